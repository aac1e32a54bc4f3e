// A profiler over an analytic landscape, for tests and benchmarks of the searchers.
//
// In:  a function giving the true time (µs) of a configuration, a relative noise spread sigma and
//      a seed.
// Out: measurements of r repetitions t · (1 + sigma · z), z ~ N(0, 1) clipped to ±3
//      (noisySamples, tune/profiler.h) — the median's spread shrinks like 1 / sqrt(r), so pruning
//      at small r is tested under realistic noise. The noise of a call depends only on (seed,
//      configuration, r, how many times that pair was measured before), so the same request
//      sequence gives the same values.
#pragma once

#include <functional>
#include <map>
#include <utility>

#include "tune/profiler.h"

namespace tuccl {

class SyntheticProfiler : public Profiler {
 public:
  using TrueTime = std::function<double(const SearchSpace&, const Configuration&)>;

  SyntheticProfiler(TrueTime trueTime, double sigma, uint64_t seed, double bytes = 1 << 20);

  std::string_view name() const override { return "synthetic"; }
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override;
  /// The noiseless time of `config` (what a benchmark compares searchers on).
  double trueTime(const SearchSpace& space, const Configuration& config) const { return trueTime_(space, config); }

 private:
  TrueTime trueTime_;
  double sigma_;
  uint64_t seed_;
  double bytes_;
  std::map<std::pair<Configuration, int64_t>, uint64_t> repeats_;
};

/// A multi-modal landscape over the default space's dimension names (tests, bench): each
/// protocol has its own optimum in (nChannels, nThreads, chunkBytes) with different depths,
/// ridges between them, a per-algorithm and per-scheduler factor, and a small deterministic
/// roughness (hash of the configuration) so no two neighbours tie. `variant` reshuffles the
/// optima; every value is > 0.
double multimodalLandscape(const SearchSpace& space, const Configuration& config, uint64_t variant);

/// SplitMix64 finaliser: a well-mixed 64-bit hash step, used for seeded per-item randomness.
uint64_t mixBits(uint64_t x);
/// Hash of a configuration's indices (order-sensitive).
uint64_t hashConfiguration(const Configuration& config);
/// The noise seed of one measurement of the seeded profilers (sim, synthetic, NoisyProfiler): per
/// (seed, configuration, resource, how many times that pair was measured before).
inline uint64_t measurementSeed(uint64_t seed, const Configuration& config, int64_t resource, uint64_t repeat) {
  return mixBits(seed ^ mixBits(hashConfiguration(config) ^ mixBits(static_cast<uint64_t>(resource) + (repeat << 32))));
}

}  // namespace tuccl
