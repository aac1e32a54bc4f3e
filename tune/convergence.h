// The convergence test of MRACO (TuCCL Eq. 5, Algorithm 1 stage 3).
//
// In:  after every step t (one Hyperband iteration in MRACO), the incumbent objective eta_t
//      (lower is better) and the distribution p_t of the good set's Parzen estimator, given as
//      one marginal per dimension (discretised over the dimension's values).
// Out: converged when, for lag Delta, both
//        (eta_{t-Delta} - eta_t) / eta_{t-Delta} < minRelativeImprovement   (1 %)   and
//        D_KL(p_t || p_{t-Delta}) < maxKl                                     (0.1),
//      after at least `minSteps` steps, at `patience` consecutive steps. D_KL of the product of the marginals is the sum of the
//      per-dimension divergences (a cheap stand-in for the joint over a space
//      that may have millions of points).
#pragma once

#include <limits>
#include <span>
#include <vector>

namespace tuccl {

struct ConvergenceOptions {
  bool enabled = true;
  double minRelativeImprovement = 0.01;
  double maxKl = 0.1;
  int lag = 2;       ///< Delta, in steps
  int minSteps = 4;  ///< never stop before this many steps
  int patience = 2;  ///< Eq. 5 must hold at this many consecutive steps
};

using Marginals = std::vector<std::vector<double>>;

/// D_KL(p || q) of two discrete distributions of the same size, with both floored at 1e-12 and
/// renormalised (a zero in q would make it infinite).
double klDivergence(std::span<const double> p, std::span<const double> q);
/// Sum of the per-dimension divergences; +inf when the shapes differ.
double klDivergence(const Marginals& p, const Marginals& q);

class ConvergenceMonitor {
 public:
  explicit ConvergenceMonitor(ConvergenceOptions options = {}) : options_(options) {}

  /// Records step t and returns whether Eq. 5 now holds.
  bool record(double incumbent, Marginals distribution);
  bool converged() const { return converged_; }
  size_t steps() const { return incumbents_.size(); }
  /// The terms of the last test (NaN before the first).
  double lastRelativeImprovement() const { return lastImprovement_; }
  double lastKl() const { return lastKl_; }

 private:
  ConvergenceOptions options_;
  std::vector<double> incumbents_;
  std::vector<Marginals> distributions_;
  bool converged_ = false;
  int streak_ = 0;
  double lastImprovement_ = std::numeric_limits<double>::quiet_NaN();
  double lastKl_ = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace tuccl
