// Exact synthesis (SCCL, papers/002): the latency/bandwidth Pareto frontier of k-synchronous
// algorithms for one node of at most 8 GPUs, by SMT (Z3).
//
// In:  a Topology of one node (its GPU fabric: NVLink, xGMI, NVSwitch; synth/exact_topology.h),
//      a collective, and bounds.
// Out: proved Algorithms (synth/proved.h), each labelled with SCCL's (chunks C, steps S, rounds R):
//      its cost in the alpha-beta model is S·alpha + (R/C)·L·beta. An inverted phase may take more
//      IR steps than S: reduces into one slot in one SMT step are serialised (exact_lowering.h).
//
// Chunks C count the collective's own unit: per GPU for AllGather and ReduceScatter (the IR's
// chunk unit k = C), the whole buffer for Broadcast, Reduce and AllReduce, and per GPU in total for
// AllToAll (C/nGPUs to each destination, so C must be a multiple of nGPUs).
//
// Combining collectives (SCCL) are inverses: ReduceScatter is AllGather on the reversed links
// run backwards with sends turned into reduces, Reduce is Broadcast inverted likewise, and AllReduce
// is a ReduceScatter followed by an AllGather, each taking half the steps and rounds; its C counts
// the whole buffer, nGPUs × the AllGather's per-GPU chunks, so AllReduce (8,4,4) on DGX-1 is
// ReduceScatter (1,2,2) + AllGather (1,2,2), and C must be a multiple of nGPUs and S, R even.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "support/status.h"
#include "support/vocabulary.h"
#include "topo/topology.h"

namespace tuccl {

struct ExactSynthesisOptions {
  int32_t root = 0;  ///< Broadcast / Reduce
  /// k: rounds R <= S + k. 0 (the default) searches synchronous algorithms, R = S, the class whose
  /// DGX-1 AllGather frontier runs from (1,2,2) to NCCL's bandwidth-optimal (6,7,7) (SCCL Table 4);
  /// SCCL's (6,3,7) AllGather needs k = 4 and its AllToAll (8,2,3) k = 1.
  int32_t slack = 0;
  /// Largest S tried by paretoSynthesize; 0: the steps lower bound plus the number of GPUs (for
  /// AllReduce, twice that of its AllGather).
  int32_t maxSteps = 0;
  /// Largest C tried by paretoSynthesize; 0: 8 of the collective's smallest chunk count (8 for
  /// AllGather, Broadcast, ReduceScatter, Reduce; 8 × nGPUs for AllToAll and AllReduce).
  int32_t maxChunks = 0;
  /// Wall-clock budget of the whole call, passed to Z3 as its timeout.
  double timeLimitSeconds = 120;
  std::function<void(const std::string&)> progress;  ///< one line per query and result; may be empty
};

struct ParetoPoint {
  int32_t chunks = 0, steps = 0, rounds = 0;
  double seconds = 0;  ///< SMT time of the query (both phases' for AllReduce on asymmetric links)
  Algorithm algorithm;
};

struct ParetoFrontier {
  std::vector<ParetoPoint> points;  ///< S ascending, R/C strictly descending
  bool complete = true;             ///< the bandwidth lower bound was reached within the bounds and time
  std::string note;                 ///< the bounds used, and why the walk stopped
};

/// SCCL Algorithm 1 (Pareto-Synthesize): from S = the steps lower bound upwards, the smallest R/C
/// satisfiable at that S (R in S..S+k, R/C at least the bandwidth lower bound and below every
/// earlier point's), until R/C reaches the bandwidth lower bound. On a Z3 timeout or an exhausted
/// time limit, the points found so far with complete = false.
/// One node of <= 8 GPUs (InvalidArgument naming the limit otherwise).
Expected<ParetoFrontier> paretoSynthesize(const Topology& topology, Collective collective,
                                          const ExactSynthesisOptions& options);

/// One (C,S,R) query: the algorithm, or NotFound when UNSAT, Timeout when Z3 gives up.
Expected<ParetoPoint> synthesizeExact(const Topology& topology, Collective collective, int32_t chunks,
                                      int32_t steps, int32_t rounds, const ExactSynthesisOptions& options);

}  // namespace tuccl
