// The runtime phase's decision rule (table/adaptation.h), driven as a communicator would: every
// simulated rank records its own (noisy) timings, and at the sync points the summaries of all
// ranks are gathered and agreed on. Every rank must choose the same group for every call.
#include "table/adaptation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <random>

namespace tuccl {
namespace {

struct PolicyRun {
  std::vector<std::vector<int32_t>> choices;  // by rank, by call
  std::deque<AdaptivePolicy> policies;  // not movable (a mutex): a deque never relocates
};

/// `calls` calls of one key on `ranks` ranks; `seconds(group, call, rank)` is what a call takes.
PolicyRun drive(int32_t ranks, int32_t groups, uint64_t calls, const AdaptationOptions& options,
          const std::function<double(int32_t, uint64_t, int32_t)>& seconds) {
  PolicyRun run;
  run.choices.resize(static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) run.policies.emplace_back(groups, options);
  for (uint64_t k = 0; k < calls; ++k) {
    if (run.policies[0].syncDue(k)) {
      std::vector<std::string> gathered;
      for (const AdaptivePolicy& policy : run.policies) gathered.push_back(policy.summary());
      for (AdaptivePolicy& policy : run.policies) EXPECT_TRUE(policy.agree(gathered));
    }
    for (int32_t r = 0; r < ranks; ++r) {
      const int32_t group = run.policies[static_cast<size_t>(r)].groupFor(k);
      run.choices[static_cast<size_t>(r)].push_back(group);
      run.policies[static_cast<size_t>(r)].record(group, seconds(group, k, r));
    }
  }
  return run;
}

TEST(Adaptation, EveryRankMovesToTheFastGroupTogetherWithinABoundedNumberOfCalls) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  const AdaptationOptions options;
  // Group 0 (the static choice) is slow, group 2 the fastest; rank 3 is a slower machine.
  const double base[] = {5e-3, 3e-3, 2e-3};
  const PolicyRun run = drive(4, 3, 1000, options, [&](int32_t group, uint64_t, int32_t rank) {
    return base[group] * (rank == 3 ? 1.5 : 1.0) * noise(random);
  });
  for (size_t r = 1; r < run.choices.size(); ++r) EXPECT_EQ(run.choices[r], run.choices[0]) << "rank " << r;
  // Exploration (3 groups x 2 samples) ends at call 6; the next agreement (call 8) decides.
  const uint64_t bound = 3 * options.samplesPerGroup + 2 * options.syncEvery;
  for (uint64_t k = bound; k < 1000; ++k) {
    if (!run.policies[0].exploring(k)) {
      EXPECT_EQ(run.choices[0][k], 2) << "call " << k;
    }
  }
  int64_t exploring = 0;
  for (uint64_t k = 0; k < 1000; ++k) exploring += run.choices[0][k] != 2 ? 1 : 0;
  // The initial tries, the calls before the first agreement, and one probe in probeEvery.
  EXPECT_LE(exploring, static_cast<int64_t>(bound + 1000 / options.probeEvery + 1));
  std::printf("exploration: %lld of 1000 calls ran another group than the fastest\n",
              static_cast<long long>(exploring));
}

TEST(Adaptation, AChangedLandscapeIsNoticedThroughTheProbes) {
  AdaptationOptions options;
  options.probeEvery = 8;
  // Group 1 is fastest until call 400, then it becomes the slowest.
  const PolicyRun run = drive(2, 3, 1000, options, [](int32_t group, uint64_t k, int32_t) {
    if (group == 1) return k < 400 ? 1e-3 : 9e-3;
    return group == 0 ? 5e-3 : 3e-3;
  });
  EXPECT_EQ(run.choices[0], run.choices[1]);
  EXPECT_EQ(run.choices[0][300], 1);
  EXPECT_EQ(run.policies[0].best(), 2);
  ASSERT_FALSE(run.policies[0].exploring(990));
  EXPECT_EQ(run.choices[0][990], 2);
}

// Agreements back off while nothing changes (every interval a multiple of syncEvery, up to
// kMaxSyncBackoff of them), and come back to every syncEvery calls when the choice changes.
TEST(Adaptation, AgreementsBackOffWhileSettledAndReturnOnAChange) {
  AdaptationOptions options;
  options.probeEvery = 8;
  std::vector<uint64_t> syncs;
  AdaptivePolicy policy(2, options);
  auto seconds = [](int32_t group, uint64_t k) {
    if (group == 0) return 5e-3;
    return k < 3000 ? 2e-3 : 9e-3;  // group 1 wins, then becomes the slowest at call 3000
  };
  for (uint64_t k = 0; k < 6000; ++k) {
    if (policy.syncDue(k)) {
      syncs.push_back(k);
      EXPECT_TRUE(policy.agree({policy.summary()}));
    }
    const int32_t group = policy.groupFor(k);
    policy.record(group, seconds(group, k));
  }
  const auto every = static_cast<uint64_t>(options.syncEvery);
  ASSERT_GE(syncs.size(), 4u);
  EXPECT_EQ(syncs[0], every);
  uint64_t longest = 0;
  for (size_t i = 1; i < syncs.size(); ++i) {
    const uint64_t interval = syncs[i] - syncs[i - 1];
    EXPECT_EQ(interval % every, 0u) << "agreement at call " << syncs[i];
    EXPECT_LE(interval, every * kMaxSyncBackoff);
    longest = std::max(longest, interval);
  }
  EXPECT_EQ(longest, every * kMaxSyncBackoff) << "a settled key backs off to the longest interval";
  EXPECT_LT(syncs.size(), 6000 / every / 8) << "far fewer agreements than one per syncEvery calls";
  EXPECT_EQ(policy.best(), 0) << "the change at call 3000 was noticed";
  // After the change the agreements came every syncEvery calls again for a while.
  bool shortAfterChange = false;
  for (size_t i = 1; i < syncs.size(); ++i) shortAfterChange |= syncs[i - 1] > 3000 && syncs[i] - syncs[i - 1] == every;
  EXPECT_TRUE(shortAfterChange);
}

TEST(Adaptation, LocalTimingsAloneNeverMoveAChoice) {
  AdaptivePolicy policy(2, AdaptationOptions{});
  for (int i = 0; i < 100; ++i) policy.record(1, 1e-6);
  for (int i = 0; i < 100; ++i) policy.record(0, 1.0);
  EXPECT_EQ(policy.best(), 0);
  EXPECT_EQ(policy.groupFor(1000), 0);
  // Once agreed, it moves.
  ASSERT_TRUE(policy.agree({policy.summary()}));
  EXPECT_EQ(policy.best(), 1);
}

TEST(Adaptation, TheSlowestRankDecidesAGroupsTime) {
  AdaptivePolicy fast(2, AdaptationOptions{}), slow(2, AdaptationOptions{});
  fast.record(0, 1.0);
  fast.record(1, 0.5);
  slow.record(0, 1.0);
  slow.record(1, 2.0);  // group 1 is bad on this rank: the collective waits for it
  ASSERT_TRUE(fast.agree({fast.summary(), slow.summary()}));
  EXPECT_EQ(fast.agreedSeconds(1), 2.0);
  EXPECT_EQ(fast.best(), 0);
}

TEST(Adaptation, AMalformedSummaryChangesNothing) {
  AdaptivePolicy policy(2, AdaptationOptions{});
  policy.record(1, 0.1);
  const Status bad = policy.agree({policy.summary(), "short"});
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("rank 1"), std::string::npos) << bad.message();
  EXPECT_EQ(policy.best(), 0);
  EXPECT_FALSE(policy.agreedSeconds(1));
}

TEST(Adaptation, AGroupMustWinByTheMarginToTakeOver) {
  AdaptationOptions options;
  options.switchMargin = 0.10;
  AdaptivePolicy policy(2, options);
  policy.record(0, 1.00);
  policy.record(1, 0.95);  // 5% faster: not enough
  ASSERT_TRUE(policy.agree({policy.summary()}));
  EXPECT_EQ(policy.best(), 0);
  for (int i = 0; i < 8; ++i) policy.record(1, 0.80);
  ASSERT_TRUE(policy.agree({policy.summary()}));
  EXPECT_EQ(policy.best(), 1);
}

}  // namespace
}  // namespace tuccl
