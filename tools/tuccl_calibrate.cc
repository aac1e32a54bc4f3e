// tuccl-calibrate: fit the simulator's constants to runs measured on this machine and write them
// as a cost-model file (docs/simulator.md, "Calibration").
//
//   tuccl-run -n 4 -- tuccl-topo probe -o topo.json
//   TUCCL_CACHE_DIR=ar TUCCL_ALGO=ring tuccl-run -n 4 -- tuccl-bench allreduce -b 1M -e 256M -f 2 > ar.txt
//   tuccl-calibrate --topo topo.json --run allreduce,ar.txt,ar --fit 1M,4M,16M,64M,256M -o cost.json
//
// Each --run is COLLECTIVE,OUTPUT,PLANS: the collective, tuccl-bench's (nccl-tests') output and
// the plan that ran — a plan JSON file, or the run's plan cache (TUCCL_CACHE_DIR), where the
// collective's plan for calls above libtuccl's one-TB size is taken. The in-place column is read
// for an in-place plan, the out-of-place one otherwise; several rows of one size (-N) give their
// median. --topo-output writes the topology again, naming the cost model, so that tuccl-sim
// --topo uses it. The report (standard output, or --report FILE) gives every point's measured,
// simulated-before and simulated-after times and the held-out error.
//
// Exit status: 0 success, 2 for any error in the inputs or on the command line.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "plan/plan_json.h"
#include "sim/cost_files.h"
#include "sim/cost_model.h"
#include "sim/network_topology.h"
#include "support/cache_files.h"
#include "support/text_values.h"
#include "topo/load.h"
#include "topo/topology_json.h"
#include "tune/calibration.h"
#include "tune/nccl_tests_output.h"

namespace {

namespace fs = std::filesystem;
using tuccl::cli::valueOrThrow;

// libtuccl's plans for calls up to this many bytes run on one TB per rank on the CPU device
// (backend/plan_cache.h singleTbMaxBytes); the measured sizes above it ran the other plan.
constexpr int64_t kSingleTbMaxBytes = 64 << 10;

struct Args {
  std::string topo;
  std::vector<std::string> runs;
  std::string fit;
  std::string output;
  std::string report;
  std::string start;
  std::string topoOutput;
  std::string hardwareClass = "measured";
  int32_t maxEvaluations = 1500;
  bool force = false;
};

tuccl::Plan readPlanFile(const fs::path& path) {
  return valueOrThrow(tuccl::readPlanJson(tuccl::readSourceFile(path.string())));
}

// The collective's plan in a plan cache directory: the one that served calls above one TB's size.
tuccl::Plan planFromCache(const fs::path& dir, tuccl::Collective collective) {
  const fs::path plans = dir / "plans";
  if (!fs::is_directory(plans))
    throw std::invalid_argument(dir.string() + ": no plans/ directory (is it the run's TUCCL_CACHE_DIR?)");
  std::vector<std::pair<std::string, tuccl::Plan>> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(plans)) {
    if (entry.path().extension() != ".plan") continue;
    tuccl::Expected<std::string> bytes = tuccl::readWholeFile(entry.path());
    if (!bytes) throw std::invalid_argument(entry.path().string() + ": " + bytes.status().message());
    const std::optional<std::string_view> body = tuccl::unsealCacheEntry(*bytes);
    if (!body) throw std::invalid_argument(entry.path().string() + ": a damaged cache entry");
    const size_t newline = body->find('\n');  // the identity line, then the plan JSON
    if (newline == std::string_view::npos) throw std::invalid_argument(entry.path().string() + ": no plan after the identity line");
    tuccl::Plan plan = valueOrThrow(
        tuccl::readPlanJson(tuccl::SourceText(entry.path().string(), std::string(body->substr(newline + 1)))));
    if (plan.collective == collective && plan.tbAllocation != tuccl::TbPolicy::Single)
      found.emplace_back(entry.path().filename().string(), std::move(plan));
  }
  if (found.size() != 1) {
    std::string names;
    for (const auto& [name, plan] : found) names += " " + name;
    throw std::invalid_argument(dir.string() + ": " + std::to_string(found.size()) + " " +
                                std::string(tuccl::collectiveName(collective)) +
                                " plans for calls above one TB's size" + (names.empty() ? "" : " (" + names + " )") +
                                "; run each measurement with its own TUCCL_CACHE_DIR, or give the plan file");
  }
  return std::move(found.front().second);
}

