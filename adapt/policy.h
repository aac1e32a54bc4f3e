// The runtime phase's decision rule (TuCCL §III-A, "runtime phase"): per (collective, size
// bucket), which configuration group the next call runs, learnt from measured completion times —
// and the same on every rank.
//
// In:  the candidate groups of one key (group 0: the static choice), per-call local timings,
//      and, at fixed call counts, every rank's summary of its timings (all-gathered by the
//      caller through the communicator).
// Out: the group of every call.
//
// Agreement: the group of call k is a function of the calls before it and the *agreed* state,
// which changes only in agree(), from the gathered summaries of all ranks. Every rank calls
// agree() with the same bytes at the same call count, so every rank holds the same state and
// picks the same group for every call; local timings alone never move a choice.
//
// Statistics: a rank keeps its last `window` timings per group (the first call of a group, which
// builds its plan, is left out) and summarises them as their median and the half-width of a 95 %
// interval of the median (McGill's notch, 1.58 IQR / sqrt(n)). A group's agreed time is the
// largest median over ranks (a collective completes when its slowest rank does), its interval
// the largest bounds over ranks, its sample count the smallest; it is measured once every rank
// has `minSamples` timings of it.
//
// Choice: the best group changes only on a significant difference: a measured group whose
// interval lies wholly below the best group's at two agreements in a row takes over (the fastest
// such). One outlier moves nothing: medians of at least minSamples timings on every rank decide,
// and a chance gap at one of a long run of agreements is not confirmed at the next.
//
// Exploration: the static choice runs first (the caller's warm-up, then the first agreement,
// which learns its time). After that, one call now and then runs another group, spaced so that
// what probes cost beyond the best group's time stays within `budget` of the key's time: after a
// probe of group g the next comes ceil((t_g - t_best) / (budget * t_best)) calls later (at least
// probeEvery; t_g is g's agreed median, however few its timings; a group with none yet is costed
// at t_best, as if twice as slow). A group that never ran costs its first call too, which builds
// or loads its plan: its first probe waits until the key's calls so far, at t_best each, make
// that affordable within the budget (the best group's agreed first call standing for it), so a
// key too short to pay for exploring never explores. Groups short of minSamples are probed
// first, the most promising first; then all in turn. The schedule depends only on agreed times,
// so it is the same on every rank.
//
// Agreements: syncEvery calls apart while probes bring a group's first timings or the choice just
// changed, then twice as far apart each time nothing changes, up to kMaxSyncBackoff x syncEvery;
// never more often than the budget pays for (an exchange's agreed time per interval at most
// `budget` of the calls'), and none while no probe is due: a key that waits to afford its first
// probe agrees again only when it comes. An agreement
// may be asynchronous: exchangeDue(k) says to start one with summary() before call k, and the
// caller applies the gathered summaries with agree() at any later call it names the same on every
// rank (libtuccl: exchangeLag() calls later, from agreed times, the first at once; the tuner
// plugin: always at once).
//
// Standard library only: libtuccl (adapt/runtime.h, agreeing over its bootstrap) and
// the tuner plugin (plugin/tuner_adapt.h, agreeing through a rendezvous) share it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/statistics.h"
#include "support/status.h"

