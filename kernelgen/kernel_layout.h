// Kernel layout: what the generated kernels and their runtime agree on, derived from a plan.
//
// In:  a Plan (scheduler/plan.h) that passed validatePlan.
// Out: a KernelLayout: the staging rings (one per pair of sending TB and receiving TB of a
//      directed rank pair, docs/kernels.md), the ring of every remote entry, the progress counter
//      of every entry others depend on, the chunk unit and in-place storage mapping; and
//      checkPlanRaceFree, the static race check run before a plan is executed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "scheduler/plan.h"

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
  int32_t ring = -1;      ///< remote entries: the ring they push into / read from
  int32_t progress = -1;  ///< entries with dependents: index of their progress counter on the rank
  EntryRef peer{-1, -1};  ///< remote entries: the paired entry on the peer
};

struct KernelLayout {
  Collective collective = Collective::AllReduce;
  int32_t chunksPerUnit = 1;  ///< k (Algorithm::chunksPerRank)
  std::vector<RingInfo> rings;
  std::vector<std::vector<std::vector<EntryLayout>>> entries;  ///< [rank][tb][entry]
  std::vector<int32_t> progressCounters;                        ///< per rank

  const EntryLayout& at(int32_t rank, int32_t tb, int32_t entry) const { return entries[rank][tb][entry]; }
};

/// Builds the layout. Sends of a -> b pair with receives of b from a, the k-th with the k-th,
/// both ordered by (subPipeline, op) as docs/plan-format.md defines. Throws std::invalid_argument
/// when the collective is unknown or the sends and receives of a rank pair do not pair up.
KernelLayout layoutKernels(const Plan& plan);

/// Where (buffer, index) of `rank` lives: the in-place storage of plan.inPlace plans
/// (lang/algorithm.h inPlaceStorage), the buffer itself otherwise.
StorageSlot planStorage(const Plan& plan, const KernelLayout& layout, int32_t rank, BufferKind buffer,
                        int32_t index);

/// Static race check: any two entries of one rank that touch a common storage chunk, at least
/// one writing it, must be ordered per micro-batch by the plan — a chain of TB order, `deps`
/// and send -> paired receive. Returns the first unordered pair, empty when there is none.
/// Catches a removed dependency before anything runs.
std::optional<std::string> checkPlanRaceFree(const Plan& plan, const KernelLayout& layout);

}  // namespace tuccl
