// The runtime phase's decision rule (adapt/policy.h), driven as a communicator would: every
// simulated rank records its own (noisy) timings; when an agreement is due every rank's summary
// is taken, and every rank applies all of them at the same later call (the policy's lag), as
// libtuccl's background exchange does. Every rank must choose the same group for every call.
#include "adapt/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <random>

namespace tuccl {
namespace {

struct PolicyRun {
  std::vector<std::vector<int32_t>> choices;  // by rank, by call
  std::vector<uint64_t> agreements;           // the calls that applied one
  std::vector<int32_t> best;                  // rank 0's exploited group at each call
  std::deque<AdaptivePolicy> policies;        // not movable (a mutex): a deque never relocates
  double seconds = 0;                         // rank 0's total time of the calls
  uint64_t timed = 0;                         // rank 0's calls that were timed
};

using Timing = std::function<double(int32_t group, uint64_t call, int32_t rank)>;

/// `calls` calls of one key on `ranks` ranks; `seconds(group, call, rank)` is what a call takes.
/// With `lagged`, an agreement applies exchangeLag() calls after it started, else at once.
/// With `sparse`, only the calls the policy asks for (timed()) are recorded, as libtuccl does.
PolicyRun drive(int32_t ranks, int32_t groups, uint64_t calls, const AdaptationOptions& options, const Timing& seconds,
                bool lagged = true, const std::vector<std::pair<int32_t, std::vector<AgreedTime>>>& restored = {},
                bool sparse = false) {
  PolicyRun run;
  run.choices.resize(static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) {
    run.policies.emplace_back(groups, options);
    if (!restored.empty()) run.policies.back().restore(restored[0].first, restored[0].second);
  }
  std::vector<std::string> gathered;
  uint64_t applyAt = 0;
  for (uint64_t k = 0; k < calls; ++k) {
    if (run.policies[0].pending() && k == applyAt) {
      for (AdaptivePolicy& policy : run.policies) EXPECT_TRUE(policy.agree(gathered, k));
      run.agreements.push_back(k);
    }
    if (run.policies[0].exchangeDue(k)) {
      gathered.clear();
      for (AdaptivePolicy& policy : run.policies) {
        EXPECT_TRUE(policy.exchangeDue(k));
        gathered.push_back(policy.summary(50e-6));
        policy.exchangeStarted();
      }
      applyAt = k + (lagged ? run.policies[0].exchangeLag() : 0);
      for (AdaptivePolicy& policy : run.policies) EXPECT_EQ(k + (lagged ? policy.exchangeLag() : 0), applyAt);
      if (applyAt == k) {
        for (AdaptivePolicy& policy : run.policies) EXPECT_TRUE(policy.agree(gathered, k));
        run.agreements.push_back(k);
      }
    }
    run.best.push_back(run.policies[0].best());
    for (int32_t r = 0; r < ranks; ++r) {
      const int32_t group = run.policies[static_cast<size_t>(r)].groupFor(k);
      run.choices[static_cast<size_t>(r)].push_back(group);
      const double t = seconds(group, k, r);
      if (r == 0) run.seconds += t;
      if (sparse && !run.policies[static_cast<size_t>(r)].timed(k, group)) continue;
      if (r == 0) ++run.timed;
      run.policies[static_cast<size_t>(r)].record(group, t);
    }
  }
  return run;
}

// The first call from which the exploited group is `group` for good (calls if never).
uint64_t settledOn(const PolicyRun& run, int32_t group) {
  uint64_t since = run.best.size();
  while (since > 0 && run.best[since - 1] == group) --since;
  return since;
}

TEST(Adaptation, MedianAndItsIntervalAreTukeysNotch) {
  const auto [median, halfWidth] = medianAndHalfWidth({4, 1, 3, 2, 5});
  EXPECT_DOUBLE_EQ(median, 3);
  EXPECT_DOUBLE_EQ(halfWidth, 1.58 * (4 - 2) / std::sqrt(5.0));  // quartiles 2 and 4
  EXPECT_DOUBLE_EQ(medianAndHalfWidth({7}).first, 7);
  EXPECT_DOUBLE_EQ(medianAndHalfWidth({7}).second, 0);
  EXPECT_DOUBLE_EQ(medianAndHalfWidth({1, 2}).first, 1.5);
  EXPECT_LT(medianAndHalfWidth({}).first, 0);
}

TEST(Adaptation, EveryRankMovesToTheFastGroupTogether) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  const AdaptationOptions options;
  // Group 0 (the static choice) is slow, group 2 the fastest; rank 3 is a slower machine.
  const double base[] = {5e-3, 3e-3, 2e-3};
  const PolicyRun run = drive(4, 3, 2000, options, [&](int32_t group, uint64_t, int32_t rank) {
    return base[group] * (rank == 3 ? 1.5 : 1.0) * noise(random);
  });
  for (size_t r = 1; r < run.choices.size(); ++r) EXPECT_EQ(run.choices[r], run.choices[0]) << "rank " << r;
  EXPECT_EQ(run.policies[0].best(), 2);
  const uint64_t settled = settledOn(run, 2);
  EXPECT_LT(settled, 400u) << "the fast group took over within a few hundred calls";
  std::printf("settled on the fastest group at call %llu; %zu agreements\n", static_cast<unsigned long long>(settled),
              run.agreements.size());
}

// Timing only the calls the policy asks for — every probe, a group's first call, and about a
// window's worth of the best group's calls between two agreements — finds the fast group as
// timing every call does, and once settled times a small share of the calls.
TEST(Adaptation, SparseTimingFindsTheFastGroupAndTimesFewCalls) {
  std::mt19937 random(11);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  AdaptationOptions options;
  options.firstSync = 2000;  // as libtuccl's first agreement for a call of tens of microseconds
  for (const double other : {0.5, 2.0}) {  // the other group twice as fast, or twice as slow
    const PolicyRun run = drive(
        4, 2, 40000, options, [&](int32_t group, uint64_t, int32_t) { return (group == 0 ? 1e-4 : 1e-4 * other) * noise(random); },
        true, {}, true);
    for (size_t r = 1; r < run.choices.size(); ++r) EXPECT_EQ(run.choices[r], run.choices[0]) << "rank " << r;
    const int32_t fast = other < 1 ? 1 : 0;
    EXPECT_EQ(run.policies[0].best(), fast);
    EXPECT_LT(settledOn(run, fast), 6000u);
    EXPECT_LT(run.timed, 40000u / 4) << other;
    EXPECT_FALSE(run.agreements.empty());
    std::printf("other group %.1fx: %llu of 40000 calls timed, settled at call %llu\n", other,
                static_cast<unsigned long long>(run.timed), static_cast<unsigned long long>(settledOn(run, fast)));
  }
  // The spread: with nothing agreed, about `window` calls before the first agreement, the last
  // just before it.
  AdaptivePolicy policy(2, options);
  policy.record(0, 1e-4);  // the first call seen: no setup to time any more
  uint64_t count = 0;
  const auto first = static_cast<uint64_t>(options.firstSync);
  for (uint64_t k = 0; k < first; ++k) count += policy.timed(k, 0) ? 1 : 0;
  EXPECT_GE(count, static_cast<uint64_t>(options.window));
  EXPECT_LE(count, static_cast<uint64_t>(options.window) + 1);
  EXPECT_TRUE(policy.timed(first - 1, 0));
  EXPECT_TRUE(policy.timed(5, 1)) << "a probe is always timed";
  AdaptivePolicy fresh(2, options);
  EXPECT_TRUE(fresh.timed(5, 0)) << "until its first timing, a group's setup is timed";
}

// Once settled, what probes cost beyond the best group stays within the budget, however slow the
// other groups are.
TEST(Adaptation, ProbesCostAtMostTheBudget) {
  for (const int32_t groups : {2, 3}) {
  for (const double slower : {1.1, 2.0, 8.0}) {
    AdaptationOptions options;
    options.budget = 0.03;
    const PolicyRun run = drive(2, groups, 20000, options, [&](int32_t group, uint64_t, int32_t) {
      return group == 0 ? 1e-4 : 1e-4 * slower;
    });
    EXPECT_EQ(run.policies[0].best(), 0);
    double extra = 0;
    for (uint64_t k = 0; k < 20000; ++k) extra += run.choices[0][k] == 0 ? 0 : 1e-4 * (slower - 1);
    const double share = extra / (20000 * 1e-4);
    EXPECT_LE(share, 0.035) << "groups " << slower << "x slower";
    // Still probed after every group was measured, at about the rate the budget allows.
    double later = 0;
    for (uint64_t k = 10000; k < 20000; ++k) later += run.choices[0][k] == 0 ? 0 : 1e-4 * (slower - 1);
    EXPECT_GE(later / (10000 * 1e-4), options.budget / 2) << groups << " groups, " << slower << "x slower";
    std::printf("%d groups, %.1fx slower: probes cost %.2f %% of the key's time\n", groups, slower, 100 * share);
  }
  }
}

// A group whose timings are no different (same distribution) never takes over, and one outlier
// of a slower group moves nothing.
TEST(Adaptation, NoSwitchWithoutASignificantDifference) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    std::mt19937 random(seed);
    std::lognormal_distribution<double> spread(0.0, 0.3);
    const PolicyRun run = drive(4, 2, 3000, AdaptationOptions{},
                                [&](int32_t, uint64_t, int32_t) { return 1e-3 * spread(random); });
    EXPECT_EQ(settledOn(run, 0), 0u) << "seed " << seed << ": group 0 stayed the choice throughout";
  }
  // Group 1 is 20 % slower, except one call that is a thousand times faster.
  uint64_t group1Calls = 0;
  const PolicyRun outlier = drive(2, 2, 2000, AdaptationOptions{}, [&](int32_t group, uint64_t, int32_t) {
    if (group == 0) return 1e-3;
    return ++group1Calls == 4 ? 1e-6 : 1.2e-3;
  });
  EXPECT_GT(group1Calls, 4u);
  EXPECT_EQ(settledOn(outlier, 0), 0u) << "the outlier never made group 1 the choice";
}

