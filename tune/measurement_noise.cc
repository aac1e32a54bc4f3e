#include "tune/measurement_noise.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tune/synthetic_profiler.h"

namespace tuccl {

Measurement NoisyProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  Measurement m = exact_.profile(space, config, resource);
  uint64_t& repeat = repeats_[{config, resource}];
  const uint64_t seed =
      mixBits(seed_ ^ mixBits(hashConfiguration(config) ^ mixBits(static_cast<uint64_t>(resource) + (repeat++ << 32))));
  if (!m.ok) return m;
  m = noisySamples(m.timeUs, sigma_, resource, seed, m.busBwGBps * m.timeUs);
  return m;
}

}  // namespace tuccl
