// The statistics of a measurement (tune/profiler.h): a sample's median, interval and spread, and
// the ratio of paired runs.
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <stdexcept>

#include "support/statistics.h"
#include "tune/profiler.h"

namespace tuccl {
namespace {

/// The two-sided 95 % quantile of Student's t with `dof` degrees of freedom (standard tables);
/// the normal's 1.96 beyond 30.
double studentT975(int32_t dof) {
  static constexpr std::array<double, 30> kT975 = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
      2.120,  2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof < 1) return std::numeric_limits<double>::infinity();
  return dof <= 30 ? kT975[static_cast<size_t>(dof - 1)] : 1.96;
}

}  // namespace

Measurement measurementOfSamples(std::vector<double> samplesUs, double cost, double busBwTimesUs) {
  if (samplesUs.empty()) throw std::invalid_argument("measurementOfSamples: no samples");
  for (double t : samplesUs)
    if (!std::isfinite(t) || !(t > 0)) throw std::invalid_argument("measurementOfSamples: a time is not finite and > 0");
  Measurement m;
  m.cost = cost;
  const auto [median, halfWidth] = medianAndHalfWidth(samplesUs);
  m.timeUs = median;
  m.lowUs = std::max(0.0, median - halfWidth);
  m.highUs = median + halfWidth;
  std::vector<double> sorted = samplesUs;
  std::sort(sorted.begin(), sorted.end());
  m.spreadUs = quantileOfSorted(sorted, 0.75) - quantileOfSorted(sorted, 0.25);
  m.busBwGBps = busBwTimesUs > 0 ? busBwTimesUs / median : 0;
  m.samplesUs = std::move(samplesUs);
  return m;
}

Measurement noisySamples(double trueUs, double sigma, int64_t resource, uint64_t seed, double busBwTimesUs) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> samples(static_cast<size_t>(std::max<int64_t>(1, resource)));
  for (double& t : samples) t = trueUs * std::max(0.05, 1.0 + sigma * std::clamp(normal(rng), -3.0, 3.0));
  return measurementOfSamples(std::move(samples), static_cast<double>(resource), busBwTimesUs);
}

bool significantlySlower(const Measurement& a, const Measurement& b) {
  if (!b.ok) return false;
  if (!a.ok) return true;
  return a.lowUs > b.highUs;
}

Measurement Profiler::profileDefault(int64_t resource) {
  Measurement m;
  m.ok = false;
  m.cost = static_cast<double>(resource);
  m.error = "the " + std::string(name()) + " profiler has no default configuration to measure";
  return m;
}

PairedRatio pairedRatio(const std::vector<double>& first, const std::vector<double>& second) {
  PairedRatio r;
  std::vector<double> logs;
  for (size_t i = 0; i < std::min(first.size(), second.size()); ++i) {
    if (!(first[i] > 0) || !(second[i] > 0) || !std::isfinite(first[i]) || !std::isfinite(second[i])) continue;
    logs.push_back(std::log(first[i] / second[i]));
    if (first[i] < second[i]) ++r.firstWon;
  }
  r.pairs = static_cast<int32_t>(logs.size());
  if (logs.empty()) return r;
  double mean = 0;
  for (double x : logs) mean += x;
  mean /= static_cast<double>(logs.size());
  r.ratio = std::exp(mean);
  if (logs.size() < 2) return r;
  double squares = 0;
  for (double x : logs) squares += (x - mean) * (x - mean);
  const double n = static_cast<double>(logs.size());
  const double halfWidth = studentT975(r.pairs - 1) * std::sqrt(squares / (n - 1) / n);
  r.low = std::exp(mean - halfWidth);
  r.high = std::exp(mean + halfWidth);
  return r;
}

}  // namespace tuccl
