// The runtime phase's decision rule (TuCCL §III-A, "runtime phase"): per (collective, size
// bucket), which configuration group the next call runs, learnt from measured completion times —
// and the same on every rank.
//
// In:  the candidate groups of one key (group 0: the static choice), per-call local timings,
//      and, at fixed call counts, every rank's summary of its timings (all-gathered by the
//      caller through the communicator).
// Out: the group of every call.
//
// Agreement: the group of call k is a pure function of k and the *agreed* state, which changes
// only in agree(), from the gathered summaries of all ranks, at the call counts syncDue() names.
// Every rank calls agree() with the same bytes at the same call count, so every rank holds the
// same state and picks the same group for every call; local timings alone never move a choice.
//
// Rule: first every group is tried `samplesPerGroup` times (round robin); from then on the
// group with the shortest agreed recent time runs, except that one call in `probeEvery` runs
// another group in turn (a bounded exploration that notices when the landscape changes). A
// group's agreed time is the maximum over ranks of each rank's mean of its last samples: a
// collective completes when its slowest rank does.
//
// Agreements back off: after one that changes nothing (every group known, the same choice) the
// next comes twice as many calls later, up to kMaxSyncBackoff x syncEvery; a change, or a group
// still unknown, brings them back to every syncEvery calls. An agreement costs an exchange among
// all ranks, which a long job pays only while there is something to learn. Every interval is a
// multiple of syncEvery, and the schedule changes only in agree(), so it is the same on every rank.
//
// Standard library only: libtuccl (backend/adaptive_runtime.h, agreeing over its bootstrap) and
// the tuner plugin (plugin/tuner_adapt.h, agreeing through a rendezvous) share it.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/status.h"

namespace tuccl {

/// The longest interval between agreements, in multiples of AdaptationOptions::syncEvery.
inline constexpr uint64_t kMaxSyncBackoff = 64;

struct AdaptationOptions {
  int32_t samplesPerGroup = 2;  ///< calls per group before the first choice
  int32_t syncEvery = 8;        ///< calls of a key between agreements
  int32_t probeEvery = 32;      ///< after exploring, one call in this many runs another group
  int32_t window = 8;           ///< recent samples a rank averages per group
  double switchMargin = 0.05;   ///< a challenger must be this much faster to take over
};

/// Calls of a key before libtuccl's runtime phase explores it (TUCCL_ADAPT_WARMUP): a key called
/// less often never builds the plans of its other groups (a kernel compile each on a GPU).
inline constexpr int32_t kDefaultAdaptWarmup = 64;

/// The runtime phase's switches, read alike by libtuccl and the tuner plugin (README
/// "Environment"): TUCCL_ADAPT (1/on/yes or 0/off/no; default on — the tuner plugin also needs a
/// rendezvous), TUCCL_ADAPT_SYNC (calls of a key between agreements, 1..1048576),
/// TUCCL_ADAPT_PROBE (after exploring, one call in this many runs another group, 2..1048576),
/// TUCCL_ADAPT_WARMUP (libtuccl: calls of a key before it is explored, 0..1048576). An error
/// names the variable and its value.
struct AdaptationSwitches {
  bool enabled = true;
  AdaptationOptions rule;
  int32_t warmup = kDefaultAdaptWarmup;
};
Expected<AdaptationSwitches> adaptationSwitchesFromEnvironment();

/// A call's size bucket in a key: floor(log2 bytes) (0 for 0 bytes).
int32_t sizeBucket(uint64_t bytes);

class AdaptivePolicy {
 public:
  AdaptivePolicy(int32_t groups, AdaptationOptions options);

  int32_t groups() const { return groups_; }
  /// The group call `k` (0-based, counted per key) runs.
  int32_t groupFor(uint64_t k) const;
  /// Whether the caller must agree() before call `k`: at syncEvery, then at the intervals the
  /// agreements set (see "Agreements back off"); always a multiple of syncEvery.
  bool syncDue(uint64_t k) const { return k > 0 && k == nextSync_; }
  /// A call of `group` took `seconds` on this rank (any thread).
  void record(int32_t group, double seconds);
  /// This rank's summary for the next agreement (fixed size: groups x 16 bytes).
  std::string summary() const;
  /// Every rank's summary (by rank), at the call syncDue() named: updates the agreed times, the
  /// current choice and when the next agreement is due. InvalidArgument when a summary is
  /// malformed (then nothing changes but the schedule, which moves on alike on every rank).
  Status agree(const std::vector<std::string>& summaries);
  /// Starts from what an earlier run agreed (the learned table): `best` and the agreed times
  /// (seconds; < 0 unknown, one per group). The first exploration round is skipped; probes go on.
  void restore(int32_t best, const std::vector<double>& agreedSeconds);
  /// Group `group` cannot run here (its plan does not fit, say): no call runs it again. Every
  /// rank must exclude it at the same call (the caller's reason must be the same on every rank).
  void exclude(int32_t group);
  /// The group the policy exploits now (the static choice until agreement says otherwise).
  int32_t best() const { return best_; }
  /// Agreed time of `group` (nullopt while no rank has a sample).
  std::optional<double> agreedSeconds(int32_t group) const;
  /// Whether call `k` is not the exploited group (exploration).
  bool exploring(uint64_t k) const { return groupFor(k) != best_; }

 private:
  int32_t groups_;
  AdaptationOptions options_;
  int32_t best_ = 0;
  bool restored_ = false;       // restore(): no first exploration round
  std::vector<bool> excluded_;  // exclude(): never run
  int32_t candidateFor(uint64_t k) const;  // groupFor before exclusions
  Status agreeOn(const std::vector<std::string>& summaries);  // agree() without the schedule
  std::vector<double> agreed_;  // seconds; < 0: unknown
  uint64_t interval_ = 0;       // calls between the last agreement and the next
  uint64_t nextSync_ = 0;       // the call of the next agreement

  mutable std::mutex mutex_;                 // the local samples
  std::vector<std::vector<double>> recent_;  // per group, the last `window` samples
};

}  // namespace tuccl
