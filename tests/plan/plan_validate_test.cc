// The static checks of a plan (plan/plan_validate.h) and the pairing they rest on
// (plan/plan_pairing.h), on hand-built plans: each check accepts the good plan and names the
// first problem of a broken one.
#include "plan/plan_validate.h"

#include <gtest/gtest.h>

#include <string>

#include "plan/plan_pairing.h"
#include "sample_plans.h"

namespace tuccl {
namespace {

// The message of a failed check; "" when it passes.
std::string problemOf(const Status& status) { return status.ok() ? "" : status.message(); }

TEST(PlanValidate, SamplePlansAreValid) {
  for (const Plan& plan : {testing::twoRankAllGather(), testing::chainBroadcast()}) {
    EXPECT_EQ(problemOf(validatePlan(plan)), "");
    EXPECT_EQ(problemOf(checkPlanDeadlockFree(plan)), "");
    EXPECT_EQ(problemOf(checkPlanRaceFree(plan)), "");
  }
}

TEST(PlanValidate, NamesTheFirstStructuralProblem) {
  const Plan good = testing::twoRankAllGather();
  auto broken = [&](auto change) {
    Plan plan = good;
    change(plan);
    return problemOf(validatePlan(plan));
  };
  EXPECT_EQ(broken([](Plan& p) { p.ranks.pop_back(); }), "the plan lists 1 ranks, not nRanks");
  EXPECT_EQ(broken([](Plan& p) { std::swap(p.ranks[0], p.ranks[1]); }), "ranks are not listed in order at index 0");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[1].tbs[1].id = 4; }), "rank 1: tb ids are not 0, 1, ...");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[0].entries[1].peer = 2; }), "rank 0 tb 0 entry 1: peer out of range");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[0].entries[0].peer = 1; }),
            "rank 0 tb 0 entry 0: a local primitive must name its own rank, a remote one another");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[0].entries[0].count = 2; }), "rank 0 tb 0 entry 0: chunks out of the buffer");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[1].entries[0].subPipeline = 1; }),
            "rank 0 tb 1 entry 0: subPipeline out of range");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[1].entries[0].deps = {EntryRef{0, 2}}; }),
            "rank 0 tb 1 entry 0: dependency [0, 2] does not exist");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[0].entries[0].deps = {EntryRef{0, 1}}; }),
            "rank 0 tb 0 entry 0: depends on itself or a later entry of its TB");
  EXPECT_EQ(broken([](Plan& p) { p.ranks[0].tbs[0].entries[0].hasDependents = true; }),
            "rank 0 tb 0 entry 0: hasDependents is wrong");
  EXPECT_EQ(broken([](Plan& p) { p.config.nThreads = 0; }), "config.nThreads is out of range [1, 1024]");
  EXPECT_EQ(broken([](Plan& p) { p.config.nChannels = 0; }), "config.nChannels must be at least 1");
  EXPECT_EQ(broken([](Plan& p) { p.config.chunkSize = 0; }), "config.chunkSize must be positive");
  EXPECT_EQ(broken([](Plan& p) { p.bufferChunks[2] = -1; }), "scratch buffer has a negative size");
}

TEST(PlanValidate, RootMustFitTheCollective) {
  Plan broadcast = testing::chainBroadcast();
  for (int32_t root : {-1, 3, 7}) {
    broadcast.root = root;
    EXPECT_EQ(problemOf(validatePlan(broadcast)),
              "root " + std::to_string(root) + " of the Broadcast is out of range [0, 3)");
  }
  broadcast.collective = Collective::Reduce;
  broadcast.root = 3;
  EXPECT_EQ(problemOf(validatePlan(broadcast)), "root 3 of the Reduce is out of range [0, 3)");
  Plan allGather = testing::twoRankAllGather();
  allGather.root = 0;
  EXPECT_EQ(problemOf(validatePlan(allGather)), "AllGather has no root, but the plan names root 0 (must be -1)");
}