// A group that never ran costs its first call (its plan is built or loaded): a key explores only
// once its calls pay for that within the budget, so a short job never pays for exploring.
TEST(Adaptation, AKeyTooShortToPayForAPlanNeverExplores) {
  // The first call of group 0 took a second (its plan was built); calls take a millisecond; 3 %
  // of the key's time pays for another such call after 1 / (0.03 * 1e-3) = 33,334 calls.
  bool first = true;
  const Timing times = [&](int32_t group, uint64_t, int32_t) {
    if (group == 0 && first) {
      first = false;
      return 1.0;
    }
    return group == 0 ? 1e-3 : 0.5e-3;
  };
  const PolicyRun run = drive(1, 2, 40000, AdaptationOptions{}, times);
  const auto firstProbe = std::find(run.choices[0].begin(), run.choices[0].end(), 1) - run.choices[0].begin();
  EXPECT_GE(firstProbe, 33334) << "no exploration before the key's calls pay for it";
  EXPECT_LT(firstProbe, 34000);
  EXPECT_EQ(run.policies[0].best(), 1) << "then the faster group is found";
}

TEST(Adaptation, AChangedLandscapeIsNoticedThroughTheProbes) {
  // Group 1 is fastest until call 2000, then it becomes the slowest.
  const PolicyRun run = drive(2, 3, 6000, AdaptationOptions{}, [](int32_t group, uint64_t k, int32_t) {
    if (group == 1) return k < 2000 ? 1e-3 : 9e-3;
    return group == 0 ? 5e-3 : 3e-3;
  });
  EXPECT_EQ(run.choices[0], run.choices[1]);
  EXPECT_EQ(run.choices[0][1900], 1);
  EXPECT_EQ(run.policies[0].best(), 2);
  EXPECT_EQ(run.choices[0][5990], 2);
}

