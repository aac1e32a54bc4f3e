// Kernel generation reads plans only: plans loaded from JSON text, with nothing but
// tuccl_kernelgen linked, become kernels that name their source lines and pass the CPU
// verification (the generated code run on host threads, every element of every rank checked).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kernelgen/codegen.h"
#include "kernelgen/compile.h"
#include "kernelgen/cpu_verify.h"
#include "plan/plan_json.h"
#include "tests/plan/sample_plans.h"

namespace tuccl {
namespace {

Plan loadPlan(const std::string& name, const std::string& text) {
  Expected<Plan> plan = readPlanJson(SourceText(name, text));
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  return plan.ok() ? std::move(plan).value() : Plan{};
}

VerifyOptions verifyOptions(DataType type, int64_t count, bool inPlace) {
  VerifyOptions options;
  options.dataType = type;
  options.count = count;
  options.chunkSize = 64;  // several micro-batches
  options.inPlace = inPlace;
  options.timeoutSeconds = 60;
  return options;
}

TEST(KernelgenFromJson, CommentsNameTheSourceLines) {
  const Plan plan = loadPlan("pair.json", writePlanJson(testing::twoRankAllGather()));
  // One kernel per rank, so each kernel's comments are its rank's.
  Targets oneKernelPerRank;
  oneKernelPerRank.kernelGen = KernelGenOptions{true, false};
  const std::vector<GeneratedKernel> kernels = compilePlan(plan, oneKernelPerRank).value().kernels.kernels;
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_NE(kernels[0].source.find("// Source: ag.resccl\n"), std::string::npos);
  EXPECT_NE(kernels[0].source.find("// Plan: AllGather \"pair\", 2 ranks, out-of-place"), std::string::npos);
  EXPECT_NE(kernels[0].source.find("// Schedule: hpds (task-level execution), connection-based TBs\n"),
            std::string::npos);
  // The protocol, the chunk size and the channels are run-time arguments: a plan that differs in
  // them alone has the same kernel sources, which NVRTC's cache then compiles once.
  Plan other = plan;
  other.config.protocol = Protocol::LL128;
  other.config.chunkSize = 4096;
  other.config.nChannels = 3;
  const std::vector<GeneratedKernel> same = compilePlan(other, oneKernelPerRank).value().kernels.kernels;
  ASSERT_EQ(same.size(), kernels.size());
  for (size_t k = 0; k < same.size(); ++k) EXPECT_EQ(same[k].source, kernels[k].source) << "kernel " << k;
  // Rank 0 runs op 0 (line 3), op 1 (line 4) and receives op 3 (line 6); rank 1 the others.
  for (const char* line : {"copy, op 0, step 0, sub-pipeline 0, ag.resccl:3:3", "send -> rank 1, op 1, step 0, sub-pipeline 0, ag.resccl:4:3",
                           "recv <- rank 1, op 3, step 0, sub-pipeline 0, ag.resccl:6:3"}) {
    EXPECT_NE(kernels[0].source.find(line), std::string::npos) << line;
  }
  EXPECT_NE(kernels[1].source.find("recv <- rank 0, op 1, step 0, sub-pipeline 0, ag.resccl:4:3"), std::string::npos);
  // Without a source name, no locations.
  Plan anonymous = plan;
  anonymous.sourceName.clear();
  const std::string text = compilePlan(anonymous, Targets{}).value().kernels.kernelOf(0).source;
  EXPECT_EQ(text.find("// Source:"), std::string::npos);
  EXPECT_EQ(text.find(":3:3"), std::string::npos);
}

TEST(KernelgenFromJson, HandWrittenPlanVerifiesOnTheCpu) {
  const Plan plan = loadPlan("pair.json", writePlanJson(testing::twoRankAllGather()));
  const CpuVerifyReport report = verifyPlanOnCpu(plan, verifyOptions(DataType::Float32, 1000, false));
  EXPECT_TRUE(report.ok) << report.summary();
  ASSERT_EQ(report.ranks.size(), 2u);
  EXPECT_GT(report.microBatches, 1);
}

// A plan tuccl-compile wrote in format version 1 (ring AllGather of 3 ranks, in place).
TEST(KernelgenFromJson, VersionOnePlanVerifiesOnTheCpu) {
  std::ifstream in(std::string(TUCCL_SOURCE_DIR) + "/tests/data/plan/v1_ring_allgather_3.json");
  std::stringstream text;
  text << in.rdbuf();
  const Plan plan = loadPlan("v1_ring_allgather_3.json", text.str());
  ASSERT_EQ(plan.nRanks, 3);
  for (bool inPlace : {true, false}) {
    const CpuVerifyReport report = verifyPlanOnCpu(plan, verifyOptions(DataType::BFloat16, 777, inPlace));
    EXPECT_TRUE(report.ok) << (inPlace ? "in place\n" : "out of place\n") << report.summary();
    ASSERT_EQ(report.ranks.size(), 3u);
    for (const RankVerifyReport& rank : report.ranks) EXPECT_TRUE(rank.ok) << rank.rank;
  }
}

}  // namespace
}  // namespace tuccl