namespace tuccl {

/// The longest interval between agreements, in multiples of AdaptationOptions::syncEvery.
inline constexpr uint64_t kMaxSyncBackoff = 64;
/// The most configuration groups a policy chooses among (a table entry has at most 8, the
/// built-in defaults 2); each group's "first call seen" is one bit of a word.
inline constexpr int32_t kMaxPolicyGroups = 64;

struct AdaptationOptions {
  int32_t minSamples = 8;  ///< timings of a group on every rank before it counts as measured
  int32_t syncEvery = 8;   ///< calls of a key between agreements while it learns (TUCCL_ADAPT_SYNC)
  int32_t probeEvery = 4;  ///< fewest calls between two probes of other groups (TUCCL_ADAPT_PROBE)
  int32_t window = 16;     ///< recent timings a rank keeps per group
  /// What probing may cost, as a share of the key's time at its best group (TUCCL_ADAPT_BUDGET).
  double budget = 0.03;
  /// The call of the first agreement: 0 where a warm-up came before (libtuccl), syncEvery where
  /// the first calls must pass before the ranks can agree (the tuner plugin learns its rank then).
  int32_t firstSync = 0;
};

/// Calls of a key before libtuccl's runtime phase explores it (TUCCL_ADAPT_WARMUP): a key called
/// less often never builds the plans of its other groups (a kernel compile each on a GPU).
inline constexpr int32_t kDefaultAdaptWarmup = 64;

/// The runtime phase's switches, read alike by libtuccl and the tuner plugin (README
/// "Environment"): TUCCL_ADAPT (1/on/yes or 0/off/no; default off), TUCCL_ADAPT_SYNC (calls of a
/// key between agreements, 1..1048576), TUCCL_ADAPT_PROBE (fewest calls between probes,
/// 2..1048576), TUCCL_ADAPT_BUDGET (percent of a key's time probes may cost, 0.1..50),
/// TUCCL_ADAPT_WARMUP (libtuccl: calls of a key before it is explored, 0..1048576),
/// TUCCL_ADAPT_FIRST (libtuccl: calls after the warm-up before a key's first agreement,
/// 0..1048576). An error names the variable and its value.
struct AdaptationSwitches {
  bool enabled = false;
  AdaptationOptions rule;
  int32_t warmup = kDefaultAdaptWarmup;
  /// TUCCL_ADAPT_FIRST (libtuccl): calls of a key after its warm-up before its first agreement;
  /// -1: what the budget pays for (adaptive_runtime.cc).
  int32_t firstAgreement = -1;
};
Expected<AdaptationSwitches> adaptationSwitchesFromEnvironment();

/// A call's size bucket in a key: floor(log2 bytes) (0 for 0 bytes).
int32_t sizeBucket(uint64_t bytes);

/// A group's time as the ranks agreed on it (seconds): the slowest rank's median, the interval
/// of that median, and the fewest timings any rank had.
struct AgreedTime {
  double median = -1;
  double lower = -1;
  double upper = -1;
  uint64_t samples = 0;
  double first = 0;  ///< the slowest rank's first call of the group (it built or loaded the plan); 0: unknown
};

class AdaptivePolicy {
 public:
  AdaptivePolicy(int32_t groups, AdaptationOptions options);

