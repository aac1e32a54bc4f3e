// The primitives of the generated kernels (ResCCL §4.5; SCCL's PUSH model; docs/kernels.md).
//
// A TB runs plan entries; an entry runs micro-batch by micro-batch. Micro-batch mb of an entry
// moves slice mb of each of its `count` chunks. Chunk geometry (exact for every size):
//   the collective's unit of `count` elements is cut into k = chunksPerUnit chunks of
//   ce = ceil(count / k) elements; chunk j of a unit covers [j*ce, min((j+1)*ce, count)), so the
//   last chunks may be shorter or empty. Chunk `index` of a buffer is chunk index % k of unit
//   block index / k (block b starts at element b * count). A transfer moves len = min(source
//   chunk length, destination chunk length) elements; with C channels the TB of channel c moves
//   its share [c*sh, min((c+1)*sh, len)), sh = channelShareElems(ce, C) (all of it when C = 1). A
//   slice is sliceElems elements; every entry runs nMicroBatches = max(1, ceil(sh / sliceElems))
//   micro-batches, and slice mb is the share's [mb*se, (mb+1)*se) — possibly short or empty,
//   which still exchanges flags so both sides stay in step.
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
#include "reduce_copy.h"
#include "tuccl_device.h"

namespace tuccl::dev {

enum BufferId : int32_t { kInput = 0, kOutput = 1, kScratch = 2 };

/// A TB's view of its rank's arguments: geometry derived once.
struct Tb {
  const KernelArgs* args;
  TbReport* report;
  int32_t tb;       ///< the block: channel * nTbs + baseTb
  int32_t baseTb;   ///< the plan's TB this block runs
  int32_t channel;  ///< the replica it runs (KernelArgs::channels)
  int32_t elemSize;
  int64_t chunkElems;
  int64_t shareElems;  ///< a channel's share of a chunk (channelShareElems)
  int64_t nMicroBatches;
  int32_t entry;       ///< the entry being run, kept in registers: the report gets it when the TB stops
  int64_t microBatch;
  /// An out-of-place call whose prologue copies the input into output unit block `inputBlock`,
  /// which the rank's plan never writes: the kernel reads that block from the input instead, so
  /// the copy needs no rank barrier (-1: every block is read where it lies).
  int32_t inputBlock;

  /// Records the entry and micro-batch being run (for the hang report; nothing is written to memory).
  TUCCL_DEVICE_INLINE void at(int32_t e, int64_t mb) {
    entry = e;
    microBatch = mb;
  }
  /// The TB stops: its report says where (the wait that gave up filled in why).
  TUCCL_DEVICE_INLINE void stopped() {
    if (threadIdx.x == 0) {
      report->entry = entry;
      report->microBatch = microBatch;
    }
  }

