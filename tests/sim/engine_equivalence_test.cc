// The engine of simulatePlan against the straightforward reference engine (simulatePlanReference):
// the same completion time, TB timelines, link traffic and errors on random plans (random
// transfers, TBs, dependencies, execution levels, channels, micro-batches, cost models; some
// deadlock) and on the example algorithms at 2 to 4 nodes under every scheduler.
//
// Exact where the engines do the same arithmetic: one channel, or a trace (which simulates every
// replica). With several channels and no trace the engine simulates one replica whose flows stand
// for nChannels identical ones; a resource then subtracts k x level once instead of level k
// times, so results may differ in the last bits: within 1e-9 relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/reference_simulator.h"
#include "sim/simulator.h"
#include "sim_test_support.h"

namespace tuccl {
namespace {

using testing::bareCostModel;
using testing::examplePath;

bool close(double a, double b, double relative) {
  return std::abs(a - b) <= relative * std::max({1.0, std::abs(a), std::abs(b)});
}

void expectSameResult(const Expected<SimResult>& got, const Expected<SimResult>& want, bool exact) {
  ASSERT_EQ(got.ok(), want.ok()) << (got.ok() ? want.status().message() : got.status().message());
  if (!want.ok()) {
    EXPECT_EQ(got.status().code(), want.status().code());
    EXPECT_EQ(got.status().message(), want.status().message());
    return;
  }
  const double tolerance = exact ? 0.0 : 1e-9;
  const SimResult& a = *got;
  const SimResult& b = *want;
  EXPECT_TRUE(close(a.timeUs, b.timeUs, tolerance)) << a.timeUs << " vs " << b.timeUs;
  EXPECT_EQ(a.slices, b.slices);
  EXPECT_EQ(a.stagingSlots, b.stagingSlots);
  EXPECT_EQ(a.transfers, b.transfers);
  ASSERT_EQ(a.tbs.size(), b.tbs.size());
  for (size_t t = 0; t < a.tbs.size(); ++t) {
    SCOPED_TRACE("tb " + std::to_string(t));
    EXPECT_EQ(a.tbs[t].replica, b.tbs[t].replica);
    EXPECT_EQ(a.tbs[t].rank, b.tbs[t].rank);
    EXPECT_EQ(a.tbs[t].tb, b.tbs[t].tb);
    EXPECT_EQ(a.tbs[t].invocations, b.tbs[t].invocations);
    EXPECT_TRUE(close(a.tbs[t].busyUs, b.tbs[t].busyUs, tolerance));
    EXPECT_TRUE(close(a.tbs[t].firstUs, b.tbs[t].firstUs, tolerance));
    EXPECT_TRUE(close(a.tbs[t].lastUs, b.tbs[t].lastUs, tolerance));
  }
  ASSERT_EQ(a.rankEndUs.size(), b.rankEndUs.size());
  for (size_t r = 0; r < a.rankEndUs.size(); ++r) EXPECT_TRUE(close(a.rankEndUs[r], b.rankEndUs[r], tolerance));
  ASSERT_EQ(a.resources.size(), b.resources.size());
  for (size_t r = 0; r < a.resources.size(); ++r) {
    SCOPED_TRACE("resource " + std::to_string(r));
    EXPECT_TRUE(close(a.resources[r].bytes, b.resources[r].bytes, tolerance));
    EXPECT_TRUE(close(a.resources[r].busyUs, b.resources[r].busyUs, tolerance));
    EXPECT_TRUE(close(a.resources[r].firstUs, b.resources[r].firstUs, tolerance));
    EXPECT_TRUE(close(a.resources[r].lastUs, b.resources[r].lastUs, tolerance));
  }
  ASSERT_EQ(a.trace.size(), b.trace.size());
  EXPECT_EQ(a.traceTruncated, b.traceTruncated);
  for (size_t i = 0; i < a.trace.size(); ++i) {
    EXPECT_EQ(a.trace[i].tb, b.trace[i].tb);
    EXPECT_EQ(a.trace[i].resource, b.trace[i].resource);
    EXPECT_EQ(a.trace[i].beginUs, b.trace[i].beginUs);
    EXPECT_EQ(a.trace[i].endUs, b.trace[i].endUs);
    EXPECT_EQ(a.trace[i].kind, b.trace[i].kind);
    EXPECT_EQ(a.trace[i].peer, b.trace[i].peer);
    EXPECT_EQ(a.trace[i].op, b.trace[i].op);
    EXPECT_EQ(a.trace[i].slice, b.trace[i].slice);
  }
}

void compareEngines(const Plan& plan, const Network& network, const SimOptions& options) {
  const bool exact = plan.config.nChannels <= 1 || options.recordTrace;
  expectSameResult(simulatePlan(plan, network, options), simulatePlanReference(plan, network, options), exact);
}

/// Random transfers between random ranks, each side appended to a random TB of its rank, with
/// random dependencies on entries already placed in other TBs of the rank (which may deadlock).
Plan randomPlan(std::mt19937& random, int32_t nRanks) {
  auto pick = [&](int32_t n) { return static_cast<int32_t>(std::uniform_int_distribution<int32_t>(0, n - 1)(random)); };
  Plan plan;
  plan.collective = Collective::AllGather;
  plan.algorithm = "random";
  plan.nRanks = nRanks;
  plan.bufferChunks = {2, 2, 0};
  plan.config.chunkSize = 1 << (14 + pick(4));
  plan.config.nChannels = 1 + pick(3);
  plan.config.protocol = static_cast<Protocol>(pick(kProtocols));
  plan.config.nThreads = 128 << pick(3);
  plan.scheduler = Scheduler::Hpds;
  const ExecutionLevel levels[] = {ExecutionLevel::Task, ExecutionLevel::Algorithm, ExecutionLevel::Stage};
  plan.executionLevel = levels[pick(3)];
  plan.tbAllocation = TbPolicy::StateBased;
  plan.subPipelines = 3;
  plan.ranks.resize(nRanks);
  const int32_t tbsPerRank = 1 + pick(3);
  for (int32_t r = 0; r < nRanks; ++r) {
    plan.ranks[r].rank = r;
    for (int32_t t = 0; t < tbsPerRank; ++t) plan.ranks[r].tbs.push_back(PlanTb{t, -2, -2, {}});
  }
  auto place = [&](int32_t rank, PlanEntry entry) {
    std::vector<PlanTb>& tbs = plan.ranks[rank].tbs;
    const int32_t tb = pick(tbsPerRank);
    for (int32_t other = 0; other < tbsPerRank; ++other) {
      if (other == tb || tbs[other].entries.empty() || pick(3) != 0) continue;
      const int32_t dep = pick(static_cast<int32_t>(tbs[other].entries.size()));
      entry.deps.push_back(EntryRef{other, dep});
      tbs[other].entries[dep].hasDependents = true;
    }
    entry.subPipeline = pick(3);
    tbs[tb].entries.push_back(entry);
  };
  const int32_t transfers = 2 + pick(3 * nRanks);
  for (int32_t i = 0; i < transfers; ++i) {
    const int32_t src = pick(nRanks);
    const int32_t dst = (src + 1 + pick(nRanks - 1)) % nRanks;
    PlanEntry send;
    send.kind = PrimitiveKind::Send;
    send.peer = dst;
    send.op = i;
    send.count = 1 + pick(2);
    PlanEntry receive = send;
    receive.kind = pick(2) == 0 ? PrimitiveKind::Recv : PrimitiveKind::RecvReduceCopy;
    receive.peer = src;
    // Mostly in op order, so most plans finish; sometimes the receive first, which may deadlock.
    if (pick(4) == 0) {
      place(dst, receive);
      place(src, send);
    } else {
      place(src, send);
      place(dst, receive);
    }
  }
  return plan;
}

TEST(EngineEquivalence, RandomPlansGiveTheReferenceResults) {
  const Network box = testing::nvswitchBox(4, 100.0, 0.35);
  const Network sharedNic = testing::twoNodesSharedNic(25.0);
  const Network twoByFour = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  const Network* networks[] = {&box, &sharedNic, &twoByFour};
  std::mt19937 random(20261123);
  int finished = 0, deadlocked = 0;
  for (int trial = 0; trial < 240; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const Network& network = *networks[trial % 3];
    const Plan plan = randomPlan(random, network.nRanks());
    SimOptions options;
    options.messageBytes = static_cast<int64_t>(std::uniform_int_distribution<int64_t>(1, 8 << 20)(random));
    options.cost = trial % 2 == 0 ? defaultCostModel() : bareCostModel();
    options.recordTrace = trial % 5 == 0;
    compareEngines(plan, network, options);
    if (simulatePlanReference(plan, network, options).ok()) {
      ++finished;
    } else {
      ++deadlocked;
    }
    if (::testing::Test::HasFailure()) break;
  }
  // The draw covers both outcomes.
  EXPECT_GT(finished, 100);
  EXPECT_GT(deadlocked, 0);
}

TEST(EngineEquivalence, ExamplesAtTwoToFourNodesGiveTheReferenceResults) {
  struct Shape {
    const char* topo;
    int32_t ranks;
    int32_t perNode;
  };
  const Shape shapes[] = {{"preset:resccl-a100:nodes=2,gpus=4", 8, 4},
                          {"preset:resccl-a100:nodes=4,gpus=4", 16, 4},
                          {"preset:resccl-a100:nodes=2", 16, 8}};
  const char* examples[] = {"hm_allreduce", "hm_allgather", "ring_allreduce"};
  const Scheduler schedulers[] = {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel,
                                  Scheduler::StageLevel};
  for (const Shape& shape : shapes) {
    const Network network = loadNetwork(shape.topo).value();
    for (const char* example : examples) {
      const Algorithm algorithm = loadRescclAlgorithm(examplePath(example), shape.ranks, shape.perNode).value();
      for (const Scheduler scheduler : schedulers) {
        for (const int32_t channels : {1, 2}) {
          SCOPED_TRACE(std::string(shape.topo) + " " + example + " " + std::string(schedulerName(scheduler)) + " x" +
                       std::to_string(channels));
          PlanRequest request;
          request.scheduler = scheduler;
          request.config.nChannels = channels;
          request.config.chunkSize = 256 << 10;
          const Plan plan = buildPlan(algorithm, request).value();
          for (const int64_t bytes : {int64_t{1} << 20, int64_t{48} << 20}) {
            SimOptions options;
            options.messageBytes = bytes;
            compareEngines(plan, network, options);
          }
        }
      }
    }
  }
}

// A trace records every replica's spans; at 4 channels it is the reference's, span for span.
TEST(EngineEquivalence, TracesAreTheReferences) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  const Algorithm hm = loadRescclAlgorithm(examplePath("hm_allreduce"), 8, 4).value();
  PlanRequest request;
  request.config.nChannels = 4;
  request.config.chunkSize = 512 << 10;
  const Plan plan = buildPlan(hm, request).value();
  SimOptions options;
  options.messageBytes = 32 << 20;
  options.recordTrace = true;
  compareEngines(plan, network, options);
  options.maxTraceSpans = 100;
  compareEngines(plan, network, options);
}

}  // namespace
}  // namespace tuccl
