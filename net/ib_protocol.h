// The verbs transport's wire protocol, as plain data and pure functions (no verbs calls), so the
// arithmetic is tested without an RDMA device.
//
// One connection = nQps RC queue pairs between a sender and a receiver (TUCCL_IB_QPS_PER_CONNECTION /
// NCCL_IB_QPS_PER_CONNECTION, 1..16), one completion queue at each end, and one registered
// ControlBlock at each end whose address and rkey travel in the TCP handshake.
//
// Receiver-driven, like NCCL's IB transport, but every notification is a completion rather than
// a polled memory word:
//   1. irecv (sequence s, receive request r, up to 8 tagged buffers) fills a FifoEntry — per
//      buffer its address, rkey, capacity and tag — and RDMA-WRITEs-WITH-IMMEDIATE it into the
//      sender's ControlBlock::fifo[s % kFifoDepth] on QP 0; the immediate is s. The sender's
//      receive completion on QP 0 says the entry has fully landed (no reliance on the order in
//      which the bytes of one RDMA write are placed).
//   2. isend(tag) takes the oldest entry that has arrived, picks the buffer with its tag (NULL
//      request while no entry is there: NCCL retries), checks the size, then on one QP writes the
//      message size into the receiver's ControlBlock::sizes[r][buffer] and writes the data:
//      small messages (≤ kSplitThreshold) on one QP, rotating per message; larger ones cut by
//      splitMessage into ≤ nQps pieces of 128-byte-aligned size, piece i on QP (first + i) %
//      nQps. Each piece's last work request is an RDMA WRITE WITH IMMEDIATE (a zero-byte
//      message is one zero-length write with immediate) whose immediate encodes (r, buffer,
//      number of pieces, s & 0xffff): see encodeImmediate.
//   3. The receiver counts the pieces' completions per buffer; RC ordering on each QP makes the
//      data (and, on the piece-0 QP, the size record written before it) visible by the time its
//      completion is polled. The request is done when every buffer has all its pieces.
// Slot reuse: at most kFifoDepth receives are posted per comm, and receive s + kFifoDepth can
// only be posted after receive s completed, which needs all of its buffers' sends to have read
// entry s — so the FIFO never overwrites an entry the sender still needs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tuccl::net::ib {

inline constexpr int kMaxQpsPerConnection = 16;
inline constexpr int kMaxRecvs = 8;                          // maxRecvs: buffers of one grouped receive
inline constexpr int kFifoDepth = 32;                        // receives in flight per comm (NCCL_NET_MAX_REQUESTS)
inline constexpr int kMaxSendsInFlight = kFifoDepth * kMaxRecvs;  // 256 isends per comm
inline constexpr size_t kPieceAlignment = 128;              // LL/LL128 lines never straddle two QPs
inline constexpr size_t kSplitThreshold = 64 * 1024;         // messages above this are split across QPs
inline constexpr size_t kMaxWorkRequestBytes = size_t{1} << 30;  // one RDMA write carries at most 1 GiB
inline constexpr int kReceivesPerQp = kMaxSendsInFlight + kFifoDepth;  // receive WRs kept posted on every QP

/// One buffer of a posted receive, as the sender sees it.
struct FifoSlot {
  uint64_t address;
  uint64_t capacity;
  uint32_t rkey;
  int32_t tag;
};

/// One posted receive (up to kMaxRecvs buffers).
struct FifoEntry {
  FifoSlot slots[kMaxRecvs];
  uint64_t sequence;  ///< the receive's sequence number s
  uint32_t n;         ///< buffers
  uint32_t request;   ///< the receiver's request index r (where the sizes go)
};
static_assert(sizeof(FifoEntry) == 208);

/// The registered block at each end of a connection. The sender uses `fifo` (written by the
/// receiver) and `sizeOut` (the size records it writes, staged); the receiver uses `fifo` as the
/// staging of the entries it writes, `sizes` (written by the sender) and `flushTarget`.
struct ControlBlock {
  FifoEntry fifo[kFifoDepth];
  uint64_t sizes[kFifoDepth][kMaxRecvs];
  uint64_t sizeOut[kMaxSendsInFlight];
  uint64_t flushTarget;
};

