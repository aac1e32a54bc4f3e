// The primitives of the generated kernels (ResCCL §4.5; SCCL's PUSH model; docs/kernels.md).
//
// A TB runs plan entries; an entry runs micro-batch by micro-batch. Micro-batch mb of an entry
// moves slice mb of each of its `count` chunks. Chunk geometry (exact for every size):
//   the collective's unit of `count` elements is cut into k = chunksPerUnit chunks of
//   ce = ceil(count / k) elements; chunk j of a unit covers [j*ce, min((j+1)*ce, count)), so the
//   last chunks may be shorter or empty. Chunk `index` of a buffer is chunk index % k of unit
//   block index / k (block b starts at element b * count). A slice is sliceElems elements; every
//   entry runs nMicroBatches = max(1, ceil(ce / sliceElems)) micro-batches, and slice mb of a
//   chunk is [mb*se, min((mb+1)*se, len)) — possibly empty, which still exchanges flags so both
//   sides stay in step. A transfer moves min(source chunk length, destination chunk length).
//
// Remote primitives use a staging ring (kernel_args.h: RingDevice) in the protocol the kernel
// runs (KernelArgs::protocol): Simple (a data flag per slot, below), LL or LL128 (flags inside
// the data, protocols.h). Every primitive returns false when a wait gave up (the TB's report says
// why); the generated code then returns.
#pragma once

#include "datatypes.h"
#include "flags.h"
#include "kernel_args.h"
#include "protocols.h"
#include "tuccl_device.h"

namespace tuccl::dev {

enum BufferId : int32_t { kInput = 0, kOutput = 1, kScratch = 2 };

/// A TB's view of its rank's arguments: geometry derived once.
struct Tb {
  const KernelArgs* args;
  TbReport* report;
  int32_t tb;
  int32_t elemSize;
  int64_t chunkElems;
  int64_t nMicroBatches;

  /// Records the entry and micro-batch being run (for the hang report).
  TUCCL_DEVICE_INLINE void at(int32_t entry, int64_t mb) {
    if (threadIdx.x == 0) {
      report->entry = entry;
      report->microBatch = mb;
    }
  }
};

TUCCL_DEVICE_INLINE Tb makeTb(const KernelArgs& args, int32_t tb) {
  Tb t;
  t.args = &args;
  t.report = &args.reports[tb];
  t.tb = tb;
  t.elemSize = elementSize(args.dtype);
  const int64_t k = args.chunksPerUnit > 0 ? args.chunksPerUnit : 1;
  t.chunkElems = (args.count + k - 1) / k;
  const int64_t se = args.sliceElems > 0 ? args.sliceElems : 1;
  t.nMicroBatches = t.chunkElems > 0 ? (t.chunkElems + se - 1) / se : 1;
  return t;
}

TUCCL_DEVICE_INLINE char* bufferBase(const KernelArgs& args, int32_t buffer) {
  return static_cast<char*>(buffer == kInput ? args.input : buffer == kOutput ? args.output : args.scratch);
}

TUCCL_DEVICE_INLINE int64_t minI64(int64_t a, int64_t b) { return a < b ? a : b; }

/// First element and length of chunk `index` of a buffer.
TUCCL_DEVICE_INLINE int64_t chunkOffset(const Tb& t, int32_t index) {
  const int32_t k = t.args->chunksPerUnit;
  return static_cast<int64_t>(index / k) * t.args->count + minI64(static_cast<int64_t>(index % k) * t.chunkElems, t.args->count);
}
TUCCL_DEVICE_INLINE int64_t chunkLength(const Tb& t, int32_t index) {
  const int64_t begin = minI64(static_cast<int64_t>(index % t.args->chunksPerUnit) * t.chunkElems, t.args->count);
  return minI64(t.chunkElems, t.args->count - begin);
}

/// Slice `mb` of the j-th chunk pair of a transfer: first element within the chunk and length.
struct Slice {
  int64_t begin;
  int64_t elems;
};
TUCCL_DEVICE_INLINE Slice sliceOf(const Tb& t, int32_t srcIndex, int32_t dstIndex, int64_t mb) {
  const int64_t len = minI64(chunkLength(t, srcIndex), chunkLength(t, dstIndex));
  const int64_t se = t.args->sliceElems;
  const int64_t begin = minI64(mb * se, len);
  return Slice{begin, minI64(se, len - begin)};
}

TUCCL_DEVICE_INLINE char* elementPtr(const Tb& t, int32_t buffer, int32_t index, int64_t within) {
  return bufferBase(*t.args, buffer) + (chunkOffset(t, index) + within) * t.elemSize;
}

/// Copies n bytes with the threads of the TB, 16 bytes per access where alignment allows.
TUCCL_DEVICE_INLINE void copyBytes(char* dst, const char* src, int64_t n) {
  int64_t done = 0;
  if (aligned16(dst) && aligned16(src)) {
    const int64_t packs = n / 16;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      reinterpret_cast<Pack16*>(dst)[p] = reinterpret_cast<const Pack16*>(src)[p];
    }
    done = packs * 16;
  }
  for (int64_t i = done + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

TUCCL_DEVICE_INLINE uint64_t sliceTag(int32_t op, int64_t slice) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(op)) << 32) | static_cast<uint32_t>(slice);
}