TEST(PlanValidate, SendsAndReceivesMustPairUp) {
  Plan unpaired = testing::twoRankAllGather();
  unpaired.ranks[1].tbs[1].entries.clear();  // rank 1 never receives from rank 0
  EXPECT_EQ(problemOf(validatePlan(unpaired)), "connection 0 -> 1: sends and receives do not pair up");
  EXPECT_FALSE(pairTransfers(unpaired).ok());
  Plan orphan = testing::twoRankAllGather();
  orphan.ranks[0].tbs[0].entries.pop_back();  // rank 0's send to rank 1
  EXPECT_EQ(problemOf(validatePlan(orphan)), "connection 0 -> 1: receives without sends");
  Plan mismatched = testing::twoRankAllGather();
  mismatched.ranks[1].tbs[1].entries[0].dstIndex = 1;
  EXPECT_EQ(problemOf(validatePlan(mismatched)), "connection 0 -> 1: send 0 (op 1) does not match receive 0 (op 1)");
}

// The k-th send of a connection pairs with its k-th receive in (subPipeline, op) order, wherever
// the entries sit in their TBs.
TEST(PlanPairing, PairsInSubPipelineAndOpOrder) {
  const Plan plan = testing::chainBroadcast();
  const Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  ASSERT_TRUE(transfers.ok()) << transfers.status().toString();
  ASSERT_EQ(transfers->size(), 2u);
  EXPECT_EQ((*transfers)[0].srcRank, 0);
  EXPECT_EQ((*transfers)[0].dstRank, 1);
  EXPECT_EQ((*transfers)[0].send, (EntryRef{0, 0}));
  EXPECT_EQ((*transfers)[0].recv, (EntryRef{0, 0}));
  EXPECT_EQ((*transfers)[1].srcRank, 1);
  EXPECT_EQ((*transfers)[1].send, (EntryRef{1, 0}));
  EXPECT_EQ((*transfers)[1].dstRank, 2);

  // Two transfers on one connection, the receives listed in the other order in two TBs.
  Plan two = testing::twoRankAllGather();
  PlanEntry secondSend = two.ranks[0].tbs[0].entries[1];
  secondSend.op = 5;
  secondSend.srcBuffer = secondSend.dstBuffer = BufferKind::Output;
  secondSend.dstIndex = secondSend.srcIndex = 1;
  two.ranks[0].tbs[0].entries.push_back(secondSend);
  PlanEntry secondRecv = secondSend;
  secondRecv.kind = PrimitiveKind::Recv;
  secondRecv.peer = 0;
  two.ranks[1].tbs.insert(two.ranks[1].tbs.begin() + 1, PlanTb{1, -1, 0, {secondRecv}});
  two.ranks[1].tbs[2].id = 2;
  const Expected<std::vector<PlanTransfer>> pairs = pairTransfers(two);
  ASSERT_TRUE(pairs.ok());
  ASSERT_EQ(pairs->size(), 3u);
  EXPECT_EQ((*pairs)[0].recv, (EntryRef{2, 0}));  // op 1
  EXPECT_EQ((*pairs)[1].recv, (EntryRef{1, 0}));  // op 5
}

TEST(PlanDeadlock, OppositeOrdersOnTwoRanksDeadlock) {
  // One TB per rank holding its send and its receive. Rank 0 sends op 1, then receives op 3;
  // rank 1 receives op 1, then sends op 3: fine. Rank 1 sending first waits for rank 0 to
  // receive, which waits for its own send, which waits for rank 1 to receive.
  Plan plan = testing::twoRankAllGather();
  for (PlanRank& rank : plan.ranks) {
    const PlanEntry send = rank.tbs[0].entries[1];
    const PlanEntry recv = rank.tbs[1].entries[0];
    PlanTb merged{0, 1 - rank.rank, 1 - rank.rank, {}};
    merged.entries = rank.rank == 0 ? std::vector<PlanEntry>{send, recv} : std::vector<PlanEntry>{recv, send};
    rank.tbs = {merged};
  }
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(plan)), "");
  EXPECT_EQ(problemOf(validatePlan(plan)), "");
  std::swap(plan.ranks[1].tbs[0].entries[0], plan.ranks[1].tbs[0].entries[1]);
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(plan)), "deadlock: rank 0 tb 0 entry 0 (send of op 1) waits in a cycle");
  EXPECT_NE(problemOf(validatePlan(plan)).find("deadlock"), std::string::npos);
}

