// Kernel layout: what the generated kernels and their runtime agree on, derived from a plan.
//
// In:  a Plan (plan/plan.h) that passed validatePlan.
// Out: a KernelLayout: the staging rings (one per pair of sending TB and receiving TB of a
//      directed rank pair, docs/kernels.md), the ring of every remote entry, the progress counter
//      of every entry others depend on, and the chunk unit. The storage mapping and the static
//      race check are the plan's (plan/plan_storage.h, plan/plan_validate.h).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// A staging ring: sends of (srcRank, srcTb) to (dstRank, dstTb), in plan pairing order.
struct RingInfo {
  int32_t srcRank = 0;
  int32_t srcTb = 0;
  int32_t dstRank = 0;
  int32_t dstTb = 0;
  int32_t messages = 0;  ///< paired entries using the ring
};

struct EntryLayout {
  int32_t ring = -1;      ///< remote entries: the ring they push into / read from (fused: read from)
  int32_t progress = -1;  ///< entries with dependents: index of their progress counter on the rank
  EntryRef peer{-1, -1};  ///< remote entries: the paired entry on the peer (fused: the sender)
  int32_t outRing = -1;      ///< fused entries: the ring they push their result into
  EntryRef outPeer{-1, -1};  ///< fused entries: the receive of their result on the next peer
};

struct KernelLayout {
  Collective collective = Collective::AllReduce;
  int32_t chunksPerUnit = 1;  ///< k (planChunkUnit)
  /// Channels: the kernels run config.nChannels replicas of the plan's TBs (docs/kernels.md
  /// "Channels"). `rings` and `progressCounters` hold every replica's; `entries` name replica 0's
  /// ring and counter, replica c adds c * ringsPerChannel and c * progressPerChannel[rank].
  int32_t channels = 1;
  int32_t ringsPerChannel = 0;
  std::vector<RingInfo> rings;                                 ///< every replica's rings
  std::vector<std::vector<std::vector<EntryLayout>>> entries;  ///< [rank][tb][entry], replica 0
  std::vector<int32_t> progressCounters;                       ///< per rank, every replica's
  std::vector<int32_t> progressPerChannel;                     ///< per rank, one replica's

  const EntryLayout& at(int32_t rank, int32_t tb, int32_t entry) const { return entries[rank][tb][entry]; }
  /// The blocks a rank's kernel is launched with: its TBs times the channels (a call may run
  /// fewer than the plan's: KernelArgs::channels).
  int32_t blocksOf(const Plan& plan, int32_t rank) const { return blocksOf(plan, rank, channels); }
  int32_t blocksOf(const Plan& plan, int32_t rank, int32_t callChannels) const {
    return static_cast<int32_t>(plan.ranks[rank].tbs.size()) * callChannels;
  }
};

/// Builds the layout. Sends pair with receives as docs/plan-format.md defines (pairTransfers).
/// InvalidInput when the plan has no chunks or its sends and receives do not pair up.
Expected<KernelLayout> layoutKernels(const Plan& plan);

}  // namespace tuccl
