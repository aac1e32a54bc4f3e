#include "tune/convergence.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tuccl {
namespace {

TEST(Convergence, KlDivergence) {
  std::vector<double> p = {0.5, 0.5}, q = {0.9, 0.1};
  EXPECT_NEAR(klDivergence(p, p), 0.0, 1e-12);
  EXPECT_NEAR(klDivergence(p, q), 0.5 * std::log(0.5 / 0.9) + 0.5 * std::log(0.5 / 0.1), 1e-9);
  EXPECT_GT(klDivergence(std::vector<double>{1, 0}, std::vector<double>{0, 1}), 20.0);  // floored, finite
  EXPECT_TRUE(std::isinf(klDivergence(std::vector<double>{1}, std::vector<double>{0.5, 0.5})));
  Marginals a = {p, p}, b = {p, q};
  EXPECT_NEAR(klDivergence(b, a), klDivergence(q, p), 1e-12);
}

const Marginals kStable = {{0.1, 0.7, 0.2}, {0.25, 0.25, 0.5}};
const Marginals kNearby = {{0.12, 0.68, 0.2}, {0.25, 0.27, 0.48}};
const Marginals kMoved = {{0.7, 0.1, 0.2}, {0.5, 0.25, 0.25}};

// Eq. 5 alone: lag 1, no minimum, one step suffices.
ConvergenceOptions plain() {
  ConvergenceOptions o;
  o.lag = 1;
  o.minSteps = 1;
  o.patience = 1;
  return o;
}

TEST(Convergence, TriggersWhenBothTermsAreSmall) {
  ConvergenceMonitor m(plain());
  EXPECT_FALSE(m.record(100.0, kStable));  // first step: nothing to compare with
  EXPECT_TRUE(m.record(99.5, kNearby));    // 0.5 % better, distribution barely moved
  EXPECT_NEAR(m.lastRelativeImprovement(), 0.005, 1e-12);
  EXPECT_LT(m.lastKl(), 0.1);
}

TEST(Convergence, NotWhileStillImproving) {
  ConvergenceMonitor m(plain());
  m.record(100.0, kStable);
  EXPECT_FALSE(m.record(95.0, kNearby));  // 5 % better
  EXPECT_TRUE(m.record(94.9, kNearby));
}

TEST(Convergence, NotWhileTheDistributionMoves) {
  ConvergenceMonitor m(plain());
  m.record(100.0, kStable);
  EXPECT_FALSE(m.record(100.0, kMoved));  // no improvement, but the good set moved
  EXPECT_GT(m.lastKl(), 0.1);
  EXPECT_TRUE(m.record(100.0, kMoved));
}

TEST(Convergence, LagMinimumStepsAndDisabled) {
  ConvergenceOptions o = plain();
  o.lag = 2;
  o.minSteps = 3;
  ConvergenceMonitor lagged(o);
  EXPECT_FALSE(lagged.record(100.0, kStable));
  EXPECT_FALSE(lagged.record(50.0, kMoved));
  EXPECT_TRUE(lagged.record(99.9, kNearby));  // compared with step 0, not step 1
  ConvergenceOptions off;
  off.enabled = false;
  ConvergenceMonitor never(off);
  never.record(1.0, kStable);
  EXPECT_FALSE(never.record(1.0, kStable));
  // No incumbent yet (nothing measured at R_max): never converged.
  ConvergenceMonitor empty(plain());
  empty.record(INFINITY, {});
  EXPECT_FALSE(empty.record(INFINITY, {}));
}

// The defaults: Delta = 2 steps, at least 4 steps, Eq. 5 at 2 consecutive steps.
TEST(Convergence, DefaultsNeedPatience) {
  ConvergenceMonitor m;
  EXPECT_FALSE(m.record(100.0, kStable));
  EXPECT_FALSE(m.record(100.0, kStable));
  EXPECT_FALSE(m.record(100.0, kStable));  // holds against step 0, streak 1
  EXPECT_TRUE(m.record(100.0, kStable));   // streak 2, 4 steps
  ConvergenceMonitor broken;
  broken.record(100.0, kStable);
  broken.record(100.0, kStable);
  broken.record(100.0, kStable);           // streak 1
  EXPECT_FALSE(broken.record(90.0, kStable));  // 10 % better than step 1: streak reset
  EXPECT_FALSE(broken.record(90.0, kStable));  // 10 % better than step 2 still
  EXPECT_FALSE(broken.record(90.0, kStable));  // holds against step 3: streak 1
  EXPECT_TRUE(broken.record(90.0, kStable));
}

}  // namespace
}  // namespace tuccl
