// NCCL's own algorithms as plans, simulated by the engine that simulates TuCCL's plans: the
// baseline of every "xNCCL" figure (tuccl-sim --vs-nccl, tuccl-tune's summary, the benches), so
// that a speed-up compares two plans under one cost model instead of a plan with a formula.
//
// In:  a Topology and its Network, a CostModel; per query a collective and a byte count
//      (nccl-tests' size), optionally a forced (algorithm, protocol).
// Out: NCCL's choice by its tuning model (sim/nccl_model.h: which algorithm and protocol NCCL
//      picks, and the model's time as a cross-check), the plan NCCL would run for it and the
//      plan's simulated time.
//
// The plans (reference/nccl-data-path.md, sections 1.1-1.6):
//   - Ring: the rings of NCCL's graph search (NcclGraph::rings), one ring per channel, the data
//     spread evenly over the channels; each rank runs one TB per channel that receives from its
//     ring predecessor and sends to its successor with fused primitives, replaying the ring's
//     primitive sequence per chunk (algorithm level). Channels beyond the distinct rings repeat
//     them as replicas, as NCCL's second half of channels repeats the rings.
//   - Tree: NCCL's double binary tree over nodes with a chain inside each node (the
//     double-binary-tree generator), half the channels per tree, channel c's trees through NIC c
//     mod the node's NICs (the generator's parts over the sketch's rails); reduce-up and broadcast-down
//     run concurrently (NCCL's two thread groups per block), each streaming its chunks: task
//     level, a TB per connection.
//   - AllToAll: NCCL's p2p path, every pair at once (the direct generator), a TB per connection.
//   - Channels at a size follow NCCL's enqueue rule (fewer channels, then fewer threads, while
//     a thread would get less than the protocol's threshold); chunks and threads follow NCCL's
//     defaults per protocol (ncclChunkBytes, ncclThreads).
// Left out with the model: NVLS, CollNet and PAT.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "plan/plan.h"
#include "sim/cost_model.h"
#include "sim/nccl_model.h"
#include "sim/network.h"
#include "support/status.h"
#include "support/vocabulary.h"
#include "topo/topology.h"

namespace tuccl {

/// NCCL's bytes per micro-batch slice for (algorithm, protocol, collective): ring Simple
/// AllReduce/AllGather/ReduceScatter 1 MiB (a 2 MiB chunk of two slices), other Simple 512 KiB,
/// LL 32 KiB, LL128 576,000 B; p2p 512 KiB inside a node, 128 KiB between nodes.
int64_t ncclChunkBytes(NcclAlgorithm algorithm, Protocol protocol, Collective collective, bool p2p, bool multiNode);

/// Tree LL128's smaller chunks for `bytes` over `nChannels` (calcCollChunking): `chunk` halved
/// while each channel would get too few chunks to fill the tree's depth.
int64_t ncclTreeLL128ChunkBytes(int64_t chunk, uint64_t bytes, int32_t nChannels, int32_t nRanks, int32_t nNodes);

/// NCCL's threads per block for (algorithm, protocol): Tree 640, LL128 640, LL and Simple 512
/// (Simple's extra sync warp moves no data).
int32_t ncclThreads(NcclAlgorithm algorithm, Protocol protocol);

/// The channels and threads NCCL uses for `bytes` (enqueue.cc): start from the communicator's
/// channels (twice the graph's, at most 64) and the protocol's threads, drop channels while bytes < channels × threads × threshold (64 B
/// Simple, 8 B LL128, 8 B × nRanks ring LL), then halve threads (multiples of 128) likewise.
struct NcclLaunch {
  int32_t nChannels = 1;
  int32_t nThreads = 512;
};
NcclLaunch ncclLaunch(const NcclGraph& graph, NcclAlgorithm algorithm, Protocol protocol, uint64_t bytes);

struct NcclSimulated {
  NcclChoice model;     ///< the tuning model's choice and time (the cross-check)
  NcclChoice choice;    ///< the same algorithm and protocol, the channels it runs; timeUs simulated
  std::string generator;  ///< the generator of the plan: "ring", "double-binary-tree", "direct"
};

class NcclBaseline {
 public:
  NcclBaseline(const Topology& topology, const Network& network, const CostModel& cost);

  const NcclGraph& graph() const { return graph_; }

  /// NCCL's choice at `bytes` by its tuning model, simulated.
  Expected<NcclSimulated> evaluate(Collective collective, int64_t bytes);
  /// A forced (algorithm, protocol), simulated; Unsupported where NCCL would not run it.
  Expected<NcclSimulated> evaluate(Collective collective, int64_t bytes, NcclAlgorithm algorithm, Protocol protocol);

  /// The plan NCCL would run for (algorithm, protocol) at `bytes` (the channels and threads
  /// depend on the size); AllToAll takes NCCL's p2p path whatever the algorithm.
  Expected<Plan> plan(Collective collective, int64_t bytes, NcclAlgorithm algorithm, Protocol protocol);

 private:
  const Topology& topology_;
  const Network& network_;
  CostModel cost_;
  NcclGraph graph_;
  // (collective, algorithm, protocol, channels, threads, chunk) -> plan
  std::map<std::tuple<int, int, int, int32_t, int32_t, int64_t>, Plan> plans_;
};

}  // namespace tuccl