// ---- Dependencies between entries of one rank (per micro-batch) -------------------------------

/// Waits until entry (depTb, depEntry), whose progress counter is `progress`, finished `mb`.
TUCCL_DEVICE_NOINLINE bool waitEntry(Tb& t, int32_t progress, int32_t depTb, int32_t depEntry, int64_t mb) {
  WaitSite site{kWaitDependency, -1, depTb, depEntry};
  return waitAtLeast(*t.args, *t.report, &t.args->progress[progress], static_cast<uint64_t>(mb + 1), site);
}

/// Publishes that this entry finished micro-batch `mb`.
TUCCL_DEVICE_INLINE void postEntry(Tb& t, int32_t progress, int64_t mb) {
  tbSync();
  if (threadIdx.x == 0) storeRelease(&t.args->progress[progress], static_cast<uint64_t>(mb + 1));
}

// ---- Remote primitives (PUSH) ---------------------------------------------------------------

/// Thread 0 records slice k's tag in its slot, and the slot bytes it uses (the proxy forwards
/// that much).
TUCCL_DEVICE_INLINE void writeTag(RingDevice& r, int32_t slot, uint64_t tag, int64_t bytes) {
  if (threadIdx.x == 0) {
    r.tags[slot] = tag;
    r.tags[r.nSlots + slot] = static_cast<uint64_t>(bytes);
  }
}

/// Writes slice k (`bytes` at `src`) into its slot in the kernel's protocol and raises `posted`.
/// Simple: data, tag, then `posted` (release). LL / LL128: the tag first, so a receiver that saw
/// the lines also sees the tag, then the lines; `posted` serves the inter-node proxy.
TUCCL_DEVICE_INLINE void stageSlice(Tb& t, RingDevice& r, uint64_t k, int32_t slot, const char* src, int64_t bytes,
                                    uint64_t tag) {
  char* at = r.staging + slot * r.slotBytes;
  const int32_t protocol = protocolOf(*t.args);
  if (protocol == kProtoSimple) {
    copyBytes(at, src, bytes);
    tbSync();
    writeTag(r, slot, tag, bytes);
  } else {
    writeTag(r, slot, tag, stagedBytes(protocol, bytes));
    fenceSystem();
    tbSync();
    if (protocol == kProtoLL) {
      writeLLSlice(at, src, bytes, k);
    } else {
      writeLL128Slice(at, src, bytes, k);
    }
    tbSync();
  }
  if (threadIdx.x == 0) storeRelease(r.posted, k + 1);
}

