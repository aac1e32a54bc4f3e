// tuccl-synth: an algorithm for a topology, from a generator or a synthesiser, proved and written
// as a ResCCLang program or MSCCL algorithm XML.
//
//   tuccl-synth --topo preset:resccl-a100 --nodes 2 --collective allgather -o ag.resccl
//   tuccl-synth --topo topo.xml --nodes 4 --collective allreduce --sketch relay --algorithm hm -o ar.xml
//   tuccl-synth --topo preset:dgx1-v100 --collective allgather --pareto [-o DIR]
//
// --algorithm names a generator (synth/generators.h: ring, hm, direct, ...), "sketch", the
// sketch-guided synthesiser (synth/sketch_synthesis.h: routing as a MILP on CBC, a heuristic when
// the solver cannot answer in time), or "best", the default: every candidate the tuner would make
// for the topology (each generator and the synthesiser under each sketch variant,
// tune/sketch_candidates.h), each planned (HPDS) and simulated at --sizes, the fastest written and
// the table of all printed. --pareto runs the exact synthesiser
// (synth/exact_synthesis.h, SMT on Z3) on one node and prints one line per point of the
// latency/bandwidth frontier: C=<chunks> S=<steps> R=<rounds> time=<seconds>.
//
// Everything written has been proved by the semantic checker. The output format follows -o's
// extension (.resccl, .xml) or --format; "-o -" prints ResCCLang.
#include <CLI/CLI.hpp>
#include <chrono>
#include <limits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "lang/resccl_printer.h"
#include "lang/semantic_check.h"
#include "plan/msccl_export.h"
#include "scheduler/plan_builder.h"
#include "support/text_values.h"
#include "synth/exact_synthesis.h"
#include "synth/generators.h"
#include "synth/sketch_synthesis.h"
#include "sim/cost_files.h"
#include "sim/cost_model.h"
#include "sim/network_topology.h"
#include "sim/simulator.h"
#include "tune/size_grid.h"
#include "tune/sketch_candidates.h"
#include "cli/cli.h"
#include "topo/load.h"
#include "topo/presets.h"
#include "topo/sketch.h"

