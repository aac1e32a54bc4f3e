#include "tune/confirmation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tune/synthetic_profiler.h"

namespace tuccl {
namespace {

// ---- the statistics of a measurement

TEST(Measurement, MedianIntervalAndSpreadOfSamples) {
  Measurement m = measurementOfSamples({5, 1, 4, 2, 3}, 5);
  EXPECT_DOUBLE_EQ(m.timeUs, 3);
  EXPECT_DOUBLE_EQ(m.spreadUs, 2);                                  // 4 - 2
  EXPECT_NEAR(m.highUs - m.timeUs, 1.58 * 2 / std::sqrt(5.0), 1e-12);  // McGill's notch
  EXPECT_NEAR(m.timeUs - m.lowUs, m.highUs - m.timeUs, 1e-12);
  EXPECT_EQ(m.samplesUs, (std::vector<double>{5, 1, 4, 2, 3}));  // in the order measured
  EXPECT_EQ(m.cost, 5);
  Measurement one = measurementOfSamples({7}, 1, 70);
  EXPECT_DOUBLE_EQ(one.timeUs, 7);
  EXPECT_DOUBLE_EQ(one.lowUs, 7);
  EXPECT_DOUBLE_EQ(one.highUs, 7);
  EXPECT_DOUBLE_EQ(one.busBwGBps, 10);
  EXPECT_THROW(measurementOfSamples({}, 1), std::invalid_argument);
  EXPECT_THROW(measurementOfSamples({1, -2}, 1), std::invalid_argument);
}

TEST(Measurement, SignificantlySlowerNeedsDisjointIntervals) {
  const Measurement fast = measurementOfSamples({10, 10.5, 9.5, 10.2, 9.8}, 5);
  const Measurement slow = measurementOfSamples({20, 20.5, 19.5, 20.2, 19.8}, 5);
  const Measurement wide = measurementOfSamples({5, 30, 12, 25, 8}, 5);
  EXPECT_TRUE(significantlySlower(slow, fast));
  EXPECT_FALSE(significantlySlower(fast, slow));
  EXPECT_FALSE(significantlySlower(wide, fast));
  EXPECT_FALSE(significantlySlower(slow, wide));
  Measurement failed;
  failed.ok = false;
  EXPECT_TRUE(significantlySlower(failed, fast));
  EXPECT_FALSE(significantlySlower(fast, failed));
  // Nothing known (a measurement made without samples) is never significantly anything.
  Measurement unknown;
  unknown.timeUs = 100;
  EXPECT_FALSE(significantlySlower(unknown, fast));
}

TEST(Measurement, PairedRatioIsTheGeometricMeanWithAStudentInterval) {
  // Every pair 0.8: the ratio is 0.8 with no spread.
  PairedRatio r = pairedRatio({8, 16, 4, 80}, {10, 20, 5, 100});
  EXPECT_NEAR(r.ratio, 0.8, 1e-12);
  EXPECT_NEAR(r.low, 0.8, 1e-12);
  EXPECT_NEAR(r.high, 0.8, 1e-12);
  EXPECT_EQ(r.pairs, 4);
  EXPECT_EQ(r.firstWon, 4);
  EXPECT_TRUE(r.faster());
  // Ratios 0.5 and 2: geometric mean 1; t(1 dof) = 12.706 on log ratios +-ln 2, sd ln2*sqrt(2).
  r = pairedRatio({1, 4}, {2, 2});
  EXPECT_NEAR(r.ratio, 1, 1e-12);
  const double half = 12.706 * std::log(2.0) * std::sqrt(2.0) / std::sqrt(2.0);
  EXPECT_NEAR(r.high, std::exp(half), 1e-9);
  EXPECT_NEAR(r.low, std::exp(-half), 1e-9);
  EXPECT_FALSE(r.faster());
  EXPECT_FALSE(r.slower());
  EXPECT_EQ(r.firstWon, 1);
  // Failed runs (+inf) leave their pair out; one pair has no interval.
  r = pairedRatio({3, INFINITY}, {6, 6});
  EXPECT_EQ(r.pairs, 1);
  EXPECT_NEAR(r.ratio, 0.5, 1e-12);
  EXPECT_FALSE(r.faster());
}

TEST(Measurement, NoisySamplesAreSeededRepetitions) {
  const Measurement a = noisySamples(100, 0.1, 9, 42, 1000);
  const Measurement b = noisySamples(100, 0.1, 9, 42, 1000);
  EXPECT_EQ(a.samplesUs, b.samplesUs);
  EXPECT_EQ(a.samplesUs.size(), 9u);
  EXPECT_NE(a.samplesUs, noisySamples(100, 0.1, 9, 43, 1000).samplesUs);
  for (double t : a.samplesUs) {
    EXPECT_GE(t, 100 * 0.7 - 1e-9);  // z clipped to +-3
    EXPECT_LE(t, 100 * 1.3 + 1e-9);
  }
  EXPECT_NEAR(a.busBwGBps * a.timeUs, 1000, 1e-9);
  const Measurement exact = noisySamples(100, 0, 3, 1, 0);
  EXPECT_DOUBLE_EQ(exact.timeUs, 100);
  EXPECT_DOUBLE_EQ(exact.lowUs, 100);
}

// ---- the confirmation against the default

/// A system with a default: configurations take trueUs[chunkBytes], the default `defaultUs`, each
/// repetition with relative noise sigma; every call is recorded.
class SystemWithDefault : public Profiler {
 public:
  SystemWithDefault(std::map<int64_t, double> trueUs, double defaultUs, double sigma)
      : trueUs_(std::move(trueUs)), defaultUs_(defaultUs), sigma_(sigma) {}
  std::string_view name() const override { return "system"; }
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override {
    calls.push_back(space.levelOf(config, kDimChunkBytes, 0));
    return noisySamples(trueUs_.at(calls.back()), sigma_, resource, mixBits(++draws_), 1000);
  }
  bool hasDefault() const override { return true; }
  Measurement profileDefault(int64_t resource) override {
    calls.push_back(-1);
    if (failDefault) {
      Measurement m;
      m.ok = false;
      m.error = "the default crashed";
      return m;
    }
    return noisySamples(defaultUs_, sigma_, resource, mixBits(++draws_), 1000);
  }
  std::vector<int64_t> calls;  ///< chunk sizes measured; -1: the default
  bool failDefault = false;

