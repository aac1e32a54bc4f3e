#include "tune/sim_profiler.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "scheduler/plan_builder.h"
#include "sim/metrics.h"
#include "sim/simulator.h"
#include "tune/synthetic_profiler.h"

namespace tuccl {

SimProfiler::SimProfiler(Network network, std::map<std::string, Algorithm> algorithms, SimProfilerOptions options)
    : network_(std::move(network)), algorithms_(std::move(algorithms)), options_(std::move(options)) {
  if (algorithms_.empty()) throw std::invalid_argument("sim profiler: no candidate algorithm");
  if (options_.defaultAlgorithm.empty()) options_.defaultAlgorithm = algorithms_.begin()->first;
}

double SimProfiler::simulatedTime(const SearchSpace& space, const Configuration& config) {
  if (auto it = simulated_.find(config); it != simulated_.end()) return it->second.timeUs;
  std::string algorithm = space.valueOf(config, kDimAlgorithm);
  if (algorithm.empty()) algorithm = options_.defaultAlgorithm;
  std::string scheduler = space.valueOf(config, kDimScheduler);
  if (scheduler.empty()) scheduler = options_.defaultScheduler;
  auto found = algorithms_.find(algorithm);
  if (found == algorithms_.end()) throw std::invalid_argument("sim profiler: unknown algorithm '" + algorithm + "'");

  auto key = std::make_pair(algorithm, scheduler);
  auto planIt = plans_.find(key);
  if (planIt == plans_.end()) {
    PlanRequest request;
    const auto parsed = parseScheduler(scheduler);
    if (!parsed) throw std::invalid_argument("sim profiler: unknown scheduler '" + scheduler + "'");
    request.scheduler = *parsed;
    request.config.nChannels = 1;
    Expected<Plan> built = buildPlan(found->second, request);
    if (!built) throw std::invalid_argument(built.status().message());
    planIt = plans_.emplace(key, std::move(*built)).first;
  }
  Plan& plan = planIt->second;
  PlanConfig c = plan.config;
  if (std::string p = space.valueOf(config, kDimProtocol); !p.empty()) {
    const auto protocol = parseProtocol(p);
    if (!protocol) throw std::invalid_argument("sim profiler: unknown protocol '" + p + "'");
    c.protocol = *protocol;
  }
  c.nThreads = static_cast<int32_t>(space.levelOf(config, kDimThreads, c.nThreads));
  c.chunkSize = space.levelOf(config, kDimChunkBytes, c.chunkSize);
  c.nChannels = static_cast<int32_t>(space.levelOf(config, kDimChannels, c.nChannels));
  plan.config = c;
  SimOptions sim;
  sim.messageBytes = options_.messageBytes;
  sim.cost = options_.cost;
  Expected<SimResult> simulated = simulatePlan(plan, network_, sim);
  throwIfError(simulated.status());
  const double t = simulated->timeUs;
  simulated_.emplace(config, Simulated{t, busBandwidthFactor(found->second.collective, plan.nRanks)});
  return t;
}

Measurement SimProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  if (resource < 1) throw std::invalid_argument("profile: resource must be >= 1");
  Measurement m;
  m.cost = static_cast<double>(resource);
  double t = 0;
  try {
    if (!space.isValid(config)) throw std::invalid_argument("invalid configuration: " + space.describe(config));
    t = simulatedTime(space, config);
  } catch (const std::exception& e) {
    m.ok = false;
    m.error = std::string("simulation of ") + space.describe(config) + " failed: " + e.what();
    return m;
  }
  const uint64_t seed = measurementSeed(options_.seed, config, resource, repeats_[{config, resource}]++);
  m = noisySamples(t, options_.sigma, resource, seed,
                   static_cast<double>(options_.messageBytes) / 1e3 * simulated_.at(config).busBwFactor);
  return m;
}

}  // namespace tuccl
