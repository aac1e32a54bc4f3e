// Lowering to a plan (scheduler/lowering.h): every task becomes its primitives, entries pair up,
// random executions compute the algorithm's result, and the plan carries root and source lines.
#include "scheduler/lowering.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <string>

#include "oracles.h"
#include "plan/plan_json.h"
#include "plan/plan_pairing.h"
#include "plan/plan_validate.h"
#include "scheduler/plan_builder.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

Plan compile(const Algorithm& algorithm, Scheduler scheduler, TbPolicy policy, bool channels = false) {
  const Dag dag = buildDependencyDag(algorithm);
  const Pipeline pipeline = scheduler == Scheduler::Hpds         ? scheduleHpds(dag)
                            : scheduler == Scheduler::RoundRobin ? scheduleRoundRobin(dag)
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
    const Plan plan = compile(algorithm, Scheduler::Hpds, TbPolicy::StateBased);
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
    const Plan plan = compile(algorithm, Scheduler::Hpds, TbPolicy::StateBased);
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
    for (Scheduler scheduler : {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel}) {
      for (TbPolicy policy : {TbPolicy::ConnectionBased, TbPolicy::StateBased, TbPolicy::Single}) {
        for (bool channels : {false, true}) {
          const Plan plan = compile(algorithm, scheduler, policy, channels);
          ASSERT_TRUE(validatePlan(plan).ok()) << schedulerName(scheduler) << ": " << validatePlan(plan).toString();
          for (uint64_t seed = 1; seed <= 5; ++seed) {
            const auto [memory, error] = testing::runPlanRandomly(algorithm, plan, seed);
            ASSERT_EQ(error, "") << schedulerName(scheduler);
            EXPECT_TRUE(memory == expected) << algorithm.name << " " << schedulerName(scheduler) << " seed " << seed;
          }
        }
      }
    }
  }
}

// The oracle has teeth: dropping the dependencies makes some random order compute a wrong result.
TEST(Lowering, OracleCatchesMissingDependencies) {
  const Algorithm algorithm = testing::hmAllReduce(2, 4);
  Plan plan = compile(algorithm, Scheduler::Hpds, TbPolicy::ConnectionBased);
  for (PlanRank& rank : plan.ranks)
    for (PlanTb& tb : rank.tbs)
      for (PlanEntry& entry : tb.entries) entry.deps.clear();
  const testing::Memory expected = testing::runInStepOrder(algorithm);
  bool wrong = false;
  for (uint64_t seed = 1; seed <= 20 && !wrong; ++seed) wrong = testing::runPlanRandomly(algorithm, plan, seed).first != expected;
  EXPECT_TRUE(wrong);
}

size_t countKind(const Plan& plan, PrimitiveKind kind) {
  size_t n = 0;
  for (const PlanRank& rank : plan.ranks)
    for (const PlanTb& tb : rank.tbs)
      for (const PlanEntry& entry : tb.entries) n += entry.kind == kind ? 1 : 0;
  return n;
}

