#include "tune/convergence.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tuccl {

double klDivergence(std::span<const double> p, std::span<const double> q) {
  if (p.size() != q.size()) return std::numeric_limits<double>::infinity();
  constexpr double kFloor = 1e-12;
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    sp += std::max(p[i], kFloor);
    sq += std::max(q[i], kFloor);
  }
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double a = std::max(p[i], kFloor) / sp, b = std::max(q[i], kFloor) / sq;
    kl += a * std::log(a / b);
  }
  return std::max(0.0, kl);
}

double klDivergence(const Marginals& p, const Marginals& q) {
  if (p.size() != q.size()) return std::numeric_limits<double>::infinity();
  double total = 0;
  for (size_t d = 0; d < p.size(); ++d) total += klDivergence(p[d], q[d]);
  return total;
}

bool ConvergenceMonitor::record(double incumbent, Marginals distribution) {
  incumbents_.push_back(incumbent);
  distributions_.push_back(std::move(distribution));
  lastImprovement_ = lastKl_ = std::numeric_limits<double>::quiet_NaN();
  const size_t t = incumbents_.size() - 1;
  const size_t lag = static_cast<size_t>(std::max(1, options_.lag));
  if (t < lag) return converged_ = false;
  const double before = incumbents_[t - lag];
  const double now = incumbents_[t];
  bool holds = false;
  if (std::isfinite(before) && std::isfinite(now)) {
    lastImprovement_ = before > 0 ? (before - now) / before : 0.0;
    lastKl_ = klDivergence(distributions_[t], distributions_[t - lag]);
    holds = lastImprovement_ < options_.minRelativeImprovement && lastKl_ < options_.maxKl;
  }
  streak_ = holds ? streak_ + 1 : 0;
  converged_ = options_.enabled && incumbents_.size() >= static_cast<size_t>(std::max(options_.minSteps, 1)) &&
               streak_ >= std::max(options_.patience, 1);
  return converged_;
}

}  // namespace tuccl
