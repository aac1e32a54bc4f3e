// Deterministic placement of staging rings in the ranks' segments (staging_layout.h).
#include "backend/staging_layout.h"

#include <algorithm>
#include <string>

namespace tuccl::backend {
namespace {

int64_t alignUp(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

StagingAllocator::StagingAllocator(int32_t nRanks, int64_t capacity)
    : capacity_(capacity), used_(static_cast<size_t>(nRanks), kSegmentHeaderBytes) {}

Expected<PlanPlacement> StagingAllocator::place(const KernelLayout& layout, int64_t slotBytes, int32_t nSlots) {
  if (slotBytes <= 0 || slotBytes % 16 != 0 || nSlots < 1) {
    return makeError(ErrorCode::InvalidArgument, "staging: slots of " + std::to_string(slotBytes) + " bytes x " +
                                                     std::to_string(nSlots) + " (slot bytes must be a positive multiple of 16)");
  }
  std::vector<int64_t> used = used_;
  auto take = [&](int32_t rank, int64_t bytes) {
    const int64_t offset = alignUp(used[rank], kFlagBytes);
    used[rank] = offset + bytes;
    return offset;
  };
  PlanPlacement placement;
  placement.rings.reserve(layout.rings.size());
  for (const RingInfo& info : layout.rings) {
    if (info.srcRank < 0 || info.dstRank < 0 || info.srcRank >= static_cast<int32_t>(used.size()) ||
        info.dstRank >= static_cast<int32_t>(used.size())) {
      return makeError(ErrorCode::InvalidArgument, "staging: a ring connects rank " + std::to_string(info.srcRank) +
                                                       " to rank " + std::to_string(info.dstRank) + " of a " +
                                                       std::to_string(used.size()) + "-rank communicator");
    }
    RingPlacement ring;
    ring.srcRank = info.srcRank;
    ring.dstRank = info.dstRank;
    ring.slotBytes = slotBytes;
    ring.nSlots = nSlots;
    ring.stagingInDst = take(info.dstRank, slotBytes * nSlots);
    ring.tagsInDst = take(info.dstRank, 16 * static_cast<int64_t>(nSlots));
    ring.postedInDst = take(info.dstRank, kFlagBytes);
    ring.recvCountInDst = take(info.dstRank, kFlagBytes);
    ring.consumedInSrc = take(info.srcRank, kFlagBytes);
    ring.sendCountInSrc = take(info.srcRank, kFlagBytes);
    placement.rings.push_back(ring);
  }
  for (size_t r = 0; r < used.size(); ++r) {
    if (used[r] > capacity_) {
      return makeError(ErrorCode::ResourceExhausted,
                       "staging: the segment of rank " + std::to_string(r) + " needs " + std::to_string(used[r]) +
                           " bytes for the plans used so far, more than its " + std::to_string(capacity_) +
                           " (raise TUCCL_STAGING_BYTES, or lower the chunk size)");
    }
  }
  used_ = std::move(used);
  return placement;
}

int64_t peerSlotBytes(int64_t capacity, int32_t nRanks, int32_t nSlots, int64_t chunkBytes) {
  if (nRanks < 2 || nSlots < 1) return 0;
  // Per incoming ring besides its slots: the tags and four flag lines (place() above).
  const int64_t perRing = capacity / 4 / (nRanks - 1) - 16 * nSlots - 4 * kFlagBytes;
  const int64_t slot = std::min(chunkBytes, perRing / nSlots) / 16 * 16;
  return slot >= 1024 ? slot : 0;
}

Expected<PlanPlacement> StagingAllocator::placePeerRings(int64_t slotBytes, int32_t nSlots) {
  KernelLayout pairs;
  const auto nRanks = static_cast<int32_t>(used_.size());
  for (int32_t src = 0; src < nRanks; ++src) {
    for (int32_t dst = 0; dst < nRanks; ++dst) {
      if (src == dst) continue;
      RingInfo ring;
      ring.srcRank = src;
      ring.dstRank = dst;
      pairs.rings.push_back(ring);
    }
  }
  return place(pairs, slotBytes, nSlots);
}

}  // namespace tuccl::backend