namespace {

using namespace tuccl;
using tuccl::cli::kExitError;

constexpr std::string_view kTool = "tuccl-synth";
constexpr std::string_view kSketchSynthesiser = "sketch";
constexpr std::string_view kBestCandidate = "best";

enum class Format : uint8_t { Resccl, Msccl };

struct Options {
  std::string topo;
  LoadOptions topologyOptions;  ///< --gpu-fabric, --nodes and how the nodes are wired
  std::string collective;
  std::string sketch = "pruned";
  std::string algorithm = std::string(kBestCandidate);
  std::string sizes = "64M:1G";  ///< best: the sizes the candidates are simulated at
  double factor = 4;
  bool heuristic = false;
  std::string switchPolicy = "uc-min";
  int32_t chunks = 0;  ///< 0: the generator's or synthesiser's default
  int32_t root = 0;
  int32_t leaders = 0;  ///< hm-leaders: 0 = its default
  bool inPlace = false;
  double timeLimit = 60;
  std::string output;
  std::string format;  ///< "", resccl, msccl
  std::string mscclRuntime = "executor";
  bool force = false;
  bool quiet = false;
  bool pareto = false;
  int32_t slack = -1;  ///< -1: the exact synthesiser's default
  int32_t maxSteps = 0;
  int32_t maxChunks = 0;
};

/// The topology of --topo and the cluster options (--nodes composes copies of a one-node source;
/// a preset gets nodes=N).
Expected<Topology> loadTopologyOption(const Options& options) {
  Expected<LoadedTopology> loaded = loadTopology(options.topo, options.topologyOptions);
  if (!loaded) return loaded.status();
  // The loader has logged its warnings (topo's logger); discovery's notes are ours to print.
  for (const std::string& note : loaded->notes) std::cerr << "note: " << note << "\n";
  if (loaded->topology.empty()) return makeError(ErrorCode::InvalidInput, options.topo + ": the topology has no GPUs");
  return std::move(loaded->topology);
}

/// The format of the file `path`: --format, else its extension; "-" prints ResCCLang.
Expected<Format> outputFormat(const Options& options, const std::string& path) {
  if (!options.format.empty()) return options.format == "msccl" ? Format::Msccl : Format::Resccl;
  const std::string extension = std::filesystem::path(path).extension().string();
  if (cli::isStandardOutput(path) || extension == ".resccl") return Format::Resccl;
  if (extension == ".xml") return Format::Msccl;
  return makeError(ErrorCode::InvalidArgument,
                   "-o " + path + ": say the format with --format resccl|msccl (or name the file .resccl or .xml)");
}

/// The algorithm as text in `format`. MSCCL XML is a schedule: the algorithm is planned with the
/// default request (HPDS) and lowered for --msccl-runtime, whose limits are reported as an error.
Expected<std::string> renderAlgorithm(const Algorithm& algorithm, Format format, MscclRuntime runtime) {
  if (format == Format::Resccl) return printResccl(algorithm);
  Expected<Plan> plan = buildPlan(algorithm, PlanRequest{});
  if (!plan) return plan.status();
  MscclExportOptions exportOptions;
  exportOptions.runtime = runtime;
  exportOptions.inPlace = algorithm.inPlace;
  Expected<MscclAlgorithm> lowered = lowerToMsccl(*plan, exportOptions);
  if (!lowered) return lowered.status();
  const std::vector<MscclLimitViolation> violations = checkMscclLimits(*lowered, runtime);
  if (!violations.empty()) {
    std::string message = "the algorithm exceeds " + std::to_string(violations.size()) + " limit(s) of " +
                          std::string(mscclRuntimeName(runtime)) + " (another --msccl-runtime may fit):";
    for (const MscclLimitViolation& violation : violations) message += "\n  " + violation.message();
    return makeError(ErrorCode::Unsupported, message);
  }
  return writeMscclXml(*lowered, runtime);
}

std::function<void(const std::string&)> progressPrinter(const Options& options) {
  if (options.quiet) return {};
  return [](const std::string& line) { std::cerr << kTool << ": " << line << "\n"; };
}

int writeAlgorithm(const Algorithm& algorithm, const Options& options, const std::string& path, const std::string& how) {
  Expected<Format> format = outputFormat(options, path);
  if (!format) return cli::reportError(kTool, format.status());
  const std::optional<MscclRuntime> runtime = parseMscclRuntime(options.mscclRuntime);
  Expected<std::string> text = renderAlgorithm(algorithm, *format, runtime.value_or(MscclRuntime::Executor));
  if (!text) return cli::reportError(kTool, text.status());
  if (Status status = cli::writeOutput(path, *text); !status) return cli::reportError(kTool, status);
  if (!cli::isStandardOutput(path)) {
    std::cout << "wrote " << path << " (" << (*format == Format::Resccl ? "ResCCLang" : "MSCCL XML") << ", "
              << algorithm.ops.size() << " operations, " << algorithm.maxStep() + 1 << " steps; " << how
              << "; verified: " << collectiveName(algorithm.collective) << " postcondition holds)\n";
  }
  return 0;
}

int runPareto(const Topology& topology, Collective collective, const Options& options) {
  ExactSynthesisOptions exact;
  exact.root = options.root;
  if (options.slack >= 0) exact.slack = options.slack;
  exact.maxSteps = options.maxSteps;
  exact.maxChunks = options.maxChunks;
  exact.timeLimitSeconds = options.timeLimit;
  exact.progress = progressPrinter(options);
  if (!options.output.empty()) {
    if (Status status = cli::checkOutputFolder(options.output, {}, options.force); !status)
      return cli::reportError(kTool, status);
  }
  Expected<ParetoFrontier> frontier = paretoSynthesize(topology, collective, exact);
  if (!frontier) return cli::reportError(kTool, frontier.status());
  for (const ParetoPoint& point : frontier->points) {
    std::printf("C=%d S=%d R=%d time=%.3f\n", point.chunks, point.steps, point.rounds, point.seconds);
    std::fflush(stdout);
  }
  if (!frontier->complete) std::cerr << kTool << ": the frontier is incomplete: " << frontier->note << "\n";
  if (options.output.empty()) return 0;
  const std::string extension = options.format == "msccl" ? ".xml" : ".resccl";
  for (const ParetoPoint& point : frontier->points) {
    const std::string name = toLowerCase(collectiveName(collective)) + "_c" + std::to_string(point.chunks) + "_s" +
                             std::to_string(point.steps) + "_r" + std::to_string(point.rounds) + extension;
    const std::string path = (std::filesystem::path(options.output) / name).string();
    if (Status status = cli::checkOutputFree(path, options.force); !status) return cli::reportError(kTool, status);
    if (int status = writeAlgorithm(point.algorithm, options, path, "exact synthesis (SMT)"); status != 0) return status;
  }
  return 0;
}

/// What candidates and routings are simulated on: the sizes of --sizes, the topology's network and
/// its constants (the file it names, else its hardware class's; sim/cost_files.h).
struct SimulationSetup {
  std::vector<int64_t> sizes;
  Network network;
  CostModel cost;
};

Expected<SimulationSetup> simulationSetup(const Topology& topology, const Options& options) {
  Expected<std::vector<int64_t>> grid = parseSizeGrid(options.sizes, options.factor);
  if (!grid) return makeError(ErrorCode::InvalidArgument, "--sizes: " + grid.status().message());
  Expected<Network> network = networkFromTopology(topology, options.topo);
  if (!network) return network.status();
  Expected<CostModel> cost = costModelForTopology(topology, options.topo);
  if (!cost) return cost.status();
  return SimulationSetup{std::move(*grid), std::move(*network), std::move(*cost)};
}

Expected<std::pair<Algorithm, std::string>> makeAlgorithm(const Topology& topology, Collective collective,
                                                          const Sketch& sketch, const Options& options) {
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  char timing[64];
  if (options.algorithm == kSketchSynthesiser) {
    SketchSynthesisOptions synthesis;
    synthesis.root = options.root;
    if (options.chunks > 0) synthesis.chunksPerRank = options.chunks;
    synthesis.inPlace = options.inPlace;
    synthesis.heuristicOnly = options.heuristic;
    synthesis.hyperedgePolicy = parseHyperedgePolicy(options.switchPolicy).value_or(HyperedgePolicy::UcMin);
    synthesis.timeLimitSeconds = options.timeLimit;
    synthesis.progress = progressPrinter(options);
    // The routing models what the engine charges and is checked by simulating it at --sizes.
    Expected<SimulationSetup> setup = simulationSetup(topology, options);
    if (!setup) return setup.status();
    synthesis.charges = synthesisCharges(setup->cost);
    synthesis.judge = simulatedJudge(setup->network, setup->cost, setup->sizes);
    Expected<SketchSynthesisResult> result = synthesizeFromSketch(collective, topology, sketch, synthesis);
    if (!result) return result.status();
    for (const std::string& note : result->notes) std::cerr << "note: " << note << "\n";
    std::snprintf(timing, sizeof timing, "%.2f s", result->seconds);
    const std::string how = std::string("sketch-guided synthesis, ") +
                            (result->method == SketchSynthesisMethod::Milp ? "MILP" : "heuristic") + ", " + timing;
    return std::make_pair(std::move(result->algorithm), how);
  }
  GeneratorOptions generator;
  generator.root = options.root;
  generator.parts = options.chunks;
  generator.leaders = options.leaders;
  generator.inPlace = options.inPlace;
  Expected<Algorithm> algorithm = generateAlgorithm(options.algorithm, collective, topology, sketch, generator);
  if (!algorithm) return algorithm.status();
  std::snprintf(timing, sizeof timing, "%.2f s", seconds());
  return std::make_pair(std::move(*algorithm), "generator " + options.algorithm + ", " + timing);
}

/// --algorithm best: every candidate planned (HPDS, the default request) and simulated at every
/// size of the grid; the score of a candidate is the geometric mean over the sizes of its time over
/// the fastest candidate's at that size (1 for one that is fastest everywhere). Prints the table,
/// returns the winner.
Expected<std::pair<Algorithm, std::string>> bestAlgorithm(const Topology& topology, Collective collective,
                                                          const Options& options) {
  Expected<SimulationSetup> setup = simulationSetup(topology, options);
  if (!setup) return setup.status();
  const std::vector<int64_t>& grid = setup->sizes;
  const Network& network = setup->network;
  const CostModel& cost = setup->cost;
  CandidateOptions which;
  which.programs = false;  // the example programs are at a fixed shape; generators and synthesis adapt
  which.synthesisSeconds = options.timeLimit;
  which.charges = synthesisCharges(cost);
  which.judge = simulatedJudge(network, cost, grid);
  std::vector<std::string> notes;
  std::vector<AlgorithmCandidate> candidates;
  try {
    candidates = algorithmCandidates(topology, collective, "", &notes, which);
  } catch (const std::exception& error) {
    return makeError(ErrorCode::Unsupported, std::string("no candidate algorithm: ") + error.what());
  }
  if (!options.quiet) {
    for (const std::string& note : notes) std::cerr << kTool << ": not a candidate: " << note << "\n";
  }
  std::vector<std::vector<double>> times(candidates.size());
  std::vector<bool> planned(candidates.size(), false);
  for (size_t c = 0; c < candidates.size(); ++c) {
    Expected<Plan> plan = buildPlan(candidates[c].algorithm, PlanRequest{});
    if (!plan) {
      if (!options.quiet) std::cerr << kTool << ": " << candidates[c].name << ": not planned: " << plan.status().message() << "\n";
      continue;
    }
    planned[c] = true;
    for (int64_t bytes : grid) {
      SimOptions sim;
      sim.messageBytes = bytes;
      sim.cost = cost;
      Expected<SimResult> result = simulatePlan(*plan, network, sim);
      if (!result) return result.status();
      times[c].push_back(result->timeUs);
    }
  }
  std::vector<double> fastest(grid.size(), std::numeric_limits<double>::infinity());
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (size_t s = 0; planned[c] && s < grid.size(); ++s) fastest[s] = std::min(fastest[s], times[c][s]);
  }
  std::vector<double> score(candidates.size(), std::numeric_limits<double>::infinity());
  size_t best = candidates.size();
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (!planned[c]) continue;
    double logSum = 0;
    for (size_t s = 0; s < grid.size(); ++s) logSum += std::log(times[c][s] / fastest[s]);
    score[c] = std::exp(logSum / static_cast<double>(grid.size()));
    if (best == candidates.size() || score[c] < score[best]) best = c;
  }
  if (best == candidates.size()) return makeError(ErrorCode::Unsupported, "no candidate algorithm could be planned");
  std::printf("# %zu candidates for %s on %s, simulated (HPDS, default configuration); time in us; score: "
              "geometric mean of time / the fastest's\n",
              candidates.size(), std::string(collectiveName(collective)).c_str(), options.topo.c_str());
  std::printf("%-28s", "# candidate");
  for (int64_t bytes : grid) std::printf(" %12s", formatByteSize(static_cast<uint64_t>(bytes)).c_str());
  std::printf(" %7s\n", "score");
  for (size_t c = 0; c < candidates.size(); ++c) {
    std::printf("%-28s", (candidates[c].name + (c == best ? " *" : "")).c_str());
    for (size_t s = 0; s < grid.size(); ++s) {
      if (planned[c]) {
        std::printf(" %12.1f", times[c][s]);
      } else {
        std::printf(" %12s", "-");
      }
    }
    if (planned[c]) {
      std::printf(" %7.3f\n", score[c]);
    } else {
      std::printf(" %7s\n", "-");
    }
  }
  std::fflush(stdout);
  const std::string how = "the best of " + std::to_string(candidates.size()) + " candidates at " + options.sizes +
                          ": " + candidates[best].name + " (" + candidates[best].program + ")";
  return std::make_pair(std::move(candidates[best].algorithm), how);
}

