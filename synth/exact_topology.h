// The link model of exact synthesis: one node's GPUs, the directed links between them and how many
// chunks each carries per round (SCCL, papers/002), plus the lower bounds Pareto-Synthesize
// starts from (SCCL Algorithm 1: steps >= the diameter, rounds per chunk >= the cut bound).
//
// In:  a Topology (topo/topology.h) of one node.
// Out: an ExactTopology, or InvalidArgument naming what the exact model cannot take (more than one
//      node, more than kMaxExactGpus GPUs, GPUs the GPU fabric does not connect).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"
#include "topo/topology.h"

namespace tuccl {

/// SCCL's encoding grows with chunks × GPUs²; it is meant for one server (SCCL evaluates DGX-1 and Z52, 8
/// GPUs each).
inline constexpr int32_t kMaxExactGpus = 8;

/// A bound shared by several links: per step, the chunks sent over all of them together are at
/// most chunksPerRound × the step's rounds. SCCL's "switches" (srcs, dsts, bw): an NVSwitch port
/// is one group for what a GPU sends and one for what it receives.
struct BandwidthGroup {
  std::vector<std::pair<int32_t, int32_t>> links;  ///< (src, dst) GPU pairs
  int32_t chunksPerRound = 0;
  std::string name;  ///< "gpu3 out", for messages
};

struct ExactTopology {
  int32_t nGpus = 0;
  /// capacity[src][dst]: chunks per round on the directed link src -> dst; 0 = no link.
  std::vector<std::vector<int32_t>> capacity;
  std::vector<BandwidthGroup> groups;

  bool hasLink(int32_t src, int32_t dst) const { return capacity[src][dst] > 0; }
};

/// A rational R/C, compared exactly (the bandwidth coefficient of the alpha-beta cost).
struct RoundsPerChunk {
  int64_t rounds = 0;
  int64_t chunks = 1;
  double value() const { return static_cast<double>(rounds) / static_cast<double>(chunks); }
  friend bool operator<(RoundsPerChunk a, RoundsPerChunk b) {
    return a.rounds * b.chunks < b.rounds * a.chunks;
  }
  friend bool operator<=(RoundsPerChunk a, RoundsPerChunk b) { return !(b < a); }
  friend bool operator==(RoundsPerChunk a, RoundsPerChunk b) {
    return a.rounds * b.chunks == b.rounds * a.chunks;
  }
};

/// The GPU-fabric links (NVLink, xGMI) of one node as chunks per round. Direct GPU links carry
/// their lanes; GPUs on one NVSwitch may each reach every other, bounded per GPU by its port in
/// both directions (a BandwidthGroup each way: SCCL's switch model, and TACCL's switch hyperedge,
/// papers/004, bounds it the same way). Lanes are divided by their greatest common divisor, so DGX-1's single
/// and double NVLinks carry 1 and 2 chunks per round (SCCL's dgx1 link matrix) and an A100 NVSwitch port 1.
Expected<ExactTopology> exactTopologyOf(const Topology& topology);

/// The same links reversed (what the inverse of a schedule runs on).
ExactTopology transposed(const ExactTopology& topology);
bool isSymmetric(const ExactTopology& topology);

/// Hops of the shortest path from every GPU to every other over links; -1 where none exists.
std::vector<std::vector<int32_t>> hopDistances(const ExactTopology& topology);

/// Chunks per round that can enter `inside` (a bit set of GPUs) from the other GPUs: the direct
/// links across the cut, capped by the receivers' and the senders' port groups.
int64_t cutCapacity(const ExactTopology& topology, uint32_t inside);

}  // namespace tuccl
