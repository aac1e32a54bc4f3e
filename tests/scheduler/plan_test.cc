#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <map>

#include "oracles.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

Plan compile(const Algorithm& algorithm, const std::string& scheduler, TbPolicy policy, bool channels = false) {
  const Dag dag = buildDependencyDag(algorithm);
  const Pipeline pipeline = scheduler == "hpds"  ? scheduleHpds(dag)
                            : scheduler == "rr" ? scheduleRoundRobin(dag)
                                                : scheduleAlgorithmLevel(algorithm, dag);
  const TbAllocation allocation =
      allocateThreadBlocks(algorithm, dag, pipeline, {policy, channels ? channelsByForwarding(algorithm, dag) : std::vector<int32_t>{}});
  return lowerToPlan(algorithm, dag, pipeline, allocation);
}

std::vector<Algorithm> smallAlgorithms() {
  return {testing::hmAllReduce(2, 4), testing::hmAllReduce(3, 2), testing::hmAllGather(2, 4), testing::hmAllGather(4, 2),
          testing::stagedRingAllReduce(4)};
}

TEST(Lowering, EveryTaskBecomesItsPrimitives) {
  for (const Algorithm& algorithm : smallAlgorithms()) {
    const Plan plan = compile(algorithm, "hpds", TbPolicy::StateBased);
    std::map<int32_t, std::vector<std::pair<int32_t, PrimitiveKind>>> byOp;  // op -> (rank, kind)
    for (const PlanRank& rank : plan.ranks)
      for (const PlanTb& tb : rank.tbs)
        for (const PlanEntry& entry : tb.entries) byOp[entry.op].emplace_back(rank.rank, entry.kind);
    ASSERT_EQ(byOp.size(), algorithm.ops.size());
    for (const auto& [index, sides] : byOp) {
      const Operation& op = algorithm.ops[index];
      if (op.isLocal()) {
        ASSERT_EQ(sides.size(), 1u);
        EXPECT_EQ(sides[0].second, op.kind == OpKind::Reduce ? PrimitiveKind::Reduce : PrimitiveKind::Copy);
        continue;
      }
      ASSERT_EQ(sides.size(), 2u);
      for (const auto& [rank, kind] : sides) {
        if (kind == PrimitiveKind::Send) {
          EXPECT_EQ(rank, op.srcRank);
        } else {
          EXPECT_EQ(rank, op.dstRank);
          EXPECT_EQ(kind, op.kind == OpKind::Reduce ? PrimitiveKind::RecvReduceCopy : PrimitiveKind::Recv);
        }
      }
    }
  }
}

// Per TB, entries run in order: the k-th send of a connection and its k-th receive are the same
// task when every connection lives in one TB (no channels).
TEST(Lowering, SendsAndReceivesPairInOrderPerConnection) {
  for (const Algorithm& algorithm : smallAlgorithms()) {
    const Plan plan = compile(algorithm, "hpds", TbPolicy::StateBased);
    std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> sendOps, recvOps;
    for (const PlanRank& rank : plan.ranks)
      for (const PlanTb& tb : rank.tbs)
        for (const PlanEntry& entry : tb.entries) {
          if (entry.kind == PrimitiveKind::Send) sendOps[{rank.rank, entry.peer}].push_back(entry.op);
          if (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy) recvOps[{entry.peer, rank.rank}].push_back(entry.op);
        }
    EXPECT_EQ(sendOps, recvOps);
  }
}

TEST(Lowering, RandomExecutionMatchesTheAlgorithm) {
  for (const Algorithm& algorithm : smallAlgorithms()) {
    const testing::Memory expected = testing::runInStepOrder(algorithm);
    for (const char* scheduler : {"hpds", "rr", "algorithm"}) {
      for (TbPolicy policy : {TbPolicy::ConnectionBased, TbPolicy::StateBased}) {
        for (bool channels : {false, true}) {
          const Plan plan = compile(algorithm, scheduler, policy, channels);
          ASSERT_EQ(validatePlan(plan), std::nullopt) << scheduler;
          for (uint64_t seed = 1; seed <= 5; ++seed) {
            const auto [memory, error] = testing::runPlanRandomly(algorithm, plan, seed);
            ASSERT_EQ(error, "") << scheduler;
            EXPECT_TRUE(memory == expected) << algorithm.name << " " << scheduler << " seed " << seed;
          }
        }
      }
    }
  }
}

// The oracle has teeth: dropping the dependencies makes some random order compute a wrong result.
TEST(Lowering, OracleCatchesMissingDependencies) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  Plan plan = compile(algorithm, "hpds", TbPolicy::ConnectionBased);
  for (PlanRank& rank : plan.ranks)
    for (PlanTb& tb : rank.tbs)
      for (PlanEntry& entry : tb.entries) entry.deps.clear();
  const testing::Memory expected = testing::runInStepOrder(algorithm);
  bool wrong = false;
  for (uint64_t seed = 1; seed <= 20 && !wrong; ++seed) wrong = testing::runPlanRandomly(algorithm, plan, seed).first != expected;
  EXPECT_TRUE(wrong);
}

