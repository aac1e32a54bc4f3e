#include "sim/metrics.h"

#include <gtest/gtest.h>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/trace.h"
#include "sim_test_support.h"

namespace tuccl {
namespace {

TEST(Metrics, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllReduce, 8), 2 * 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::ReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::Broadcast, 8), 1.0);
}

TEST(Metrics, HierarchicalMeshRunIsWellFormed) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  const Algorithm hm = loadRescclAlgorithm(testing::examplePath("hm_allreduce"), 8, 4).value();
  PlanRequest request;
  request.config.nChannels = 1;
  const Plan plan = buildPlan(hm, request).value();
  SimOptions options;
  options.messageBytes = 64 << 20;
  options.recordTrace = true;
  const SimResult result = simulatePlan(plan, network, options).value();
  const Metrics metrics = computeMetrics(plan, network, result);
  EXPECT_GT(metrics.timeUs, 0);
  EXPECT_NEAR(metrics.algBwGBps, (64 << 20) / metrics.timeUs / 1e3, 1e-9);
  EXPECT_GT(metrics.efficiency, 0);
  EXPECT_LE(metrics.efficiency, 1);
  EXPECT_EQ(metrics.minTbsPerRank, 8);  // ResCCL Table 3: 8 TBs per rank on 2x4 (one replica)
  EXPECT_EQ(metrics.maxTbsPerRank, 8);
  EXPECT_GT(metrics.tbBusyMean, 0);
  EXPECT_LE(metrics.tbIdleMax, 1);
  EXPECT_GT(metrics.usedLinks, 0);
  EXPECT_LE(metrics.linkUtilisationMax, 1 + 1e-9);
  EXPECT_GE(metrics.bubbleFraction, 0);
  EXPECT_LT(metrics.bubbleFraction, 1);
  EXPECT_NE(formatMetrics(metrics).find("efficiency"), std::string::npos);

  // The trace: one span per primitive invocation, tracks named, links on their own process.
  const nlohmann::json trace = chromeTrace(plan, network, result);
  ASSERT_TRUE(trace.contains("traceEvents"));
  int64_t primitives = 0, links = 0, names = 0;
  for (const auto& event : trace["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph"));
    if (event["ph"] == "M") ++names;
    if (event["ph"] == "X" && event["cat"] == "link") {
      ++links;
      EXPECT_EQ(event["pid"], plan.nRanks);
    } else if (event["ph"] == "X") {
      ++primitives;
      EXPECT_GE(event["dur"].get<double>(), 0);
    }
  }
  int64_t invocations = 0;
  for (const SimTb& tb : result.tbs) invocations += tb.invocations;
  EXPECT_EQ(primitives, invocations);
  EXPECT_GT(links, 0);
  EXPECT_GT(names, plan.nRanks);
  EXPECT_FALSE(trace["otherData"]["truncated"].get<bool>());
}

}  // namespace
}  // namespace tuccl