int run(const Options& options) {
  const std::optional<Collective> collective = parseCollective(options.collective);
  if (!collective)
    return cli::reportError(kTool, makeError(ErrorCode::InvalidArgument, "--collective: unknown collective '" +
                                                                             options.collective + "'"));
  if (!options.pareto && options.output.empty())
    return cli::reportError(kTool, makeError(ErrorCode::InvalidArgument, "-o FILE is required (\"-o -\" prints)"));
  if (!options.pareto) {
    if (Expected<Format> format = outputFormat(options, options.output); !format) return cli::reportError(kTool, format.status());
    if (Status status = cli::checkOutputFree(options.output, options.force); !status)
      return cli::reportError(kTool, status);
  }
  Expected<Topology> topology = loadTopologyOption(options);
  if (!topology) return cli::reportError(kTool, topology.status());
  if (options.pareto) return runPareto(*topology, *collective, options);
  if (options.algorithm == kBestCandidate) {
    Expected<std::pair<Algorithm, std::string>> best = bestAlgorithm(*topology, *collective, options);
    if (!best) return cli::reportError(kTool, best.status());
    return writeAlgorithm(best->first, options, options.output, best->second);
  }
  const std::optional<SketchVariant> variant = parseSketchVariant(options.sketch);
  const Sketch sketch = buildSketch(*topology, *variant);
  Expected<std::pair<Algorithm, std::string>> made = makeAlgorithm(*topology, *collective, sketch, options);
  if (!made) return cli::reportError(kTool, made.status());
  return writeAlgorithm(made->first, options, options.output, made->second);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-synth: a proved algorithm for a topology, from a generator or a synthesiser"};
  app.set_version_flag("--version", "tuccl-synth 0.1.0");
  app.footer("A TOPOLOGY is preset:NAME[:nodes=N,gpus=K,...], local, a TuCCL .json or an NCCL topology .xml file.\n"
             "Presets: " + cli::joinNames(presetNames()) + "\n"
             "Algorithms: best (default: every candidate below under every sketch, simulated at --sizes), sketch (the\n"
             "sketch-guided synthesiser), " + cli::joinNames(generatorNames()) + "\n"
             "Examples:\n"
             "  tuccl-synth --topo preset:resccl-a100 --nodes 2 --collective allgather -o ag.resccl\n"
             "  tuccl-synth --topo topo.xml --nodes 4 --collective allreduce --algorithm hm -o ar.xml\n"
             "  tuccl-synth --topo preset:dgx1-v100 --collective allgather --pareto");
  Options options;
  app.add_option("--topo", options.topo, "the topology (see below)")->required();
  cli::addGpuFabricOption(app, options.topologyOptions.gpuFabric);
  cli::addClusterOptions(app, options.topologyOptions);
  app.add_option("--collective", options.collective,
                 "allreduce, allgather, reducescatter, broadcast, reduce or alltoall")
      ->required();
  app.add_option("--sketch", options.sketch, "sketch variant: pruned (default), full-mesh or relay")
      ->check(cli::oneOf(cli::namesOf({SketchVariant::Pruned, SketchVariant::FullMesh, SketchVariant::Relay},
                                      sketchVariantName)));
  std::vector<std::string> algorithms = {std::string(kBestCandidate), std::string(kSketchSynthesiser)};
  for (const std::string& name : generatorNames()) algorithms.push_back(name);
  app.add_option("--algorithm", options.algorithm,
                 "best (default: every candidate simulated at --sizes, the fastest written), sketch (synthesise) or "
                 "a generator")
      ->check(cli::oneOf(algorithms));
  app.add_option("--sizes", options.sizes,
                 "best: the size range MIN:MAX the candidates are simulated at; sketch: the sizes its MILP and "
                 "heuristic routings are simulated at, the faster kept")
      ->capture_default_str();
  app.add_option("-f,--factor", options.factor, "best, sketch: multiply the size by this between sizes")
      ->capture_default_str()
      ->check(CLI::Range(1.01, 1e6));
  app.add_flag("--heuristic", options.heuristic, "sketch: route with the heuristic only, without the MILP");
  app.add_option("--switch-policy", options.switchPolicy,
                 "sketch: peers per GPU over a switch: uc-min (two neighbours, bandwidth; default) or uc-max "
                 "(every peer, latency)")
      ->check(cli::oneOf(cli::namesOf({HyperedgePolicy::UcMin, HyperedgePolicy::UcMax}, hyperedgePolicyName)));
  app.add_option("--chunks", options.chunks,
                 "chunks per rank (synthesisers) or parts (generators: ring's rings); default: the method's")
      ->check(CLI::Range(1, 64));
  app.add_option("--leaders", options.leaders,
                 "hm-leaders: GPUs per NIC that carry the inter-node traffic (default " +
                     std::to_string(kDefaultLeadersPerNic) + ")")
      ->check(CLI::Range(1, 64));
  app.add_option("--root", options.root, "broadcast and reduce: the root rank")->check(CLI::NonNegativeNumber);
  app.add_flag("--in-place", options.inPlace, "an in-place algorithm (NCCL's in-place layout)");
  app.add_option("--time-limit", options.timeLimit, "seconds the synthesiser may take")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("-o,--output", options.output, "the algorithm file (.resccl or .xml; - prints); --pareto: a folder");
  app.add_option("--format", options.format, "resccl or msccl (default: from -o's extension)")
      ->check(cli::oneOf({"resccl", "msccl"}));
  app.add_option("--msccl-runtime", options.mscclRuntime, "MSCCL XML for msccl, executor (default) or rccl")
      ->check(cli::oneOf(cli::namesOf<MscclRuntime>(kMscclRuntimes, mscclRuntimeName)));
  cli::addForceFlag(app, options.force);
  app.add_flag("-q,--quiet", options.quiet, "no progress lines");
  app.add_flag("--pareto", options.pareto,
               "exact synthesis (one node of <= 8 GPUs): print the latency/bandwidth frontier");
  app.add_option("--slack", options.slack, "--pareto: rounds may exceed steps by at most this (SCCL's k)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-steps", options.maxSteps, "--pareto: the largest step count tried")->check(CLI::PositiveNumber);
  app.add_option("--max-chunks", options.maxChunks, "--pareto: the largest chunk count tried")
      ->check(CLI::PositiveNumber);
  if (std::optional<int> status = cli::parse(app, argc, argv)) return *status;
  // best tries every candidate with its defaults: a setting of one method has no candidate to go to.
  if (options.algorithm == kBestCandidate && !options.pareto) {
    for (const char* setting : {"--heuristic", "--switch-policy", "--chunks", "--leaders", "--root", "--in-place",
                                "--sketch"}) {
      if (app.count(setting) == 0) continue;
      return cli::reportError(
          kTool, makeError(ErrorCode::InvalidArgument,
                           std::string(setting) + " sets up one method, and --algorithm best (the default) runs every "
                                                  "candidate with its defaults: name the method (--algorithm sketch, "
                                                  "--algorithm hm, ...)"));
    }
  }
  if (options.algorithm != kBestCandidate && options.algorithm != kSketchSynthesiser &&
      (app.count("--sizes") > 0 || app.count("--factor") > 0)) {
    return cli::reportError(kTool, makeError(ErrorCode::InvalidArgument,
                                             "--sizes and --factor choose among candidates: they go with --algorithm "
                                             "best (the default) or sketch"));
  }
  return run(options);
}