  // Counting (host build): what docs/kernels.md's CPU checks read.
  TUCCL_DEVICE_INLINE void count(uint64_t PrimitiveCounters::*field, uint64_t n) const {
#if !defined(TUCCL_CUDA_COMPILER)
    if (args->counters != nullptr) std::atomic_ref<uint64_t>(args->counters->*field).fetch_add(n, std::memory_order_relaxed);
#else
    (void)field;
    (void)n;
#endif
  }
  TUCCL_DEVICE_INLINE void moved(uint64_t read, uint64_t written) const {
    count(&PrimitiveCounters::bytesRead, read);
    count(&PrimitiveCounters::bytesWritten, written);
  }
  /// A barrier of the TB's threads.
  TUCCL_DEVICE_INLINE void sync() const {
    count(&PrimitiveCounters::barriers, 1);
    tbSync();
  }
  /// A barrier at which every thread learns thread 0's verdict.
  TUCCL_DEVICE_INLINE bool agree(bool threadZeroVerdict) const {
    count(&PrimitiveCounters::barriers, 1);
    return tbAgree(threadZeroVerdict);
  }
  /// A barrier at which every thread learns whether all threads' `ok` held.
  TUCCL_DEVICE_INLINE bool all(bool ok) const {
    count(&PrimitiveCounters::barriers, 1);
    return tbAll(ok);
  }
  /// Thread 0: a fence after a wait, or before writes others must see after earlier ones.
  TUCCL_DEVICE_INLINE void fence(FenceScope scope) const {
    count(&PrimitiveCounters::fences, 1);
    dev::fence(scope);
  }
  TUCCL_DEVICE_INLINE void release(uint64_t* flag, uint64_t value, FenceScope scope) const {
    count(&PrimitiveCounters::fences, 1);
    storeRelease(flag, value, scope);
  }
};

/// Block `block` of a rank's kernel whose plan has `nTbs` TBs per channel (0: one channel).
TUCCL_DEVICE_INLINE Tb makeTb(const KernelArgs& args, int32_t block, int32_t nTbs = 0) {
  Tb t;
  t.args = &args;
  t.report = &args.reports[block];
  t.tb = block;
  const int32_t channels = args.channels > 0 ? args.channels : 1;
  t.channel = nTbs > 0 && channels > 1 ? block / nTbs : 0;
  t.baseTb = block - t.channel * nTbs;
  t.elemSize = elementSize(args.dtype);
  const int64_t k = args.chunksPerUnit > 0 ? args.chunksPerUnit : 1;
  t.chunkElems = (args.count + k - 1) / k;
  t.shareElems = channelShareElems(t.chunkElems, channels, t.elemSize);
  t.nMicroBatches = microBatchCount(args.count, args.chunksPerUnit, args.sliceElems, channels, t.elemSize);
  t.entry = -1;
  t.microBatch = -1;
  t.inputBlock = -1;
  return t;
}

/// This block's copy of the plan's ring `ring` and of its rank's progress counter `counter`.
TUCCL_DEVICE_INLINE int32_t ringOf(const Tb& t, int32_t ring) { return ring + t.channel * t.args->ringsPerChannel; }
TUCCL_DEVICE_INLINE int32_t counterOf(const Tb& t, int32_t counter) {
  return counter + t.channel * t.args->progressPerChannel;
}
/// The blocks of the rank's kernel: `nTbs` per channel.
TUCCL_DEVICE_INLINE int32_t blocksOf(const Tb& t, int32_t nTbs) {
  return nTbs * (t.args->channels > 0 ? t.args->channels : 1);
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
/// The transfer moves min(source, destination chunk length) elements; the TB's channel takes its
/// share of them, [c * shareElems, (c + 1) * shareElems), and micro-batch mb its slice of that.
TUCCL_DEVICE_INLINE Slice sliceOf(const Tb& t, int32_t srcIndex, int32_t dstIndex, int64_t mb) {
  const int64_t len = minI64(chunkLength(t, srcIndex), chunkLength(t, dstIndex));
  const int64_t shareBegin = minI64(t.channel * t.shareElems, len);
  const int64_t shareEnd = minI64(shareBegin + t.shareElems, len);
  const int64_t se = t.args->sliceElems;
  const int64_t begin = minI64(shareBegin + mb * se, shareEnd);
  return Slice{begin, minI64(se, shareEnd - begin)};
}

TUCCL_DEVICE_INLINE char* elementPtr(const Tb& t, int32_t buffer, int32_t index, int64_t within) {
  if (buffer == kOutput && t.inputBlock >= 0 && index / t.args->chunksPerUnit == t.inputBlock) {
    return bufferBase(*t.args, kInput) + (chunkOffset(t, index) - t.inputBlock * t.args->count + within) * t.elemSize;
  }
  return bufferBase(*t.args, buffer) + (chunkOffset(t, index) + within) * t.elemSize;
}

TUCCL_DEVICE_INLINE uint64_t sliceTag(int32_t op, int64_t slice) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(op)) << 32) | static_cast<uint32_t>(slice);
}

// ---- Waits --------------------------------------------------------------------------------------

/// Thread 0 waits until *flag >= expected (relaxed polls); true elsewhere. The caller agrees at
/// its next barrier.
TUCCL_DEVICE_INLINE bool waitFlag(Tb& t, uint64_t* flag, uint64_t expected, WaitSite site,
                                  uint64_t PrimitiveCounters::*kind) {
  if (threadIdx.x != 0) return true;
  t.count(kind, 1);
  return spinUntilAtLeast(*t.args, *t.report, flag, expected, site);
}

// ---- Dependencies between entries of one rank (per micro-batch) -------------------------------

