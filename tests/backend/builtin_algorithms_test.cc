// The built-in algorithms libtuccl embeds: each one is the example program of its name, is proved
// by the semantic checker for 2..8 ranks and every root, and its plan, scheduled as the plan cache
// schedules it, computes the collective on the CPU (the generated kernels, every rank and element
// checked against a reference) for counts 0, 1 and 1237 — which no chunk count divides — in
// place and out of place, with micro-batches of 37 elements.
#include "backend/builtin_algorithms.h"

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "kernelgen/cpu_verify.h"
#include "lang/load_algorithm.h"
#include "lang/semantic_check.h"

namespace tuccl::backend {
namespace {

constexpr int32_t kMinRanks = 2;
constexpr int32_t kMaxRanks = 8;

std::string readExample(std::string_view fileName) {
  std::ifstream in(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + std::string(fileName));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The built-in program at a shape, as the plan cache loads it.
Expected<Algorithm> loadBuiltin(const BuiltinAlgorithm& builtin, const AlgorithmShape& shape) {
  Expected<LoadedAlgorithm> loaded =
      loadProvedAlgorithm(SourceText(std::string(builtin.fileName), std::string(builtin.text)),
                          algorithmParameters(builtin.collective, shape, builtin.scratchRankPower));
  if (!loaded) return loaded.status();
  return std::move(loaded->algorithm);
}

Expected<Algorithm> loadBuiltin(const BuiltinAlgorithm& builtin, int32_t nRanks, int32_t root) {
  return loadBuiltin(builtin, AlgorithmShape{nRanks, 1, root, 1});
}

// The roots a collective is checked at: every rank for Broadcast and Reduce, none (-1) otherwise.
std::vector<int32_t> rootsOf(Collective collective, int32_t nRanks) {
  if (!hasRoot(collective)) return {-1};
  std::vector<int32_t> roots;
  for (int32_t root = 0; root < nRanks; ++root) roots.push_back(root);
  return roots;
}

TEST(BuiltinAlgorithms, AreTheExamplePrograms) {
  ASSERT_EQ(builtinAlgorithms().size(), 12u);
  for (const BuiltinAlgorithm& builtin : builtinAlgorithms()) {
    EXPECT_EQ(builtin.text, readExample(builtin.fileName)) << builtin.fileName;
    EXPECT_EQ(findBuiltinAlgorithm(builtin.family, builtin.collective), &builtin);
  }
  EXPECT_EQ(findBuiltinAlgorithm("RING", Collective::AllReduce)->fileName, "ring_allreduce.resccl");
  EXPECT_EQ(findBuiltinAlgorithm("binomial", Collective::AllReduce), nullptr);
  EXPECT_EQ(findBuiltinAlgorithm("ring", Collective::Broadcast), nullptr);
  EXPECT_TRUE(isBuiltinFamily("Direct"));
  EXPECT_FALSE(isBuiltinFamily("tree"));
  EXPECT_EQ(builtinFamiliesOf(Collective::Broadcast), "chain, binomial");
  EXPECT_EQ(builtinFamiliesOf(Collective::AllGather), "ring, direct, hm");
}

// The hierarchical-mesh programs shaped for several nodes (GPUPerNode = nRanks / nNodes), as a
// communicator spanning hosts gets them: proved, and run on the CPU in and out of place.
TEST(BuiltinAlgorithms, HierarchicalMeshOnSeveralNodes) {
  for (Collective collective : {Collective::AllReduce, Collective::AllGather}) {
    const BuiltinAlgorithm* builtin = findBuiltinAlgorithm("hm", collective);
    ASSERT_NE(builtin, nullptr);
    for (auto [nRanks, nNodes] : {std::pair{4, 2}, std::pair{6, 2}, std::pair{6, 3}, std::pair{8, 4}}) {
      const AlgorithmShape shape{nRanks, nNodes, -1, 1};
      Expected<Algorithm> algorithm = loadBuiltin(*builtin, shape);
      ASSERT_TRUE(algorithm) << algorithm.status().toString();
      ASSERT_TRUE(checkAlgorithm(*algorithm).ok()) << builtin->fileName << " " << nRanks << "/" << nNodes;
      const Plan plan = buildPlan(*algorithm, PlanRequest{}).value();
      for (int64_t count : {int64_t{1}, int64_t{1237}}) {
        for (bool inPlace : {true, false}) {
          VerifyOptions options;
          options.count = count;
          options.chunkSize = 37 * 4;
          options.inPlace = inPlace;
          options.timeoutSeconds = 60;
          const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
          EXPECT_TRUE(report.ok) << builtin->fileName << " " << nRanks << " ranks on " << nNodes << " nodes, count "
                                 << count << "\n" << report.summary();
        }
      }
    }
  }
}

TEST(BuiltinAlgorithms, DefaultsCoverEveryCollective) {
  std::set<std::string_view> files;
  for (int c = 0; c < kCollectives; ++c) {
    const auto collective = static_cast<Collective>(c);
    const BuiltinAlgorithm* builtin = findBuiltinAlgorithm(defaultAlgorithmFamily(collective), collective);
    ASSERT_NE(builtin, nullptr) << collectiveName(collective);
    files.insert(builtin->fileName);
  }
  EXPECT_EQ(files, (std::set<std::string_view>{"ring_allreduce.resccl", "ring_allgather.resccl",
                                               "ring_reducescatter.resccl", "chain_broadcast.resccl",
                                               "chain_reduce.resccl", "direct_alltoall.resccl"}));
}

TEST(BuiltinAlgorithms, ParametersShapeThePrograms) {
  EXPECT_EQ(algorithmParameters(Collective::AllReduce, {8, 2, -1, 4}, false),
            (RescclParameters{{"nRanks", 8}, {"GPUPerNode", 4}, {"nChannels", 4}}));
  // Uneven nodes: one rank per node as far as the program knows.
  EXPECT_EQ(algorithmParameters(Collective::Broadcast, {7, 2, 3, 1}, false),
            (RescclParameters{{"nRanks", 7}, {"GPUPerNode", 1}, {"Root", 3}, {"nChannels", 1}}));
  EXPECT_EQ(algorithmParameters(Collective::AllToAll, {5, 1, -1, 2}, true),
            (RescclParameters{{"nRanks", 5}, {"GPUPerNode", 5}, {"nChannels", 2}, {"nScratch", 5}}));
}

TEST(BuiltinAlgorithms, ProvedForEveryShapeAndRoot) {
  for (const BuiltinAlgorithm& builtin : builtinAlgorithms()) {
    for (int32_t nRanks = kMinRanks; nRanks <= kMaxRanks; ++nRanks) {
      for (int32_t root : rootsOf(builtin.collective, nRanks)) {
        SCOPED_TRACE(std::string(builtin.fileName) + " " + std::to_string(nRanks) + " ranks, root " +
                     std::to_string(root));
        Expected<Algorithm> algorithm = loadBuiltin(builtin, nRanks, root);
        ASSERT_TRUE(algorithm) << algorithm.status().toString();
        EXPECT_EQ(algorithm->collective, builtin.collective);
        EXPECT_EQ(algorithm->nRanks, nRanks);
        if (root >= 0) {
          EXPECT_EQ(algorithm->root, root);
        }
        EXPECT_TRUE(checkAlgorithm(*algorithm).ok());
      }
    }
  }
}

struct VerifyCase {
  size_t builtin = 0;
  int32_t nRanks = 0;
};

std::vector<VerifyCase> verifyCases() {
  std::vector<VerifyCase> cases;
  for (size_t b = 0; b < builtinAlgorithms().size(); ++b) {
    for (int32_t nRanks = kMinRanks; nRanks <= kMaxRanks; ++nRanks) cases.push_back({b, nRanks});
  }
  return cases;
}

class BuiltinOnCpu : public ::testing::TestWithParam<VerifyCase> {};

TEST_P(BuiltinOnCpu, EveryRootCountAndLayout) {
  const BuiltinAlgorithm& builtin = builtinAlgorithms()[GetParam().builtin];
  const int32_t nRanks = GetParam().nRanks;
  for (int32_t root : rootsOf(builtin.collective, nRanks)) {
    Expected<Algorithm> algorithm = loadBuiltin(builtin, nRanks, root);
    ASSERT_TRUE(algorithm) << algorithm.status().toString();
    const Plan plan = buildPlan(*algorithm, PlanRequest{}).value();
    // In place always; out of place except ReduceScatter, whose in-place plans cannot take it
    // (docs/kernels.md): the communicator runs those through a temporary.
    std::vector<bool> layouts = {true};
    if (builtin.collective != Collective::ReduceScatter) layouts.push_back(false);
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1237}}) {
      for (bool inPlace : layouts) {
        VerifyOptions options;
        options.count = count;
        options.chunkSize = 37 * 4;  // float32: slices of 37 elements
        options.inPlace = inPlace;
        options.timeoutSeconds = 60;
        const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
        EXPECT_TRUE(report.ok) << builtin.fileName << " " << nRanks << " ranks, root " << root << ", count "
                               << count << (inPlace ? ", in place" : ", out of place") << "\n"
                               << report.summary();
      }
    }
  }
}

