// Confirming a search's choice against the system's default (docs/tuning.md, "Confirmation"):
// the best few configurations a search found and the default (Profiler::profileDefault: what
// runs when nothing is set) are measured in interleaved rounds — every round runs each once, in
// an order that rotates from round to round, so a drift of the machine falls on all alike — until
// the fastest one's ratio to the default, paired by round, is significant either way (its 95 %
// interval excludes 1) or the rounds run out. A table entry differs from the default only where
// the win is significant.
//
// In:  a profiler with a default, the search space, the candidate configurations (distinct),
//      ConfirmationOptions, and a callback told of every run (the trial log).
// Out: a Confirmation — every candidate and the default, fastest first by the median of their
//      round times with its interval; the fastest candidate's PairedRatio to the default; whether
//      the default is kept.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tune/profiler.h"
#include "tune/searcher.h"

namespace tuccl {

struct ConfirmationOptions {
  /// Rounds before the first decision: 6 pairs give Student t 5 degrees of freedom.
  int32_t minRounds = 6;
  /// Rounds at most; the default is kept when the interval still includes 1 then.
  int32_t maxRounds = 12;
  /// Repetitions of each run (its median is the run's time).
  int64_t resource = 9;
};

struct ConfirmedCandidate {
  std::optional<Configuration> config;  ///< empty: the default
  std::vector<double> roundUs;          ///< each round's time (+inf for a failed run)
  /// The rounds' times as one sample: their median and its interval (failed runs left out; a
  /// candidate that never ran has ok = false).
  Measurement summary;
  bool isDefault() const { return !config.has_value(); }
};

struct Confirmation {
  /// The candidates and the default, fastest first (a failed one last).
  std::vector<ConfirmedCandidate> candidates;
  /// The fastest configuration other than the default against the default, paired by round.
  PairedRatio versusDefault;
  size_t rival = 0;          ///< candidates index of that configuration
  bool keepDefault = true;   ///< versusDefault is not significantly below 1
  int32_t rounds = 0;
  /// The chosen one: the default when keepDefault, else the rival.
  const ConfirmedCandidate& chosen() const;
};

/// Runs the rounds; every run is told to `onRun` as a Trial numbered from `firstTrialId` (the
/// default's with isDefault). A failed run counts as an infinitely slow round of its candidate. A
/// default that never ran successfully cannot be kept: the fastest candidate is chosen, with an
/// empty versusDefault (0 pairs).
Confirmation confirmAgainstDefault(Profiler& profiler, const SearchSpace& space,
                                   const std::vector<Configuration>& candidates, const ConfirmationOptions& options,
                                   uint32_t firstTrialId, const std::function<void(const Trial&)>& onRun);

}  // namespace tuccl
