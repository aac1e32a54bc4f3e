// The verification matrix: every example algorithm under HPDS and each baseline
// (round-robin, algorithm-level, stage-level; plus connection-based TBs under HPDS), run on the
// CPU from the generated kernels with random inputs (never zero, fresh per run) and poisoned
// outputs; every element of every rank compared with a reference computed from the inputs
// (exact for integers, relative tolerance in float64 for floats).
//
// Per plan: float32, bfloat16 and int32, each in place and out of place (6 runs); the
// (size, micro-batches) pair rotates over 3 sizes (a multiple of every chunk count, one leaving
// remainders, one smaller than the chunk count so chunks are empty) x (1, a few, many
// micro-batches), so every plan sees 6 of the 9 pairs and the suite covers all of them. The
// Broadcast and Reduce examples take a different root in each of their five plans (0, 3, 6, 1, 4).
#include <gtest/gtest.h>

#include "kernelgen/cpu_verify.h"
#include "plan_fixtures.h"

namespace tuccl {
namespace {

struct MatrixCase {
  std::string algorithm;
  std::string scheduler;
  bool stateBased = true;
  int32_t root = -1;  ///< Broadcast and Reduce: the program's Root
};

std::vector<MatrixCase> matrixCases() {
  std::vector<MatrixCase> cases;
  for (const std::string& name : testing::exampleAlgorithms()) {
    for (const std::string& scheduler : testing::schedulers()) cases.push_back({name, scheduler, true});
    cases.push_back({name, "hpds", false});
  }
  for (const std::string& name : testing::rootedExampleAlgorithms()) {
    int32_t plans = 0;
    auto root = [&plans] { return plans++ * 3 % 8; };
    for (const std::string& scheduler : testing::schedulers()) cases.push_back({name, scheduler, true, root()});
    cases.push_back({name, "hpds", false, root()});
  }
  return cases;
}

class VerifyMatrix : public ::testing::TestWithParam<int> {};

TEST_P(VerifyMatrix, EveryRankEveryElement) {
  const MatrixCase c = matrixCases()[static_cast<size_t>(GetParam())];
  const auto& example = testing::compileExample(c.algorithm, c.scheduler, c.stateBased, 8, 4, c.root);
  ASSERT_EQ(example.plan.root, c.root);
  const int64_t sizes[] = {3072, 1237, 5};
  const int64_t microBatchTargets[] = {1, 3, 24};
  const DataType types[] = {DataType::Float32, DataType::BFloat16, DataType::Int32};
  const int32_t k = example.algorithm.chunksPerRank();
  int run = 0;
  for (DataType type : types) {
    for (bool inPlace : {true, false}) {
      const int pair = (GetParam() * 6 + run++) % 9;
      const int64_t count = sizes[pair / 3];
      const int64_t target = microBatchTargets[pair % 3];
      const int64_t elemSize = type == DataType::BFloat16 ? 2 : 4;
      const int64_t chunkElems = (count + k - 1) / k;
      const int64_t sliceElems = std::max<int64_t>(1, (chunkElems + target - 1) / target);
      VerifyOptions options;
      options.dataType = type;
      options.count = count;
      options.chunkSize = sliceElems * elemSize;
      options.inPlace = inPlace;
      options.timeoutSeconds = 60;
      CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
      EXPECT_TRUE(report.ok) << c.algorithm << " " << c.scheduler << (c.stateBased ? " state" : " connection")
                             << " root " << c.root << " "
                             << dataTypeName(type) << " count " << count << " chunkSize " << options.chunkSize
                             << (inPlace ? " in-place" : " out-of-place") << "\n"
                             << report.summary();
      if (count >= k && target > 1) {
        EXPECT_GT(report.microBatches, 1);
      }
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<int>& info) {
  const MatrixCase c = matrixCases()[static_cast<size_t>(info.param)];
  std::string name = c.algorithm + "_" + c.scheduler + (c.stateBased ? "" : "_connection");
  if (c.root >= 0) name += "_root" + std::to_string(c.root);
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Examples, VerifyMatrix, ::testing::Range(0, static_cast<int>(matrixCases().size())), caseName);

}  // namespace
}  // namespace tuccl