/// Waits until entry (depTb, depEntry), whose progress counter is `progress`, finished `mb`: one
/// thread polls, one GPU-scope acquire (the rank's TBs share its GPU), one barrier.
TUCCL_DEVICE_NOINLINE bool waitEntry(Tb& t, int32_t progress, int32_t depTb, int32_t depEntry, int64_t mb) {
  bool ok = waitFlag(t, &t.args->progress[counterOf(t, progress)], epochValue(t.args->epoch, static_cast<uint64_t>(mb + 1)),
                     WaitSite{kWaitDependency, -1, depTb + (t.tb - t.baseTb), depEntry}, &PrimitiveCounters::entryWaits);
  if (threadIdx.x == 0 && ok) t.fence(kScopeGpu);
  return t.agree(ok);
}

/// Publishes that this entry finished micro-batch `mb`. Every primitive ends with a barrier of
/// the TB's threads after its last store, so thread 0 alone releases (GPU scope).
TUCCL_DEVICE_INLINE void postEntry(Tb& t, int32_t progress, int64_t mb) {
  if (threadIdx.x == 0) {
    t.count(&PrimitiveCounters::entryPosts, 1);
    t.release(&t.args->progress[counterOf(t, progress)], epochValue(t.args->epoch, static_cast<uint64_t>(mb + 1)),
              kScopeGpu);
  }
}

// ---- Remote primitives (PUSH), one slice at a time ----------------------------------------------
//
// A slice of a remote primitive (docs/kernels.md "Synchronisation per slice"):
//   1. thread 0 waits: for the data flag of the incoming slice (then one acquire fence and the tag
//      check) and for the credit of the outgoing slot; LL / LL128 receivers wait on the lines
//      instead, every thread for its own;
//   2. barrier 1: every thread learns the verdict;
//   3. every thread moves its share of the slice in one pass (reduceCopy: each source read once,
//      every destination written);
//   4. barrier 2;
//   5. thread 0 posts: the outgoing slot's tag, one release fence and the data flag; the credit of
//      the incoming slot (a relaxed store).
// Two barriers and, per direction, one fence a slice. The rings' running counts are thread 0's:
// every thread reads them at the primitive's start, thread 0 advances them before the last
// barrier 2, so no thread reads a count that is being written.

/// Where one ring's slice k sits.
struct SlotRef {
  RingDevice* ring;
  uint64_t k;
  int32_t slot;
  char* data;
};
TUCCL_DEVICE_INLINE SlotRef slotOf(const Tb& t, int32_t ring, uint64_t k) {
  RingDevice& r = t.args->rings[ring];
  const int32_t slot = static_cast<int32_t>(k % static_cast<uint64_t>(r.nSlots));
  return SlotRef{&r, k, slot, r.staging + slot * r.slotBytes};
}

/// Thread 0: waits for the credit of outgoing slot `out`.
TUCCL_DEVICE_INLINE bool waitCredit(Tb& t, int32_t ring, const SlotRef& out) {
  const uint64_t nSlots = static_cast<uint64_t>(out.ring->nSlots);
  if (threadIdx.x != 0 || out.k < nSlots) return true;
  return waitFlag(t, out.ring->consumed, out.k + 1 - nSlots, WaitSite{kWaitCredit, ring, -1, -1},
                  &PrimitiveCounters::creditWaits);
}

/// Thread 0: the slot holds the slice expected (plan order); a mismatch is reported and raises
/// the abort word, never consumed.
TUCCL_DEVICE_INLINE bool tagMatches(Tb& t, int32_t ring, const SlotRef& in, uint64_t tag) {
  const uint64_t seen = loadPlain(&in.ring->tags[in.slot]);
  if (seen == tag) return true;
  TbReport& report = *t.report;
  report.state = kTbTagMismatch;
  report.wait = kWaitData;
  report.ring = ring;
  report.expected = tag;
  report.seen = seen;
  raiseAbort(*t.args);
  return false;
}

/// Thread 0 (Simple): waits for incoming slice `in`, acquires it and checks its tag.
TUCCL_DEVICE_INLINE bool waitData(Tb& t, int32_t ring, const SlotRef& in, uint64_t tag) {
  if (threadIdx.x != 0) return true;
  if (!waitFlag(t, in.ring->posted, in.k + 1, WaitSite{kWaitData, ring, -1, -1}, &PrimitiveCounters::dataWaits)) {
    return false;
  }
  t.fence(kScopeSystem);
  return tagMatches(t, ring, in, tag);
}

