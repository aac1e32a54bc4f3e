// tuccl-sim: simulate a plan (plan.json) or an algorithm (a ResCCLang program or an MSCCL XML file)
// on a topology over a range of sizes and print an nccl-tests-shaped table, with the lower bound
// and the efficiency against it; --compare puts several schedulers side by side (as-written: an
// XML file's own thread blocks and channels); --vs-nccl adds what NCCL would do (sim/nccl_model.h)
// and the speed-up over it.
//
// Exit status: 0 success, 2 for any error in the inputs or on the command line.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/cost_files.h"
#include "sim/cost_model.h"
#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim/network.h"
#include "sim/network_topology.h"
#include "sim/nccl_model.h"
#include "tune/nccl_baseline.h"
#include "plan/plan_json.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "support/text_values.h"
#include "cli/cli.h"
#include "tune/size_grid.h"

namespace {

using tuccl::cli::valueOrThrow;
constexpr int kElementBytes = 4;  // nccl-tests default type: float

// The algorithm of INPUT, proved: a ResCCLang program at nRanks / GPUPerNode (the topology's
// unless given), or an MSCCL XML file, whose shape is its own and must match the topology.
tuccl::LoadedAlgorithm loadAlgorithm(const std::string& input, const tuccl::Network& network, int32_t ranks,
                                     int32_t perNode) {
  tuccl::SourceText source = tuccl::readSourceFile(input);
  if (tuccl::detectAlgorithmFormat(source.name(), source.text()) == tuccl::AlgorithmFormat::MscclXml) {
    if (ranks > 0 || perNode > 0) {
      throw std::invalid_argument("--ranks and --gpus-per-node set ResCCLang parameters; " + input +
                                  " is MSCCL XML, whose ranks are its <algo ngpus>");
    }
    tuccl::LoadedAlgorithm loaded = valueOrThrow(tuccl::loadProvedAlgorithm(std::move(source), {}));
    if (loaded.algorithm.nRanks != network.nRanks()) {
      throw std::invalid_argument(input + ": the MSCCL XML file is for " + std::to_string(loaded.algorithm.nRanks) +
                                  " GPUs, the topology " + network.name() + " has " +
                                  std::to_string(network.nRanks()) + "; give --topo with " +
                                  std::to_string(loaded.algorithm.nRanks) + " GPUs");
    }
    return loaded;
  }
  const int32_t n = ranks > 0 ? ranks : network.nRanks();
  const int32_t g = perNode > 0 ? perNode : network.maxGpusPerNode();
  return valueOrThrow(tuccl::loadProvedAlgorithm(std::move(source), {{"nRanks", n}, {"GPUPerNode", g}}));
}

/// The --vs-nccl header cells: NCCL's simulated time, its choice, the speed-up over it, and the
/// NCCL model's own time (the cross-check).
std::string ncclColumns(const char* time, const char* speedup, const char* model) {
  char text[128];
  std::snprintf(text, sizeof text, " %10s %-18s %7s %10s", time, "", speedup, model);
  return text;
}

/// The --vs-nccl cells of one row: NCCL's plan simulated, "RING/Simple/12ch", its time over
/// `timeUs` (the first plan's), and the NCCL model's time for the same choice.
std::string ncclCells(const tuccl::NcclSimulated& nccl, double timeUs) {
  char text[128];
  std::snprintf(text, sizeof text, " %10.1f %-18s %6.2fx %10.1f", nccl.choice.timeUs,
                tuccl::describeNcclChoice(nccl.choice).c_str(), nccl.choice.timeUs / timeUs, nccl.model.timeUs);
  return text;
}

// Everything tuccl-sim reads from its command line.
struct SimArgs {
  std::string input, topo = "preset:resccl-a100:nodes=2", sizes = "1K:4G", compare, scheduler = "hpds";
  std::string costFile, trace, tbAlloc = "auto", protocol = "Simple";
  double factor = 2;
  int32_t stages = 4, threads = 512, channels = 0, ranks = 0, perNode = 0;
  int64_t chunkSize = 1 << 20;
  bool report = false, dumpCost = false, vsNccl = false, force = false;
  tuccl::LoadOptions topoOptions;
};

// INPUT, the topology and the size range.
void addInputOptions(CLI::App& app, SimArgs& args) {
  app.add_option("INPUT", args.input,
                 "a plan (.json, from tuccl-compile -o), a ResCCLang program (.resccl) or an MSCCL XML file (.xml)");
  app.add_option("--topo", args.topo, "topology: preset:NAME[:nodes=N,gpus=K,...], a .json or .xml file, local")
      ->capture_default_str();
  tuccl::cli::addGpuFabricOption(app, args.topoOptions.gpuFabric);
  tuccl::cli::addClusterOptions(app, args.topoOptions);
  app.add_option("--sizes", args.sizes, "size range MIN:MAX in bytes (K, M, G suffixes)")->capture_default_str();
  app.add_option("-f,--factor", args.factor, "multiply the size by this between rows")
      ->transform(tuccl::cli::numberIn(1.01, 1024))
      ->capture_default_str();
}

// How an algorithm becomes plans: schedulers, TB allocation, protocol, sizes and program parameters.
void addSchedulingOptions(CLI::App& app, SimArgs& args) {
  app.add_option("--scheduler", args.scheduler, "for an algorithm: hpds, rr, algorithm, stage, as-written (MSCCL XML)")
      ->check(tuccl::cli::oneOf(tuccl::schedulerShortNames()))
      ->capture_default_str();
  app.add_option("--compare", args.compare,
                 "for an algorithm: schedulers side by side, e.g. hpds,rr,algorithm,stage (XML: also as-written)");
  app.add_option("--stages", args.stages, "stage-level blocks")
      ->transform(tuccl::cli::integerIn(1, 1024))
      ->capture_default_str();
  app.add_option("--tb-alloc", args.tbAlloc, "auto (state for hpds/rr, MSCCL connection+channels otherwise), state, "
                                             "connection, connection+channels")
      ->check(tuccl::cli::oneOf(tuccl::cli::tbAllocationNames(/*offerSingle=*/false)))
      ->capture_default_str();
  app.add_option("--protocol", args.protocol, "for an algorithm: LL, LL128, Simple")
      ->check(tuccl::cli::oneOf(tuccl::protocolNames()))
      ->capture_default_str();
  app.add_option("--threads", args.threads, "for an algorithm: threads per TB")
      ->transform(tuccl::cli::integerIn(32, 1024))
      ->capture_default_str();
  app.add_option("--chunk-size", args.chunkSize, "for an algorithm: bytes per micro-batch (256 B to 1 GiB; K, M, G)")
      ->transform(tuccl::cli::byteSizeIn(tuccl::cli::kMinChunkBytes, tuccl::cli::kMaxChunkBytes))
      ->capture_default_str();
  app.add_option("--channels", args.channels, "for an algorithm: plan replicas (default: the program's nChannels)")
      ->transform(tuccl::cli::integerIn(1, 64));
  app.add_option("--ranks", args.ranks, "for a ResCCLang program: nRanks (default: the topology's GPUs)")
      ->transform(tuccl::cli::integerIn(1, 65536));
  app.add_option("--gpus-per-node", args.perNode, "for a ResCCLang program: GPUPerNode (default: the topology's)")
      ->transform(tuccl::cli::integerIn(1, 1024));
}

// The cost model, the trace, the NCCL comparison and the report.
void addOutputOptions(CLI::App& app, SimArgs& args) {
  app.add_option("--cost", args.costFile,
                 "cost-model JSON (see --dump-cost); default: the file the topology names (tuccl-calibrate), else the "
                 "one of its GPUs' hardware class (volta, ampere, hopper, blackwell), else the defaults");
  app.add_flag("--dump-cost", args.dumpCost, "print the cost model in effect (for --topo, if given) as JSON and exit");
  app.add_option("--trace", args.trace, "write a Chrome trace (Perfetto) of the largest size, first scheduler")
      ->type_name("FILE");
  tuccl::cli::addForceFlag(app, args.force);
  app.add_flag("--vs-nccl", args.vsNccl,
               "add what NCCL would do: its algorithm, protocol and channels by its tuning model, run as NCCL's "
               "plan (its rings or trees) in this simulator (nccl), xNCCL = that time over this one's, and the "
               "tuning model's own time (model) as a cross-check");
  app.add_flag("--report", args.report, "print the metrics of the largest size (bound, TBs, links, bubbles)");
}

// The plans to simulate and the column label of each.
struct SimPlans {
  std::vector<tuccl::Plan> plans;
  std::vector<std::string> labels;
};

// The plan request for scheduler `name` with the command line's settings.
tuccl::PlanRequest planRequestFor(const std::string& name, const SimArgs& args, const tuccl::LoadedAlgorithm& loaded) {
  tuccl::PlanRequest request;
  const auto parsed = tuccl::parseScheduler(name);
  if (!parsed) throw std::invalid_argument("unknown scheduler '" + name + "' (hpds, rr, algorithm, stage, as-written)");
  request.scheduler = *parsed;
  request.stages = args.stages;
  request.tbAllocation = tuccl::parseTbRequest(args.tbAlloc).value();  // CLI11 checked the name
  request.config.protocol = tuccl::parseProtocol(args.protocol).value();
  request.config.nThreads = args.threads;
  request.config.chunkSize = args.chunkSize;
  request.config.nChannels = args.channels;
  if (loaded.msccl) request.mscclSchedule = &loaded.msccl->schedule;
  return request;
}

// One plan per scheduler (--compare, else --scheduler) from the algorithm of INPUT.
SimPlans planAlgorithm(const SimArgs& args, const tuccl::Network& network) {
  SimPlans sims;
  const tuccl::LoadedAlgorithm loaded = loadAlgorithm(args.input, network, args.ranks, args.perNode);
  if (loaded.msccl) {  // how an ambiguous file was read
    for (const tuccl::Diagnostic& warning : loaded.msccl->warnings) tuccl::cli::printDiagnostic(warning);
  }
  std::vector<std::string> schedulers =
      args.compare.empty() ? std::vector<std::string>{args.scheduler} : tuccl::splitList(args.compare);
  for (const std::string& name : schedulers) {
    tuccl::Expected<tuccl::Plan> plan = tuccl::buildPlan(loaded.algorithm, planRequestFor(name, args, loaded));
    if (!plan) {
      throw std::invalid_argument(name + ": " + plan.status().message() + " (" + args.input + " is " +
                                  std::string(tuccl::algorithmFormatName(loaded.format)) + ")");
    }
    sims.plans.push_back(std::move(*plan));
    sims.labels.push_back(name);
  }
  return sims;
}

// The plans: one from a file, or one per scheduler from an algorithm.
SimPlans loadPlans(const SimArgs& args, const tuccl::Network& network) {
  const bool isPlan = args.input.size() >= 5 && args.input.substr(args.input.size() - 5) == ".json";
  if (!isPlan) return planAlgorithm(args, network);
  if (!args.compare.empty()) throw std::invalid_argument("--compare needs an algorithm, not a plan");
  SimPlans sims;
  sims.plans.push_back(valueOrThrow(tuccl::readPlanJson(tuccl::readSourceFile(args.input))));
  sims.labels.push_back(std::string(tuccl::schedulerName(sims.plans.back().scheduler)));
  return sims;
}

// The first comment line: collective, algorithm, topology and the plan's configuration.
void printSettings(const tuccl::Plan& first, const tuccl::Network& network, const tuccl::CostModel& cost) {
  std::printf("# %s %s on %s: %d ranks, %d nodes; protocol %s, %d threads, chunk %s, %d channel(s); cost model %s\n",
              std::string(tuccl::collectiveName(first.collective)).c_str(), first.algorithm.c_str(),
              network.name().c_str(), network.nRanks(), network.nNodes(),
              std::string(tuccl::protocolName(first.config.protocol)).c_str(), first.config.nThreads,
              tuccl::formatByteSize(first.config.chunkSize).c_str(), first.config.nChannels,
              cost.hardwareClass.empty() ? "(defaults)" : cost.hardwareClass.c_str());
}

// The column headers: nccl-tests' for one plan, or the plans side by side.
void printColumnHeaders(const SimPlans& sims, bool vsNccl) {
  const tuccl::Plan& first = sims.plans.front();
  if (sims.plans.size() == 1) {
    std::printf("# scheduler %s (%s level, %s)\n", std::string(tuccl::schedulerName(first.scheduler)).c_str(),
                std::string(tuccl::executionLevelName(first.executionLevel)).c_str(),
                std::string(tuccl::tbPolicyName(first.tbAllocation)).c_str());
    std::printf("#%11s %13s %6s %6s %10s %8s %8s %10s %6s%s\n", "size", "count", "type", "redop", "time", "algbw",
                "busbw", "bound", "eff", vsNccl ? ncclColumns("nccl-sim", "xNCCL", "nccl-model").c_str() : "");
    std::printf("#%11s %13s %6s %6s %10s %8s %8s %10s %6s%s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
                "(GB/s)", "(us)", "(%)", vsNccl ? ncclColumns("(us)", "", "(us)").c_str() : "");
  } else {
    std::printf("#%11s %13s %10s", "size", "count", "bound(us)");
    for (const std::string& label : sims.labels) std::printf(" %10s %8s %6s", (label + "(us)").c_str(), "busbw", "eff%");
    if (vsNccl) std::printf("%s", ncclColumns("nccl-sim(us)", "xNCCL", "model(us)").c_str());
    std::printf(" %s\n", ("speedup " + sims.labels[0] + " vs others").c_str());
  }
}

// Every plan's simulated time at one size; `keep` (if any) receives the first plan's result.
std::vector<double> simulateSize(const std::vector<tuccl::Plan>& plans, const tuccl::Network& network, int64_t bytes,
                                 const tuccl::CostModel& cost, bool recordTrace, tuccl::SimResult* keep) {
  std::vector<double> times;
  for (size_t p = 0; p < plans.size(); ++p) {
    tuccl::SimOptions options;
    options.messageBytes = bytes;
    options.cost = cost;
    options.recordTrace = recordTrace && p == 0;
    tuccl::SimResult result = valueOrThrow(tuccl::simulatePlan(plans[p], network, options));
    times.push_back(result.timeUs);
    if (p == 0 && keep != nullptr) *keep = std::move(result);
  }
  return times;
}

// One nccl-tests row of a single plan; returns its bus bandwidth.
double printSingleRow(tuccl::Collective collective, int64_t bytes, double timeUs, const tuccl::LowerBound& bound,
                      double factorBus, const std::string& ncclText) {
  const char* redop = tuccl::isReduction(collective) ? "sum" : "none";
  const double algbw = bytes / (timeUs * 1e3);
  std::printf(" %11lld %13lld %6s %6s %10.1f %8.2f %8.2f %10.1f %6.1f%s\n", static_cast<long long>(bytes),
              static_cast<long long>(bytes / kElementBytes), "float", redop, timeUs, algbw, algbw * factorBus,
              bound.timeUs, 100 * bound.timeUs / timeUs, ncclText.c_str());
  return algbw * factorBus;
}

// One row of plans side by side, with the first plan's speed-up over each other.
void printCompareRow(int64_t bytes, const std::vector<double>& times, const tuccl::LowerBound& bound, double factorBus,
                     const std::string& ncclText) {
  std::printf(" %11lld %13lld %10.1f", static_cast<long long>(bytes), static_cast<long long>(bytes / kElementBytes),
              bound.timeUs);
  for (double t : times) std::printf(" %10.1f %8.2f %6.1f", t, bytes / (t * 1e3) * factorBus, 100 * bound.timeUs / t);
  std::printf("%s  ", ncclText.c_str());
  for (size_t p = 1; p < times.size(); ++p) std::printf(" %.2fx", times[p] / times[0]);
  std::printf("\n");
}

// What the size sweep leaves: the sum of a single plan's bus bandwidths and the last size's result.
struct SizeSweep {
  double busSum = 0;
  tuccl::SimResult last;  // the first plan at the largest size
};

// Simulates every plan at every size and prints a row per size.
SizeSweep simulateSizes(const SimPlans& sims, const std::vector<int64_t>& sizeList, const tuccl::Network& network,
                        const tuccl::CostModel& cost, tuccl::NcclBaseline* nccl,
                        bool traceLast) {
  const tuccl::Plan& first = sims.plans.front();
  const tuccl::Collective collective = first.collective;
  SizeSweep sweep;
  for (size_t i = 0; i < sizeList.size(); ++i) {
    const int64_t bytes = sizeList[i];
    const bool lastSize = i + 1 == sizeList.size();
    const tuccl::LowerBound bound = tuccl::collectiveLowerBound(collective, bytes, network, std::max(0, first.root));
    const std::vector<double> times =
        simulateSize(sims.plans, network, bytes, cost, traceLast && lastSize, lastSize ? &sweep.last : nullptr);
    const double factorBus = tuccl::busBandwidthFactor(collective, first.nRanks);
    std::string ncclText;
    if (nccl != nullptr) ncclText = ncclCells(valueOrThrow(nccl->evaluate(collective, bytes)), times[0]);
    if (sims.plans.size() == 1) {
      sweep.busSum += printSingleRow(collective, bytes, times[0], bound, factorBus, ncclText);
    } else {
      printCompareRow(bytes, times, bound, factorBus, ncclText);
    }
  }
  return sweep;
}

// After the table: the average bus bandwidth, the --report metrics and the --trace file.
void finishRun(const SimArgs& args, const SimPlans& sims, const tuccl::Network& network, const SizeSweep& sweep,
               size_t sizeCount) {
  const tuccl::Plan& first = sims.plans.front();
  if (sims.plans.size() == 1) std::printf("# Avg bus bandwidth    : %g\n", sweep.busSum / sizeCount);
  if (args.report) std::cout << tuccl::formatMetrics(tuccl::computeMetrics(first, network, sweep.last), 12);
  if (!args.trace.empty()) {
    tuccl::throwIfError(tuccl::cli::writeOutput(args.trace, tuccl::writeChromeTrace(first, network, sweep.last)));
    std::fprintf(stderr, "wrote %s (%zu spans%s)\n", args.trace.c_str(), sweep.last.trace.size(),
                 sweep.last.traceTruncated ? ", truncated" : "");
  }
}

// The run after parsing: the cost model, the topology, the plans, the table and what follows it.
int runSim(const CLI::App& app, SimArgs& args) {
  if (tuccl::Status status = tuccl::cli::checkOutputFree(args.trace, args.force); !status) tuccl::throwIfError(status);
  // --nodes without --topo composes the default preset's node.
  if (app.count("--topo") == 0 && app.count("--nodes") > 0) args.topo = "preset:resccl-a100";
  // The cost model: --cost, else the one the topology names (tuccl-calibrate), else its hardware
  // class's (sim/cost_files.h); --dump-cost without --topo prints the defaults.
  const bool topologyGiven = app.count("--topo") > 0 || app.count("--nodes") > 0;
  tuccl::CostModel cost = tuccl::defaultCostModel();
  if (!args.costFile.empty()) cost = valueOrThrow(tuccl::readCostModelJson(tuccl::readSourceFile(args.costFile)));
  // --dump-cost loads the topology only to find the model it implies.
  if (args.dumpCost && (!args.costFile.empty() || !topologyGiven)) {
    std::cout << tuccl::writeCostModelJson(cost);
    return 0;
  }
  const tuccl::Topology topology = valueOrThrow(tuccl::loadTopology(args.topo, args.topoOptions)).topology;
  if (args.costFile.empty()) cost = valueOrThrow(tuccl::costModelForTopology(topology, args.topo));
  if (args.dumpCost) {
    std::cout << tuccl::writeCostModelJson(cost);
    return 0;
  }
  if (args.input.empty())
    throw std::invalid_argument("no INPUT (a plan .json, a .resccl program or an MSCCL .xml); see --help");
  const tuccl::Network network = valueOrThrow(tuccl::networkFromTopology(topology, args.topo));
  const tuccl::Expected<std::vector<int64_t>> grid = tuccl::parseSizeGrid(args.sizes, args.factor);
  if (!grid) throw std::invalid_argument("--sizes: " + grid.status().message());
  const SimPlans sims = loadPlans(args, network);
  printSettings(sims.plans.front(), network, cost);
  std::optional<tuccl::NcclBaseline> nccl;
  if (args.vsNccl) nccl.emplace(topology, network, cost);
  printColumnHeaders(sims, args.vsNccl);
  const SizeSweep sweep = simulateSizes(sims, *grid, network, cost, nccl ? &*nccl : nullptr, !args.trace.empty());
  finishRun(args, sims, network, sweep, grid->size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-sim: simulate a collective on a topology (discrete events, alpha-beta with fair sharing).\n"
      "  tuccl-sim plan.json --topo preset:resccl-a100:nodes=2 --sizes 1K:4G\n"
      "  tuccl-sim hm_allreduce.resccl --topo preset:resccl-a100:nodes=2,gpus=4 --compare hpds,rr,algorithm,stage\n"
      "  tuccl-sim ring.xml --topo preset:dgx-a100:nodes=1 --compare hpds,as-written\n"
      "  tuccl-sim ring_allreduce.resccl --topo node.xml --nodes 2 --vs-nccl"};
  app.set_version_flag("--version", "tuccl-sim 0.1.0");
  SimArgs args;
  addInputOptions(app, args);
  addSchedulingOptions(app, args);
  addOutputOptions(app, args);
  if (auto status = tuccl::cli::parse(app, argc, argv)) return *status;
  return tuccl::cli::runGuarded("tuccl-sim", [&]() -> int { return runSim(app, args); });
}