// config.sendAhead: a send completes into the ring without its receive, while the connection
// holds at most that many chunks sent and not received.
TEST(PlanDeadlock, SendAheadModelsRingCredits) {
  // Both ranks send, then receive: a rendezvous deadlock, fine with a ring of one chunk.
  Plan plan = testing::twoRankAllGather();
  for (PlanRank& rank : plan.ranks) {
    PlanTb merged{0, 1 - rank.rank, 1 - rank.rank, {rank.tbs[0].entries[1], rank.tbs[1].entries[0]}};
    rank.tbs = {merged};
  }
  EXPECT_NE(problemOf(checkPlanDeadlockFree(plan)), "");
  plan.config.sendAhead = 1;
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(plan)), "");
  EXPECT_EQ(problemOf(validatePlan(plan)), "");
  plan.config.sendAhead = -1;
  EXPECT_EQ(problemOf(validatePlan(plan)), "config.sendAhead must not be negative");

  // Two sends each, then two receives: the second send waits for the credit of the first chunk,
  // which the peer returns only after its own two sends. A ring of two chunks holds both.
  Plan twice = testing::twoRankAllGather();
  twice.bufferChunks = {2, 4, 0};
  for (PlanRank& rank : twice.ranks) {
    const int32_t r = rank.rank;
    const int32_t peer = 1 - r;
    PlanTb tb{0, peer, peer, {}};
    for (int32_t j = 0; j < 2; ++j) {
      PlanEntry send = testing::sampleEntry(PrimitiveKind::Send, peer, 2 * r + j, SourceLoc{});
      send.srcIndex = j;
      send.dstIndex = 2 * r + j;
      tb.entries.push_back(send);
    }
    for (int32_t j = 0; j < 2; ++j) {
      PlanEntry recv = testing::sampleEntry(PrimitiveKind::Recv, peer, 2 * peer + j, SourceLoc{});
      recv.srcIndex = j;
      recv.dstIndex = 2 * peer + j;
      tb.entries.push_back(recv);
    }
    rank.tbs = {tb};
  }
  twice.config.sendAhead = 1;
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(twice)), "deadlock: rank 0 tb 0 entry 1 (send of op 1) waits in a cycle");
  twice.config.sendAhead = 2;
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(twice)), "");
  // One send of both chunks needs both slots as well.
  for (PlanRank& rank : twice.ranks) {
    auto& entries = rank.tbs[0].entries;
    entries[0].count = entries[2].count = 2;
    entries.erase(entries.begin() + 3);
    entries.erase(entries.begin() + 1);
  }
  EXPECT_EQ(problemOf(checkPlanDeadlockFree(twice)), "");
  twice.config.sendAhead = 1;
  EXPECT_NE(problemOf(checkPlanDeadlockFree(twice)), "");
}

TEST(PlanRace, RemovedDependencyIsARace) {
  Plan plan = testing::chainBroadcast();
  plan.ranks[1].tbs[1].entries[0].deps.clear();
  plan.ranks[1].tbs[0].entries[0].hasDependents = false;
  EXPECT_EQ(problemOf(validatePlan(plan)), "") << "structurally fine";
  EXPECT_EQ(problemOf(checkPlanRaceFree(plan)),
            "race on rank 1: rank 1 tb 0 entry 0 (recv, op 0) and rank 1 tb 1 entry 0 (send, op 1) touch output "
            "chunk 0 (one writes it) but nothing orders them");
}

}  // namespace
}  // namespace tuccl