// Fusion: a ring's receives fuse with the sends of their results, each TB pair of a rank becomes
// one TB, and the plan moves the same data: every transfer stays (paired per connection), its
// unfused form runs to the algorithm's result, and plan JSON carries the fused entries (version
// 4) or writes the unfused form (version 3).
TEST(Lowering, FusesEachReceiveWithTheSendOfItsResult) {
  const Algorithm ring = testing::ringAllReduce(4);
  const Plan fused = buildPlan(ring, PlanRequest{}).value();
  PlanRequest plain;
  plain.fuse = false;
  const Plan unfused = buildPlan(ring, plain).value();
  ASSERT_TRUE(validatePlan(fused).ok()) << validatePlan(fused).toString();
  ASSERT_TRUE(checkPlanRaceFree(fused).ok()) << checkPlanRaceFree(fused).toString();
  EXPECT_GT(countKind(fused, PrimitiveKind::RecvReduceSend), 0u);
  EXPECT_GT(countKind(fused, PrimitiveKind::RecvReduceCopySend), 0u);
  EXPECT_GT(countKind(fused, PrimitiveKind::RecvCopySend), 0u);
  EXPECT_FALSE(hasFusedEntries(unfused));
  EXPECT_EQ(minStagingSlots(fused), 2);
  EXPECT_EQ(minStagingSlots(unfused), 1);
  for (const PlanRank& rank : fused.ranks) {
    EXPECT_LT(rank.tbs.size(), unfused.ranks[rank.rank].tbs.size()) << "rank " << rank.rank;
  }
  EXPECT_EQ(pairTransfers(fused).value().size(), pairTransfers(unfused).value().size());

  // Every task is sent and received on the same ranks, fused or not (the CPU verification
  // matrix runs the fused plans element by element).
  auto sidesOf = [](const Plan& plan) {
    std::multiset<std::tuple<int32_t, int32_t, int32_t, bool>> sides;  // op, rank, peer, sending
    for (const PlanRank& rank : plan.ranks)
      for (const PlanTb& tb : rank.tbs)
        for (const PlanEntry& entry : tb.entries) {
          if (isSending(entry.kind)) sides.emplace(sendSideOf(entry).op, rank.rank, sendSideOf(entry).peer, true);
          if (isReceive(entry.kind) || isLocal(entry.kind)) sides.emplace(entry.op, rank.rank, entry.peer, false);
        }
    return sides;
  };
  EXPECT_TRUE(sidesOf(fused) == sidesOf(unfused));
  const Plan split = unfusedPlan(fused);
  EXPECT_FALSE(hasFusedEntries(split));
  EXPECT_TRUE(sidesOf(split) == sidesOf(unfused));
  // Split, the fused chains' sends still run ahead of their receives: a buffered order.
  EXPECT_EQ(split.config.sendAhead, 1);
  ASSERT_TRUE(validatePlan(split).ok()) << validatePlan(split).toString();

  const Expected<Plan> back = readPlanJson(SourceText("plan.json", writePlanJson(fused)));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_TRUE(*back == fused);
  const Expected<Plan> older = readPlanJson(SourceText("plan.json", writePlanJson(fused, 3)));
  ASSERT_TRUE(older.ok()) << older.status().toString();
  EXPECT_TRUE(*older == split);
  // A fused kind in a version-3 document is refused, naming the field.
  std::string text = writePlanJson(fused);
  text.replace(text.find("\"version\": 4"), 12, "\"version\": 3");
  const Expected<Plan> refused = readPlanJson(SourceText("plan.json", text));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is a fused primitive, which plan format version 4 introduced"),
            std::string::npos)
      << refused.status().message();
  // ... and so is one in a version-2 entry.
  std::string plainText = writePlanJson(split, 2);
  plainText.replace(plainText.find("\"kind\": \"recv\""), 14, "\"kind\": \"recvCopySend\"");
  const Expected<Plan> plainRefused = readPlanJson(SourceText("plan.json", plainText));
  ASSERT_FALSE(plainRefused.ok());
  EXPECT_NE(plainRefused.status().message().find("which only rolled plans (format version 4) carry"), std::string::npos)
      << plainRefused.status().message();

  // Bad next fields are named; a fused ring run entry by entry (task level) deadlocks.
  auto firstFused = [](Plan& plan) -> PlanEntry& {
    for (PlanRank& rank : plan.ranks)
      for (PlanTb& tb : rank.tbs)
        for (PlanEntry& entry : tb.entries)
          if (isFused(entry.kind)) return entry;
    throw std::logic_error("no fused entry");
  };
  Plan bad = fused;
  firstFused(bad).next.peer = bad.ranks[0].rank;  // rank 0's first fused entry sends to itself
  EXPECT_NE(validatePlan(bad).message().find("next.peer must name another rank"), std::string::npos)
      << validatePlan(bad).toString();
  bad = fused;
  {
    PlanEntry::Next& next = firstFused(bad).next;
    next.dstIndex = (next.dstIndex + 1) % bad.bufferChunks[static_cast<int>(next.dstBuffer)];  // another unit place
  }
  EXPECT_NE(validatePlan(bad).message().find("must sit at the same place of their units"), std::string::npos)
      << validatePlan(bad).toString();
  bad = fused;
  bad.ranks[0].tbs[0].entries[0].next.peer = 1;  // a plain send
  EXPECT_NE(validatePlan(bad).message().find("is not a fused primitive"), std::string::npos)
      << validatePlan(bad).toString();
  bad = fused;
  bad.executionLevel = ExecutionLevel::Task;
  EXPECT_NE(checkPlanDeadlockFree(bad).message().find("must run together with an earlier entry of its TB"),
            std::string::npos)
      << checkPlanDeadlockFree(bad).toString();
}