/// Pushes slice `mb` of `count` source chunks into the peer's staging ring.
TUCCL_DEVICE_NOINLINE bool send(Tb& t, int32_t ring, int32_t srcBuffer, int32_t srcIndex, int32_t dstIndex,
                              int32_t count, int32_t op, int64_t mb) {
  RingDevice& r = t.args->rings[ring];
  tbSync();
  const uint64_t first = *r.sendCount;
  for (int32_t j = 0; j < count; ++j) {
    const uint64_t k = first + static_cast<uint64_t>(j);
    const int32_t slot = static_cast<int32_t>(k % static_cast<uint64_t>(r.nSlots));
    if (k >= static_cast<uint64_t>(r.nSlots)) {
      WaitSite site{kWaitCredit, ring, -1, -1};
      if (!waitAtLeast(*t.args, *t.report, r.consumed, k + 1 - static_cast<uint64_t>(r.nSlots), site)) return false;
    }
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    stageSlice(t, r, k, slot, elementPtr(t, srcBuffer, srcIndex + j, s.begin), s.elems * t.elemSize,
               sliceTag(op, mb * count + j));
  }
  if (threadIdx.x == 0) *r.sendCount = first + static_cast<uint64_t>(count);
  tbSync();
  return true;
}

/// Thread 0 checks that the slot holds the slice expected (plan order); a mismatch is reported,
/// never consumed.
TUCCL_DEVICE_INLINE bool checkTag(Tb& t, int32_t ring, int32_t slot, uint64_t tag) {
  RingDevice& r = t.args->rings[ring];
  bool ok = true;
  if (threadIdx.x == 0) {
    const uint64_t seen = loadPlain(&r.tags[slot]);
    if (seen != tag) {
      TbReport& report = *t.report;
      report.state = kTbTagMismatch;
      report.wait = kWaitData;
      report.ring = ring;
      report.expected = tag;
      report.seen = seen;
      raiseAbort(*t.args);
      ok = false;
    }
  }
  return tbAgree(ok);
}

/// Simple: waits for the next slice of a ring and checks it is the one expected (plan order).
TUCCL_DEVICE_INLINE bool awaitSlice(Tb& t, int32_t ring, uint64_t k, uint64_t tag, int32_t& slot) {
  RingDevice& r = t.args->rings[ring];
  slot = static_cast<int32_t>(k % static_cast<uint64_t>(r.nSlots));
  WaitSite site{kWaitData, ring, -1, -1};
  if (!waitAtLeast(*t.args, *t.report, r.posted, k + 1, site)) return false;
  return checkTag(t, ring, slot, tag);
}

/// LL / LL128: takes slice k's lines out of its slot as they arrive, into `dst` (reduce: dst op=
/// the data, a piece at a time through a TB-local buffer), then checks its tag.
TUCCL_DEVICE_NOINLINE bool receiveLines(Tb& t, int32_t ring, uint64_t k, int32_t slot, char* dst, int64_t bytes,
                                        uint64_t tag, bool reduce) {
  RingDevice& r = t.args->rings[ring];
  const char* at = r.staging + slot * r.slotBytes;
  const bool ll = protocolOf(*t.args) == kProtoLL;
#if defined(TUCCL_DEVICE_COMPILE)
  __shared__ alignas(16) char bounce[kLineBounceBytes];
#else
  alignas(16) char bounce[kLineBounceBytes];
#endif
  const int64_t piece = reduce ? kLineBounceBytes : (bytes > 0 ? bytes : 1);
  for (int64_t begin = 0; begin == 0 || begin < bytes; begin += piece) {
    const int64_t n = minI64(piece, bytes - begin);
    char* out = reduce ? bounce : dst + begin;
    const bool ok = ll ? readLLPiece(*t.args, *t.report, ring, at, k, bytes, begin, n, out)
                       : readLL128Piece(*t.args, *t.report, ring, at, k, bytes, begin, n, out);
    if (!ok) return false;
    if (reduce) {
      reduceElements(t.args->dtype, t.args->op, dst + begin, bounce, n / t.elemSize);
      tbSync();
    }
  }
  fenceSystem();
  tbSync();
  return checkTag(t, ring, slot, tag);
}