// COLLECTIVE,OUTPUT,PLANS -> a measured run.
tuccl::MeasuredRun readRun(const std::string& spec) {
  const std::vector<std::string> parts = tuccl::splitList(spec, ',');
  if (parts.size() != 3) throw std::invalid_argument("--run " + spec + ": expected COLLECTIVE,OUTPUT,PLANS");
  const std::optional<tuccl::Collective> collective = tuccl::parseCollective(parts[0]);
  if (!collective) throw std::invalid_argument("--run " + spec + ": unknown collective '" + parts[0] + "'");
  tuccl::MeasuredRun run;
  run.label = fs::path(parts[1]).filename().string();
  run.plan = fs::is_directory(parts[2]) ? planFromCache(parts[2], *collective) : readPlanFile(parts[2]);
  if (run.plan.collective != *collective)
    throw std::invalid_argument(parts[2] + " is a " + std::string(tuccl::collectiveName(run.plan.collective)) + " plan, not " + parts[0]);
  const tuccl::SourceText text = tuccl::readSourceFile(parts[1]);
  const tuccl::NcclTestsOutput output = tuccl::parseNcclTestsOutput(text.text());
  if (!output.ok()) throw std::invalid_argument(parts[1] + ": " + output.error);
  std::map<int64_t, std::vector<double>> times;
  for (const tuccl::NcclTestsRow& row : output.rows) {
    const auto bytes = static_cast<int64_t>(row.bytes);
    if (bytes <= kSingleTbMaxBytes) continue;
    times[bytes].push_back(run.plan.inPlace ? row.inPlace.timeUs : row.outOfPlace.timeUs);
  }
  if (times.empty()) throw std::invalid_argument(parts[1] + ": no result row above 64 KiB");
  for (auto& [bytes, list] : times) {
    std::sort(list.begin(), list.end());
    const size_t m = list.size() / 2;
    run.times.emplace_back(bytes, list.size() % 2 == 1 ? list[m] : (list[m - 1] + list[m]) / 2);
  }
  return run;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

int run(const Args& args) {
  for (const std::string& path : {args.output, args.report, args.topoOutput}) {
    if (path.empty()) continue;
    if (tuccl::Status status = tuccl::cli::checkOutputFree(path, args.force); !status) tuccl::throwIfError(status);
  }
  tuccl::LoadedTopology loaded = valueOrThrow(tuccl::loadTopology(args.topo));
  const tuccl::Network network = valueOrThrow(tuccl::networkFromTopology(loaded.topology, args.topo));
  std::vector<tuccl::MeasuredRun> runs;
  std::string files;
  for (const std::string& spec : args.runs) {
    runs.push_back(readRun(spec));
    if (runs.back().plan.nRanks != network.nRanks())
      throw std::invalid_argument("--run " + spec + ": a plan of " + std::to_string(runs.back().plan.nRanks) +
                                  " ranks on a topology of " + std::to_string(network.nRanks()));
    files += (files.empty() ? "" : ", ") + runs.back().label;
  }
  tuccl::CalibrationOptions options;
  options.maxEvaluations = args.maxEvaluations;
  for (const std::string& size : tuccl::splitList(args.fit, ',')) {
    const tuccl::Expected<uint64_t> bytes = tuccl::parseByteSize(size);
    if (!bytes) throw std::invalid_argument("--fit " + size + ": " + bytes.status().message());
    options.fitSizes.push_back(static_cast<int64_t>(*bytes));
  }
  // Start from --start, else the topology's class file (ampere's numbers, the defaults, for GPUs of
  // unknown class such as probed CPU ranks): the numbers not fitted keep its sources.
  const std::string startClass = tuccl::hardwareClassOf(loaded.topology);
  tuccl::CostModel start = args.start.empty()
                               ? valueOrThrow(tuccl::costModelForClass(startClass.empty() ? "ampere" : startClass))
                               : valueOrThrow(tuccl::readCostModelJson(tuccl::readSourceFile(args.start)));
  tuccl::CalibrationResult result = valueOrThrow(tuccl::calibrateCostModel(network, runs, start, options));
  result.model.hardwareClass = args.hardwareClass;
  const std::string how = "fitted by tuccl-calibrate on " + today() + " to " + files + " on " + args.topo;
  for (const std::string& name : result.parameters) result.model.sources[name] = how;
  tuccl::throwIfError(tuccl::cli::writeOutput(args.output, tuccl::writeCostModelJson(result.model)));
  const std::string report = tuccl::formatCalibrationReport(result);
  if (args.report.empty()) std::cout << report;
  else tuccl::throwIfError(tuccl::cli::writeOutput(args.report, report));
  if (!args.topoOutput.empty()) {
    tuccl::Topology topology = loaded.topology;
    const fs::path from = fs::absolute(args.topoOutput).parent_path();
    topology.costModel = fs::relative(fs::absolute(args.output), from).string();
    tuccl::throwIfError(tuccl::cli::writeOutput(args.topoOutput, tuccl::writeTopologyJson(topology)));
  }
  std::fprintf(stderr, "wrote %s (%s)\n", args.output.c_str(), args.hardwareClass.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-calibrate: fit the simulator's constants (per-TB rates, synchronisation, latencies, the memory "
               "hierarchy) to tuccl-bench runs measured on this machine and write them as a cost-model file"};
  Args args;
  app.add_option("--topo", args.topo, "the machine's topology (tuccl-topo probe's output)")->required();
  app.add_option("--run", args.runs, "COLLECTIVE,OUTPUT,PLANS: tuccl-bench's output and the plan that ran (a plan JSON "
                                     "file, or the run's TUCCL_CACHE_DIR); repeat for several runs")
      ->required();
  app.add_option("--fit", args.fit, "the sizes to fit on (1M,16M,...); every other measured size is held out")->required();
  app.add_option("-o,--output", args.output, "the cost-model file to write")->required();
  app.add_option("--report", args.report, "the report (default: standard output)");
  app.add_option("--start", args.start,
                 "the cost-model file to start from (default: the topology's hardware class, else ampere's)");
  app.add_option("--topo-output", args.topoOutput, "write the topology again, naming the cost model (costModel)");
  app.add_option("--class", args.hardwareClass, "the hardwareClass the file says it describes")->capture_default_str();
  app.add_option("--max-evaluations", args.maxEvaluations, "simulations of the fitted set the fit may spend")
      ->check(CLI::Range(50, 1000000))
      ->capture_default_str();
  tuccl::cli::addForceFlag(app, args.force);
  if (auto status = tuccl::cli::parse(app, argc, argv)) return *status;
  return tuccl::cli::runGuarded("tuccl-calibrate", [&]() -> int { return run(args); });
}
