#include "tune/measurement_noise.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "tune/synthetic_profiler.h"

namespace tuccl {

Measurement NoisyProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  Measurement m = exact_.profile(space, config, resource);
  const uint64_t seed = measurementSeed(seed_, config, resource, repeats_[{config, resource}]++);
  if (!m.ok) return m;
  m = noisySamples(m.timeUs, sigma_, resource, seed, m.busBwGBps * m.timeUs);
  return m;
}

}  // namespace tuccl