/// Returns the credit of slice k.
TUCCL_DEVICE_INLINE void releaseSlice(RingDevice& r, uint64_t k) {
  tbSync();
  if (threadIdx.x == 0) storeRelease(r.consumed, k + 1);
}

/// Receives slice `mb` of `count` chunks into the destination (reduce: dst op= incoming).
TUCCL_DEVICE_NOINLINE bool receive(Tb& t, int32_t ring, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                                 int32_t count, int32_t op, int64_t mb, bool reduce) {
  RingDevice& r = t.args->rings[ring];
  tbSync();
  const uint64_t first = *r.recvCount;
  for (int32_t j = 0; j < count; ++j) {
    const uint64_t k = first + static_cast<uint64_t>(j);
    const uint64_t tag = sliceTag(op, mb * count + j);
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    char* dst = elementPtr(t, dstBuffer, dstIndex + j, s.begin);
    if (protocolOf(*t.args) != kProtoSimple) {
      const int32_t slot = static_cast<int32_t>(k % static_cast<uint64_t>(r.nSlots));
      if (!receiveLines(t, ring, k, slot, dst, s.elems * t.elemSize, tag, reduce)) return false;
      releaseSlice(r, k);
      continue;
    }
    int32_t slot = 0;
    if (!awaitSlice(t, ring, k, tag, slot)) return false;
    const char* staged = r.staging + slot * r.slotBytes;
    if (reduce) {
      reduceElements(t.args->dtype, t.args->op, dst, staged, s.elems);
    } else {
      copyBytes(dst, staged, s.elems * t.elemSize);
    }
    releaseSlice(r, k);
  }
  if (threadIdx.x == 0) *r.recvCount = first + static_cast<uint64_t>(count);
  tbSync();
  return true;
}

TUCCL_DEVICE_INLINE bool recv(Tb& t, int32_t ring, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                              int32_t count, int32_t op, int64_t mb) {
  return receive(t, ring, srcIndex, dstBuffer, dstIndex, count, op, mb, false);
}
TUCCL_DEVICE_INLINE bool recvReduceCopy(Tb& t, int32_t ring, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                                        int32_t count, int32_t op, int64_t mb) {
  return receive(t, ring, srcIndex, dstBuffer, dstIndex, count, op, mb, true);
}

/// Fused forms (one pass over the slice): receive into the destination (copy or reduce), then
/// push the result on to the next ring without re-reading a flag in between. `nextOp` tags the
/// forwarded slices.
TUCCL_DEVICE_INLINE bool recvSendFused(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex, int32_t dstBuffer,
                                       int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb,
                                       bool reduce) {
  if (!receive(t, inRing, srcIndex, dstBuffer, dstIndex, count, op, mb, reduce)) return false;
  return send(t, outRing, dstBuffer, dstIndex, dstIndex, count, nextOp, mb);
}
TUCCL_DEVICE_INLINE bool recvCopySend(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex, int32_t dstBuffer,
                                      int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb) {
  return recvSendFused(t, inRing, outRing, srcIndex, dstBuffer, dstIndex, count, op, nextOp, mb, false);
}
TUCCL_DEVICE_INLINE bool recvReduceSend(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex, int32_t dstBuffer,
                                        int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb) {
  return recvSendFused(t, inRing, outRing, srcIndex, dstBuffer, dstIndex, count, op, nextOp, mb, true);
}

// ---- Local primitives -----------------------------------------------------------------------