/// Thread 0, after barrier 2: publishes outgoing slice `out` (`bytes` of payload) under `tag`.
/// Simple: the tag and size, then the data flag with one release fence. LL / LL128 published
/// the tag before the lines (writeLines); the data flag serves the inter-node proxy only.
TUCCL_DEVICE_INLINE void postData(Tb& t, const SlotRef& out, uint64_t tag, int64_t bytes) {
  if (threadIdx.x != 0) return;
  RingDevice& r = *out.ring;
  if (protocolOf(*t.args) == kProtoSimple) {
    r.tags[out.slot] = tag;
    r.tags[r.nSlots + out.slot] = static_cast<uint64_t>(bytes);
    t.release(r.posted, out.k + 1, kScopeSystem);
  } else {
    storeRelaxed(r.posted, out.k + 1);
  }
}

/// Thread 0, after barrier 2: returns the credit of incoming slice `in` (its loads are done).
TUCCL_DEVICE_INLINE void returnCredit(const SlotRef& in) {
  if (threadIdx.x == 0) storeRelaxed(in.ring->consumed, in.k + 1);
}

/// LL / LL128, thread 0 before barrier 1: the outgoing slot's tag and size, fenced before any
/// thread writes a line, so a receiver that saw the lines sees the tag.
TUCCL_DEVICE_INLINE void tagLines(Tb& t, const SlotRef& out, uint64_t tag, int64_t bytes) {
  if (threadIdx.x != 0) return;
  RingDevice& r = *out.ring;
  r.tags[out.slot] = tag;
  r.tags[r.nSlots + out.slot] = static_cast<uint64_t>(stagedBytes(protocolOf(*t.args), bytes));
  t.fence(kScopeSystem);
}

/// LL / LL128: every thread writes its lines of `bytes` at `src` into slot `out`.
TUCCL_DEVICE_INLINE void writeLines(Tb& t, const SlotRef& out, const char* src, int64_t bytes) {
  const int32_t protocol = protocolOf(*t.args);
  if (protocol == kProtoLL) {
    writeLLSlice(out.data, src, bytes, out.k);
  } else {
    writeLL128Slice(out.data, src, bytes, out.k);
  }
  t.moved(static_cast<uint64_t>(bytes), static_cast<uint64_t>(stagedBytes(protocol, bytes)));
}

/// LL / LL128: takes incoming slice `in`'s lines as they arrive into `dst` (reduce: dst op= the
/// data, a piece at a time through a TB-local buffer). A barrier ends every piece; thread 0 then
/// acquires and checks the tag.
TUCCL_DEVICE_NOINLINE bool receiveLines(Tb& t, int32_t ring, const SlotRef& in, char* dst, int64_t bytes,
                                        uint64_t tag, bool reduce) {
  const bool ll = protocolOf(*t.args) == kProtoLL;
#if defined(TUCCL_DEVICE_COMPILE)
  __shared__ alignas(16) char bounce[kLineBounceBytes];
#else
  alignas(16) char bounce[kLineBounceBytes];
#endif
  const int64_t piece = reduce ? kLineBounceBytes : (bytes > 0 ? bytes : 1);
  if (threadIdx.x == 0) t.count(&PrimitiveCounters::dataWaits, 1);
  for (int64_t begin = 0; begin == 0 || begin < bytes; begin += piece) {
    const int64_t n = minI64(piece, bytes - begin);
    char* out = reduce ? bounce : dst + begin;
    const bool ok = ll ? readLLPiece(*t.args, *t.report, ring, in.data, in.k, bytes, begin, n, out)
                       : readLL128Piece(*t.args, *t.report, ring, in.data, in.k, bytes, begin, n, out);
    t.count(&PrimitiveCounters::barriers, 1);  // the readers' tbAll
    if (!ok) return false;
    if (reduce) {
      reduceFromShared(t.args->dtype, t.args->op, dst + begin, bounce, n / t.elemSize);
      if (begin + piece < bytes) t.sync();  // the next piece reuses the bounce buffer; the last
                                            // piece's reads end at the caller's barrier
    }
  }
  const int32_t protocol = ll ? kProtoLL : kProtoLL128;
  t.moved(static_cast<uint64_t>(stagedBytes(protocol, bytes) + (reduce ? bytes : 0)), static_cast<uint64_t>(bytes));
  bool ok = true;
  if (threadIdx.x == 0) {
    t.fence(kScopeSystem);
    ok = tagMatches(t, ring, in, tag);
  }
  return ok;
}

