// The simulator reads plans only: a plan file of the previous format (version 1) and its
// version-2 rewrite, loaded from JSON with nothing but tuccl_sim linked, simulate to the closed
// form of a pipelined ring AllGather.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "plan/plan_json.h"
#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "sim_test_support.h"

namespace tuccl {
namespace {

Plan loadPlan(const std::string& name, const std::string& text) {
  Expected<Plan> plan = readPlanJson(SourceText(name, text));
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  return plan.ok() ? std::move(plan).value() : Plan{};
}

// Ring AllGather of 3 ranks, scheduled by HPDS (tuccl-compile, plan format version 1).
Plan versionOneRing() {
  std::ifstream in(std::string(TUCCL_SOURCE_DIR) + "/tests/data/plan/v1_ring_allgather_3.json");
  std::stringstream text;
  text << in.rdbuf();
  return loadPlan("v1_ring_allgather_3.json", text.str());
}

TEST(SimulatorFromJson, VersionOneRingMatchesItsClosedForm) {
  constexpr int n = 3;
  Plan plan = versionOneRing();
  ASSERT_EQ(plan.nRanks, n);
  plan.config.nChannels = 1;
  plan.config.chunkSize = 1 << 20;
  const Network box = testing::nvswitchBox(n, 300.0, 0.35);
  const int64_t bytes = int64_t{n} * (32 << 20);  // 32 MiB per chunk: 32 micro-batches
  SimOptions options;
  options.messageBytes = bytes;
  const SimResult result = simulatePlan(plan, box, options).value();
  const double micro = 32, launch = 8.4, sync = 1.0, tau = (1 << 20) / 24e3, lambda = 0.7 + 3.4;
  ASSERT_EQ(result.slices, micro);
  const double expected = launch + (n - 1) * micro * (sync + tau) + lambda + sync;
  EXPECT_NEAR(result.timeUs / expected, 1.0, 0.01) << result.timeUs << " vs " << expected;
  EXPECT_GE(result.timeUs, collectiveLowerBound(plan.collective, bytes, box).timeUs);
  const Metrics metrics = computeMetrics(plan, box, result);
  EXPECT_NEAR(metrics.busBwGBps, metrics.algBwGBps * (n - 1) / n, 1e-9);  // AllGather's factor

  // The version-2 rewrite of the same plan simulates identically.
  const Plan rewritten = loadPlan("v2.json", writePlanJson(plan));
  EXPECT_EQ(simulatePlan(rewritten, box, options).value().timeUs, result.timeUs);
}

TEST(SimulatorFromJson, ProtocolOfThePlanSetsTheLaunchLatency) {
  Plan plan = versionOneRing();
  const Network box = testing::nvswitchBox(3, 300.0, 0.35);
  SimOptions options;
  options.messageBytes = 3 << 10;
  const CostModel cost = defaultCostModel();
  for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    plan.config.protocol = protocol;
    const Plan loaded = loadPlan("p.json", writePlanJson(plan));
    EXPECT_EQ(simulatePlan(loaded, box, options).value().launchUs, cost.protocol(protocol).baseLatencyUs) << protocolName(protocol);
  }
}

}  // namespace
}  // namespace tuccl