// Agreements back off while nothing changes (every interval a multiple of syncEvery, up to
// kMaxSyncBackoff of them), and come back to every syncEvery calls when the choice changes.
TEST(Adaptation, AgreementsBackOffWhileSettledAndReturnOnAChange) {
  AdaptationOptions options;
  const PolicyRun run = drive(1, 2, 20000, options, [](int32_t group, uint64_t k, int32_t) {
    if (group == 0) return 5e-3;
    return k < 10000 ? 2e-3 : 9e-3;  // group 1 wins, then becomes the slowest at call 10000
  }, /*lagged=*/false);
  const std::vector<uint64_t>& syncs = run.agreements;
  const auto every = static_cast<uint64_t>(options.syncEvery);
  ASSERT_GE(syncs.size(), 4u);
  EXPECT_EQ(syncs[0], 0u) << "the first agreement learns the static choice's time";
  uint64_t longest = 0;
  for (size_t i = 1; i < syncs.size(); ++i) {
    const uint64_t interval = syncs[i] - syncs[i - 1];
    EXPECT_EQ(interval % every, 0u) << "agreement at call " << syncs[i];
    EXPECT_LE(interval, every * kMaxSyncBackoff);
    longest = std::max(longest, interval);
  }
  EXPECT_EQ(longest, every * kMaxSyncBackoff) << "a settled key backs off to the longest interval";
  EXPECT_LT(syncs.size(), 20000 / every / 8) << "far fewer agreements than one per syncEvery calls";
  EXPECT_EQ(run.policies[0].best(), 0) << "the change at call 10000 was noticed";
  bool shortAfterChange = false;
  for (size_t i = 1; i < syncs.size(); ++i) shortAfterChange |= syncs[i - 1] > 10000 && syncs[i] - syncs[i - 1] == every;
  EXPECT_TRUE(shortAfterChange);
}

