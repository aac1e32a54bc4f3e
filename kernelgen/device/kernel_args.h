// The plain structs a rank's kernel receives (MSCCL++'s "DeviceHandle" idea: pointers and
// counters, nothing else). The host executor (kernelgen/host_executor.h) and a GPU backend fill
// them; the generated code and the primitives only read them.
#pragma once

#include "tuccl_device.h"

namespace tuccl::dev {

/// Datatypes and reduction operations, numbered like NCCL's ncclDataType_t (2.24+: every one,
/// fp8 included) and ncclRedOp_t (the built-in ones; PreMulSum is a Sum whose inputs the prologue
/// scales first, see KernelArgs::preScale).
enum DataType : int32_t { kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5, kFloat16 = 6,
                          kFloat32 = 7, kFloat64 = 8, kBFloat16 = 9, kFloat8E4M3 = 10, kFloat8E5M2 = 11 };
enum RedOp : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

/// The protocols, numbered like support/vocabulary.h's Protocol (and NCCL's NCCL_PROTO_*);
/// kernelgen/datatype.cc checks the two agree.
enum ProtocolId : int32_t { kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2 };

/// Bytes of one staging slot that carries slices of up to `sliceBytes` payload bytes
/// (docs/kernels.md, "Protocols"). The one definition: the host executor, libtuccl's staging
/// placement and the kernels all size slots with it.
///   Simple: the payload, rounded up to 16 bytes.
///   LL:     8-byte lines of 4 data bytes + a 4-byte flag: twice the payload rounded up to 16.
///   LL128:  128-byte lines of 120 data bytes + an 8-byte flag.
/// LL and LL128 slots hold at least one line: an empty slice still carries its flag.
TUCCL_DEVICE_INLINE int64_t stagingSlotBytes(int32_t protocol, int64_t sliceBytes) {
  const int64_t payload = sliceBytes > 0 ? sliceBytes : 0;
  const int64_t lineBearing = payload > 0 ? payload : 1;
  if (protocol == kProtoLL) return 2 * ((lineBearing + 15) / 16 * 16);
  if (protocol == kProtoLL128) return (lineBearing + 119) / 120 * 128;
  return (payload + 15) / 16 * 16;
}

/// One staging ring: the directed connection (srcRank, srcTb) -> (dstRank, dstTb). PUSH model:
/// the sender writes slice k into slot k % nSlots of the receiver's staging buffer, stores the
/// slot's tag and raises `posted` to k + 1; the receiver consumes the slot and raises `consumed`
/// to k + 1, which returns the credit. Each side keeps its own running count. The sender also
/// stores the slot's used byte count at tags[nSlots + slot]: the inter-node proxy sends only that
/// much. LL and LL128 receivers read the data flags inside the slot's lines instead of `posted`
/// (protocols.h); slotBytes is the slot's stride, stagingSlotBytes of the largest slice.
struct RingDevice {
  char* staging = nullptr;        ///< receiver memory: nSlots * slotBytes
  uint64_t* tags = nullptr;       ///< receiver memory: per slot, (op << 32) | slice; then per slot its bytes
  uint64_t* posted = nullptr;     ///< receiver memory, raised by the sender (data flag)
  uint64_t* consumed = nullptr;   ///< sender memory, raised by the receiver (credit)
  uint64_t* sendCount = nullptr;  ///< sender-private: slices sent so far
  uint64_t* recvCount = nullptr;  ///< receiver-private: slices received so far
  int64_t slotBytes = 0;
  int32_t nSlots = 1;
  int32_t pad = 0;
};

/// What a TB was doing when it stopped (filled by the TB itself).
enum TbState : int32_t { kTbRunning = 0, kTbDone = 1, kTbTimedOut = 2, kTbAborted = 3, kTbTagMismatch = 4 };
enum WaitKind : int32_t { kWaitNone = 0, kWaitData = 1, kWaitCredit = 2, kWaitDependency = 3, kWaitBarrier = 4,
                        kWaitLine = 5 /* an LL / LL128 line flag */ };

struct TbReport {
  int32_t state = kTbRunning;
  int32_t entry = -1;      ///< the entry being run (-1: prologue / epilogue)
  int64_t microBatch = -1;
  int32_t wait = kWaitNone;
  int32_t ring = -1;       ///< kWaitData / kWaitLine / kWaitCredit / kTbTagMismatch
  int32_t depTb = -1;      ///< kWaitDependency
  int32_t depEntry = -1;   ///< kWaitDependency; kWaitBarrier: the TBs the barrier waits for
  uint64_t expected = 0;   ///< flag value (or tag) waited for
  uint64_t seen = 0;       ///< the value last seen
};

/// What a rank's TBs did, counted by the host build only (the device build compiles the counting
/// out): the checks of docs/kernels.md "Counted on the CPU" read them. Bytes are those the data
/// loops and line writers load and store (buffers and staging slots alike).
struct PrimitiveCounters {
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t slices = 0;       ///< slices moved by remote primitives (each send or receive of one)
  uint64_t passes = 0;       ///< passes of remote primitives over a slice (a fused one sends and receives in one)
  uint64_t dataWaits = 0;    ///< waits for a slice's data flag (Simple) or its lines (LL, LL128)
  uint64_t creditWaits = 0;  ///< waits for a slot's credit
  uint64_t entryWaits = 0;   ///< waits on another entry of the rank, and the rank barrier
  uint64_t entryPosts = 0;   ///< progress posted for the rank's other entries
  uint64_t barriers = 0;     ///< barriers of a TB's threads
  uint64_t fences = 0;       ///< memory fences
};

struct KernelArgs {
  void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  int64_t count = 0;          ///< elements of the collective's unit (NCCL's count; see chunkGeometry)
  int64_t sliceElems = 1;     ///< elements of one micro-batch slice of a chunk (chunkSize / element size)
  int32_t dtype = kFloat32;
  int32_t op = kSum;
  int32_t rank = 0;
  int32_t nRanks = 1;
  int32_t chunksPerUnit = 1;  ///< k: chunks of one unit (Algorithm::chunksPerRank)
  int32_t inPlaceCall = 1;    ///< the input already sits at its in-place storage position
  RingDevice* rings = nullptr;   ///< every ring of the plan, by ring id
  uint64_t* progress = nullptr;  ///< this rank: per-entry progress counters (micro-batches done)
  uint64_t* barrier = nullptr;   ///< this rank: TB arrivals (prologue, epilogue)
  TbReport* reports = nullptr;   ///< this rank: one per TB
  int32_t* abort = nullptr;      ///< shared by all ranks: set by the first TB that gives up
  int32_t pad = 0;
  int64_t spinLimit = 0;         ///< device: clock64 cycles a wait may spin; host: unused
  int64_t deadlineNs = 0;        ///< host: steady-clock time (ns) after which a wait gives up
  const int32_t* roleValues = nullptr;  ///< this rank's value table: the values its kernel reads as v[k]
  int32_t protocol = kProtoSimple;  ///< ProtocolId: how slices travel through the staging rings
  PrimitiveCounters* counters = nullptr;  ///< host build: this rank's counters (null: not counted)
  /// Channels (docs/kernels.md "Channels"): the kernel runs `channels` replicas of the plan's TBs,
  /// replica c as blocks [c * nTbs, (c + 1) * nTbs), each on its own contiguous share of every
  /// transfer, with its own rings (ring + c * ringsPerChannel) and progress counters
  /// (counter + c * progressPerChannel).
  int32_t channels = 1;
  int32_t ringsPerChannel = 0;     ///< the plan's rings (all ranks)
  int32_t progressPerChannel = 0;  ///< this rank's progress counters of one replica
  int32_t pad2 = 0;
  /// The call's number on its progress and barrier counters, which are never cleared between
  /// calls: a progress value is (epoch << 32) | micro-batches done, a barrier value
  /// (epoch << 32) | arrivals, so an earlier call's values read as "nothing yet". Counters that
  /// start at zero for every call (the host executor, the CPU device) run with epoch 0.
  uint64_t epoch = 0;
  /// PreMulSum (libtuccl's tucclRedOpCreatePreMulSum): before anything else the prologue stores
  /// scalar * preScaleSrc[i] at preScaleDst[i] for i < preScaleElems (the TBs of the rank split
  /// them, then meet at the rank barrier), so the plan's Sum runs on the scaled input. The scalar
  /// is one element of dtype: read from preScaleScalar when that is set (the scalar lives in device
  /// memory and is read at every call), else from the low bytes of preScaleBits. src may be dst.
  const void* preScaleSrc = nullptr;
  void* preScaleDst = nullptr;
  int64_t preScaleElems = 0;
  const void* preScaleScalar = nullptr;
  uint64_t preScaleBits = 0;
  /// Host build: called by a TB that waits, between its polls of the word it waits on (null:
  /// none). The CPU device passes the inter-node proxy's progress here, so the waiting TB moves
  /// the frames it waits for itself instead of handing the core to the proxy's thread.
  void (*hostPoll)(void*) = nullptr;
  void* hostPollContext = nullptr;
};

/// The value of a progress or barrier counter that says `n` of the call of `epoch`.
TUCCL_DEVICE_INLINE uint64_t epochValue(uint64_t epoch, uint64_t n) { return (epoch << 32) | n; }

/// Elements of one channel's share of a transfer of up to `chunkElems` elements: all of it with one
/// channel; with more, ceil(chunkElems / channels) rounded up to 16 bytes, so a share starts on the
/// same 16-byte boundary as its chunk (NCCL also splits a chunk over channels in contiguous,
/// aligned pieces: nccl-data-path.md §1.2).
TUCCL_DEVICE_INLINE int64_t channelShareElems(int64_t chunkElems, int32_t channels, int32_t elemSize) {
  if (channels <= 1) return chunkElems;
  const int64_t grain = elemSize > 0 && elemSize < 16 ? 16 / elemSize : 1;
  const int64_t per = (chunkElems + channels - 1) / channels;
  return (per + grain - 1) / grain * grain;
}

/// Micro-batches every entry of a call runs: slices of `sliceElems` over a channel's share of a
/// chunk (at least one, so an empty call still exchanges its flags).
TUCCL_DEVICE_INLINE int64_t microBatchCount(int64_t count, int32_t chunksPerUnit, int64_t sliceElems, int32_t channels,
                                            int32_t elemSize) {
  const int64_t k = chunksPerUnit > 0 ? chunksPerUnit : 1;
  const int64_t share = channelShareElems((count + k - 1) / k, channels, elemSize);
  const int64_t se = sliceElems > 0 ? sliceElems : 1;
  return share > 0 ? (share + se - 1) / se : 1;
}

}  // namespace tuccl::dev
