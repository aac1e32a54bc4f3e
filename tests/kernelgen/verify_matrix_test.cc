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
//
// Those runs use the Simple protocol; each plan also runs in LL and in LL128 (the kernels take
// the protocol at run time: the same build), the 54 combinations of datatype x placement x
// (size, micro-batches) pair dealt over the plans (one or two per plan), so each protocol covers
// all of them.
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

// One verification: `pair` picks the (size, micro-batches) pair of 3 x 3.
void verifyRun(const testing::CompiledExample& example, const MatrixCase& c, DataType type, bool inPlace, int pair,
               Protocol protocol) {
  const int64_t sizes[] = {3072, 1237, 5};
  const int64_t microBatchTargets[] = {1, 3, 24};
  const int32_t k = example.algorithm.chunksPerRank();
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
  options.protocol = protocol;
  CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
  EXPECT_TRUE(report.ok) << c.algorithm << " " << c.scheduler << (c.stateBased ? " state" : " connection") << " root "
                         << c.root << " " << dataTypeName(type) << " count " << count << " chunkSize "
                         << options.chunkSize << (inPlace ? " in-place" : " out-of-place") << " "
                         << protocolName(protocol) << "\n"
                         << report.summary();
  if (count >= k && target > 1) {
    EXPECT_GT(report.microBatches, 1);
  }
}

class VerifyMatrix : public ::testing::TestWithParam<int> {};

TEST_P(VerifyMatrix, EveryRankEveryElement) {
  const MatrixCase c = matrixCases()[static_cast<size_t>(GetParam())];
  const auto& example = testing::compileExample(c.algorithm, c.scheduler, c.stateBased, 8, 4, c.root);
  ASSERT_EQ(example.plan.root, c.root);
  struct Run {
    DataType type;
    bool inPlace;
    int pair;  ///< (size, micro-batches) pair
    Protocol protocol;
  };
  const DataType types[] = {DataType::Float32, DataType::BFloat16, DataType::Int32};
  std::vector<Run> runs;
  for (DataType type : types) {
    for (bool inPlace : {true, false}) {
      runs.push_back({type, inPlace, static_cast<int>((GetParam() * 6 + runs.size()) % 9), Protocol::Simple});
    }
  }
  // The 54 combinations are dealt over the plans (so each protocol runs every one); LL128 runs a
  // plan's combination shifted by half, so a plan's two runs differ.
  const int plans = static_cast<int>(matrixCases().size());
  for (int combination = GetParam(); combination < 54; combination += plans) {
    for (auto [protocol, shift] : {std::pair{Protocol::LL, 0}, std::pair{Protocol::LL128, 27}}) {
      const int dealt = (combination + shift) % 54;
      runs.push_back({types[dealt % 3], (dealt / 3) % 2 == 0, dealt / 6, protocol});
    }
  }
  for (const Run& r : runs) verifyRun(example, c, r.type, r.inPlace, r.pair, r.protocol);
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