// Lowering fills the typed header, the root of a rooted collective and every entry's source line.
TEST(Lowering, CarriesRootAndSourceLocations) {
  Algorithm broadcast = testing::emptyAlgorithm(Collective::Broadcast, 1, 4, 1);
  broadcast.root = 2;
  broadcast.sourceName = "bcast.resccl";
  for (int32_t r = 0; r < 4; ++r) {
    if (r == 2) continue;
    testing::addTransfer(broadcast, 2, r, 0, 0, OpKind::Copy);
    broadcast.ops.back().loc = SourceLoc{static_cast<uint32_t>(10 + r), 5};
  }
  const Plan plan = compile(broadcast, Scheduler::Hpds, TbPolicy::StateBased);
  ASSERT_TRUE(validatePlan(plan).ok()) << validatePlan(plan).toString();
  EXPECT_EQ(plan.collective, Collective::Broadcast);
  EXPECT_EQ(plan.root, 2);
  EXPECT_EQ(plan.sourceName, "bcast.resccl");
  EXPECT_EQ(plan.scheduler, Scheduler::Hpds);
  EXPECT_EQ(plan.executionLevel, ExecutionLevel::Task);
  EXPECT_EQ(plan.tbAllocation, TbPolicy::StateBased);
  int32_t entries = 0;
  for (const PlanRank& rank : plan.ranks)
    for (const PlanTb& tb : rank.tbs)
      for (const PlanEntry& entry : tb.entries) {
        EXPECT_EQ(entry.loc, broadcast.ops[entry.op].loc);
        ++entries;
      }
  EXPECT_EQ(entries, 6);  // three sends, three receives
  // A collective without a root gets -1, whatever the algorithm's field holds.
  Algorithm allGather = testing::hmAllGather(1, 2);
  allGather.root = 1;
  EXPECT_EQ(compile(allGather, Scheduler::Hpds, TbPolicy::StateBased).root, -1);
}

// One TB per rank: in the pipeline's order the plan is deadlock free under rendezvous (checked by
// buildPlan); asked for send-ahead, each TB runs step by step, a step's sends before its
// receives, which only the buffered model accepts — or, where a connection carries more chunks
// in a step than the rings hold, the plan keeps the pipeline's order.
TEST(Lowering, SingleTbOrdersAndSendAhead) {
  auto isSorted = [](const PlanTb& tb) {
    return std::is_sorted(tb.entries.begin(), tb.entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
      return std::make_pair(a.step, isReceive(a.kind)) < std::make_pair(b.step, isReceive(b.kind));
    });
  };
  std::vector<int32_t> kept;  // sendAhead, per algorithm
  for (const Algorithm& algorithm : smallAlgorithms()) {
    PlanRequest request;
    request.tbAllocation = TbRequest{TbPolicy::Single, false};
    const Plan pipelineOrder = buildPlan(algorithm, request).value();
    EXPECT_EQ(pipelineOrder.config.sendAhead, 0);
    request.config.sendAhead = 1;
    const Plan plan = buildPlan(algorithm, request).value();
    EXPECT_EQ(plan.tbAllocation, TbPolicy::Single);
    ASSERT_TRUE(validatePlan(plan).ok()) << validatePlan(plan).toString();
    kept.push_back(plan.config.sendAhead);
    for (const PlanRank& rank : plan.ranks) {
      ASSERT_LE(rank.tbs.size(), 1u);
      if (plan.config.sendAhead > 0 && !rank.tbs.empty()) {
        EXPECT_TRUE(isSorted(rank.tbs[0])) << algorithm.name << " rank " << rank.rank;
      }
    }
    if (plan.config.sendAhead == 0) {
      EXPECT_TRUE(plan == pipelineOrder) << algorithm.name;
      continue;
    }
    // Every rank sends before it receives: a cycle when sends wait for their receives.
    Plan rendezvous = plan;
    rendezvous.config.sendAhead = 0;
    EXPECT_NE(checkPlanDeadlockFree(rendezvous).message().find("deadlock"), std::string::npos) << algorithm.name;
  }
  // HM AllReduce and the staged ring send several chunks on a connection in one step.
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 0, 1, 1, 0}));
}

