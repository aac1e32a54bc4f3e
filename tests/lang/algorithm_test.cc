#include "lang/algorithm.h"

#include <gtest/gtest.h>

#include "lang/algorithm_summary.h"

namespace tuccl {
namespace {

Algorithm ringAllGather(int32_t n) {
  Algorithm algorithm;
  algorithm.name = "ring";
  algorithm.sourceName = "ring.resccl";
  algorithm.collective = Collective::AllGather;
  algorithm.nRanks = n;
  algorithm.bufferChunks = conventionalBufferChunks(Collective::AllGather, n, 1);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t s = 0; s + 1 < n; ++s) {
      Operation op;
      op.srcRank = r;
      op.dstRank = (r + 1) % n;
      op.srcBuffer = op.dstBuffer = BufferKind::Output;
      op.srcIndex = op.dstIndex = ((r - s) % n + n) % n;
      op.step = s;
      op.loc = SourceLoc{static_cast<uint32_t>(10 + s), 5};
      algorithm.ops.push_back(op);
    }
  }
  algorithm.inPlace = true;
  return algorithm;
}

TEST(Algorithm, OperationIsSmall) { EXPECT_LE(sizeof(Operation), 36u); }

TEST(Algorithm, CollectiveNames) {
  EXPECT_EQ(parseCollective("Allreduce"), Collective::AllReduce);
  EXPECT_EQ(parseCollective("reduce_scatter"), Collective::ReduceScatter);
  EXPECT_EQ(parseCollective("ReduceScatter"), Collective::ReduceScatter);
  EXPECT_EQ(parseCollective("alltoall"), Collective::AllToAll);
  EXPECT_EQ(parseCollective("Broadcast"), Collective::Broadcast);
  EXPECT_EQ(parseCollective("gather"), std::nullopt);
  for (Collective kind : {Collective::AllGather, Collective::AllReduce, Collective::ReduceScatter,
                              Collective::Broadcast, Collective::Reduce, Collective::AllToAll}) {
    EXPECT_EQ(parseCollective(collectiveName(kind)), kind);
  }
}

TEST(Algorithm, ConventionalBuffers) {
  EXPECT_EQ(conventionalBufferChunks(Collective::AllGather, 4, 2), (std::array<int32_t, 3>{2, 8, 0}));
  EXPECT_EQ(conventionalBufferChunks(Collective::ReduceScatter, 4, 2), (std::array<int32_t, 3>{8, 2, 0}));
  EXPECT_EQ(conventionalBufferChunks(Collective::AllReduce, 4, 8, 3), (std::array<int32_t, 3>{8, 8, 3}));
  EXPECT_EQ(conventionalBufferChunks(Collective::AllToAll, 4, 1), (std::array<int32_t, 3>{4, 4, 0}));
}

TEST(Algorithm, InPlaceStorage) {
  Algorithm ag = ringAllGather(4);
  StorageSlot slot = inPlaceStorage(ag, 3, BufferKind::Input, 0);
  EXPECT_EQ(slot.buffer, BufferKind::Output);
  EXPECT_EQ(slot.index, 3);
  Algorithm rs;
  rs.collective = Collective::ReduceScatter;
  rs.nRanks = 4;
  rs.bufferChunks = conventionalBufferChunks(Collective::ReduceScatter, 4, 2);
  rs.inPlace = true;
  slot = inPlaceStorage(rs, 2, BufferKind::Output, 1);
  EXPECT_EQ(slot.buffer, BufferKind::Input);
  EXPECT_EQ(slot.index, 5);
  rs.inPlace = false;
  slot = inPlaceStorage(rs, 2, BufferKind::Output, 1);
  EXPECT_EQ(slot.buffer, BufferKind::Output);
  EXPECT_EQ(slot.index, 1);
}

TEST(Algorithm, ValidStructure) {
  Algorithm algorithm = ringAllGather(4);
  EXPECT_TRUE(validateStructure(algorithm).ok());
  EXPECT_EQ(algorithm.chunksPerRank(), 1);
  EXPECT_EQ(algorithm.maxStep(), 2);
}

TEST(Algorithm, StructuralErrorsNameTheOperation) {
  Algorithm algorithm = ringAllGather(4);
  algorithm.ops[5].dstRank = 4;
  Status problem = validateStructure(algorithm);
  ASSERT_FALSE(problem.ok());
  EXPECT_EQ(problem.code(), ErrorCode::InvalidInput);
  EXPECT_EQ(problem.diagnostic().loc, algorithm.ops[5].loc);
  EXPECT_EQ(problem.diagnostic().file, "ring.resccl");
  EXPECT_NE(problem.message().find("destination rank 4 out of range [0, 4)"), std::string::npos) << problem.message();

  algorithm = ringAllGather(4);
  algorithm.ops[2].srcIndex = 3;
  algorithm.ops[2].count = 2;
  problem = validateStructure(algorithm);
  ASSERT_FALSE(problem.ok());
  EXPECT_NE(problem.message().find("source chunk 3 (count 2) out of range [0, 4)"), std::string::npos)
      << problem.message();

  algorithm = ringAllGather(4);
  algorithm.ops[0].step = -1;
  problem = validateStructure(algorithm);
  ASSERT_FALSE(problem.ok());
  EXPECT_NE(problem.message().find("negative"), std::string::npos);

  algorithm = ringAllGather(4);
  algorithm.bufferChunks[1] = 5;
  problem = validateStructure(algorithm);
  ASSERT_FALSE(problem.ok());
  EXPECT_NE(problem.message().find("do not fit"), std::string::npos);

  algorithm = ringAllGather(4);
  algorithm.ranksPerNode = 3;
  EXPECT_FALSE(validateStructure(algorithm).ok());

  algorithm = ringAllGather(4);
  algorithm.collective = Collective::Broadcast;
  algorithm.bufferChunks = conventionalBufferChunks(Collective::Broadcast, 4, 4);
  algorithm.root = 7;
  problem = validateStructure(algorithm);
  ASSERT_FALSE(problem.ok());
  EXPECT_NE(problem.message().find("root 7"), std::string::npos);
}

TEST(AlgorithmSummary, PeersAndCounts) {
  Algorithm algorithm = ringAllGather(4);
  AlgorithmSummary summary = summarizeAlgorithm(algorithm);
  EXPECT_EQ(summary.operations, 12);
  EXPECT_EQ(summary.copies, 12);
  EXPECT_EQ(summary.reduces, 0);
  EXPECT_EQ(summary.distinctSteps, 3);
  EXPECT_EQ(summary.sendPeers[0], (std::vector<int32_t>{1}));
  EXPECT_EQ(summary.recvPeers[0], (std::vector<int32_t>{3}));
  EXPECT_EQ(summary.sendOps[2], 3);
  std::string text = renderSummary(algorithm, summary, 2);
  EXPECT_NE(text.find("collective   AllGather, in place"), std::string::npos) << text;
  EXPECT_NE(text.find("2 more ranks"), std::string::npos) << text;
}

TEST(AlgorithmSummary, RankListsCollapseRuns) {
  EXPECT_EQ(formatRankList({}), "-");
  EXPECT_EQ(formatRankList({3}), "3");
  EXPECT_EQ(formatRankList({1, 2}), "1,2");
  EXPECT_EQ(formatRankList({0, 1, 2, 3, 8, 10, 11, 12}), "0-3,8,10-12");
}

}  // namespace
}  // namespace tuccl
