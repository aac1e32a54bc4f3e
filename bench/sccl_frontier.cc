// SCCL Table 4 on DGX-1 (papers/002): each (C,S,R) point synthesised by TuCCL's exact synthesis
// (Z3), our solve time beside SCCL's (Z3 4.8.8 on their machine), then the Pareto frontier per
// collective. Times are wall-clock of this machine; never asserted.
//
// Usage: bench_sccl_frontier [--topology SPEC] [--time-limit SECONDS] [--collective NAME]
//                            [--points-only | --frontiers-only]
// The whole run takes minutes: SCCL's bandwidth-optimal AllToAll (24,8,8) is the slow point.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "synth/exact_synthesis.h"
#include "topo/presets.h"

namespace {

using namespace tuccl;

struct Table4Row {
  Collective collective;
  int32_t chunks, steps, rounds;
  const char* optimality;
  double scclSeconds;
};

// SCCL Table 4 (DGX-1, SMT time with Z3 4.8.8).
const std::vector<Table4Row> kTable4 = {
    {Collective::AllGather, 1, 2, 2, "latency", 0.3},
    {Collective::AllGather, 6, 7, 7, "bandwidth", 4.6},
    {Collective::AllGather, 6, 3, 7, "bandwidth (lower S)", 6.6},
    {Collective::AllReduce, 8, 4, 4, "latency", 0.3},
    {Collective::AllReduce, 48, 14, 14, "bandwidth", 12.8},
    {Collective::AllReduce, 16, 4, 6, "latency-tight", 0.8},
    {Collective::Broadcast, 2, 2, 2, "latency", 0.1},
    {Collective::AllToAll, 8, 2, 3, "latency", 3.0},
    {Collective::AllToAll, 24, 8, 8, "bandwidth", 133.7},
    {Collective::AllToAll, 24, 2, 8, "both", 24.3},
};

std::string point(int32_t c, int32_t s, int32_t r) {
  return "(" + std::to_string(c) + "," + std::to_string(s) + "," + std::to_string(r) + ")";
}

void printPoints(const Topology& topology, double timeLimit, std::optional<Collective> only) {
  std::printf("%-14s %-12s %10s %10s  %-20s %s\n", "collective", "(C,S,R)", "ours [s]", "SCCL [s]",
              "optimality", "result");
  for (const Table4Row& row : kTable4) {
    if (only && row.collective != *only) continue;
    ExactSynthesisOptions options;
    options.timeLimitSeconds = timeLimit;
    Expected<ParetoPoint> result =
        synthesizeExact(topology, row.collective, row.chunks, row.steps, row.rounds, options);
    const std::string name(collectiveName(row.collective));
    if (result.ok()) {
      std::printf("%-14s %-12s %10.2f %10.1f  %-20s sat, %zu operations, proved\n", name.c_str(),
                  point(row.chunks, row.steps, row.rounds).c_str(), result->seconds, row.scclSeconds,
                  row.optimality, result->algorithm.ops.size());
    } else {
      std::printf("%-14s %-12s %10s %10.1f  %-20s %s\n", name.c_str(),
                  point(row.chunks, row.steps, row.rounds).c_str(), "-", row.scclSeconds, row.optimality,
                  result.status().message().c_str());
    }
    std::fflush(stdout);
  }
}

void printFrontier(const Topology& topology, Collective collective, int32_t slack, double timeLimit) {
  ExactSynthesisOptions options;
  options.slack = slack;
  options.timeLimitSeconds = timeLimit;
  Expected<ParetoFrontier> frontier = paretoSynthesize(topology, collective, options);
  std::printf("\n%s, k = %d:\n", std::string(collectiveName(collective)).c_str(), slack);
  if (!frontier.ok()) {
    std::printf("  error: %s\n", frontier.status().message().c_str());
    return;
  }
  for (const ParetoPoint& p : frontier->points) {
    std::printf("  %-12s R/C = %6.3f  %8.2f s\n", point(p.chunks, p.steps, p.rounds).c_str(),
                static_cast<double>(p.rounds) / p.chunks, p.seconds);
  }
  std::printf("  %s: %s\n", frontier->complete ? "complete" : "incomplete", frontier->note.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "preset:dgx1-v100";
  double timeLimit = 300;
  bool points = true, frontiers = true;
  std::optional<Collective> only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--topology") && i + 1 < argc) {
      spec = argv[++i];
    } else if (!std::strcmp(argv[i], "--time-limit") && i + 1 < argc) {
      timeLimit = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--collective") && i + 1 < argc) {
      only = parseCollective(argv[++i]);
      if (!only) {
        std::fprintf(stderr, "error: --collective: unknown collective '%s'\n", argv[i]);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--points-only")) {
      frontiers = false;
    } else if (!std::strcmp(argv[i], "--frontiers-only")) {
      points = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--topology SPEC] [--time-limit SECONDS] [--collective NAME] [--points-only | "
                   "--frontiers-only]\n",
                   argv[0]);
      return 2;
    }
  }
  Topology topology;
  try {
    topology = makePreset(spec);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 2;
  }
  std::printf("SCCL Table 4 on %s (time limit %.0f s per query)\n\n", spec.c_str(), timeLimit);
  if (points) printPoints(topology, timeLimit, only);
  if (frontiers) {
    // k = 0 except AllToAll, whose chunks come in multiples of 8: at R = S its first point is
    // (8,3,3), and SCCL's latency-optimal (8,2,3) needs one extra round.
    const std::vector<std::pair<Collective, int32_t>> walks = {{Collective::AllGather, 0},
                                                               {Collective::AllReduce, 0},
                                                               {Collective::Broadcast, 0},
                                                               {Collective::AllToAll, 1}};
    for (const auto& [collective, slack] : walks) {
      if (!only || *only == collective) printFrontier(topology, collective, slack, timeLimit);
    }
  }
  return 0;
}
