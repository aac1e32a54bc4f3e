#include "scheduler/dag.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "oracles.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

// reach[i] = the tasks reachable from i along DAG edges (small DAGs only).
std::vector<std::vector<bool>> reachability(const Dag& dag) {
  std::vector<std::vector<bool>> reach(dag.nTasks, std::vector<bool>(dag.nTasks, false));
  for (int32_t s = 0; s < dag.nTasks; ++s) {
    std::vector<int32_t> stack{s};
    while (!stack.empty()) {
      const int32_t t = stack.back();
      stack.pop_back();
      for (int32_t u : dag.successors(t)) {
        if (!reach[s][u]) {
          reach[s][u] = true;
          stack.push_back(u);
        }
      }
    }
  }
  return reach;
}

void expectDagMatchesBruteForce(const Algorithm& algorithm) {
  const Dag dag = buildDependencyDag(algorithm);
  ASSERT_EQ(dag.nTasks, static_cast<int32_t>(algorithm.ops.size()));
  const auto pairs = testing::conflictingPairs(algorithm);
  const std::set<std::pair<int32_t, int32_t>> conflicting(pairs.begin(), pairs.end());
  // Complete: every conflicting pair is ordered by a path, earlier step first.
  const auto reach = reachability(dag);
  for (const auto& [i, j] : pairs) EXPECT_TRUE(reach[i][j]) << "ops " << i << " -> " << j << " are not ordered";
  // Sound: every edge is a conflicting pair with the earlier step first.
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (int32_t p : dag.predecessors(t)) EXPECT_TRUE(conflicting.contains({p, t})) << "spurious edge " << p << " -> " << t;
    for (int32_t s : dag.successors(t)) EXPECT_TRUE(conflicting.contains({t, s})) << "spurious edge " << t << " -> " << s;
  }
  // Links are connections.
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const DagLink& link = dag.links[dag.linkOf[t]];
    EXPECT_EQ(link.srcRank, algorithm.ops[t].srcRank);
    EXPECT_EQ(link.dstRank, algorithm.ops[t].dstRank);
    bool listed = false;
    for (int32_t u : dag.tasksOfLink(dag.linkOf[t])) listed = listed || u == t;
    EXPECT_TRUE(listed);
  }
}

TEST(Dag, HmAllReduceMatchesBruteForce) {
  expectDagMatchesBruteForce(testing::hmAllReduce(2, 4));
  expectDagMatchesBruteForce(testing::hmAllReduce(3, 2));
}

TEST(Dag, HmAllGatherMatchesBruteForce) { expectDagMatchesBruteForce(testing::hmAllGather(3, 4)); }

TEST(Dag, StagedRingWithScratchLocalOpsAndCountTwo) { expectDagMatchesBruteForce(testing::stagedRingAllReduce(4)); }

TEST(Dag, ChunkIdsAndLinkCounts) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  const Dag dag = buildDependencyDag(algorithm);
  EXPECT_EQ(dag.nChunks, 8);
  // Per rank: 3 intra-node peers each way plus the ring: 4 sending links per rank.
  EXPECT_EQ(dag.links.size(), 8u * 4u);
  for (int32_t t = 0; t < dag.nTasks; ++t) EXPECT_EQ(dag.chunkOf[t], algorithm.ops[t].dstIndex);
}

TEST(Dag, LinkKeyHookMergesLinks) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  DagOptions options;
  options.linkKey = [](const Operation& op) { return static_cast<uint64_t>(op.srcRank); };  // one NIC per rank
  const Dag dag = buildDependencyDag(algorithm, options);
  EXPECT_EQ(dag.links.size(), 8u);
}

TEST(Dag, RejectsInvalidAlgorithm) {
  Algorithm algorithm = testing::hmAllReduce(2, 2);
  algorithm.ops[0].dstIndex = 99;
  EXPECT_THROW(buildDependencyDag(algorithm), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
