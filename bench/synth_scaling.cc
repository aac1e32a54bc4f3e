// bench_synth_scaling: sketch-guided synthesis (synth/sketch_synthesis.h) as the cluster grows,
// 1, 2, 4 and 10 nodes of 8 GPUs (TACCL synthesised 80 GPUs in under 8 minutes with Gurobi; the
// target here is 60 s each on CBC).
//
//   build/bench/bench_synth_scaling [PRESET] [--policy uc-min|uc-max] [--chunks K] [--limit SECONDS]
//                                   [--sketch full-mesh|pruned|relay] [--collective NAME]...
//
// One row per (nodes, collective, method asked for): the method that produced the algorithm, the
// wall time, the operations and steps of the proved algorithm and the routing's modelled time.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "synth/sketch_synthesis.h"
#include "topo/presets.h"
#include "topo/sketch.h"

namespace {

struct Settings {
  std::string preset = "dgx-a100";
  tuccl::HyperedgePolicy policy = tuccl::HyperedgePolicy::UcMin;
  int chunks = 1;
  double limit = 60;
  tuccl::SketchVariant variant = tuccl::SketchVariant::Pruned;
  std::vector<tuccl::Collective> collectives;  // empty: AllGather and AllReduce
};

bool parseArguments(int argc, char** argv, Settings& settings) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--policy" && hasValue) {
      auto policy = tuccl::parseHyperedgePolicy(argv[++i]);
      if (!policy) return false;
      settings.policy = *policy;
    } else if (arg == "--chunks" && hasValue) {
      settings.chunks = std::atoi(argv[++i]);
    } else if (arg == "--sketch" && hasValue) {
      auto variant = tuccl::parseSketchVariant(argv[++i]);
      if (!variant) return false;
      settings.variant = *variant;
    } else if (arg == "--collective" && hasValue) {
      auto collective = tuccl::parseCollective(argv[++i]);
      if (!collective) return false;
      settings.collectives.push_back(*collective);
    } else if (arg == "--limit" && hasValue) {
      settings.limit = std::atof(argv[++i]);
    } else if (!arg.empty() && arg[0] != '-') {
      settings.preset = arg;
    } else {
      return false;
    }
  }
  if (settings.collectives.empty()) settings.collectives = {tuccl::Collective::AllGather, tuccl::Collective::AllReduce};
  return settings.chunks >= 1 && settings.limit > 0;
}

void printRow(int nodes, int ranks, tuccl::Collective collective, bool heuristicOnly,
              const tuccl::Expected<tuccl::SketchSynthesisResult>& result) {
  std::printf("%5d %5d  %-13s %-9s ", nodes, ranks, std::string(tuccl::collectiveName(collective)).c_str(),
              heuristicOnly ? "heuristic" : "milp");
  if (!result.ok()) {
    std::printf("error: %s\n", result.status().message().c_str());
    return;
  }
  std::printf("%-9s %8.2f %8zu %6d %12.1f\n", std::string(tuccl::sketchSynthesisMethodName(result->method)).c_str(),
              result->seconds, result->algorithm.ops.size(), result->algorithm.maxStep() + 1, result->modelTimeUs);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (!parseArguments(argc, argv, settings)) {
    std::fprintf(stderr, "usage: %s [PRESET] [--policy uc-min|uc-max] [--chunks K>=1] [--limit SECONDS>0] "
                 "[--sketch full-mesh|pruned|relay] [--collective NAME]...\n", argv[0]);
    return 2;
  }
  std::printf("sketch synthesis, preset %s, %s sketch, %s, %d chunk(s) per rank, limit %.0f s\n",
              settings.preset.c_str(), std::string(tuccl::sketchVariantName(settings.variant)).c_str(), std::string(tuccl::hyperedgePolicyName(settings.policy)).c_str(),
              settings.chunks, settings.limit);
  std::printf("%5s %5s  %-13s %-9s %-9s %8s %8s %6s %12s\n", "nodes", "ranks", "collective", "asked", "method",
              "seconds", "ops", "steps", "model (us)");
  for (int nodes : {1, 2, 4, 10}) {
    tuccl::Topology topology;
    try {
      topology = tuccl::makePreset("preset:" + settings.preset + ":nodes=" + std::to_string(nodes));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "%s\n", error.what());
      return 2;
    }
    tuccl::Sketch sketch = tuccl::buildSketch(topology, settings.variant);
    for (tuccl::Collective collective : settings.collectives) {
      for (bool heuristicOnly : {false, true}) {
        tuccl::SketchSynthesisOptions options;
        options.chunksPerRank = settings.chunks;
        options.heuristicOnly = heuristicOnly;
        options.timeLimitSeconds = settings.limit;
        options.hyperedgePolicy = settings.policy;
        printRow(nodes, topology.nRanks(), collective, heuristicOnly,
                 tuccl::synthesizeFromSketch(collective, topology, sketch, options));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
