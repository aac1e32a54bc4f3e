// Seeded measurement noise as a decorator over a noiseless profiler (the simulator with sigma 0),
// so that a replayed trial log (tune/trial_log.h) can advance the noise state without measuring.
//
// In:  an exact profiler, sigma, a seed.
// Out: r repetitions t · max(0.05, 1 + sigma · z), z ~ N(0, 1) clipped to ±3, and their median
//      (noisySamples, tune/profiler.h: SimProfiler's and SyntheticProfiler's model), seeded per
//      (seed, configuration, r, how many times that pair was measured or replayed before).
#pragma once

#include <map>
#include <utility>

#include "tune/profiler.h"

namespace tuccl {

class NoisyProfiler : public Profiler {
 public:
  NoisyProfiler(Profiler& exact, double sigma, uint64_t seed) : exact_(exact), sigma_(sigma), seed_(seed) {}
  std::string_view name() const override { return exact_.name(); }
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override;
  /// Counts a measurement of (config, resource) that was replayed from a log instead of taken.
  void countReplayed(const Configuration& config, int64_t resource) { ++repeats_[{config, resource}]; }

 private:
  Profiler& exact_;
  double sigma_;
  uint64_t seed_;
  std::map<std::pair<Configuration, int64_t>, uint64_t> repeats_;
};

}  // namespace tuccl
