// What NCCL would do: its own choice of algorithm, protocol and channels for a collective on a
// topology, and the time its cost model gives that choice. Every speed-up TuCCL reports is over
// this (tuccl-sim --vs-nccl, bench_search_compare, tuccl-tune's summary).
//
// In:  a Topology (one node or several identical ones), a Collective, a byte count (nccl-tests'
//      size: the whole buffer of AllGather/ReduceScatter, the per-rank buffer of AllToAll).
// Out: an NcclChoice: algorithm (Ring; Tree for AllReduce only), protocol, channels, time and
//      bandwidths; or the model of one forced (algorithm, protocol).
//
// The model has two halves (docs/simulator.md, "The NCCL model"):
//  1. The graph search (NCCL search.cc), approximated: rings of one speed s per channel are packed
//     into one node while every directed link keeps s of bandwidth per ring using it — a Hamiltonian
//     cycle on one node, a path from a GPU under a NIC back to a GPU under the same NIC (whose
//     capacity each ring also takes s of) on several. Speeds come from NCCL's speed arrays, starting
//     at the widest GPU-to-GPU (one node) or NIC (several) bandwidth, keeping the largest
//     channels × s, at most 16 channels, doubled (at half the speed) when s >= 25 GB/s. NVLinks
//     count at NCCL's own per-link rate (topo.h: 20 GB/s on Volta/Ampere, 20.6 on Hopper), not the
//     marketing line rate of the topology file.
//  2. The tuning model (NCCL tuning.cc; constants in reference/cost-model.md): for each enabled
//     (algorithm, protocol) time = latency + nBytes / (1000 × bw), bw the bus bandwidth
//     nChannels × s derated by protocol and converted to algorithm bandwidth; the fastest wins.
// Left out: NVLS, CollNet and PAT (so H100 numbers are "without NVLS"), NCCL's tree correction
// factors and ring plateau factor, and the pass that raises the speed at a fixed channel count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "support/status.h"
#include "support/vocabulary.h"
#include "topo/topology.h"

namespace tuccl {

/// What the graph search finds for a topology; independent of the collective and the size.
struct NcclGraph {
  int32_t nRanks = 0;
  int32_t nNodes = 0;
  int32_t gpusPerNode = 0;
  int32_t nChannels = 0;       ///< graph->nChannels after the search's duplication
  double bwPerChannelGBps = 0; ///< graph->bwIntra (one node) or bwInter (several; NCCL sets both)
  HopClass intraHop = HopClass::NVLink;  ///< NVLink when every ring hop inside a node is NVLink/xGMI
  int32_t sm = 0;              ///< smallest compute capability × 10 of the GPUs (0 unknown)
  bool ll128 = false;          ///< LL128 enabled (NCCL enables it only where it was validated)
  double gpuFabricGBps = 0;    ///< widest GPU's total fabric bandwidth (NCCL's totalBw)
  double nicGBpsPerNode = 0;   ///< sum of the NICs of one node
  /// The distinct rings the search packed (before the duplication), each a permutation of all
  /// ranks: one node's order repeated node after node (NCCL's rings over nodes).
  std::vector<std::vector<int32_t>> rings;
};

/// NCCL's choice. AllToAll is no collective algorithm in NCCL but grouped send/recv (p2p): it is
/// reported with p2p set and algorithm Ring.
struct NcclChoice {
  NcclAlgorithm algorithm = NcclAlgorithm::Ring;
  Protocol protocol = Protocol::Simple;
  bool p2p = false;
  int32_t nChannels = 0;
  double timeUs = 0;
  double algBwGBs = 0;  ///< bytes / time
  double busBwGBs = 0;  ///< algBw × nccl-tests' bus factor (support/bus_bandwidth.h)
};

/// The graph search on `topology`; throws std::invalid_argument for a topology without GPUs.
NcclGraph searchNcclGraph(const Topology& topology);

/// The model of one (algorithm, protocol), or Unsupported when NCCL would not run it there: Tree
/// for anything but AllReduce, LL128 where it is disabled, algorithms other than Ring and Tree.
/// AllToAll takes Ring (its p2p path) with LL or Simple.
Expected<NcclChoice> evaluateNcclChoice(const NcclGraph& graph, Collective collective, uint64_t bytes,
                                        NcclAlgorithm algorithm, Protocol protocol);

/// The fastest enabled (algorithm, protocol) by NCCL's model, first in NCCL's order on ties
/// (Tree before Ring, LL before LL128 before Simple); AllToAll: NCCL's p2p protocol choice.
NcclChoice ncclModelChoice(const NcclGraph& graph, Collective collective, uint64_t bytes);
NcclChoice ncclModelChoice(const Topology& topology, Collective collective, uint64_t bytes);

/// "RING/Simple/12ch", "TREE/LL/12ch", "P2P/LL/16ch".
std::string describeNcclChoice(const NcclChoice& choice);

}  // namespace tuccl
