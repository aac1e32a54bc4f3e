// The verbs transport's protocol arithmetic (net/ib_protocol.h): FIFO positions, control-block
// offsets, the immediate's encoding, and how messages are cut across queue pairs.
#include "net/ib_protocol.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace tuccl::net::ib {
namespace {

TEST(IbProtocol, FifoPositionsWrapAndOffsetsStayInsideTheControlBlock) {
  for (uint64_t sequence = 0; sequence < 3 * kFifoDepth; ++sequence) {
    EXPECT_EQ(fifoPosition(sequence), sequence % kFifoDepth);
    EXPECT_EQ(fifoEntryOffset(sequence), fifoPosition(sequence) * sizeof(FifoEntry));
    EXPECT_LE(fifoEntryOffset(sequence) + sizeof(FifoEntry), offsetof(ControlBlock, sizes));
  }
  // Entries kFifoDepth apart share a position: a receive reuses its predecessor's slot only.
  EXPECT_EQ(fifoPosition(5), fifoPosition(5 + kFifoDepth));
  std::set<size_t> records;
  for (uint32_t request = 0; request < kFifoDepth; ++request)
    for (uint32_t slot = 0; slot < kMaxRecvs; ++slot) {
      const size_t offset = sizeRecordOffset(request, slot);
      EXPECT_GE(offset, offsetof(ControlBlock, sizes));
      EXPECT_LE(offset + sizeof(uint64_t), offsetof(ControlBlock, sizeOut));
      EXPECT_EQ(offset % alignof(uint64_t), 0u);
      records.insert(offset);
    }
  EXPECT_EQ(records.size(), static_cast<size_t>(kFifoDepth * kMaxRecvs)) << "every (request, buffer) has its own record";
}

TEST(IbProtocol, ImmediateRoundTripsEveryField) {
  std::mt19937 random(7);
  auto below = [&](uint32_t bound) { return static_cast<uint32_t>(random() % bound); };
  for (int i = 0; i < 10000; ++i) {
    const Immediate in{below(kFifoDepth), below(kMaxRecvs), 1 + below(kMaxQpsPerConnection), below(0x10000)};
    const Immediate out = decodeImmediate(encodeImmediate(in));
    EXPECT_EQ(out.request, in.request);
    EXPECT_EQ(out.slot, in.slot);
    EXPECT_EQ(out.pieces, in.pieces);
    EXPECT_EQ(out.sequence16, in.sequence16);
  }
  EXPECT_EQ(decodeImmediate(encodeImmediate({255, 7, 32, 0xffff})).pieces, 32u);
  EXPECT_NE(encodeImmediate({1, 0, 1, 0}), encodeImmediate({1, 1, 1, 0}));
}

TEST(IbProtocol, SmallMessagesTravelWholeOnOneQp) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, kSplitThreshold}) {
    const MessageSplit split = splitMessage(size, 4);
    EXPECT_EQ(split.pieces, 1) << size;
    const Piece piece = pieceOf(split, size, 0, 3, 4);
    EXPECT_EQ(piece.offset, 0u);
    EXPECT_EQ(piece.size, size);
    EXPECT_EQ(piece.qp, 3);
  }
  EXPECT_EQ(splitMessage(size_t{1} << 30, 1).pieces, 1) << "one QP: never split";
}

TEST(IbProtocol, LargeMessagesCoverEveryByteOnceWithAlignedPiecesOnDistinctQps) {
  std::mt19937_64 random(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const int nQps = 1 + static_cast<int>(random() % kMaxQpsPerConnection);
    const size_t size = kSplitThreshold + 1 + random() % (size_t{256} << 20);
    const int firstQp = static_cast<int>(random() % static_cast<uint64_t>(nQps));
    const MessageSplit split = splitMessage(size, nQps);
    ASSERT_GE(split.pieces, 1);
    ASSERT_LE(split.pieces, nQps);
    if (nQps > 1) {
      EXPECT_EQ(split.chunk % kPieceAlignment, 0u);
    }
    size_t covered = 0;
    std::set<int> qps;
    for (int k = 0; k < split.pieces; ++k) {
      const Piece piece = pieceOf(split, size, k, firstQp, nQps);
      EXPECT_EQ(piece.offset, covered) << "pieces are contiguous";
      EXPECT_GT(piece.size, 0u) << "no empty piece";
      EXPECT_EQ(piece.qp, (firstQp + k) % nQps);
      covered += piece.size;
      qps.insert(piece.qp);
    }
    EXPECT_EQ(covered, size);
    EXPECT_EQ(qps.size(), static_cast<size_t>(split.pieces)) << "one piece per QP";
  }
  const MessageSplit even = splitMessage(size_t{64} << 20, 4);
  EXPECT_EQ(even.pieces, 4);
  EXPECT_EQ(even.chunk, size_t{16} << 20);
}

TEST(IbProtocol, WritesPerPieceAndWorkIds) {
  EXPECT_EQ(writesForPiece(0), 1u) << "a zero-byte message is one zero-length write with immediate";
  EXPECT_EQ(writesForPiece(1), 1u);
  EXPECT_EQ(writesForPiece(kMaxWorkRequestBytes), 1u);
  EXPECT_EQ(writesForPiece(kMaxWorkRequestBytes + 1), 2u);
  EXPECT_EQ(writesForPiece(10, 4), 3u);
  const uint64_t id = workId(WorkKind::SendData, 13, 255);
  EXPECT_EQ(workKind(id), WorkKind::SendData);
  EXPECT_EQ(workQp(id), 13);
  EXPECT_EQ(workIndex(id), 255u);
  EXPECT_EQ(workKind(workId(WorkKind::Receive, 0, 0)), WorkKind::Receive);
}

}  // namespace
}  // namespace tuccl::net::ib
