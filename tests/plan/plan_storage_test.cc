// Where a plan's chunks live (plan/plan_storage.h): the chunk unit of each collective and NCCL's
// in-place layout, the same mapping the algorithm IR uses (support/buffer_layout.h).
#include "plan/plan_storage.h"

#include <gtest/gtest.h>

#include "sample_plans.h"

namespace tuccl {
namespace {

Plan planOf(Collective collective, int32_t nRanks, std::array<int32_t, kBufferKinds> chunks, bool inPlace) {
  Plan plan;
  plan.collective = collective;
  plan.nRanks = nRanks;
  plan.bufferChunks = chunks;
  plan.inPlace = inPlace;
  return plan;
}

TEST(PlanStorage, ChunkUnitOfEachCollective) {
  EXPECT_EQ(planChunkUnit(planOf(Collective::AllGather, 4, {2, 8, 0}, true)), 2);
  EXPECT_EQ(planChunkUnit(planOf(Collective::ReduceScatter, 4, {12, 3, 0}, true)), 3);
  EXPECT_EQ(planChunkUnit(planOf(Collective::AllToAll, 4, {8, 8, 0}, true)), 2);
  EXPECT_EQ(planChunkUnit(planOf(Collective::AllReduce, 4, {5, 5, 1}, true)), 5);
  EXPECT_EQ(planChunkUnit(planOf(Collective::Broadcast, 4, {1, 1, 0}, true)), 1);
  EXPECT_EQ(planChunkUnit(testing::twoRankAllGather()), 1);
}

TEST(PlanStorage, InPlaceLayout) {
  const Plan allGather = planOf(Collective::AllGather, 4, {2, 8, 0}, true);
  StorageSlot slot = planStorage(allGather, 3, BufferKind::Input, 1);
  EXPECT_EQ(slot.buffer, BufferKind::Output);
  EXPECT_EQ(slot.index, 7);  // block 3 of the output, chunk 1
  slot = planStorage(allGather, 3, BufferKind::Output, 5);
  EXPECT_EQ(slot.buffer, BufferKind::Output);
  EXPECT_EQ(slot.index, 5);
  const Plan reduceScatter = planOf(Collective::ReduceScatter, 4, {12, 3, 0}, true);
  slot = planStorage(reduceScatter, 2, BufferKind::Output, 1);
  EXPECT_EQ(slot.buffer, BufferKind::Input);
  EXPECT_EQ(slot.index, 7);
  const Plan allReduce = planOf(Collective::AllReduce, 4, {5, 5, 1}, true);
  slot = planStorage(allReduce, 1, BufferKind::Input, 4);
  EXPECT_EQ(slot.buffer, BufferKind::Output);
  EXPECT_EQ(slot.index, 4);
  slot = planStorage(allReduce, 1, BufferKind::Scratch, 0);
  EXPECT_EQ(slot.buffer, BufferKind::Scratch);
  // Out of place, every buffer is its own storage.
  slot = planStorage(planOf(Collective::AllGather, 4, {2, 8, 0}, false), 3, BufferKind::Input, 1);
  EXPECT_EQ(slot.buffer, BufferKind::Input);
  EXPECT_EQ(slot.index, 1);
}

}  // namespace
}  // namespace tuccl