// An agreement applies exchangeLag() calls after it started: enough for four times the agreed
// time an exchange took, at the best group's time per call.
TEST(Adaptation, TheLagCoversTheExchange) {
  AdaptationOptions options;
  AdaptivePolicy policy(2, options);
  EXPECT_EQ(policy.exchangeLag(), 0u) << "nothing agreed yet: the first agreement applies at once";
  for (int i = 0; i < 8; ++i) policy.record(0, 10e-6);
  ASSERT_TRUE(policy.agree({policy.summary(1e-3)}, 0));  // an exchange of 1 ms, calls of 10 us
  EXPECT_EQ(policy.exchangeLag(), 400u);
  EXPECT_DOUBLE_EQ(policy.agreedExchangeSeconds(), 1e-3);
  ASSERT_TRUE(policy.agree({policy.summary(1.0)}, 8));  // far longer: capped
  EXPECT_EQ(policy.exchangeLag(), options.syncEvery * kMaxSyncBackoff);
}

TEST(Adaptation, LocalTimingsAloneNeverMoveAChoice) {
  AdaptivePolicy policy(2, AdaptationOptions{});
  for (int i = 0; i < 100; ++i) policy.record(1, 1e-6);
  for (int i = 0; i < 100; ++i) policy.record(0, 1.0);
  EXPECT_EQ(policy.best(), 0);
  EXPECT_EQ(policy.groupFor(1000), 0);
  // Once agreed at two agreements in a row, it moves.
  ASSERT_TRUE(policy.agree({policy.summary()}, 1000));
  EXPECT_EQ(policy.best(), 0) << "one agreement names a challenger";
  ASSERT_TRUE(policy.agree({policy.summary()}, 1008));
  EXPECT_EQ(policy.best(), 1);
}

