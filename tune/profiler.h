// Profilers: what one configuration costs on one workload, measured with a resource r: the
// repetitions of the measurement (MRACO's budget levels are in repetitions). Every searcher talks to a profiler through this interface only, so the
// simulator, a command template (nccl-tests, tuccl-bench) and a synthetic landscape are
// interchangeable.
//
// In:  a configuration of a SearchSpace and the resource r >= 1 to spend on it.
// Out: a Measurement — a sample, not a number: the time of each repetition, their median (the
//      objective, lower is better), the median's 95 % interval and the spread, the bus
//      bandwidth, the resource charged; or a failure with a message a user can act on.
//
// A profiler is bound to its workload (collective and size) when it is constructed.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tune/search_space.h"

namespace tuccl {

struct Measurement {
  bool ok = true;
  /// The median of samplesUs: the objective. (A profiler that sees only one number per
  /// measurement, e.g. a command without {reps}, has one sample.)
  double timeUs = std::numeric_limits<double>::infinity();
  /// The 95 % interval of the median (McGill's notch, median +- 1.58 IQR / sqrt(n): the statistic
  /// the runtime phase switches on, adapt/policy.h); [timeUs, timeUs] for one sample;
  /// [0, inf) where nothing is known.
  double lowUs = 0;
  double highUs = std::numeric_limits<double>::infinity();
  double spreadUs = 0;              ///< the interquartile range of the samples
  std::vector<double> samplesUs;    ///< one time per repetition, in the order measured
  double busBwGBps = 0;             ///< nccl-tests' busbw, at the median time
  double cost = 0;                  ///< resource charged (r)
  std::string error;                ///< why, when !ok
};

/// The measurement of repeated timings `samplesUs` (at least one, each finite and > 0): their
/// median, its interval and the spread; busBwGBps of the median from `busBwTimesUs` (busbw × time,
/// the same for every repetition of one size; 0: unknown); cost = `cost`.
Measurement measurementOfSamples(std::vector<double> samplesUs, double cost, double busBwTimesUs = 0);

/// The seeded noise model of the simulated profilers (sim, synthetic, NoisyProfiler): `resource`
/// repetitions, each trueUs · max(0.05, 1 + sigma · z), z ~ N(0, 1) clipped to +-3, drawn from
/// `seed`; their measurementOfSamples (the median's spread shrinks like 1 / sqrt(r)).
Measurement noisySamples(double trueUs, double sigma, int64_t resource, uint64_t seed, double busBwTimesUs);

/// The objective the searchers minimise: timeUs, +inf for a failed measurement.
inline double objectiveOf(const Measurement& m) {
  return m.ok ? m.timeUs : std::numeric_limits<double>::infinity();
}

/// Whether `a` is significantly slower than `b`: a's interval lies wholly above b's. A failed
/// measurement is slower than any successful one.
bool significantlySlower(const Measurement& a, const Measurement& b);

/// The time ratio of paired runs, first_i / second_i (run i of each taken back to back): the
/// geometric mean of the ratios and its 95 % interval (Student t on the log ratios — the
/// statistic bench/tuned_vs_default.sh prints), and how many pairs the first won.
struct PairedRatio {
  double ratio = 1;
  double low = 0;
  double high = std::numeric_limits<double>::infinity();
  int32_t pairs = 0;
  int32_t firstWon = 0;
  /// The first is significantly faster (the interval lies below 1) / slower (above 1).
  bool faster() const { return high < 1; }
  bool slower() const { return low > 1; }
};
/// Pairs with a non-positive or non-finite time are left out; fewer than 2 pairs give the
/// unbounded interval.
PairedRatio pairedRatio(const std::vector<double>& first, const std::vector<double>& second);

class Profiler {
 public:
  virtual ~Profiler() = default;
  /// "synthetic", "command", "sim"
  virtual std::string_view name() const = 0;
  /// Measures `config` with `resource` profiling iterations. Never throws for a failure of the
  /// measured system (a crashing command, an unparsable output): that is a Measurement with
  /// ok = false. Throws only for misuse (resource < 1, a configuration of another space).
  virtual Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) = 0;
  /// Whether the measured system has a default of its own: what runs when no configuration is
  /// set (NCCL's choice, libtuccl's built-in defaults). The tuning run confirms its winners
  /// against it.
  virtual bool hasDefault() const { return false; }
  /// Measures that default with `resource` repetitions; a failed Measurement without one.
  virtual Measurement profileDefault(int64_t resource);
};

}  // namespace tuccl
