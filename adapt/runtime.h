// The runtime phase in a communicator (TuCCL §III-A): before each call, the configuration group
// with the shortest recent completion time; after it, the measured time; the choice the same on
// every rank; what was learnt kept for the next run.
//
// In:  per call, its key (collective, size bucket, table entry) and how many configuration groups
//      it may run (plan_selection.h candidateGroups); the call's measured time; a way to
//      all-gather bytes over the communicator's ranks (its bootstrap).
// Out: the group each call runs; "TuCCL adapt: ..." lines when a key's choice changes; the
//      learned table file (rank 0 writes it, atomically).
//
// Agreement: each key has an AdaptivePolicy (adaptation.h). Calls are counted per key; when the
// policy says an agreement is due, every rank hands its summary to the runtime's exchange thread,
// which all-gathers it over the communicator's bootstrap in the background, and every rank
// applies every rank's summary at the same later call (the policy's exchangeLag, from agreed
// times): the caller's path waits only when the exchange has not finished by then. Exchanges
// run one at a time in the order they were started, the same on every rank; the communicator
// quiesces them (quiesce) before it uses the bootstrap itself. Every rank holds the same state
// and runs the same group; local timings alone never move a choice.
//
// The learned table (TUCCL_ADAPT_FILE) holds, per key, the chosen group and every group's agreed
// time (median, interval, samples), with the topology signature, the rank count and the tuning
// table's hash it was learnt under. At init rank 0 reads it and all-gathers its bytes, so every
// rank starts from the same state (even without a shared file system); a file learnt under
// another signature, rank count or table is ignored (its keys re-initialise) and replaced at the
// next write. A group measured in an earlier run needs no exploration in the next: short runs
// converge.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "adapt/policy.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

/// Settings from the environment (README "Environment"); an error names the variable.
struct AdaptSettings {
  /// TUCCL_ADAPT: 1 or 0 (default: off until bench/tuned_vs_default.sh shows it never loses).
  bool enabled = false;
  /// TUCCL_ADAPT_WARMUP (kDefaultAdaptWarmup, adapt/policy.h): calls of a key that run
  /// group 0 before it is explored; a key the learned table knows starts at once.
  int32_t warmup = kDefaultAdaptWarmup;
  /// TUCCL_ADAPT_FIRST: calls of a key after its warm-up before its first agreement; -1: when
  /// the key's calls pay for an exchange within the budget (adaptive_runtime.cc).
  int32_t firstAgreement = -1;
  /// TUCCL_ADAPT_FILE; default <cache dir>/adaptation-n<ranks>-t<table hash>.json (the runtime
  /// completes the name); empty with no cache dir: nothing is kept.
  std::string file;
  bool fileFromDefault = false;  ///< `file` is the cache directory, to be completed
  int32_t delayGroup = -1;       ///< TUCCL_TEST_DELAY_GROUP=<g>:<us>: test hook, off when -1
  int64_t delayMicros = 0;
  AdaptationOptions rule;        ///< TUCCL_ADAPT_SYNC (calls between agreements), TUCCL_ADAPT_PROBE
};
Expected<AdaptSettings> adaptSettingsFromEnvironment(const std::string& cacheDir);

/// A call's key: its collective, power-of-two size bucket (floor(log2 bytes)) and the table entry
/// deciding it (-1: the built-in defaults).
struct AdaptKey {
  Collective collective = Collective::AllReduce;
  int32_t bucket = 0;
  int32_t entry = -1;
  friend auto operator<=>(const AdaptKey&, const AdaptKey&) = default;
};

class AdaptiveRuntime {
 public:
  using AllGather = std::function<Expected<std::vector<std::string>>(const std::string&)>;

  /// `signature`: the topology signature of the communicator (the same on every rank);
  /// `tableHash`: the tuning table's (0: none). `exchange` all-gathers bytes over the ranks; the
  /// runtime calls it from its own thread, one exchange at a time.
  AdaptiveRuntime(AdaptSettings settings, int32_t rank, int32_t nRanks, uint64_t signature, uint64_t tableHash,
                  AllGather exchange);
  ~AdaptiveRuntime();
  AdaptiveRuntime(const AdaptiveRuntime&) = delete;
  AdaptiveRuntime& operator=(const AdaptiveRuntime&) = delete;