 private:
  std::map<int64_t, double> trueUs_;
  double defaultUs_;
  double sigma_;
  uint64_t draws_ = 0;
};

SearchSpace chunkSpace() {
  return searchSpaceFromJson(nlohmann::json{{"remove", {"protocol", "nThreads", "nChannels", "scheduler"}},
                                            {"dimensions", {{{"name", "chunkBytes"}, {"values", {4096, 8192, 16384}}}}}},
                             defaultSearchSpace({"ring"}));
}

Configuration chunk(const SearchSpace& space, int64_t bytes) {
  return space.configurationFromJson({{"chunkBytes", bytes}, {"algorithm", "ring"}});
}

TEST(Confirmation, ASignificantWinIsTakenAtTheFirstDecision) {
  const SearchSpace space = chunkSpace();
  SystemWithDefault system({{4096, 80}, {8192, 95}, {16384, 120}}, 100, 0.02);
  std::vector<Trial> runs;
  ConfirmationOptions options;
  const Confirmation c = confirmAgainstDefault(system, space, {chunk(space, 8192), chunk(space, 4096)}, options, 40,
                                               [&](const Trial& t) { runs.push_back(t); });
  EXPECT_FALSE(c.keepDefault);
  EXPECT_EQ(c.rounds, options.minRounds);
  ASSERT_TRUE(c.chosen().config.has_value());
  EXPECT_EQ(space.levelOf(*c.chosen().config, kDimChunkBytes, 0), 4096);
  EXPECT_TRUE(c.versusDefault.faster());
  EXPECT_NEAR(c.versusDefault.ratio, 0.8, 0.03);
  EXPECT_EQ(c.versusDefault.pairs, options.minRounds);
  EXPECT_EQ(c.versusDefault.firstWon, options.minRounds);
  // Fastest first: 4096 (80), 8192 (95), the default (100).
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_EQ(space.levelOf(*c.candidates[0].config, kDimChunkBytes, 0), 4096);
  EXPECT_EQ(space.levelOf(*c.candidates[1].config, kDimChunkBytes, 0), 8192);
  EXPECT_TRUE(c.candidates[2].isDefault());
  EXPECT_EQ(c.rival, 0u);
  for (const ConfirmedCandidate& k : c.candidates) {
    EXPECT_EQ(k.roundUs.size(), static_cast<size_t>(options.minRounds));
    EXPECT_EQ(k.summary.samplesUs.size(), static_cast<size_t>(options.minRounds));
    EXPECT_LE(k.summary.lowUs, k.summary.timeUs);
    EXPECT_GE(k.summary.highUs, k.summary.timeUs);
  }
  // Every round runs each once, the order rotating; the runs are numbered on from 40.
  ASSERT_EQ(runs.size(), 3u * options.minRounds);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].id, 40 + i);
    EXPECT_EQ(runs[i].resource, options.resource);
    EXPECT_EQ(runs[i].isDefault, system.calls[i] == -1);
  }
  EXPECT_EQ(system.calls[0], -1);
  EXPECT_EQ(system.calls[3], 8192);  // round 1 starts with the next one
  EXPECT_EQ(system.calls[6], 4096);
}