TEST(Adaptation, TheSlowestRankDecidesAGroupsTime) {
  AdaptivePolicy fast(2, AdaptationOptions{}), slow(2, AdaptationOptions{});
  for (int i = 0; i < 8; ++i) {
    fast.record(0, 1.0);
    fast.record(1, 0.5);
    slow.record(0, 1.0);
    slow.record(1, 2.0);  // group 1 is bad on this rank: the collective waits for it
  }
  ASSERT_TRUE(fast.agree({fast.summary(), slow.summary()}, 0));
  EXPECT_EQ(fast.agreedSeconds(1), 2.0);
  EXPECT_EQ(fast.best(), 0);
}

TEST(Adaptation, AMalformedSummaryChangesNothing) {
  AdaptivePolicy policy(2, AdaptationOptions{});
  for (int i = 0; i < 8; ++i) policy.record(1, 0.1);
  const Status bad = policy.agree({policy.summary(), "short"}, 0);
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("rank 1"), std::string::npos) << bad.message();
  EXPECT_EQ(policy.best(), 0);
  EXPECT_FALSE(policy.agreedSeconds(1));
  // Non-finite numbers in a summary are taken as no timing.
  std::string summary = policy.summary();
  const double nan = std::nan("");
  std::memcpy(summary.data() + 8 + 32, &nan, sizeof nan);  // group 1's median (8-byte header, 32-byte groups)
  ASSERT_TRUE(policy.agree({summary}, 8));
  EXPECT_FALSE(policy.agreedSeconds(1));
}

// A key restored from the learned table starts at its best group and needs no exploration of the
// groups measured before: it only probes at the budget's rate.
TEST(Adaptation, ARestoredKeyStartsAtItsBestAndConverges) {
  std::vector<AgreedTime> agreed = {{5e-3, 4.9e-3, 5.1e-3, 16}, {2e-3, 1.9e-3, 2.1e-3, 16}, {9e-3, 8.8e-3, 9.2e-3, 16}};
  const Timing times = [](int32_t group, uint64_t, int32_t) { return group == 0 ? 5e-3 : group == 1 ? 2e-3 : 9e-3; };
  const PolicyRun run = drive(2, 3, 1000, AdaptationOptions{}, times, true, {{1, agreed}});
  EXPECT_EQ(run.choices[0][0], 1) << "the first call runs the learned best";
  EXPECT_EQ(run.policies[0].best(), 1);
  int64_t others = 0;
  for (int32_t g : run.choices[0]) others += g != 1;
  EXPECT_LE(others, 1000 * 0.03 / 1.5) << "only budgeted probes of the slower groups";
  // Bad restored numbers are dropped, not trusted.
  agreed[2] = {-1, 1, 0, 3};
  AdaptivePolicy bad(3, AdaptationOptions{});
  bad.restore(1, agreed);
  EXPECT_FALSE(bad.agreedSeconds(2));
  EXPECT_TRUE(bad.measured(0));
}

TEST(Adaptation, AnExcludedGroupNeverRuns) {
  AdaptivePolicy policy(3, AdaptationOptions{});
  for (int i = 0; i < 8; ++i) policy.record(0, 1e-3);
  ASSERT_TRUE(policy.agree({policy.summary()}, 0));
  policy.exclude(2);
  for (uint64_t k = 1; k < 2000; ++k) {
    const int32_t group = policy.groupFor(k);
    ASSERT_NE(group, 2) << "call " << k;
    policy.record(group, group == 1 ? 2e-3 : 1e-3);
    if (policy.exchangeDue(k)) {
      ASSERT_TRUE(policy.agree({policy.summary()}, k));
    }
  }
  policy.exclude(0);  // the static choice always stays
  EXPECT_TRUE(policy.agreedSeconds(0));
}

}  // namespace
}  // namespace tuccl
