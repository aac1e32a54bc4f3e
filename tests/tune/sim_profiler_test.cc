// The simulator profiler; compiled to an empty test program when the simulator is not built.
#include <gtest/gtest.h>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "tune/searcher.h"
#include "tune/sim_profiler.h"

namespace tuccl {
namespace {

std::string example(const std::string& name) {
  return std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl";
}

struct Fixture {
  SearchSpace space;
  std::unique_ptr<SimProfiler> profiler;
  Fixture(double sigma, uint64_t seed) {
    std::map<std::string, Algorithm> algorithms;
    algorithms.emplace("ring", loadRescclAlgorithm(example("ring_allreduce"), 8, 4).value());
    algorithms.emplace("hm", loadRescclAlgorithm(example("hm_allreduce"), 8, 4).value());
    space = searchSpaceFromJson(nlohmann::json::parse(R"({"dimensions": [
        {"name": "nChannels", "values": [1, 2, 4]},
        {"name": "nThreads", "values": [128, 256, 512]},
        {"name": "chunkBytes", "values": [65536, 262144, 1048576]}]})"),
                                defaultSearchSpace({"ring", "hm"}, {"hpds", "rr"}));
    SimProfilerOptions o;
    o.messageBytes = 64 << 20;
    o.sigma = sigma;
    o.seed = seed;
    profiler = std::make_unique<SimProfiler>(loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value(), std::move(algorithms), o);
  }
};

TEST(SimProfiler, MeasuresAndCachesPlans) {
  Fixture f(0.0, 1);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 12; ++i) {
    Configuration c = f.space.sampleValid(rng);
    Measurement m = f.profiler->profile(f.space, c, 3);
    ASSERT_TRUE(m.ok) << m.error;
    EXPECT_GT(m.timeUs, 0);
    // nccl-tests' busbw: algbw x 2(n-1)/n for AllReduce on 8 ranks.
    EXPECT_DOUBLE_EQ(m.busBwGBps, (64 << 20) / (m.timeUs * 1e3) * (2.0 * 7 / 8));
    EXPECT_DOUBLE_EQ(m.timeUs, f.profiler->simulatedTime(f.space, c));  // sigma 0: exact
  }
  EXPECT_LE(f.profiler->compiledPlans(), 4u);  // (algorithm, scheduler) pairs
}

TEST(SimProfiler, NoiseShrinksWithResource) {
  Fixture f(0.1, 7);
  std::mt19937_64 rng(3);
  Configuration c = f.space.sampleValid(rng);
  const double truth = f.profiler->simulatedTime(f.space, c);
  auto spread = [&](int64_t r) {
    double s = 0;
    for (int i = 0; i < 40; ++i) {
      const double e = f.profiler->profile(f.space, c, r).timeUs / truth - 1;
      s += e * e;
    }
    return std::sqrt(s / 40);
  };
  const double wide = spread(1), narrow = spread(64);
  EXPECT_GT(wide, 0.05);
  EXPECT_LT(narrow, 0.03);
}

TEST(SimProfiler, MracoRunsOnTheSimulator) {
  Fixture f(0.03, 2);
  SearchOptions o;
  o.seed = 2;
  o.budget = 0.2 * static_cast<double>(f.space.validCount()) * 27;
  SearchResult r = makeMracoSearcher()->search(f.space, *f.profiler, o);
  ASSERT_TRUE(r.best);
  double optimum = 1e300;
  for (const Configuration& c : f.space.enumerateValid()) optimum = std::min(optimum, f.profiler->simulatedTime(f.space, c));
  EXPECT_LE(f.profiler->simulatedTime(f.space, *r.best), optimum * 1.05);
}

}  // namespace
}  // namespace tuccl