  int32_t groups() const { return groups_; }
  /// The group call `k` (0-based, counted per key) runs. Call it once per call, in call order:
  /// a probe advances the probe schedule.
  int32_t groupFor(uint64_t k);
  /// Whether an agreement starts before call `k` (with summary()); never while one is pending.
  bool exchangeDue(uint64_t k) const { return !pending_ && k == nextSync_; }
  /// An exchange started (exchangeDue) and not yet agreed.
  bool pending() const { return pending_; }
  /// Call before taking summary() for an exchange.
  void exchangeStarted() {
    pending_ = true;
    probesAtStart_ = probes_;
  }
  /// Calls between an agreement's start and the call that applies it, for a caller that gathers
  /// in the background: 0 for the first (nothing is known to size a lag by: the caller waits for
  /// it), then enough for four times the agreed time an exchange took at the best group's agreed
  /// time per call, at least syncEvery, at most kMaxSyncBackoff x syncEvery. The same on every
  /// rank.
  uint64_t exchangeLag() const;
  /// Whether call k, of `group` (what groupFor(k) returned), should be timed: a probe always, a
  /// group until its first timing (its setup), and the best group's calls spread so that about
  /// `window` of them fall between two agreements, the last just before the agreement — the
  /// window keeps no more, and a call not timed costs nothing (no clock, no callback). Which
  /// calls are timed is this rank's business: the ranks agree on medians, not on samples.
  bool timed(uint64_t k, int32_t group) const;
  /// A call of `group` took `seconds` on this rank (any thread).
  void record(int32_t group, double seconds);
  /// Before its first call, `group`'s plan took `seconds` to build or load here (host work the
  /// call's own time does not include): it counts into the group's first call.
  void recordSetup(int32_t group, double seconds);
  /// Whether a call of `group` should time its setup for recordSetup: until the group's first
  /// timing arrives (afterwards its plan is cached and the clock reads would be wasted).
  bool timesSetup(int32_t group) const { return group >= 0 && group < groups_ && !seen(group); }
  /// This rank's summary for the next agreement (fixed size); `exchangeSeconds` is how long this
  /// rank's last exchange took (0: none yet).
  std::string summary(double exchangeSeconds = 0) const;
  /// Every rank's summary (by rank), applied before call `k`: updates the agreed times, the
  /// choice and the schedule of agreements and probes. InvalidArgument when a summary is
  /// malformed (then nothing changes but the schedule, which moves on alike on every rank).
  Status agree(const std::vector<std::string>& summaries, uint64_t k);
  /// Starts from what an earlier run agreed (the learned table): `best` and one agreed time per
  /// group. Measured groups need no exploration; the others are probed as usual.
  void restore(int32_t best, const std::vector<AgreedTime>& agreed);
  /// Group `group` cannot run here (its plan does not fit, say): no call runs it again. Every
  /// rank must exclude it at the same call (the caller's reason must be the same on every rank).
  void exclude(int32_t group);
  /// The group the policy exploits now (the static choice until agreement says otherwise).
  int32_t best() const { return best_; }
  /// Agreed time of `group` (nullopt while no rank has a timing of it).
  std::optional<AgreedTime> agreed(int32_t group) const;
  /// Agreed median of `group` (nullopt while unknown).
  std::optional<double> agreedSeconds(int32_t group) const;
  /// Whether `group` has minSamples agreed timings.
  bool measured(int32_t group) const;
  /// The agreed time an exchange took (the slowest rank's; 0 before any).
  double agreedExchangeSeconds() const { return exchangeSeconds_; }

 private:
  int32_t groups_;
  AdaptationOptions options_;
  int32_t best_ = 0;
  int32_t challenger_ = -1;     // significantly faster than best_ at the last agreement
  std::vector<bool> excluded_;  // exclude(): never run
  std::vector<bool> ran_;       // groupFor() ran the group (or the learned table measured it)
  std::vector<AgreedTime> agreed_;
  double exchangeSeconds_ = 0;
  uint64_t interval_ = 0;       // calls between the last agreement and the next
  uint64_t nextSync_ = 0;       // the call of the next agreement
  bool pending_ = false;
  uint64_t nextProbe_ = UINT64_MAX;  // the call of the next probe (none before t_best is agreed)
  int32_t probeCursor_ = 0;          // the group probed last
  uint64_t probes_ = 0;              // probes so far
  uint64_t probesAtStart_ = 0;       // probes when the pending exchange started
  uint64_t probesAgreed_ = 0;        // probes when the last agreed exchange started

  uint64_t gatedProbeCall() const;     // nextProbe_, or later while the next group's first call is not affordable

  int32_t nextProbeGroup() const;      // the group after probeCursor_ in turn (-1: none)
  uint64_t probeGap(int32_t group) const;  // calls after probing `group` until the next probe
  Status agreeOn(const std::vector<std::string>& summaries);  // agree() without the schedule

  mutable std::mutex mutex_;                 // the local samples
  std::vector<std::vector<double>> recent_;  // per group, the last `window` timings
  // Per group (a bit each), whether its first (warm) call was seen; read without the lock.
  std::atomic<uint64_t> seen_{0};
  bool seen(int32_t group) const { return ((seen_.load(std::memory_order_relaxed) >> group) & 1u) != 0; }
  std::vector<double> first_;                // per group, that first call's time
  std::vector<double> setup_;                // per group, building or loading its plan
};

}  // namespace tuccl
