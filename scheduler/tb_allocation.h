// Thread-block allocation (ResCCL §4.4, Table 3).
//
// In:  an Algorithm, its Dag and a Pipeline.
// Out: a TbAllocation: the connections of every rank and the TB (thread block) of each, and per
//      task the connection of its sending and receiving side.
//
// A connection is one side of a link on one rank: (rank, peer, direction, channel) with direction
// send (rank -> peer), recv (peer -> rank) or local (a rank's own copies and reduces).
//   - Connection-based allocation (MSCCL): one TB per connection.
//   - State-based allocation (ResCCL): a connection is active over the sub-pipelines from its
//     first to its last task; connections of a rank whose active intervals never overlap share a
//     TB. Greedy colouring by start time uses the fewest TBs an interval graph allows.
//   - Single: every connection of a rank in one TB. Lowering puts a TB's entries in the pipeline's
//     order, one topological order of the tasks shared by all ranks, so each rank's sends and
//     receives meet their peers' in the same global order: deadlock free even with rendezvous
//     (checkPlanDeadlockFree), whatever the ring sizes. For small calls on the CPU device, where
//     a TB is a thread and starting several costs more than the data.
// Channels split one connection into several (MSCCL opens extra channels for parallelism); they
// come from the caller, e.g. channelsByForwarding, which reproduces MSCCL's counts in Table 3 (see
// docs/scheduling.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"

namespace tuccl {

enum class Direction : uint8_t { Send, Recv, Local };

/// "send", "recv", "local".
std::string_view directionName(Direction direction);

struct Connection {
  int32_t rank = 0;
  int32_t peer = 0;
  Direction direction = Direction::Send;
  int32_t channel = 0;
  int32_t firstSubPipeline = 0;  ///< active interval, inclusive
  int32_t lastSubPipeline = 0;
};

struct TbAllocationOptions {
  TbPolicy policy = TbPolicy::StateBased;
  /// Channel of each task (indexed like Algorithm::ops, values in [0, 65536)); empty: all 0.
  std::vector<int32_t> channelOfTask;
};

struct TbAllocation {
  TbPolicy policy = TbPolicy::StateBased;
  /// Sorted by (rank, peer, direction, channel); the connections of rank r are
  /// connections[connectionBegin[r] .. connectionBegin[r + 1]).
  std::vector<Connection> connections;
  std::vector<int64_t> connectionBegin;
  std::vector<int32_t> tbOfConnection;  ///< TB index on the connection's rank
  std::vector<int32_t> tbCount;         ///< per rank
  /// Per task: its connection on the source rank (-1 for a local task) and on the destination
  /// rank (the local connection for a local task).
  std::vector<int32_t> sendConnectionOf;
  std::vector<int32_t> recvConnectionOf;
};

TbAllocation allocateThreadBlocks(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline,
                                  const TbAllocationOptions& options = {});

/// The MSCCL channel model behind Table 3: an intra-node task whose source data was last written
/// by an inter-node task (it forwards data that crossed nodes) runs on channel 1, every other task
/// on channel 0. Needs algorithm.ranksPerNode (all channel 0 when unknown).
std::vector<int32_t> channelsByForwarding(const Algorithm& algorithm, const Dag& dag);

/// TB utilisation in the units of the pipeline: a TB is busy in a sub-pipeline when it runs an
/// entry there; its lifetime is its rank's kernel, from the rank's first to its last busy
/// sub-pipeline (every TB of a kernel holds its SM for the kernel's lifetime).
struct TbUsage {
  int32_t minTbs = 0;
  int32_t maxTbs = 0;
  double meanTbs = 0;
  int64_t totalTbs = 0;
  double busyFraction = 0;  ///< mean over all TBs ("Comm Time" in Table 3)
  double meanIdle = 0;      ///< 1 - busyFraction
  double maxIdle = 0;       ///< the most idle TB
};
TbUsage measureTbUsage(const Algorithm& algorithm, const Pipeline& pipeline, const TbAllocation& allocation);

}  // namespace tuccl