// Channels given per operation split every connection into one TB per channel; a list of the
// wrong length is refused.
TEST(Lowering, ChannelsOfOperationsSplitConnectionsIntoTbs) {
  const Algorithm ring = testing::ringAllReduce(4);
  PlanRequest request;
  request.tbAllocation.policy = TbPolicy::ConnectionBased;
  const Plan one = buildPlan(ring, request).value();
  for (const Operation& op : ring.ops) request.tbAllocation.channelOfOperation.push_back(op.dstIndex % 2);
  const Plan two = buildPlan(ring, request).value();
  for (size_t r = 0; r < one.ranks.size(); ++r) {
    EXPECT_EQ(two.ranks[r].tbs.size(), 2 * one.ranks[r].tbs.size()) << "rank " << r;
    for (const PlanTb& tb : two.ranks[r].tbs)
      for (const PlanEntry& entry : tb.entries) EXPECT_EQ(entry.dstIndex % 2, tb.entries.front().dstIndex % 2);
  }
  request.tbAllocation.channelOfOperation.pop_back();
  Expected<Plan> bad = buildPlan(ring, request);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("channels for"), std::string::npos) << bad.status().message();
}

TEST(PlanJson, RoundTripAndDeterminism) {
  for (const Algorithm& algorithm : smallAlgorithms()) {
    const Plan plan = compile(algorithm, Scheduler::Hpds, TbPolicy::StateBased);
    const std::string text = writePlanJson(plan);
    EXPECT_EQ(text, writePlanJson(compile(algorithm, Scheduler::Hpds, TbPolicy::StateBased)));  // byte-identical
    const Expected<Plan> back = readPlanJson(SourceText("plan.json", text));
    ASSERT_TRUE(back.ok()) << back.status().toString();
    EXPECT_TRUE(*back == plan);
    EXPECT_EQ(writePlanJson(*back), text);
  }
  const std::string text = writePlanJson(compile(testing::hmAllReduce(2, 2), Scheduler::Hpds, TbPolicy::StateBased));
  EXPECT_NE(text.find("\"format\": \"tuccl-plan\""), std::string::npos);
  EXPECT_NE(text.find("\"version\": " + std::to_string(kPlanFormatVersion)), std::string::npos);
  EXPECT_NE(text.find("\"recvReduceCopy\""), std::string::npos);
  EXPECT_EQ(text.find("sendAhead"), std::string::npos);  // rendezvous: the field is left out
  PlanRequest request;
  request.tbAllocation = TbRequest{TbPolicy::Single, false};
  request.config.sendAhead = 1;
  const Plan sendAhead = buildPlan(testing::hmAllGather(2, 2), request).value();
  ASSERT_EQ(sendAhead.config.sendAhead, 1);
  const std::string single = writePlanJson(sendAhead);
  EXPECT_NE(single.find("\"sendAhead\": 1"), std::string::npos);
  EXPECT_NE(single.find("\"tbAllocation\": \"single\""), std::string::npos);
  const Expected<Plan> back = readPlanJson(SourceText("plan.json", single));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_TRUE(*back == sendAhead);
}

}  // namespace
}  // namespace tuccl