/// Pushes slice `mb` of `count` source chunks into the peer's staging ring.
TUCCL_DEVICE_NOINLINE bool send(Tb& t, int32_t planRing, int32_t srcBuffer, int32_t srcIndex, int32_t dstIndex,
                                int32_t count, int32_t op, int64_t mb) {
  const int32_t ring = ringOf(t, planRing);
  const uint64_t first = *t.args->rings[ring].sendCount;
  const bool simple = protocolOf(*t.args) == kProtoSimple;
  for (int32_t j = 0; j < count; ++j) {
    const SlotRef out = slotOf(t, ring, first + static_cast<uint64_t>(j));
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    const char* src = elementPtr(t, srcBuffer, srcIndex + j, s.begin);
    const int64_t bytes = s.elems * t.elemSize;
    const uint64_t tag = sliceTag(op, mb * count + j);
    bool ok = waitCredit(t, ring, out);
    if (!simple && ok) tagLines(t, out, tag, bytes);
    if (!t.agree(ok)) return false;  // barrier 1
    if (simple) {
      copyBytes(out.data, src, bytes);
      t.moved(static_cast<uint64_t>(bytes), static_cast<uint64_t>(bytes));
    } else {
      writeLines(t, out, src, bytes);
    }
    if (threadIdx.x == 0) {
      t.count(&PrimitiveCounters::slices, 1);
      t.count(&PrimitiveCounters::passes, 1);
      if (j + 1 == count) *out.ring->sendCount = first + static_cast<uint64_t>(count);
    }
    t.sync();  // barrier 2
    postData(t, out, tag, bytes);
  }
  return true;
}

/// Receives slice `mb` of `count` chunks into the destination (reduce: dst op= incoming). With
/// `outRing` >= 0 the result is also pushed on to that ring in the same pass (the fused forms;
/// `nextOp` tags the forwarded slices), so the slice is read once; without `store` (Simple) the
/// result goes to the ring only (recvReduceSend: nothing reads the stored value).
TUCCL_DEVICE_NOINLINE bool receive(Tb& t, int32_t planRing, int32_t planOutRing, int32_t srcIndex, int32_t dstBuffer,
                                   int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb, bool reduce,
                                   bool store) {
  const int32_t ring = ringOf(t, planRing);
  const int32_t outRing = planOutRing >= 0 ? ringOf(t, planOutRing) : -1;
  const uint64_t firstIn = *t.args->rings[ring].recvCount;
  const uint64_t firstOut = outRing >= 0 ? *t.args->rings[outRing].sendCount : 0;
  const bool simple = protocolOf(*t.args) == kProtoSimple;
  for (int32_t j = 0; j < count; ++j) {
    const SlotRef in = slotOf(t, ring, firstIn + static_cast<uint64_t>(j));
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    char* dst = elementPtr(t, dstBuffer, dstIndex + j, s.begin);
    const int64_t bytes = s.elems * t.elemSize;
    const uint64_t tag = sliceTag(op, mb * count + j);
    const uint64_t nextTag = sliceTag(nextOp, mb * count + j);
    SlotRef out{nullptr, 0, 0, nullptr};
    bool ok = true;
    if (outRing >= 0) {
      out = slotOf(t, outRing, firstOut + static_cast<uint64_t>(j));
      ok = waitCredit(t, outRing, out);
    }
    if (simple) {
      ok = ok && waitData(t, ring, in, tag);
      if (!t.agree(ok)) return false;  // barrier 1
      // Reduce: dst op= the slot; copy: the slot alone. The next ring's slot, if any, gets it too
      // (or alone, when the result is not stored).
      const bool stores = store || outRing < 0;
      reduceCopy(t.args->dtype, t.args->op, reduce ? dst : in.data, reduce ? in.data : nullptr, stores ? dst : out.data,
                 stores ? out.data : nullptr, s.elems);
      t.moved(static_cast<uint64_t>((reduce ? 2 : 1) * bytes),
              static_cast<uint64_t>(((stores ? 1 : 0) + (outRing >= 0 ? 1 : 0)) * bytes));
    } else {
      if (outRing >= 0 && !t.all(ok)) return false;  // the outgoing credit, before the lines are read
      ok = receiveLines(t, ring, in, dst, bytes, tag, reduce);  // ends with a barrier per piece
      if (outRing < 0) {
        // Every thread's loads of the slot are done: thread 0 returns the credit at once.
        if (threadIdx.x == 0 && ok) {
          t.count(&PrimitiveCounters::slices, 1);
          t.count(&PrimitiveCounters::passes, 1);
          if (j + 1 == count) *in.ring->recvCount = firstIn + static_cast<uint64_t>(count);
          returnCredit(in);
        }
        if (!t.agree(ok)) return false;
        continue;
      }
      if (threadIdx.x == 0 && ok) tagLines(t, out, nextTag, bytes);
      if (!t.agree(ok)) return false;  // the lines and the tag
      writeLines(t, out, dst, bytes);
    }
    if (threadIdx.x == 0) {
      t.count(&PrimitiveCounters::slices, outRing >= 0 ? 2 : 1);
      t.count(&PrimitiveCounters::passes, 1);
      if (j + 1 == count) {
        *in.ring->recvCount = firstIn + static_cast<uint64_t>(count);
        if (outRing >= 0) *out.ring->sendCount = firstOut + static_cast<uint64_t>(count);
      }
    }
    t.sync();  // barrier 2
    returnCredit(in);
    if (outRing >= 0) postData(t, out, nextTag, bytes);
  }
  return true;
}

