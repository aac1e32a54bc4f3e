#include "synth/proved.h"

#include <gtest/gtest.h>

namespace tuccl {
namespace {

// A two-rank AllGather: each rank sends its chunk to the other and keeps its own.
Algorithm twoRankAllGather() {
  Algorithm algorithm;
  algorithm.name = "pair";
  algorithm.collective = Collective::AllGather;
  algorithm.nRanks = 2;
  algorithm.bufferChunks = conventionalBufferChunks(Collective::AllGather, 2, 1);
  for (int32_t r = 0; r < 2; ++r) {
    algorithm.ops.push_back({.srcRank = r, .srcIndex = 0, .dstRank = r, .dstIndex = r, .step = 0});
    algorithm.ops.push_back({.srcRank = r, .srcIndex = 0, .dstRank = 1 - r, .dstIndex = r, .step = 0});
  }
  return algorithm;
}

TEST(ProveGenerated, PassesAProvedAlgorithmThrough) {
  Expected<Algorithm> proved = proveGenerated(twoRankAllGather(), "pair");
  ASSERT_TRUE(proved.ok()) << proved.status().message();
  EXPECT_EQ(proved->ops.size(), 4u);
}

TEST(ProveGenerated, NamesTheProducerAndTheViolation) {
  Algorithm broken = twoRankAllGather();
  broken.ops.pop_back();  // rank 0 never receives chunk 1
  Expected<Algorithm> proved = proveGenerated(broken, "pair generator");
  ASSERT_FALSE(proved.ok());
  EXPECT_EQ(proved.status().code(), ErrorCode::Internal);
  EXPECT_NE(proved.status().message().find("pair generator"), std::string::npos);
}

}  // namespace
}  // namespace tuccl
