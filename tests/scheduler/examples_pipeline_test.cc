// The scheduler on the ResCCLang examples (examples/algorithms/*.resccl) through compileResccl.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "lang/resccl.h"
#include "oracles.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "plan/plan_validate.h"
#include "scheduler/lowering.h"
#include "scheduler/tb_allocation.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

Algorithm compileExample(const std::string& file, int32_t nodes, int32_t gpus) {
  const SourceText source = readSourceFile(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + file);
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", nodes * gpus}, {"GPUPerNode", gpus}};
  return compileResccl(source, options).value();
}

auto opKey(const Operation& op) {
  return std::tuple(op.srcRank, op.dstRank, op.srcIndex, op.dstIndex, op.step, op.count, static_cast<int>(op.kind));
}

TEST(Examples, HmProgramsMatchTheTestBuilders) {
  for (auto [nodes, gpus] : {std::pair{2, 4}, std::pair{4, 4}, std::pair{2, 8}}) {
    for (int which = 0; which < 2; ++which) {
      const Algorithm program = compileExample(which == 0 ? "hm_allreduce.resccl" : "hm_allgather.resccl", nodes, gpus);
      const Algorithm built = which == 0 ? testing::hmAllReduce(nodes, gpus) : testing::hmAllGather(nodes, gpus);
      std::vector<decltype(opKey(Operation{}))> a, b;
      for (const Operation& op : program.ops) a.push_back(opKey(op));
      for (const Operation& op : built.ops) b.push_back(opKey(op));
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      EXPECT_EQ(a, b) << which << " " << nodes << "x" << gpus;
    }
  }
}

TEST(Examples, EveryExampleCompilesToAValidPlan) {
  for (const char* file : {"hm_allreduce.resccl", "hm_allgather.resccl", "ring_allreduce.resccl", "ring_allgather.resccl",
                           "direct_allgather.resccl"}) {
    const Algorithm algorithm = compileExample(file, 2, 4);
    const Dag dag = buildDependencyDag(algorithm);
    const Pipeline pipeline = scheduleHpds(dag);
    ASSERT_TRUE(validatePipeline(dag, pipeline).ok()) << file;
    const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline);
    const Plan plan = lowerToPlan(algorithm, dag, pipeline, allocation);
    const Status valid = validatePlan(plan);
    ASSERT_TRUE(valid.ok()) << file << ": " << valid.toString();
    const auto [memory, error] = testing::runPlanRandomly(algorithm, plan, 7);
    EXPECT_EQ(error, "") << file;
    EXPECT_TRUE(memory == testing::runInStepOrder(algorithm)) << file;
  }
}

}  // namespace
}  // namespace tuccl
