// SCCL's k-synchronous SMT encoding (papers/002) on Z3: can chunks with given start and end
// GPUs be routed over an ExactTopology in S steps and R rounds?
//
// In:  an ExactTopology, a Demand (per chunk: the GPUs holding it before, the GPUs needing it
//      after), steps S, rounds R >= S, a time limit.
// Out: a Schedule (for every chunk, the step it reaches each GPU and from whom; the rounds of each
//      step), or Unsat, or Unknown when Z3 gave up within the limit.
//
// Variables (SCCL): time[c][n] (int: the step at which chunk c is at GPU n; S+1 = never),
// snd[n][c][n'] (bool: n sends c to n', in step time[c][n']), and rounds r_s >= 1 per step with
// sum r_s = R. Constraints: time = 0 where the chunk starts; time <= S where it must end; a GPU that
// does not start with a chunk but gets it receives it from exactly one sender that held it strictly
// earlier, over a link; per step and link (and per bandwidth group) the chunks sent are at most
// chunksPerRound × r_s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "synth/exact_topology.h"

namespace tuccl {

/// One chunk of a collective in SCCL's (pre, post) form (SCCL Table 2).
struct ChunkDemand {
  std::vector<int32_t> pre;   ///< GPUs holding the chunk before step 1
  std::vector<int32_t> post;  ///< GPUs that must hold it after step S
};

struct Demand {
  int32_t nGpus = 0;
  std::vector<ChunkDemand> chunks;
};

/// A solution: the k-synchronous algorithm the model describes.
struct Schedule {
  int32_t steps = 0;
  std::vector<int32_t> rounds;             ///< rounds of step s+1 at index s
  std::vector<std::vector<int32_t>> time;  ///< [chunk][gpu]: step it arrives (0: pre), -1: never
  std::vector<std::vector<int32_t>> from;  ///< [chunk][gpu]: its sender, -1 when pre or never
};

enum class SolveOutcome : uint8_t { Sat, Unsat, Unknown };

struct SolveResult {
  SolveOutcome outcome = SolveOutcome::Unknown;
  Schedule schedule;   ///< when Sat
  double seconds = 0;  ///< Z3's wall time
  std::string reason;  ///< Z3's reason when Unknown
};

/// Decides one (S, R) instance. Deterministic: Z3's random seeds are fixed.
SolveResult solveSchedule(const ExactTopology& topology, const Demand& demand, int32_t steps, int32_t rounds,
                          double timeLimitSeconds);

/// SCCL Algorithm 1's lower bounds for a demand. Steps: the farthest any chunk must travel.
int32_t stepsLowerBound(const ExactTopology& topology, const Demand& demand);
/// Rounds per chunk unit: for every set of GPUs, the chunks that must enter it over what can enter
/// it per round (the per-GPU bound for single GPUs, the bisection bound for halves), divided by
/// `chunkUnits` (the C the demand was built for).
RoundsPerChunk roundsPerChunkLowerBound(const ExactTopology& topology, const Demand& demand,
                                        int32_t chunkUnits);

}  // namespace tuccl
