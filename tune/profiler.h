// Profilers: what one configuration costs on one workload, measured with a resource r
// (profiling iterations; issue 8 item 4). Every searcher talks to a profiler through this
// interface only, so the simulator, a command template (nccl-tests) and a synthetic landscape
// are interchangeable.
//
// In:  a configuration of a SearchSpace and the resource r >= 1 to spend on it.
// Out: a Measurement — the time per iteration (the objective, lower is better), the bus
//      bandwidth, the resource charged, or a failure with a message a user can act on.
//
// A profiler is bound to its workload (collective and size) when it is constructed.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "tune/search_space.h"

namespace tuccl {

struct Measurement {
  bool ok = true;
  double timeUs = std::numeric_limits<double>::infinity();  ///< mean time of one iteration
  double busBwGBps = 0;                                      ///< nccl-tests' busbw
  double cost = 0;                                           ///< resource charged (r)
  std::string error;                                         ///< why, when !ok
};

/// The objective the searchers minimise: timeUs, +inf for a failed measurement.
inline double objectiveOf(const Measurement& m) {
  return m.ok ? m.timeUs : std::numeric_limits<double>::infinity();
}

class Profiler {
 public:
  virtual ~Profiler() = default;
  /// "synthetic", "command", "sim"
  virtual std::string_view name() const = 0;
  /// Measures `config` with `resource` profiling iterations. Never throws for a failure of the
  /// measured system (a crashing command, an unparsable output): that is a Measurement with
  /// ok = false. Throws only for misuse (resource < 1, a configuration of another space).
  virtual Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) = 0;
};

}  // namespace tuccl
