#include "tune/measurement_noise.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tune/synthetic_profiler.h"

namespace tuccl {

Measurement NoisyProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  Measurement m = exact_.profile(space, config, resource);
  uint64_t& repeat = repeats_[{config, resource}];
  std::mt19937_64 rng(mixBits(seed_ ^ mixBits(hashConfiguration(config) ^
                                               mixBits(static_cast<uint64_t>(resource) + (repeat++ << 32)))));
  const double z = std::clamp(std::normal_distribution<double>(0.0, 1.0)(rng), -3.0, 3.0);
  if (!m.ok) return m;
  const double factor = std::max(0.05, 1.0 + sigma_ / std::sqrt(static_cast<double>(resource)) * z);
  m.timeUs *= factor;
  m.busBwGBps /= factor;
  return m;
}

}  // namespace tuccl