// Small calls on the CPU device run in one TB per rank (plan_cache.h): in the pipeline's order
// with many micro-batches, and with send-ahead (a step's sends before its receives) for calls of
// one micro-batch, as the plan cache asks for them.
class BuiltinSingleTbOnCpu : public ::testing::TestWithParam<VerifyCase> {};

TEST_P(BuiltinSingleTbOnCpu, EveryCountAndLayout) {
  const BuiltinAlgorithm& builtin = builtinAlgorithms()[GetParam().builtin];
  const int32_t nRanks = GetParam().nRanks;
  const int32_t root = hasRoot(builtin.collective) ? nRanks - 1 : -1;
  Expected<Algorithm> algorithm = loadBuiltin(builtin, nRanks, root);
  ASSERT_TRUE(algorithm) << algorithm.status().toString();
  for (bool sendAhead : {false, true}) {
    PlanRequest request;
    request.tbAllocation = TbRequest{TbPolicy::Single, false};
    request.config.chunkSize = 64 << 10;
    request.config.sendAhead = sendAhead ? 1 : 0;
    const Plan plan = buildPlan(*algorithm, request).value();
    for (const PlanRank& rank : plan.ranks) EXPECT_EQ(rank.tbs.size(), 1u) << builtin.fileName << " rank " << rank.rank;
    if (sendAhead && builtin.family == "direct") {
      EXPECT_EQ(plan.config.sendAhead, 1) << builtin.fileName;
    }
    std::vector<bool> layouts = {true};
    if (builtin.collective != Collective::ReduceScatter) layouts.push_back(false);
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1237}}) {
      for (bool inPlace : layouts) {
        VerifyOptions options;
        options.count = count;
        options.chunkSize = sendAhead ? 0 : 37 * 4;  // send-ahead: one micro-batch
        options.inPlace = inPlace;
        options.timeoutSeconds = 60;
        const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
        EXPECT_TRUE(report.ok) << builtin.fileName << " " << nRanks << " ranks, root " << root << ", count " << count
                               << (inPlace ? ", in place" : ", out of place")
                               << (sendAhead ? ", send-ahead " + std::to_string(plan.config.sendAhead) : "") << "\n"
                               << report.summary();
        if (sendAhead && count > 0) {
          EXPECT_EQ(report.microBatches, 1);
        }
      }
    }
  }
}

std::vector<VerifyCase> singleTbCases() {
  std::vector<VerifyCase> cases;
  for (size_t b = 0; b < builtinAlgorithms().size(); ++b) {
    for (int32_t nRanks : {3, 8}) cases.push_back({b, nRanks});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinSingleTbOnCpu, ::testing::ValuesIn(singleTbCases()),
                         [](const ::testing::TestParamInfo<VerifyCase>& param) {
                           std::string name(builtinAlgorithms()[param.param.builtin].fileName);
                           name = name.substr(0, name.find('.'));
                           return name + "_" + std::to_string(param.param.nRanks) + "ranks";
                         });

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinOnCpu, ::testing::ValuesIn(verifyCases()),
                         [](const ::testing::TestParamInfo<VerifyCase>& param) {
                           std::string name(builtinAlgorithms()[param.param.builtin].fileName);
                           name = name.substr(0, name.find('.'));
                           return name + "_" + std::to_string(param.param.nRanks) + "ranks";
                         });

}  // namespace
}  // namespace tuccl::backend
