#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "oracles.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

// Independent of validatePipeline: brute-force conflicting pairs and per-sub-pipeline links.
void expectValidTaskPipeline(const Algorithm& algorithm, const Pipeline& pipeline) {
  ASSERT_EQ(pipeline.order.size(), algorithm.ops.size());
  std::vector<int64_t> position(algorithm.ops.size(), -1);
  for (size_t i = 0; i < pipeline.order.size(); ++i) {
    ASSERT_EQ(position[pipeline.order[i]], -1) << "task scheduled twice";
    position[pipeline.order[i]] = static_cast<int64_t>(i);
  }
  for (const auto& [i, j] : testing::conflictingPairs(algorithm)) {
    EXPECT_LT(position[i], position[j]) << "op " << j << " (step " << algorithm.ops[j].step << ") before op " << i;
    EXPECT_LE(pipeline.subPipelineOf[i], pipeline.subPipelineOf[j]);
  }
  for (int32_t k = 0; k < pipeline.subPipelineCount(); ++k) {
    std::set<std::pair<int32_t, int32_t>> links;
    for (int32_t t : pipeline.subPipeline(k)) {
      EXPECT_TRUE(links.insert({algorithm.ops[t].srcRank, algorithm.ops[t].dstRank}).second)
          << "two tasks on one link in sub-pipeline " << k;
    }
  }
}

TEST(Hpds, HmAlgorithmsRespectDependenciesAndLinks) {
  for (auto [nodes, gpus] : {std::pair{2, 4}, std::pair{2, 8}, std::pair{4, 4}, std::pair{3, 2}}) {
    for (const Algorithm& algorithm : {testing::hmAllReduce(nodes, gpus), testing::hmAllGather(nodes, gpus)}) {
      const Dag dag = buildDependencyDag(algorithm);
      const Pipeline hpds = scheduleHpds(dag);
      const Pipeline rr = scheduleRoundRobin(dag);
      EXPECT_TRUE(validatePipeline(dag, hpds).ok());
      EXPECT_TRUE(validatePipeline(dag, rr).ok());
      expectValidTaskPipeline(algorithm, hpds);
      expectValidTaskPipeline(algorithm, rr);
    }
  }
}

TEST(Hpds, StagedRingWithLocalOps) {
  const Algorithm algorithm = testing::stagedRingAllReduce(5);
  const Dag dag = buildDependencyDag(algorithm);
  expectValidTaskPipeline(algorithm, scheduleHpds(dag));
  expectValidTaskPipeline(algorithm, scheduleRoundRobin(dag));
}

TEST(Hpds, SubPipelineCountIsAtLeastTheBusiestLink) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  const Dag dag = buildDependencyDag(algorithm);
  size_t busiest = 0;
  for (size_t l = 0; l < dag.links.size(); ++l) busiest = std::max(busiest, dag.tasksOfLink(static_cast<int32_t>(l)).size());
  EXPECT_GE(static_cast<size_t>(scheduleHpds(dag).subPipelineCount()), busiest);
}

// Two independent chunks, each a chain of three tasks 0->1->2->3 on ranks 0..3 (chunk 0) and
// the same links (chunk 1). HPDS alternates chunks by priority; RR also cycles, starting at 0.
TEST(Hpds, PriorityPrefersTheLeastExecutedChunk) {
  Algorithm algorithm = testing::emptyAlgorithm(Collective::AllGather, 1, 4, 1);
  algorithm.ranksPerNode = 0;
  for (int32_t chunk : {0, 1})
    for (int32_t hop = 0; hop < 3; ++hop) testing::addTransfer(algorithm, hop, hop + 1, hop, chunk, OpKind::Copy);
  const Dag dag = buildDependencyDag(algorithm);
  const Pipeline pipeline = scheduleHpds(dag);
  // Sub-pipeline 0: chunk 0 takes link 0->1 and, in the same sub-pipeline, its dependants 1->2
  // and 2->3 (they wait per micro-batch); chunk 1 finds every link taken.
  ASSERT_EQ(pipeline.subPipelineCount(), 2);
  EXPECT_EQ(std::vector<int32_t>(pipeline.subPipeline(0).begin(), pipeline.subPipeline(0).end()), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(std::vector<int32_t>(pipeline.subPipeline(1).begin(), pipeline.subPipeline(1).end()), (std::vector<int32_t>{3, 4, 5}));
}

TEST(Baselines, AlgorithmAndStageLevel) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  const Dag dag = buildDependencyDag(algorithm);
  const Pipeline steps = scheduleAlgorithmLevel(algorithm, dag);
  EXPECT_TRUE(validatePipeline(dag, steps).ok());
  EXPECT_EQ(steps.subPipelineCount(), algorithm.maxStep() + 1);
  for (int32_t t = 0; t < dag.nTasks; ++t) EXPECT_EQ(steps.subPipelineOf[t], algorithm.ops[t].step);
  const Pipeline stages = scheduleStageLevel(algorithm, dag, 3);
  EXPECT_TRUE(validatePipeline(dag, stages).ok());
  EXPECT_EQ(stages.subPipelineCount(), 3);  // 10 steps in blocks of 4
}

TEST(Hpds, DeterministicAcrossRuns) {
  const Algorithm algorithm = testing::hmAllReduce(4, 4);
  const Pipeline a = scheduleHpds(buildDependencyDag(algorithm));
  const Pipeline b = scheduleHpds(buildDependencyDag(algorithm));
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.subPipelineBegin, b.subPipelineBegin);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr int32_t kLargeNodes = 16;  // sanitizers are ~10x slower
#else
constexpr int32_t kLargeNodes = 128;  // 1,024 ranks, ~2.1M tasks
#endif

TEST(Hpds, ScalesToAThousandRanks) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto t0 = Clock::now();
  const Algorithm algorithm = testing::hmAllReduce(kLargeNodes, 8);
  const auto t1 = Clock::now();
  const Dag dag = buildDependencyDag(algorithm);
  const auto t2 = Clock::now();
  const Pipeline pipeline = scheduleHpds(dag);
  const auto t3 = Clock::now();
  const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline);
  const auto t4 = Clock::now();
  std::printf("HM AllReduce %d ranks: %zu tasks, %lld edges, %zu links, %d sub-pipelines\n", algorithm.nRanks,
              algorithm.ops.size(), static_cast<long long>(dag.edgeCount()), dag.links.size(), pipeline.subPipelineCount());
  std::printf("  build %.2fs  dag %.2fs  hpds %.2fs  tb allocation %.2fs  (state-based TBs per rank: %d..%d)\n",
              seconds(t0, t1), seconds(t1, t2), seconds(t2, t3), seconds(t3, t4),
              *std::min_element(allocation.tbCount.begin(), allocation.tbCount.end()),
              *std::max_element(allocation.tbCount.begin(), allocation.tbCount.end()));
  EXPECT_TRUE(validatePipeline(dag, pipeline).ok());
}

}  // namespace
}  // namespace tuccl
