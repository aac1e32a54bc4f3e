// MSCCL XML files run for real: every valid corpus file (tests/data/msccl) is imported, proved,
// scheduled by every scheduler and its generated kernels run on the CPU, every element compared.
#include <gtest/gtest.h>

#include <string>

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
    "unusual_attributes.xml",
};

TEST(MscclVerify, EveryValidCorpusFileRunsCorrectlyOnTheCpu) {
  for (const char* name : kValidFiles) {
    const std::string path = std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name;
    Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(path);
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    const Algorithm& algorithm = imported->algorithm;
    ASSERT_TRUE(checkAlgorithm(algorithm).ok()) << name;
    for (Scheduler scheduler : {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel}) {
      PlanRequest request;
      request.scheduler = scheduler;
      const Plan plan = buildPlan(algorithm, request);
      VerifyOptions options;
      options.dataType = DataType::Int32;
      options.count = 1001;
      options.chunkSize = 64;
      options.inPlace = algorithm.inPlace;
      options.timeoutSeconds = 60;
      const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
      EXPECT_TRUE(report.ok) << name << " " << schedulerName(scheduler) << "\n" << report.summary();
      int32_t compared = 0;
      for (const RankVerifyReport& rank : report.ranks) compared += rank.compared ? 1 : 0;
      EXPECT_GT(compared, 0) << name;
    }
  }
}

}  // namespace
}  // namespace tuccl
