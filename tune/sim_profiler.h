// The simulator profiler (issue 8 item 4): a configuration is compiled into a plan and run by the
// discrete-event simulator (sim/simulator.h); a seeded measurement-noise model (noisySamples,
// tune/profiler.h: r repetitions of t · (1 + sigma · z), their median) makes pruning face
// realistic noise.
//
// In:  the Network of a topology, the candidate algorithms by name (the values of the space's
//      "algorithm" dimension), the message size, a cost model, sigma and a seed.
// Out: Measurements: the simulated time, busbw = bytes / time × the collective's nccl-tests
//      factor. Plans are compiled once per (algorithm, scheduler) — the sketch variant is part of
//      the algorithm's name — and simulated once per configuration (the noise is added per call).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "lang/algorithm.h"
#include "plan/plan.h"
#include "sim/cost_model.h"
#include "sim/network.h"
#include "tune/profiler.h"

namespace tuccl {

struct SimProfilerOptions {
  int64_t messageBytes = 1 << 20;
  CostModel cost = defaultCostModel();
  double sigma = 0.05;  ///< relative spread of one repetition's time
  uint64_t seed = 1;
  /// Used when the space has no "algorithm" / "scheduler" dimension.
  std::string defaultAlgorithm;
  std::string defaultScheduler = "hpds";
};

class SimProfiler : public Profiler {
 public:
  SimProfiler(Network network, std::map<std::string, Algorithm> algorithms, SimProfilerOptions options);
  std::string_view name() const override { return "sim"; }
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override;
  /// The noiseless simulated time of `config` (µs); throws what the simulator throws.
  double simulatedTime(const SearchSpace& space, const Configuration& config);
  size_t compiledPlans() const { return plans_.size(); }

 private:
  Network network_;
  std::map<std::string, Algorithm> algorithms_;
  SimProfilerOptions options_;
  std::map<std::pair<std::string, std::string>, Plan> plans_;  // (algorithm, scheduler)
  struct Simulated {
    double timeUs = 0;
    double busBwFactor = 1;
  };
  std::map<Configuration, Simulated> simulated_;
  std::map<std::pair<Configuration, int64_t>, uint64_t> repeats_;
};

}  // namespace tuccl