  /// Init, on every rank: rank 0 reads the learned table and every rank takes its bytes (through
  /// the exchange, on the caller's thread).
  Status loadLearned();
  /// The group call `call` of `key` runs (0-based per key; the runtime counts them), starting or
  /// applying an agreement first when due. `groups` is what the key may run; `bytes` is for the
  /// log line.
  /// With `policy`, the key's policy is handed back when the call is to be timed (null when the
  /// key has one group, or when the policy needs no timing of this call: AdaptivePolicy::timed):
  /// the caller records the call's setup and time on it without another lookup.
  Expected<int32_t> choose(const AdaptKey& key, int32_t groups, uint64_t bytes,
                           std::shared_ptr<AdaptivePolicy>* policy = nullptr);
  /// The call that ran `group` of `key` took `seconds` here.
  void record(const AdaptKey& key, int32_t group, double seconds);
  /// `group` of `key` cannot run (its plan does not fit the staging): it is dropped for the key,
  /// said once. The reason must hold on every rank alike (plan placement does).
  void exclude(const AdaptKey& key, int32_t group, const std::string& why);
  /// Waits until every exchange started has finished (their results wait for their calls): the
  /// bootstrap is free for the caller. Every rank quiesces at the same point of its calls.
  void quiesce();
  /// Stops the exchange thread (exchanges not yet run fail); the owner of the exchange calls it
  /// before the exchange's means go away. Choices stay as agreed.
  void shutdown();
  /// TUCCL_TEST_DELAY_GROUP: the microseconds a call of `group` is delayed (0: none).
  int64_t testDelayMicros(int32_t group) const;
  /// Rank 0 writes the learned table (temporary file + rename); the others do nothing. A write
  /// that fails is logged once and returned.
  Status persist();

  /// The group a key exploits now (tests and logs); -1 for a key not seen.
  int32_t best(const AdaptKey& key) const;
  /// Calls of `key` so far.
  uint64_t calls(const AdaptKey& key) const;
  /// Exchanges started so far (tests).
  uint64_t exchangesStarted() const;
  const std::string& learnedFile() const { return settings_.file; }

 private:
  class Exchanges;
  struct KeyState {
    std::shared_ptr<AdaptivePolicy> policy;
    uint64_t calls = 0;
    uint64_t warmup = 0;  ///< calls before the policy decides (0 for a key the learned table knew)
    int32_t announced = -1;  ///< the choice last logged
    uint64_t ticket = 0;     ///< the exchange in flight (policy->pending())
    uint64_t applyAt = 0;    ///< the policy call that applies it
  };
  struct Learned {
    int32_t best = 0;
    std::vector<AgreedTime> agreed;
  };
  KeyState& stateOf(const AdaptKey& key, int32_t groups);
  /// The key's policy; null for a key not seen.
  std::shared_ptr<AdaptivePolicy> policyOf(const AdaptKey& key) const;
  /// The learned table's text; nullopt when no key has anything to keep.
  std::optional<std::string> learnedText() const;

  AdaptSettings settings_;
  int32_t rank_;
  int32_t nRanks_;
  uint64_t signature_;
  uint64_t tableHash_;
  AllGather gather_;
  std::unique_ptr<Exchanges> exchanges_;
  mutable std::mutex mutex_;
  double lastWait_ = 0;  ///< how long the caller last waited for an agreement's exchange
  std::map<AdaptKey, KeyState> keys_;
  std::map<AdaptKey, Learned> learned_;  ///< from the file, until the key is first called
};

/// The communicator's topology signature: fnv1a64 over every rank's description (rank order),
/// each the TUCCL_TOPOLOGY_SIGNATURE it was given or else its host's network devices
/// (/sys/class/net without lo, /sys/class/infiniband), with the rank and host counts. A NIC that
/// disappears from a host changes it.
std::string localTopologyDescription();
uint64_t topologySignatureOf(const std::vector<std::string>& descriptions, int32_t nHosts);

}  // namespace tuccl
