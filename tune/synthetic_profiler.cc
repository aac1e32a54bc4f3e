#include "tune/synthetic_profiler.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace tuccl {

uint64_t mixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hashConfiguration(const Configuration& config) {
  uint64_t h = 0x51ed270b27e4a3c5ull;
  for (uint32_t i : config.index) h = mixBits(h ^ i);
  return h;
}

SyntheticProfiler::SyntheticProfiler(TrueTime trueTime, double sigma, uint64_t seed, double bytes)
    : trueTime_(std::move(trueTime)), sigma_(sigma), seed_(seed), bytes_(bytes) {}

Measurement SyntheticProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  if (resource < 1) throw std::invalid_argument("profile: resource must be >= 1");
  if (!space.isValid(config)) {
    Measurement bad;
    bad.ok = false;
    bad.cost = static_cast<double>(resource);
    bad.error = "invalid configuration: " + space.describe(config);
    return bad;
  }
  const uint64_t seed = measurementSeed(seed_, config, resource, repeats_[{config, resource}]++);
  return noisySamples(trueTime_(space, config), sigma_, resource, seed, bytes_ / 1e3);
}

double multimodalLandscape(const SearchSpace& space, const Configuration& config, uint64_t variant) {
  const std::optional<Protocol> protocol = protocolOf(space, config);
  const double channels = std::log2(static_cast<double>(space.levelOf(config, kDimChannels, 4)));
  const double threads = static_cast<double>(space.levelOf(config, kDimThreads, 256)) / 32.0;
  const double chunk = std::log2(static_cast<double>(space.levelOf(config, kDimChunkBytes, 1 << 17)));

  // Per-protocol optimum (log2 channels, warps, log2 chunk) and depth; `variant` moves them.
  struct Mode {
    double c, t, b, depth;
  };
  auto shift = [&](int salt, double range) {
    return (static_cast<double>(mixBits(variant * 131 + static_cast<uint64_t>(salt)) % 1000) / 1000.0 - 0.5) * range;
  };
  Mode mode;
  if (protocol == Protocol::LL)
    mode = {1.0 + shift(1, 1.5), 8 + shift(2, 6), 12 + shift(3, 3), 1.30};
  else if (protocol == Protocol::LL128)
    mode = {3.0 + shift(4, 1.5), 14 + shift(5, 6), 16 + shift(6, 3), 1.05 + 0.1 * std::abs(shift(13, 1))};
  else
    mode = {2.5 + shift(7, 2.0), 10 + shift(8, 6), 19 + shift(9, 3), 1.00};
  // A second, shallower basin per protocol (multi-modality inside one protocol).
  Mode second{mode.c + 1.5 + shift(10, 1), mode.t - 5 + shift(11, 2), mode.b - 5 + shift(12, 2), mode.depth * 1.04};

  auto bowl = [&](const Mode& m) {
    double dc = channels - m.c, dt = (threads - m.t) / 4.0, db = (chunk - m.b) / 2.0;
    return m.depth * (1.0 + 0.08 * dc * dc + 0.05 * dt * dt + 0.06 * db * db + 0.02 * dc * db);
  };
  double value = std::min(bowl(mode), bowl(second));

  const std::string algorithm = space.valueOf(config, kDimAlgorithm);
  if (!algorithm.empty()) {
    size_t d = space.dimensionIndex(kDimAlgorithm);
    value *= 1.0 + 0.06 * static_cast<double>(mixBits(variant ^ (0xa1 + config.index[d])) % 100) / 100.0;
  }
  const std::string scheduler = space.valueOf(config, kDimScheduler);
  if (!scheduler.empty()) {
    size_t d = space.dimensionIndex(kDimScheduler);
    value *= config.index[d] == 0 ? 1.0 : 1.02 + 0.01 * config.index[d];
  }
  // Roughness: ±0.3 %, deterministic per configuration.
  value *= 1.0 + 0.003 * (static_cast<double>(mixBits(hashConfiguration(config) ^ variant) % 2001) / 1000.0 - 1.0);
  return 100.0 * value;
}

}  // namespace tuccl