/// dst = src (copy) or dst op= src (reduce) for slice `mb` of `count` chunks of this rank.
TUCCL_DEVICE_NOINLINE bool local(Tb& t, int32_t srcBuffer, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                               int32_t count, int64_t mb, bool reduce) {
  for (int32_t j = 0; j < count; ++j) {
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    char* dst = elementPtr(t, dstBuffer, dstIndex + j, s.begin);
    const char* src = elementPtr(t, srcBuffer, srcIndex + j, s.begin);
    if (reduce) {
      reduceElements(t.args->dtype, t.args->op, dst, src, s.elems);
    } else {
      copyBytes(dst, src, s.elems * t.elemSize);
    }
  }
  tbSync();
  return true;
}
TUCCL_DEVICE_INLINE bool copy(Tb& t, int32_t srcBuffer, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                              int32_t count, int64_t mb) {
  return local(t, srcBuffer, srcIndex, dstBuffer, dstIndex, count, mb, false);
}
TUCCL_DEVICE_INLINE bool reduce(Tb& t, int32_t srcBuffer, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                                int32_t count, int64_t mb) {
  return local(t, srcBuffer, srcIndex, dstBuffer, dstIndex, count, mb, true);
}

// ---- Kernel prologue and epilogue -----------------------------------------------------------

/// Waits until all nTbs TBs of the rank arrived at barrier `which` (0: prologue, 1: epilogue).
TUCCL_DEVICE_NOINLINE bool rankBarrier(Tb& t, int32_t which, int32_t nTbs) {
  tbSync();
  if (threadIdx.x == 0) arrive(&t.args->barrier[which]);
  WaitSite site{kWaitBarrier, -1, -1, -1};
  return waitAtLeast(*t.args, *t.report, &t.args->barrier[which], static_cast<uint64_t>(nTbs), site);
}

/// This TB's share [begin, end) of n elements split over nTbs TBs.
TUCCL_DEVICE_INLINE Slice tbShare(const Tb& t, int64_t n, int32_t nTbs) {
  const int64_t begin = n * t.tb / nTbs;
  return Slice{begin, n * (t.tb + 1) / nTbs - begin};
}

/// Out-of-place call of an in-place plan: copy the input (copyBlocks units) into its storage
/// position (unit block dstBlock of the output) before any TB touches the storage.
TUCCL_DEVICE_NOINLINE bool prologue(Tb& t, int32_t nTbs, int32_t copyBlocks, int32_t dstBlock) {
  t.at(-1, -1);
  if (copyBlocks == 0 || t.args->inPlaceCall) return true;
  const Slice share = tbShare(t, copyBlocks * t.args->count, nTbs);
  copyBytes(bufferBase(*t.args, kOutput) + (dstBlock * t.args->count + share.begin) * t.elemSize,
            bufferBase(*t.args, kInput) + share.begin * t.elemSize, share.elems * t.elemSize);
  return rankBarrier(t, 0, nTbs);
}

/// Avg: once every TB of the rank is done, divide the rank's result (`blocks` units from unit
/// block `firstBlock` of `buffer`) by nRanks.
TUCCL_DEVICE_NOINLINE bool epilogue(Tb& t, int32_t nTbs, int32_t buffer, int32_t firstBlock, int32_t blocks) {
  t.at(-1, -1);
  if (t.args->op == kAvg && blocks > 0) {
    if (!rankBarrier(t, 1, nTbs)) return false;
    const Slice share = tbShare(t, blocks * t.args->count, nTbs);
    divideElements(t.args->dtype, bufferBase(*t.args, buffer) + (firstBlock * t.args->count + share.begin) * t.elemSize,
                   share.elems, t.args->nRanks);
  }
  tbSync();
  if (threadIdx.x == 0) t.report->state = kTbDone;
  return true;
}

}  // namespace tuccl::dev

/// Generated code: run a primitive; stop the TB when it gave up (its report says why).
#define TUCCL_TRY(call) \
  do {                  \
    if (!(call)) return; \
  } while (0)
