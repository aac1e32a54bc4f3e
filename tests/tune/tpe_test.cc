#include "tune/tpe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tune/searcher.h"
#include "tune/synthetic_profiler.h"

namespace tuccl {
namespace {

SearchSpace line(int levels) {
  Dimension x{"x", DimensionKind::Ordinal, {}, {}, false};
  for (int i = 0; i < levels; ++i) x.levels.push_back(i);
  return SearchSpace({x}, {});
}

TEST(Tpe, GoodCountRule) {
  TpeOptions o;  // gamma 0.15, at most 25
  EXPECT_EQ(tpeGoodCount(0, o), 0u);
  EXPECT_EQ(tpeGoodCount(1, o), 1u);
  EXPECT_EQ(tpeGoodCount(2, o), 1u);
  EXPECT_EQ(tpeGoodCount(10, o), 2u);
  EXPECT_EQ(tpeGoodCount(40, o), 6u);
  EXPECT_EQ(tpeGoodCount(1000, o), 25u);
  o.gamma = 0.25;
  EXPECT_EQ(tpeGoodCount(10, o), 3u);
  o.gamma = 1.0;
  EXPECT_EQ(tpeGoodCount(10, o), 9u);  // the bad set is never empty
}

TEST(Tpe, EstimatorIsADistributionAndPeaksAtItsCentres) {
  SearchSpace space = defaultSearchSpace({"ring", "hm"});
  std::mt19937_64 rng(3);
  std::vector<Configuration> centres;
  for (int i = 0; i < 5; ++i) centres.push_back(space.sampleValid(rng));
  ParzenEstimator l(space, centres, TpeOptions{});
  EXPECT_EQ(l.componentCount(), 6u);
  for (const std::vector<double>& m : l.marginals())
    EXPECT_NEAR(std::accumulate(m.begin(), m.end(), 0.0), 1.0, 1e-9);
  // The total mass over the raw grid is 1.
  double total = 0;
  Configuration c{std::vector<uint32_t>(space.dimensionCount(), 0)};
  const uint64_t raw = space.rawSize();
  for (uint64_t k = 0; k < raw; ++k) {
    uint64_t rest = k;
    for (size_t d = space.dimensionCount(); d-- > 0;) {
      c.index[d] = static_cast<uint32_t>(rest % space.dimension(d).size());
      rest /= space.dimension(d).size();
    }
    total += std::exp(l.logDensity(c));
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  // A centre is more likely than a far-away point.
  Configuration far = centres[0];
  const size_t threads = space.dimensionIndex("nThreads");
  far.index[threads] = far.index[threads] < 10 ? 19 : 0;
  EXPECT_GT(l.logDensity(centres[0]), l.logDensity(far));
}

TEST(Tpe, ProtocolWidensTheKernel) {
  // Eq. 2: an LL128 observation spreads its ordinal kernels wider than a Simple one.
  SearchSpace space = defaultSearchSpace();
  nlohmann::json j = {{"protocol", "Simple"}, {"nChannels", 4},      {"nThreads", 256},
                      {"chunkBytes", 65536},  {"algorithm", "ring"}, {"scheduler", "hpds"}};
  Configuration simple = space.configurationFromJson(j);
  j["protocol"] = "LL128";
  Configuration ll128 = space.configurationFromJson(j);
  TpeOptions o;
  o.priorWeight = 0;
  auto peak = [&](const Configuration& c) {
    ParzenEstimator e(space, std::vector<Configuration>{c}, o);
    std::vector<double> m = e.marginals()[space.dimensionIndex("nThreads")];
    return *std::max_element(m.begin(), m.end());
  };
  EXPECT_LT(peak(ll128), peak(simple));
}

// A 1-D quadratic over 200 ordinal levels: TPE finds the minimum with 40 trials (a fifth of the
// grid), on every seed.
TEST(Tpe, FindsTheMinimumOfAQuadratic) {
  SearchSpace space = line(200);
  auto f = [](const SearchSpace& s, const Configuration& c) {
    const double x = static_cast<double>(s.dimension(0).levels[c.index[0]]);
    return 1.0 + (x - 137) * (x - 137);
  };
  int exact = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SyntheticProfiler profiler(f, 0.0, seed);
    SearchOptions options;
    options.seed = seed;
    options.maxTrials = 40;
    options.maxResource = 1;
    SearchResult r = makeTpeSearcher()->search(space, profiler, options);
    ASSERT_TRUE(r.best);
    EXPECT_EQ(r.trials.size(), 40u);
    const int64_t x = space.dimension(0).levels[r.best->index[0]];
    EXPECT_LE(std::abs(x - 137), 2) << "seed " << seed;
    exact += x == 137;
  }
  EXPECT_GE(exact, 8);
}

// One categorical value is best; a second (ordinal) dimension shapes the rest. TPE finds the
// best category and concentrates its good set there.
TEST(Tpe, FindsTheBestCategory) {
  Dimension colour{"colour", DimensionKind::Categorical, {"a", "b", "c", "d", "e", "f", "g", "h"}, {}, false};
  Dimension x{"x", DimensionKind::Ordinal, {}, {}, true};
  for (int i = 0; i < 16; ++i) x.levels.push_back(int64_t{1} << i);
  SearchSpace space({colour, x}, {});
  const std::vector<double> base = {3, 5, 1.5, 4, 2, 0, 6, 2.5};  // "f" is best
  auto f = [&](const SearchSpace&, const Configuration& c) {
    const double dx = static_cast<double>(c.index[1]) - 5;
    return 1.0 + base[c.index[0]] + 0.1 * dx * dx;
  };
  int found = 0, concentrated = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SyntheticProfiler profiler(f, 0.0, seed);
    SearchOptions options;
    options.seed = seed;
    options.maxTrials = 40;
    options.maxResource = 1;
    SearchResult r = makeTpeSearcher()->search(space, profiler, options);
    ASSERT_TRUE(r.best);
    found += space.valueOf(*r.best, "colour") == "f" && space.levelOf(*r.best, "x") == 32;
    std::vector<Observation> history;
    for (const Trial& t : r.trials) history.push_back({t.config, objectiveOf(t.measurement)});
    std::vector<double> m = buildTpeModel(space, history, TpeOptions{}).l.marginals()[0];
    EXPECT_GT(m[5], 1.0 / 8) << "seed " << seed;
    concentrated += std::max_element(m.begin(), m.end()) - m.begin() == 5;
  }
  EXPECT_GE(found, 8);
  EXPECT_GE(concentrated, 8);
}

TEST(Tpe, ProposalsAreValidAndAvoidExclusions) {
  SearchSpace space = defaultSearchSpace();
  TpeSampler sampler(space, TpeOptions{});
  std::mt19937_64 rng(5);
  std::vector<Observation> history;
  for (int i = 0; i < 30; ++i) {
    Configuration c = space.sampleValid(rng);
    history.push_back({c, multimodalLandscape(space, c, 1)});
  }
  std::set<Configuration> exclude;
  for (const Observation& o : history) exclude.insert(o.config);
  std::vector<Configuration> batch = sampler.proposeBatch(history, 20, rng, exclude);
  std::set<Configuration> distinct(batch.begin(), batch.end());
  EXPECT_EQ(distinct.size(), 20u);
  for (const Configuration& c : batch) {
    EXPECT_TRUE(space.isValid(c));
    EXPECT_FALSE(exclude.count(c));
  }
}

}  // namespace
}  // namespace tuccl
