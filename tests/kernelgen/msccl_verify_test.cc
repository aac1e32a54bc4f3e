// MSCCL XML files run for real: every valid corpus file (tests/data/msccl) is imported, proved,
// scheduled by every scheduler (and run as written: its own TBs and channels) and its generated
// kernels run on the CPU, every element compared.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernelgen/cpu_verify.h"
#include "lang/msccl_xml.h"
#include "lang/semantic_check.h"
#include "scheduler/plan_builder.h"

namespace tuccl {
namespace {

const char* const kValidFiles[] = {
    "ring_allreduce_1ch.xml",   "ring_allreduce_2ch.xml",        "ring_allreduce_rrs.xml",
    "allgather_inplace.xml",    "allgather_outofplace.xml",      "allgather_inferred.xml",
    "reducescatter_inplace.xml", "reduce_scatter_outofplace.xml", "alltoall_copy.xml",
    "broadcast_chain.xml",      "reduce_chain.xml",              "local_tb_and_nops.xml",
    "unusual_attributes.xml",   "ring_allreduce_io_views.xml",   "allgather_inplace_selfcopy.xml",
    "allgather_chan_minus_one.xml", "send_then_reuse.xml",
};

TEST(MscclVerify, EveryValidCorpusFileRunsCorrectlyOnTheCpu) {
  for (const char* name : kValidFiles) {
    const std::string path = std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name;
    Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(path);
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    const Algorithm& algorithm = imported->algorithm;
    ASSERT_TRUE(checkAlgorithm(algorithm).ok()) << name;
    for (Scheduler scheduler :
         {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel, Scheduler::AsWritten}) {
      PlanRequest request;
      request.scheduler = scheduler;
      request.mscclSchedule = &imported->schedule;
      const Plan plan = buildPlan(algorithm, request).value();
      VerifyOptions options;
      options.dataType = DataType::Int32;
      options.count = 1001;
      options.chunkSize = 64;
      options.inPlace = algorithm.inPlace;
      options.timeoutSeconds = 60;
      // Buffered sends (an as-written file's order may need them) need rings of sendAhead slots
      // per micro-batch.
      options.stagingSlots = 64;
      const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
      EXPECT_TRUE(report.ok) << name << " " << schedulerName(scheduler) << "\n" << report.summary();
      int32_t compared = 0;
      for (const RankVerifyReport& rank : report.ranks) compared += rank.compared ? 1 : 0;
      EXPECT_GT(compared, 0) << name;
    }
  }
}

// One plan TB per <tb> of the file (plus one for <copy> elements), each with the entries of its
// steps in the file's order.
TEST(MscclVerify, AsWrittenKeepsTheFilesThreadBlocksAndStepOrder) {
  for (const char* name : kValidFiles) {
    const std::string path = std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name;
    Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(path);
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    PlanRequest request;
    request.scheduler = Scheduler::AsWritten;
    request.mscclSchedule = &imported->schedule;
    Expected<Plan> plan = buildPlan(imported->algorithm, request);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status().toString();
    EXPECT_EQ(plan->scheduler, Scheduler::AsWritten);
    EXPECT_EQ(plan->executionLevel, ExecutionLevel::Algorithm);
    for (int32_t r = 0; r < plan->nRanks; ++r) {
      const auto& fileTbs = imported->schedule.ranks[r];
      const auto& tbs = plan->ranks[r].tbs;
      ASSERT_GE(tbs.size(), fileTbs.size()) << name << " rank " << r;
      ASSERT_LE(tbs.size(), fileTbs.size() + 1) << name << " rank " << r;
      for (size_t b = 0; b < fileTbs.size(); ++b) {
        std::vector<int32_t> fileOps;
        for (const MscclScheduleStep& step : fileTbs[b].steps) {
          for (int8_t k = 0; k < step.nOps; ++k) fileOps.push_back(step.ops[static_cast<size_t>(k)]);
        }
        std::vector<int32_t> planOps;
        for (const PlanEntry& entry : tbs[b].entries) planOps.push_back(entry.op);
        EXPECT_EQ(planOps, fileOps) << name << " rank " << r << " tb " << b;
        for (const PlanEntry& entry : tbs[b].entries) {
          if (entry.kind == PrimitiveKind::Send) {
            EXPECT_EQ(entry.peer, fileTbs[b].sendPeer) << name;
          }
          if (isReceive(entry.kind)) {
            EXPECT_EQ(entry.peer, fileTbs[b].recvPeer) << name;
          }
        }
      }
    }
  }
}

TEST(MscclVerify, AsWrittenWithoutAnXmlScheduleIsAClearError) {
  const std::string path = std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/ring_allreduce_1ch.xml";
  Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(path);
  ASSERT_TRUE(imported.ok()) << imported.status().toString();
  PlanRequest request;
  request.scheduler = Scheduler::AsWritten;
  Expected<Plan> plan = buildPlan(imported->algorithm, request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(plan.status().message().find(kAsWrittenNeedsXml), std::string::npos);

  // A schedule of another file is refused, not lowered into a wrong plan.
  Expected<ImportedMscclAlgorithm> other =
      importMscclXmlFile(std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/alltoall_copy.xml");
  ASSERT_TRUE(other.ok());
  request.mscclSchedule = &other->schedule;
  plan = buildPlan(imported->algorithm, request);
  EXPECT_FALSE(plan.ok());
}

}  // namespace
}  // namespace tuccl
