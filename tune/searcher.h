// Search strategies behind one interface (issue 8 items 2–3): MRACO (TPE + Hyperband + Eq. 5
// + elite retention), grid, random, TPE alone, coordinate descent per (algorithm, protocol)
// subspace (AutoCCL).
//
// In:  a SearchSpace, a Profiler bound to one workload, SearchOptions (seed, budget, R_max, eta,
//      TPE and convergence settings).
// Out: a SearchResult — the best configuration (by its measurement at R_max when there is one),
//      every trial in order, the profiling cost spent (sum of r) and why the search stopped.
//
// Determinism: a searcher draws only from a std::mt19937_64 seeded with options.seed and visits
// containers in a fixed order, so the same seed and profiler give the same trial sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tune/convergence.h"
#include "tune/hyperband.h"
#include "tune/profiler.h"
#include "tune/search_space.h"
#include "tune/tpe.h"

namespace tuccl {

/// One profiling call.
struct Trial {
  uint32_t id = 0;  ///< position in the sequence
  Configuration config;  ///< empty when isDefault
  bool isDefault = false;  ///< a measurement of the system's default (Profiler::profileDefault)
  int64_t resource = 0;
  Measurement measurement;
  int32_t bracket = -1;  ///< MRACO: Hyperband bracket s; -1 elsewhere
  int32_t rung = -1;     ///< MRACO: rung i within the bracket
};

struct SearchOptions {
  uint64_t seed = 1;
  /// Profiling budget: the sum of r over all trials never exceeds it; 0 = no limit (grid and
  /// coordinate descent end on their own; random, TPE and MRACO then need maxTrials or
  /// convergence).
  double budget = 0;
  /// R_max: repetitions of one full measurement (the resource of grid, random, TPE and
  /// coordinate-descent trials, and of MRACO's last rung).
  int64_t maxResource = 27;
  double eta = 3;
  RungRounding rounding = RungRounding::Ceil;
  /// Stop after this many trials (0 = no limit).
  uint32_t maxTrials = 0;
  TpeOptions tpe;
  ConvergenceOptions convergence;
  /// MRACO's final selection: before returning, the `finalCandidates` best distinct
  /// configurations by their mean at R_max are re-measured at R_max in rounds (a race) with a
  /// reserve of `finalReserve` x the search's cost (held back from the budget: the search itself
  /// stops at budget / (1 + finalReserve)); a candidate leaves the race when its mean is more than
  /// `finalZ` standard errors (pooled noise estimate) above the leader's; the pick is the lowest
  /// pooled mean. finalReserve = 0 or finalCandidates < 2 turns it off.
  double finalReserve = 0.15;
  int finalCandidates = 4;
  double finalZ = 2.0;
  /// Coordinate descent: the categorical dimensions that span the subspaces.
  std::vector<std::string> subspaceDimensions = {"algorithm", "protocol"};
  /// Abort (std::runtime_error carrying the profiler's message) when this many trials in a row
  /// failed before any succeeded: a broken command, not a bad configuration.
  int maxLeadingFailures = 3;
  /// Called after every trial (progress bars, trial logs).
  std::function<void(const Trial&)> onTrial;
};

struct SearchResult {
  std::string method;
  std::optional<Configuration> best;  ///< empty when nothing was measured successfully
  Measurement bestMeasurement;
  int64_t bestResource = 0;  ///< the resource of the measurement that chose `best`
  std::vector<Trial> trials;
  double cost = 0;  ///< sum of r
  bool converged = false;
  std::string stopReason;  ///< "budget", "exhausted", "converged", "max trials"
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  virtual std::string_view name() const = 0;
  virtual SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) = 0;
};

/// "mraco", "grid", "random", "tpe", "coordinate" (AutoCCL); nullptr for other names.
std::unique_ptr<Searcher> makeSearcher(std::string_view name);
/// The names makeSearcher knows, in a fixed order.
std::vector<std::string> searcherNames();

std::unique_ptr<Searcher> makeMracoSearcher();
std::unique_ptr<Searcher> makeGridSearcher();
std::unique_ptr<Searcher> makeRandomSearcher();
std::unique_ptr<Searcher> makeTpeSearcher();
std::unique_ptr<Searcher> makeCoordinateDescentSearcher();

/// Thrown inside a search when the next trial would exceed the budget or the trial limit;
/// searchers catch it and return what they have.
struct SearchStopped {
  std::string reason;
};

/// Profiles for a searcher: charges the budget, numbers and records the trials, keeps the
/// incumbent (the best measurement at the largest resource seen — elite retention, Algorithm 1
/// line 10) and enforces maxLeadingFailures.
class ProfilingSession {
 public:
  ProfilingSession(std::string method, const SearchSpace& space, Profiler& profiler, const SearchOptions& options);

  /// Whether a trial of `resource` still fits the budget and trial limit.
  bool canAfford(int64_t resource) const;
  /// Profiles `config`; throws SearchStopped when it does not fit.
  const Measurement& profile(const Configuration& config, int64_t resource, int32_t bracket = -1, int32_t rung = -1);
  double spent() const { return result_.cost; }
  const std::vector<Trial>& trials() const { return result_.trials; }
  /// Best objective measured at exactly `resource` so far (+inf when none).
  double bestAt(int64_t resource) const;
  /// The result so far, with `stopReason`.
  SearchResult finish(std::string stopReason, bool converged = false);

 private:
  const SearchSpace& space_;
  Profiler& profiler_;
  const SearchOptions& options_;
  SearchResult result_;
  int leadingFailures_ = 0;
  bool anySuccess_ = false;
};

}  // namespace tuccl