TEST(Confirmation, ATieKeepsTheDefaultAfterTheLastRound) {
  const SearchSpace space = chunkSpace();
  SystemWithDefault system({{4096, 100}, {8192, 101}, {16384, 120}}, 100, 0.05);
  ConfirmationOptions options;
  options.maxRounds = 9;
  const Confirmation c = confirmAgainstDefault(system, space, {chunk(space, 4096)}, options, 0, nullptr);
  EXPECT_TRUE(c.keepDefault);
  EXPECT_TRUE(c.chosen().isDefault());
  EXPECT_FALSE(c.versusDefault.faster());
  EXPECT_LE(c.versusDefault.low, 1);
  EXPECT_GE(c.versusDefault.high, 1);
  EXPECT_EQ(c.rounds, 9);
  EXPECT_EQ(system.calls.size(), 18u);
}

TEST(Confirmation, ASignificantLossStopsEarlyAndKeepsTheDefault) {
  const SearchSpace space = chunkSpace();
  SystemWithDefault system({{4096, 150}, {8192, 160}, {16384, 170}}, 100, 0.02);
  const Confirmation c =
      confirmAgainstDefault(system, space, {chunk(space, 4096), chunk(space, 8192)}, ConfirmationOptions{}, 0, nullptr);
  EXPECT_TRUE(c.keepDefault);
  EXPECT_TRUE(c.versusDefault.slower());
  EXPECT_EQ(c.rounds, 6);
  EXPECT_TRUE(c.candidates[0].isDefault());  // fastest first
  ASSERT_TRUE(c.candidates[c.rival].config.has_value());
  EXPECT_EQ(space.levelOf(*c.candidates[c.rival].config, kDimChunkBytes, 0), 4096);
}

TEST(Confirmation, ADefaultThatNeverRunsCannotBeKept) {
  const SearchSpace space = chunkSpace();
  SystemWithDefault system({{4096, 150}, {8192, 90}, {16384, 170}}, 100, 0.02);
  system.failDefault = true;
  ConfirmationOptions options;
  options.minRounds = options.maxRounds = 3;
  const Confirmation c =
      confirmAgainstDefault(system, space, {chunk(space, 4096), chunk(space, 8192)}, options, 0, nullptr);
  EXPECT_FALSE(c.keepDefault);
  EXPECT_EQ(c.versusDefault.pairs, 0);
  EXPECT_EQ(space.levelOf(*c.chosen().config, kDimChunkBytes, 0), 8192);
  EXPECT_TRUE(c.candidates.back().isDefault());  // failed: last
  EXPECT_FALSE(c.candidates.back().summary.ok);
}

TEST(Confirmation, BadOptionsAreRefused) {
  const SearchSpace space = chunkSpace();
  SystemWithDefault system({{4096, 1}}, 1, 0);
  ConfirmationOptions options;
  options.minRounds = 1;
  EXPECT_THROW(confirmAgainstDefault(system, space, {chunk(space, 4096)}, options, 0, nullptr), std::invalid_argument);
  EXPECT_THROW(confirmAgainstDefault(system, space, {}, ConfirmationOptions{}, 0, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