TUCCL_DEVICE_INLINE bool recv(Tb& t, int32_t ring, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                              int32_t count, int32_t op, int64_t mb) {
  return receive(t, ring, -1, srcIndex, dstBuffer, dstIndex, count, op, op, mb, false, true);
}
TUCCL_DEVICE_INLINE bool recvReduceCopy(Tb& t, int32_t ring, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                                        int32_t count, int32_t op, int64_t mb) {
  return receive(t, ring, -1, srcIndex, dstBuffer, dstIndex, count, op, op, mb, true, true);
}

/// Fused forms (one pass over the slice): receive into the destination (copy or reduce) and push
/// the result on to the next ring in the same loop. `nextOp` tags the forwarded slices.
/// recvReduceSend leaves the destination as it was (Simple; LL and LL128 reduce through it).
TUCCL_DEVICE_INLINE bool recvCopySend(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex, int32_t dstBuffer,
                                      int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb) {
  return receive(t, inRing, outRing, srcIndex, dstBuffer, dstIndex, count, op, nextOp, mb, false, true);
}
TUCCL_DEVICE_INLINE bool recvReduceCopySend(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex,
                                            int32_t dstBuffer, int32_t dstIndex, int32_t count, int32_t op,
                                            int32_t nextOp, int64_t mb) {
  return receive(t, inRing, outRing, srcIndex, dstBuffer, dstIndex, count, op, nextOp, mb, true, true);
}
TUCCL_DEVICE_INLINE bool recvReduceSend(Tb& t, int32_t inRing, int32_t outRing, int32_t srcIndex, int32_t dstBuffer,
                                        int32_t dstIndex, int32_t count, int32_t op, int32_t nextOp, int64_t mb) {
  return receive(t, inRing, outRing, srcIndex, dstBuffer, dstIndex, count, op, nextOp, mb, true, false);
}

// ---- Local primitives -----------------------------------------------------------------------

