#include "tune/searcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "tune/synthetic_profiler.h"

namespace tuccl {
namespace {

struct Landscape {
  SearchSpace space = defaultSearchSpace({"ring", "hm"}, {"hpds", "rr"});
  uint64_t variant;
  double optimum = std::numeric_limits<double>::infinity();
  explicit Landscape(uint64_t v) : variant(v) {
    for (const Configuration& c : space.enumerateValid())
      optimum = std::min(optimum, multimodalLandscape(space, c, variant));
  }
  SyntheticProfiler profiler(uint64_t seed, double sigma = 0.05) const {
    uint64_t v = variant;
    return SyntheticProfiler([v](const SearchSpace& s, const Configuration& c) { return multimodalLandscape(s, c, v); },
                             sigma, seed);
  }
};

TEST(Searchers, FactoryKnowsEveryMethod) {
  for (const std::string& name : searcherNames()) {
    std::unique_ptr<Searcher> s = makeSearcher(name);
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(s->name(), name);
  }
  EXPECT_FALSE(makeSearcher("annealing"));
}

TEST(Searchers, SameSeedSameTrialSequence) {
  Landscape land(3);
  for (const std::string& name : searcherNames()) {
    auto run = [&](uint64_t seed) {
      SyntheticProfiler profiler = land.profiler(seed);
      SearchOptions options;
      options.seed = seed;
      options.budget = 3000;
      return makeSearcher(name)->search(land.space, profiler, options);
    };
    SearchResult a = run(11), b = run(11), c = run(12);
    ASSERT_EQ(a.trials.size(), b.trials.size()) << name;
    for (size_t i = 0; i < a.trials.size(); ++i) {
      EXPECT_EQ(a.trials[i].config, b.trials[i].config) << name << " trial " << i;
      EXPECT_EQ(a.trials[i].resource, b.trials[i].resource);
      EXPECT_EQ(a.trials[i].measurement.timeUs, b.trials[i].measurement.timeUs);
    }
    EXPECT_LE(a.cost, 3000.0) << name;
    if (name != "grid" && name != "coordinate") {  // these do not draw random numbers
      bool differs = a.trials.size() != c.trials.size();
      for (size_t i = 0; !differs && i < a.trials.size(); ++i) differs = a.trials[i].config != c.trials[i].config;
      EXPECT_TRUE(differs) << name;
    }
  }
}

TEST(Searchers, BudgetAndTrialLimitsHold) {
  Landscape land(1);
  SyntheticProfiler profiler = land.profiler(1);
  SearchOptions options;
  options.budget = 500;
  SearchResult grid = makeGridSearcher()->search(land.space, profiler, options);
  EXPECT_EQ(grid.trials.size(), 500u / 27);
  EXPECT_EQ(grid.stopReason, "budget");
  options.budget = 0;
  options.maxTrials = 7;
  SearchResult random = makeRandomSearcher()->search(land.space, profiler, options);
  EXPECT_EQ(random.trials.size(), 7u);
  EXPECT_EQ(random.stopReason, "max trials");
}

TEST(Searchers, MracoUsesHyperbandRungs) {
  Landscape land(2);
  SyntheticProfiler profiler = land.profiler(5);
  SearchOptions options;
  options.budget = 40000;
  SearchResult r = makeMracoSearcher()->search(land.space, profiler, options);
  ASSERT_FALSE(r.trials.empty());
  // The first bracket (s = 3 for R_max 27, eta 3) measures 27 configurations at r = 1, then 9 at 3.
  for (size_t i = 0; i < 27; ++i) {
    EXPECT_EQ(r.trials[i].resource, 1);
    EXPECT_EQ(r.trials[i].bracket, 3);
    EXPECT_EQ(r.trials[i].rung, 0);
  }
  EXPECT_EQ(r.trials[27].resource, 3);
  EXPECT_EQ(r.trials[27 + 9].resource, 9);
  EXPECT_EQ(r.bestResource, 27);  // the incumbent is an R_max measurement
  // Survivors of a rung are the best of the rung below.
  std::vector<std::pair<double, Configuration>> rung0;
  for (size_t i = 0; i < 27; ++i) rung0.push_back({r.trials[i].measurement.timeUs, r.trials[i].config});
  std::stable_sort(rung0.begin(), rung0.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(r.trials[27 + i].config, rung0[i].second);
}

// Successive halving promotes on intervals: besides the best third by median, a configuration
// whose interval overlaps the last kept one's goes on too (up to as many again), so noise does
// not prune what it cannot tell apart; without noise exactly the best third goes on.
TEST(Searchers, MracoPromotesWhatNoiseCannotTellApart) {
  Landscape land(2);
  auto rungCount = [&](double sigma, int32_t rung) {
    SyntheticProfiler profiler = land.profiler(5, sigma);
    SearchOptions options;
    options.budget = 40000;
    SearchResult r = makeMracoSearcher()->search(land.space, profiler, options);
    // The first bracket of the first Hyperband iteration: the trials before bracket 2 starts.
    const auto next = std::find_if(r.trials.begin(), r.trials.end(), [](const Trial& t) { return t.bracket != 3; });
    r.trials.erase(next, r.trials.end());
    size_t count = 0;
    for (const Trial& t : r.trials) count += t.rung == rung;
    // Every configuration of rung 2 was not significantly slower than rung 1's third best.
    if (rung == 2) {
      std::vector<const Trial*> below;
      for (const Trial& t : r.trials)
        if (t.bracket == 3 && t.rung == 1) below.push_back(&t);
      std::stable_sort(below.begin(), below.end(),
                       [](const Trial* a, const Trial* b) { return a->measurement.timeUs < b->measurement.timeUs; });
      for (const Trial& t : r.trials) {
        if (t.bracket != 3 || t.rung != 2) continue;
        auto it = std::find_if(below.begin(), below.end(), [&](const Trial* b) { return b->config == t.config; });
        EXPECT_NE(it, below.end());
        if (it - below.begin() >= 3) {
          EXPECT_FALSE(significantlySlower((*it)->measurement, below[2]->measurement));
        }
      }
    }
    return count;
  };
  EXPECT_EQ(rungCount(0, 1), 9u);  // rung 0 has one repetition each: no interval, the best 9
  EXPECT_EQ(rungCount(0, 2), 3u);
  const size_t noisy = rungCount(0.5, 2);
  EXPECT_GT(noisy, 3u);
  EXPECT_LE(noisy, 6u);
}

// The final selection (a race at R_max on the best few configurations) spends at most
// finalReserve x the search's cost, never more than the budget, and is deterministic.
TEST(Searchers, MracoFinalRaceStaysInItsReserveAndIsDeterministic) {
  Landscape land(4);
  const double gridCost = static_cast<double>(land.space.validCount()) * 27;
  auto run = [&](double budget, bool convergence, double reserve) {
    SyntheticProfiler profiler = land.profiler(9);
    SearchOptions options;
    options.seed = 9;
    options.budget = budget;
    options.convergence.enabled = convergence;
    options.finalReserve = reserve;
    return makeMracoSearcher()->search(land.space, profiler, options);
  };
  for (const double budget : {0.02 * gridCost, 0.1 * gridCost, 5000.0, 700.0}) {
    for (const bool convergence : {true, false}) {
      SearchResult a = run(budget, convergence, 0.15), b = run(budget, convergence, 0.15);
      EXPECT_LE(a.cost, budget);
      ASSERT_EQ(a.trials.size(), b.trials.size());
      for (size_t i = 0; i < a.trials.size(); ++i) {
        EXPECT_EQ(a.trials[i].config, b.trials[i].config) << i;
        EXPECT_EQ(a.trials[i].resource, b.trials[i].resource) << i;
        EXPECT_EQ(a.trials[i].measurement.timeUs, b.trials[i].measurement.timeUs) << i;
      }
      EXPECT_EQ(a.best, b.best);
      EXPECT_EQ(a.bestMeasurement.timeUs, b.bestMeasurement.timeUs);
      // The race trials: the tail outside any bracket, all at R_max, within the reserve.
      size_t first = a.trials.size();
      while (first > 0 && a.trials[first - 1].bracket == -1) --first;
      double searchCost = 0, raceCost = 0;
      for (size_t i = 0; i < a.trials.size(); ++i) {
        if (i < first) {
          EXPECT_GE(a.trials[i].bracket, 0) << i;  // no race trial inside the search
          searchCost += static_cast<double>(a.trials[i].resource);
        } else {
          EXPECT_EQ(a.trials[i].resource, 27);
          raceCost += static_cast<double>(a.trials[i].resource);
        }
      }
      EXPECT_LE(raceCost, 0.15 * searchCost * (1 + 1e-12)) << budget << " " << convergence;
      EXPECT_LE(searchCost, budget / 1.15 * (1 + 1e-12));
      if (budget >= 5000) {
        EXPECT_GT(raceCost, 0) << budget << " " << convergence;  // enough reserve for one round
      }
      ASSERT_TRUE(a.best);
      // x* is a raced candidate (or the only one) and its reported time is its pooled mean.
      double sum = 0;
      int n = 0;
      for (const Trial& t : a.trials)
        if (t.resource == 27 && t.config == *a.best) sum += t.measurement.timeUs, ++n;
      ASSERT_GT(n, 0);
      EXPECT_NEAR(a.bestMeasurement.timeUs, sum / n, 1e-9 * sum / n);
      if (raceCost > 0) {
        EXPECT_GE(n, 2);
      }
    }
  }
  // finalReserve = 0: no race, and the search may use the whole budget.
  SearchResult off = run(0.05 * gridCost, false, 0);
  for (const Trial& t : off.trials) EXPECT_GE(t.bracket, 0);
  EXPECT_GT(off.cost, 0.05 * gridCost / 1.15);
  // maxTrials cuts the race too.
  SyntheticProfiler profiler = land.profiler(9);
  SearchOptions options;
  options.seed = 9;
  options.maxTrials = 120;
  options.convergence.enabled = false;
  SearchResult capped = makeMracoSearcher()->search(land.space, profiler, options);
  EXPECT_LE(capped.trials.size(), 120u);
  EXPECT_TRUE(capped.best);
}

TEST(Searchers, LeadingFailuresAbortWithTheProfilersMessage) {
  SearchSpace space = defaultSearchSpace();
  struct Broken : Profiler {
    std::string_view name() const override { return "broken"; }
    Measurement profile(const SearchSpace&, const Configuration&, int64_t r) override {
      Measurement m;
      m.ok = false;
      m.cost = static_cast<double>(r);
      m.error = "all_reduce_perf: not found";
      return m;
    }
  } broken;
  SearchOptions options;
  options.budget = 1000;
  for (const std::string& name : searcherNames()) {
    try {
      makeSearcher(name)->search(space, broken, options);
      ADD_FAILURE() << name << " did not abort";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce_perf: not found"), std::string::npos) << name;
    }
  }
}

// The acceptance case on a synthetic landscape: MRACO reaches within 1 % of the grid optimum
// with at most 10 % of the grid's profiling cost (averaged over seeds), under measurement noise.
TEST(Searchers, MracoNearGridOptimumAtATenthOfItsCost) {
  double gapSum = 0, costSum = 0;
  const int seeds = 6;
  for (int seed = 1; seed <= seeds; ++seed) {
    Landscape land(static_cast<uint64_t>(seed));
    const double gridCost = static_cast<double>(land.space.validCount()) * 27;
    SyntheticProfiler profiler = land.profiler(static_cast<uint64_t>(seed));
    SearchOptions options;
    options.seed = static_cast<uint64_t>(seed);
    options.budget = 0.1 * gridCost;
    SearchResult r = makeMracoSearcher()->search(land.space, profiler, options);
    ASSERT_TRUE(r.best);
    const double gap = profiler.trueTime(land.space, *r.best) / land.optimum - 1;
    gapSum += gap;
    costSum += r.cost / gridCost;
    EXPECT_LE(r.cost, options.budget);
    RecordProperty("seed" + std::to_string(seed), std::to_string(gap) + " " + std::to_string(r.cost / gridCost) +
                                                       " " + r.stopReason);
    std::printf("seed %d: gap %.3f%% cost %.2f%% of grid, %zu trials, %s\n", seed, 100 * gap, 100 * r.cost / gridCost,
                r.trials.size(), r.stopReason.c_str());
  }
  EXPECT_LE(gapSum / seeds, 0.01);
  EXPECT_LE(costSum / seeds, 0.10);
}

}  // namespace
}  // namespace tuccl
