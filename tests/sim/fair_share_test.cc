#include "sim/fair_share.h"

#include <gtest/gtest.h>

#include <random>

namespace tuccl {
namespace {

const auto kNoContention = [](double) { return 1.0; };

TEST(FairShare, ClassicMaxMinExample) {
  // Link 0 (10) carries flows A and B; link 1 (4) carries B and C. B and C get 2 each on link 1,
  // A gets the rest of link 0: 8.
  const std::vector<double> capacities = {10, 4};
  const std::vector<std::vector<int32_t>> flows = {{0}, {0, 1}, {1}};
  const std::vector<double> caps = {100, 100, 100};
  const std::vector<double> rates = maxMinFairRates(capacities, flows, caps, kNoContention);
  EXPECT_NEAR(rates[0], 8, 1e-12);
  EXPECT_NEAR(rates[1], 2, 1e-12);
  EXPECT_NEAR(rates[2], 2, 1e-12);
}

TEST(FairShare, CapsFreezeFlowsAndReleaseCapacity) {
  // Three flows on one 30 GB/s link, one capped at 6: the others split the remaining 24.
  const std::vector<double> rates = maxMinFairRates(std::vector<double>{30}, std::vector<std::vector<int32_t>>{{0}, {0}, {0}},
                                                    std::vector<double>{6, 100, 100}, kNoContention);
  EXPECT_NEAR(rates[0], 6, 1e-12);
  EXPECT_NEAR(rates[1], 12, 1e-12);
  EXPECT_NEAR(rates[2], 12, 1e-12);
}

TEST(FairShare, ContentionScalesAnOversubscribedResource) {
  // Eight flows capped at 6.25 on a 25 GB/s link: z = 2, capacity × 1/(1 + 0.15).
  const auto contention = [](double z) { return z > 1 ? 1 / (1 + 0.15 * (z - 1)) : 1.0; };
  std::vector<std::vector<int32_t>> flows(8, std::vector<int32_t>{0});
  const std::vector<double> rates = maxMinFairRates(std::vector<double>{25}, flows, std::vector<double>(8, 6.25), contention);
  for (double rate : rates) EXPECT_NEAR(rate, 25 / 1.15 / 8, 1e-12);
}

// The incremental network (component recompute and fast path) against the one-shot allocation
// after every start and finish of a random workload.
TEST(FairShare, IncrementalMatchesOneShot) {
  std::mt19937 random(7);
  const std::vector<double> capacities = {10, 20, 5, 40, 8, 12};
  const auto contention = [](double z) { return z > 1 ? 1 / (1 + 0.1 * (z - 1)) : 1.0; };
  FlowNetwork network(capacities, contention);
  struct Live {
    int32_t id;
    std::vector<int32_t> resources;
    double cap;
  };
  std::vector<Live> live;
  for (int step = 0; step < 400; ++step) {
    const double now = step;
    if (live.empty() || random() % 3 != 0) {
      std::vector<int32_t> resources;
      for (int32_t r = 0; r < static_cast<int32_t>(capacities.size()); ++r)
        if (random() % 3 == 0) resources.push_back(r);
      if (resources.empty()) resources.push_back(static_cast<int32_t>(random() % capacities.size()));
      const double cap = 1.0 + random() % 20;
      live.push_back({network.start(now, resources, 1e12, cap), resources, cap});
    } else {
      const size_t victim = random() % live.size();
      network.finish(live[victim].id, now);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    network.settle(now);
    std::vector<std::vector<int32_t>> flows;
    std::vector<double> caps;
    for (const Live& flow : live) {
      flows.push_back(flow.resources);
      caps.push_back(flow.cap);
    }
    const std::vector<double> expected = maxMinFairRates(capacities, flows, caps, contention);
    for (size_t i = 0; i < live.size(); ++i)
      ASSERT_NEAR(network.rateGBps(live[i].id), expected[i], 1e-9 * expected[i]) << "step " << step;
  }
}

TEST(FairShare, FinishTimesAndStats) {
  FlowNetwork network({10.0}, kNoContention);
  const int32_t a = network.start(0, std::vector<int32_t>{0}, 10e3, 100);  // 10 KB
  const int32_t b = network.start(0, std::vector<int32_t>{0}, 20e3, 100);
  auto changes = network.settle(0);
  ASSERT_EQ(changes.size(), 2u);
  for (const auto& change : changes) EXPECT_NEAR(change.finishUs, change.flow == a ? 2.0 : 4.0, 1e-12);
  network.finish(a, 2.0);
  changes = network.settle(2.0);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].flow, b);
  EXPECT_NEAR(changes[0].finishUs, 3.0, 1e-12);  // 10 KB left at 10 GB/s
  network.finish(b, 3.0);
  EXPECT_NEAR(network.stats()[0].bytes, 30e3, 1e-9);
  EXPECT_NEAR(network.stats()[0].busyUs, 3.0, 1e-12);
  EXPECT_EQ(network.activeFlows(), 0);
}

// A flow of k copies gets the rate each of k identical flows gets beside the same others, and
// carries k times the bytes; Eq. 1's z counts its k caps.
TEST(FairShare, CopiesActAsIdenticalFlows) {
  std::mt19937 random(11);
  const std::vector<double> capacities = {10, 20, 5, 40};
  const auto contention = [](double z) { return z > 1 ? 1 / (1 + 0.15 * (z - 1)) : 1.0; };
  for (int trial = 0; trial < 50; ++trial) {
    FlowNetwork folded(capacities, contention);
    FlowNetwork separate(capacities, contention);
    std::vector<int32_t> foldedIds;
    std::vector<std::vector<int32_t>> separateIds;
    const int flows = 1 + static_cast<int>(random() % 5);
    for (int f = 0; f < flows; ++f) {
      std::vector<int32_t> resources;
      for (int32_t r = 0; r < static_cast<int32_t>(capacities.size()); ++r)
        if (random() % 2 == 0) resources.push_back(r);
      if (resources.empty()) resources.push_back(0);
      const double cap = 1.0 + random() % 12;
      const int32_t copies = 1 + static_cast<int32_t>(random() % 4);
      foldedIds.push_back(folded.start(0, resources, 1e6, cap, copies));
      separateIds.emplace_back();
      for (int32_t c = 0; c < copies; ++c) separateIds.back().push_back(separate.start(0, resources, 1e6, cap));
    }
    folded.settle(0);
    separate.settle(0);
    for (int f = 0; f < flows; ++f) {
      for (int32_t id : separateIds[f])
        ASSERT_NEAR(folded.rateGBps(foldedIds[f]), separate.rateGBps(id), 1e-9 * separate.rateGBps(id)) << trial;
    }
    for (int f = 0; f < flows; ++f) {
      folded.finish(foldedIds[f], 1.0);
      for (int32_t id : separateIds[f]) separate.finish(id, 1.0);
    }
    for (size_t r = 0; r < capacities.size(); ++r)
      EXPECT_NEAR(folded.stats()[r].bytes, separate.stats()[r].bytes, 1e-6) << trial << " resource " << r;
  }
}

}  // namespace
}  // namespace tuccl
