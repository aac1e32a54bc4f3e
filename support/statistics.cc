#include "support/statistics.h"

#include <algorithm>
#include <cstddef>

namespace tuccl {
namespace {

/// McGill, Tukey and Larsen (1978), "Variations of box plots": medians whose notches,
/// median +- 1.58 IQR / sqrt(n), do not overlap differ at roughly the 95 % level.
constexpr double kNotch = 1.58;

/// sqrt(n) of a sample count by Newton's iteration (std::sqrt may call libm).
double sqrtOfCount(size_t n) {
  const auto x = static_cast<double>(n);
  double r = x > 1 ? x / 2 : 1;
  for (int i = 0; i < 64; ++i) r = (r + x / r) / 2;
  return r;
}

}  // namespace

double quantileOfSorted(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto low = static_cast<size_t>(at);
  const size_t high = std::min(low + 1, sorted.size() - 1);
  return sorted[low] + (sorted[high] - sorted[low]) * (at - static_cast<double>(low));
}

std::pair<double, double> medianAndHalfWidth(std::vector<double> samples) {
  if (samples.empty()) return {-1, 0};
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  auto quantile = [&](double q) { return quantileOfSorted(samples, q); };
  const double median = quantile(0.5);
  if (n < 2) return {median, 0};
  return {median, kNotch * (quantile(0.75) - quantile(0.25)) / sqrtOfCount(n)};
}

}  // namespace tuccl