TEST(PlanJson, RoundTripAndDeterminism) {
  for (const Algorithm& algorithm : smallAlgorithms()) {
    const Plan plan = compile(algorithm, "hpds", TbPolicy::StateBased);
    const std::string text = writePlanJson(plan);
    EXPECT_EQ(text, writePlanJson(compile(algorithm, "hpds", TbPolicy::StateBased)));  // byte-identical
    const Plan back = readPlanJson(SourceText("plan.json", text));
    EXPECT_TRUE(back == plan);
    EXPECT_EQ(writePlanJson(back), text);
  }
  const std::string text = writePlanJson(compile(testing::hmAllReduce(2, 2), "hpds", TbPolicy::StateBased));
  EXPECT_NE(text.find("\"format\": \"tuccl-plan\""), std::string::npos);
  EXPECT_NE(text.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(text.find("\"recvReduceCopy\""), std::string::npos);
}

std::string errorOf(const std::string& text) {
  try {
    readPlanJson(SourceText("bad.json", text));
  } catch (const DiagnosticError& error) {
    return formatDiagnostic(error.diagnostic(), nullptr);
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(PlanJson, ReaderErrors) {
  const std::string good = writePlanJson(compile(testing::hmAllReduce(2, 2), "hpds", TbPolicy::StateBased));
  EXPECT_NE(errorOf("{\n  \"format\": \"tuccl-plan\",\n  oops\n}").find("bad.json:3:"), std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"version\": 1", "\"version\": 7")).find("version 7 is not supported"), std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"tuccl-plan\"", "\"other\"")).find("not a TuCCL plan"), std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"kind\": \"send\"", "\"kind\": \"teleport\"")).find(".kind must be"), std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"nThreads\": 512", "\"nThreads\": \"many\"")).find("plan.config.nThreads is not an integer"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"count\": 1", "\"count\": 2")).find("does not match"), std::string::npos);
}

// A chain Reduce of three ranks into root 2, in place (the data buffer is the output).
Algorithm chainReduceToRankTwo() {
  Algorithm a;
  a.name = "chain";
  a.collective = Collective::Reduce;
  a.nRanks = 3;
  a.root = 2;
  a.inPlace = true;
  a.bufferChunks = conventionalBufferChunks(Collective::Reduce, 3, 1);
  for (int32_t r = 0; r < 2; ++r) {
    Operation op;
    op.srcRank = r;
    op.dstRank = r + 1;
    op.step = r;
    op.srcBuffer = op.dstBuffer = BufferKind::Output;
    op.kind = OpKind::Reduce;
    a.ops.push_back(op);
  }
  return a;
}

TEST(PlanJson, TheRootOfBroadcastAndReduce) {
  const Plan plan = compile(chainReduceToRankTwo(), "hpds", TbPolicy::StateBased);
  EXPECT_EQ(plan.root, 2);
  EXPECT_FALSE(validatePlan(plan).has_value());
  const std::string text = writePlanJson(plan);
  EXPECT_NE(text.find("\"root\": 2,"), std::string::npos);
  EXPECT_EQ(readPlanJson(SourceText("plan.json", text)).root, 2);
  EXPECT_NE(errorOf(replaced(text, "\"root\": 2,", "\"root\": 3,")).find("root 3 is not a rank of the Reduce plan"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(text, "\"root\": 2,", "")).find("root -1 is not a rank of the Reduce plan"),
            std::string::npos);
  // Plans of collectives without a root say -1, and may leave it out.
  const std::string allReduce = writePlanJson(compile(testing::hmAllReduce(2, 2), "hpds", TbPolicy::StateBased));
  EXPECT_NE(allReduce.find("\"root\": -1,"), std::string::npos);
  EXPECT_EQ(readPlanJson(SourceText("plan.json", replaced(allReduce, "\"root\": -1,", ""))).root, -1);
}

TEST(PlanCheck, DetectsDeadlock) {
  // Rank 0 TB: [send to 1 (op a), recv from 1 (op b)]; rank 1 TB: [send to 0 (op b), recv from 0 (op a)]
  // is fine; swapping rank 1's two entries makes each rank wait for the other.
  Algorithm algorithm = testing::emptyAlgorithm(Collective::AllGather, 1, 2, 1);
  testing::addTransfer(algorithm, 0, 1, 0, 0, OpKind::Copy);
  testing::addTransfer(algorithm, 1, 0, 0, 1, OpKind::Copy);
  Plan plan;
  {
    const Dag dag = buildDependencyDag(algorithm);
    const Pipeline pipeline = scheduleAlgorithmLevel(algorithm, dag);
    TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, {TbPolicy::StateBased, {}});
    plan = lowerToPlan(algorithm, dag, pipeline, allocation);
  }
  // Algorithm-level: both tasks in one sub-pipeline, every connection overlaps: 2 TBs per rank.
  ASSERT_EQ(plan.ranks[0].tbs.size(), 2u);
  EXPECT_EQ(validatePlan(plan), std::nullopt);
  // Force one TB per rank holding both entries, in opposite orders on the two ranks.
  for (PlanRank& rank : plan.ranks) {
    PlanTb merged;
    merged.sendPeer = 1 - rank.rank;
    merged.recvPeer = 1 - rank.rank;
    for (PlanTb& tb : rank.tbs)
      for (PlanEntry& entry : tb.entries) merged.entries.push_back(entry);
    rank.tbs = {merged};
  }
  std::sort(plan.ranks[0].tbs[0].entries.begin(), plan.ranks[0].tbs[0].entries.end(),
            [](const PlanEntry& a, const PlanEntry& b) { return a.op < b.op; });
  std::sort(plan.ranks[1].tbs[0].entries.begin(), plan.ranks[1].tbs[0].entries.end(),
            [](const PlanEntry& a, const PlanEntry& b) { return a.op < b.op; });
  EXPECT_EQ(checkPlanDeadlockFree(plan), std::nullopt);  // both ranks: op 0 first, then op 1
  std::swap(plan.ranks[1].tbs[0].entries[0], plan.ranks[1].tbs[0].entries[1]);
  const auto problem = checkPlanDeadlockFree(plan);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("deadlock"), std::string::npos);
}

}  // namespace
}  // namespace tuccl