/// dst = src (copy) or dst op= src (reduce) for slice `mb` of `count` chunks of this rank; one
/// barrier after the last store.
TUCCL_DEVICE_NOINLINE bool local(Tb& t, int32_t srcBuffer, int32_t srcIndex, int32_t dstBuffer, int32_t dstIndex,
                                 int32_t count, int64_t mb, bool reduce) {
  for (int32_t j = 0; j < count; ++j) {
    const Slice s = sliceOf(t, srcIndex + j, dstIndex + j, mb);
    char* dst = elementPtr(t, dstBuffer, dstIndex + j, s.begin);
    const char* src = elementPtr(t, srcBuffer, srcIndex + j, s.begin);
    reduceCopy(t.args->dtype, t.args->op, reduce ? dst : src, reduce ? src : nullptr, dst, nullptr, s.elems);
    t.moved(static_cast<uint64_t>((reduce ? 2 : 1) * s.elems * t.elemSize), static_cast<uint64_t>(s.elems * t.elemSize));
  }
  t.sync();
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

/// Waits until all blocks of the rank (nTbs per channel) arrived at barrier `which` (0: prologue,
/// 1: epilogue).
TUCCL_DEVICE_NOINLINE bool rankBarrier(Tb& t, int32_t which, int32_t nTbs) {
  t.sync();
  bool ok = true;
  if (threadIdx.x == 0) {
    const int32_t blocks = blocksOf(t, nTbs);
    const uint64_t generation = arrive(&t.args->barrier[which], static_cast<uint64_t>(blocks));
    ok = waitFlag(t, &t.args->barrier[which], (generation + 1) << 32, WaitSite{kWaitBarrier, -1, -1, blocks},
                  &PrimitiveCounters::entryWaits);
    if (ok) t.fence(kScopeGpu);
  }
  return t.agree(ok);
}

/// This block's share [begin, end) of n elements split over the rank's blocks (nTbs per channel).
TUCCL_DEVICE_INLINE Slice tbShare(const Tb& t, int64_t n, int32_t nTbs) {
  const int64_t blocks = blocksOf(t, nTbs);
  const int64_t begin = n * t.tb / blocks;
  return Slice{begin, n * (t.tb + 1) / blocks - begin};
}

/// PreMulSum (KernelArgs::preScale): the rank's TBs scale their shares of the input, then meet, so
/// no TB reads the input before all of it is scaled.
TUCCL_DEVICE_NOINLINE bool preScale(Tb& t, int32_t nTbs) {
  const KernelArgs& a = *t.args;
  const Slice share = tbShare(t, a.preScaleElems, nTbs);
  scaleElements(a.dtype, static_cast<char*>(a.preScaleDst) + share.begin * t.elemSize,
                static_cast<const char*>(a.preScaleSrc) + share.begin * t.elemSize, share.elems,
                a.preScaleScalar != nullptr ? a.preScaleScalar : static_cast<const void*>(&a.preScaleBits));
  return rankBarrier(t, 0, nTbs);
}

/// PreMulSum's scaling first (preScale), then, for an out-of-place call of an in-place plan: copy
/// the input (copyBlocks units) into its storage position (unit block dstBlock of the output)
/// before any TB touches the storage. With `readInput` (the rank's plan never writes those blocks,
/// copyBlocks is 1: AllGather, a Broadcast's root) the TBs read the block from the input and no TB
/// waits for the copy; NCCL's rings read an out-of-place call's own contribution from the input
/// alike (shared/reference/nccl-data-path.md).
TUCCL_DEVICE_NOINLINE bool prologue(Tb& t, int32_t nTbs, int32_t copyBlocks, int32_t dstBlock, int32_t readInput = 0) {
  t.at(-1, -1);
  if (t.args->preScaleElems > 0 && !preScale(t, nTbs)) return false;
  if (copyBlocks == 0 || t.args->inPlaceCall) return true;
  const Slice share = tbShare(t, copyBlocks * t.args->count, nTbs);
  copyBytes(bufferBase(*t.args, kOutput) + (dstBlock * t.args->count + share.begin) * t.elemSize,
            bufferBase(*t.args, kInput) + share.begin * t.elemSize, share.elems * t.elemSize);
  if (readInput != 0 && copyBlocks == 1) {
    t.inputBlock = dstBlock;
    return true;
  }
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
  t.sync();
  if (threadIdx.x == 0) t.report->state = kTbDone;
  return true;
}

}  // namespace tuccl::dev

/// Generated code: run a primitive; stop the TB when it gave up (its report says why and, from
/// the Tb `t`, where).
#define TUCCL_TRY(call) \
  do {                  \
    if (!(call)) {      \
      t.stopped();      \
      return;           \
    }                   \
  } while (0)