/// The FIFO position of receive sequence `sequence`.
constexpr size_t fifoPosition(uint64_t sequence) { return static_cast<size_t>(sequence % kFifoDepth); }

/// Byte offset of sizes[request][slot] inside the ControlBlock.
constexpr size_t sizeRecordOffset(uint32_t request, uint32_t slot) {
  return offsetof(ControlBlock, sizes) + (static_cast<size_t>(request) * kMaxRecvs + slot) * sizeof(uint64_t);
}
/// Byte offset of fifo[fifoPosition(sequence)] inside the ControlBlock.
constexpr size_t fifoEntryOffset(uint64_t sequence) {
  return offsetof(ControlBlock, fifo) + fifoPosition(sequence) * sizeof(FifoEntry);
}

/// What a data write's immediate says: bits 0-7 request, 8-10 buffer, 11-15 pieces - 1,
/// 16-31 the low 16 bits of the receive's sequence (a check against stale or misrouted writes).
struct Immediate {
  uint32_t request = 0;  ///< < 256
  uint32_t slot = 0;     ///< < kMaxRecvs
  uint32_t pieces = 1;   ///< 1 .. 32
  uint32_t sequence16 = 0;
};
constexpr uint32_t encodeImmediate(const Immediate& value) {
  return (value.request & 0xffu) | ((value.slot & 0x7u) << 8) | (((value.pieces - 1) & 0x1fu) << 11) |
         ((value.sequence16 & 0xffffu) << 16);
}
constexpr Immediate decodeImmediate(uint32_t word) {
  return Immediate{word & 0xffu, (word >> 8) & 0x7u, ((word >> 11) & 0x1fu) + 1, word >> 16};
}

/// How a message is cut: `pieces` pieces of `chunk` bytes (the last may be shorter).
struct MessageSplit {
  int pieces = 1;
  size_t chunk = 0;
};
/// One piece per QP for messages above kSplitThreshold (chunk = ⌈size / nQps⌉ rounded up to
/// kPieceAlignment, so fewer pieces when that rounding covers the message); one piece otherwise.
constexpr MessageSplit splitMessage(size_t size, int nQps) {
  if (nQps <= 1 || size <= kSplitThreshold) return {1, size};
  const size_t n = static_cast<size_t>(nQps);
  const size_t chunk = ((size + n - 1) / n + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
  return {static_cast<int>((size + chunk - 1) / chunk), chunk};
}

struct Piece {
  size_t offset = 0;
  size_t size = 0;
  int qp = 0;
};
/// Piece `index` of a message of `size` bytes split as `split`, the first piece on QP `firstQp`.
constexpr Piece pieceOf(const MessageSplit& split, size_t size, int index, int firstQp, int nQps) {
  const size_t offset = static_cast<size_t>(index) * split.chunk;
  const size_t left = size > offset ? size - offset : 0;
  return {offset, left < split.chunk ? left : split.chunk, (firstQp + index) % nQps};
}

/// RDMA writes a piece of `bytes` needs (≥ 1: a zero-byte piece is one zero-length write).
constexpr size_t writesForPiece(size_t bytes, size_t maxWriteBytes = kMaxWorkRequestBytes) {
  return bytes == 0 ? 1 : (bytes + maxWriteBytes - 1) / maxWriteBytes;
}

/// Work request ids: the kind in bits 56-63, the QP index in 48-55, an index below.
enum class WorkKind : uint8_t { Receive = 1, SendData = 2, FifoWrite = 3, Flush = 4 };
constexpr uint64_t workId(WorkKind kind, int qp, uint32_t index) {
  return (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(qp & 0xff) << 48) | index;
}
constexpr WorkKind workKind(uint64_t id) { return static_cast<WorkKind>(id >> 56); }
constexpr int workQp(uint64_t id) { return static_cast<int>((id >> 48) & 0xff); }
constexpr uint32_t workIndex(uint64_t id) { return static_cast<uint32_t>(id & 0xffffffffu); }

}  // namespace tuccl::net::ib
