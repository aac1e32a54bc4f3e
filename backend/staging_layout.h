// Where every staging ring of a plan lives, in the staging memory of the ranks it connects
// (design.md "Kernels": PUSH model, the sender writes into the receiver's ring).
//
// Each rank owns one staging segment (CPU: POSIX shared memory; CUDA: device memory exported
// through an IPC handle). A ring (srcRank -> dstRank) keeps in the receiver's segment its slots,
// their tags, the `posted` flag and the receiver's running count, and in the sender's segment the
// `consumed` credit and the sender's running count; flags sit on their own 128-byte lines.
//
// Placement is a pure function of the plans placed so far, so every rank computes the same
// offsets for every rank's segment without talking: the ranks of a communicator place the same
// plans in the same order (collective calls are issued in the same order on every rank). A
// placed plan keeps its rings for the communicator's life; counters keep running across calls,
// so no call needs to reset them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernelgen/kernel_layout.h"
#include "support/status.h"

namespace tuccl::backend {

inline constexpr int64_t kFlagBytes = 128;  // one flag per 128-byte line (no false sharing)

/// Offsets of one ring. The *InDst offsets are in the receiver's segment, *InSrc in the sender's.
struct RingPlacement {
  int32_t srcRank = 0;
  int32_t dstRank = 0;
  int64_t stagingInDst = 0;  ///< nSlots * slotBytes
  int64_t tagsInDst = 0;     ///< nSlots * 8 tags, then nSlots * 8 slice sizes (RingDevice::tags)
  int64_t postedInDst = 0;
  int64_t recvCountInDst = 0;
  int64_t consumedInSrc = 0;
  int64_t sendCountInSrc = 0;
  int64_t slotBytes = 0;
  int32_t nSlots = 0;
};

struct PlanPlacement {
  std::vector<RingPlacement> rings;  ///< by ring id of the KernelLayout
};

/// Bytes every segment starts with: the communicator's abort word (rank 0's is the one used).
inline constexpr int64_t kSegmentHeaderBytes = kFlagBytes;

/// The point-to-point ring of the ordered pair (src, dst), src != dst, among the rings of
/// StagingAllocator::placePeerRings.
inline int32_t peerRingIndex(int32_t src, int32_t dst, int32_t nRanks) {
  return src * (nRanks - 1) + (dst < src ? dst : dst - 1);
}

/// The slot size of the point-to-point rings: the chunk size, but at most what keeps every
/// segment's incoming rings (nRanks - 1 of `nSlots` slots) within a quarter of `capacity`, so the
/// plans keep the rest; a multiple of 16. 0 when a slot would be under 1 KiB (too many ranks for
/// the staging: point-to-point is then refused, naming TUCCL_STAGING_BYTES).
int64_t peerSlotBytes(int64_t capacity, int32_t nRanks, int32_t nSlots, int64_t chunkBytes);

class StagingAllocator {
 public:
  /// nRanks segments of `capacity` bytes each.
  StagingAllocator(int32_t nRanks, int64_t capacity);
  /// Places the rings of `layout` with slots of `slotBytes` (a multiple of 16) and `nSlots`
  /// slots each. ResourceExhausted (naming the segment, the bytes needed and TUCCL_STAGING_BYTES)
  /// when a segment is full; nothing is placed then.
  Expected<PlanPlacement> place(const KernelLayout& layout, int64_t slotBytes, int32_t nSlots);
  /// Places one ring for every ordered pair of distinct ranks (index peerRingIndex), the
  /// point-to-point rings. Called first on a fresh allocator, so every rank finds them at the same
  /// offsets whatever collectives it ran.
  Expected<PlanPlacement> placePeerRings(int64_t slotBytes, int32_t nSlots);
  int64_t used(int32_t rank) const { return used_[rank]; }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  std::vector<int64_t> used_;
};

}  // namespace tuccl::backend
