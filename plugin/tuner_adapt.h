// The runtime phase inside NCCL (TuCCL §III-A): a communicator's tuner serves, per call, one of
// its table entry's configuration groups, learnt from measured durations, the same on every rank.
//
// In:  per getCollInfo call, its key (collective, power-of-two size bucket, table entry) and how
//      many groups the entry has; durations through the intake (include/tuccl/tuner_adapt.h); at
//      the agreement calls, every rank's summary through the rendezvous (rendezvous.h).
// Out: the group of every call; "TuCCL adapt: rank=<r> call=<k> coll=<c> bytes=<n> group=<g>" at
//      INFO through NCCL's logger when a key's choice changes.
//
// Joining: at init every rank joins the rendezvous (rendezvous.h) with its settings; unless every
// rank of the communicator joined with the same settings within the timeout, no rank adapts (so a
// rank without a rendezvous never sees others explore). Agreement: the decision rule is
// libtuccl's (adapt/policy.h). Calls are counted per key;
// NCCL asks getCollInfo for the same collectives in the same order on every rank, so every rank
// reaches an agreement call (every TUCCL_ADAPT_SYNC calls of a key) at the same count, publishes
// its summary and applies the round's single outcome. A round that cannot be completed (a rank's
// summary missing by the timeout, this rank's rank not yet known because no duration arrived)
// is abandoned alike for every rank: the key keeps its last agreed group — group 0, the static
// choice, if it never agreed — for every later call and stops adapting. A rank that can neither
// read nor create an outcome (rendezvous.h's residual case) does the same and warns.
//
// On when TUCCL_ADAPT_RENDEZVOUS names a usable store (a directory, or a tuccl-adapt-store that
// admits the secret in TUCCL_ADAPT_SECRET_FILE) and TUCCL_ADAPT=1; a bad setting or an unusable
// store is one WARN per process and setting, and the static table is served.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "adapt/rendezvous.h"
#include "adapt/policy.h"
#include "tuccl/nccl_tuner.h"

namespace tuccl {

/// The runtime phase's settings for the tuner (README "Environment").
struct TunerAdaptSettings {
  AdaptationOptions rule;                            ///< TUCCL_ADAPT_SYNC, TUCCL_ADAPT_PROBE
  std::string rendezvous;                            ///< TUCCL_ADAPT_RENDEZVOUS: dir:<path>, tcp:<host>:<port>
  std::string secretFile;                            ///< TUCCL_ADAPT_SECRET_FILE: a tcp: store's secret
  std::chrono::milliseconds timeout{5000};           ///< TUCCL_ADAPT_TIMEOUT_MS (1..600000)
};

/// The settings when adaptation is on; otherwise nullopt, having logged why (a WARN once per
/// process and setting when a setting is wrong; INFO once when an explicit TUCCL_ADAPT=1 names no rendezvous).
std::optional<TunerAdaptSettings> tunerAdaptSettings(ncclDebugLogger_t logger) noexcept;

/// The store of the settings' rendezvous, usable now; null (a WARN once per process and value)
/// when it is not — a directory that does not exist, a store nobody answers at, a tcp: store
/// without TUCCL_ADAPT_SECRET_FILE or refusing its secret.
std::unique_ptr<RendezvousStore> openTunerRendezvous(const TunerAdaptSettings& settings,
                                                     ncclDebugLogger_t logger) noexcept;

/// The id a v2..v4 communicator gets (include/tuccl/tuner_adapt.h): (1 << 63) | (nRanks << 32) |
/// the count of earlier v2..v4 inits of that size in this process.
uint64_t legacyCommunicatorId(size_t nRanks) noexcept;

/// A call's key for the runtime phase.
struct TunerAdaptKey {
  int32_t collective = 0;
  int32_t bucket = 0;      ///< floor(log2 nBytes)
  uint32_t entry = 0;      ///< the table entry deciding it
  friend auto operator<=>(const TunerAdaptKey&, const TunerAdaptKey&) = default;
};

class CommAdaptation {
 public:
  CommAdaptation(TunerAdaptSettings settings, std::unique_ptr<RendezvousStore> store, uint64_t commId,
                 int32_t nRanks, ncclDebugLogger_t logger);
  /// Finalize: this rank's rendezvous files go (the last rank removes the communicator's).
  ~CommAdaptation();
  CommAdaptation(const CommAdaptation&) = delete;
  CommAdaptation& operator=(const CommAdaptation&) = delete;

  /// At init, on every rank: joins the communicator's rendezvous with `settings` (what must be
  /// equal on every rank: table, topology signature, rule). Whether every rank joined with the
  /// same settings; otherwise (logged) the caller serves the static table.
  bool join(const std::string& settings) noexcept;

  /// The group call `bytes` of `key` runs (0 .. groups-1), agreeing first when due. May wait
  /// for the rendezvous (bounded by the timeout). Never throws: on any failure, group 0.
  int32_t chooseGroup(const TunerAdaptKey& key, int32_t groups, uint64_t bytes) noexcept;
  /// The group the last call of `key` ran, for getChunkSize; -1 when none.
  int32_t lastGroup(const TunerAdaptKey& key) const noexcept;

  /// The intake: a completed collective on `rank` took `micros`.
  bool record(int32_t rank, int32_t collective, uint64_t bytes, double micros) noexcept;
  uint64_t commId() const { return commId_; }
  int32_t nRanks() const { return nRanks_; }
  /// This context's rank, bound by the first duration reported for it; -1 until then.
  int32_t rank() const { return rank_.load(); }
  /// Binds this context to `rank` when unbound; whether it is bound to `rank` now.
  bool bindRank(int32_t rank);

 private:
  struct KeyState {
    std::shared_ptr<AdaptivePolicy> policy;
    uint64_t calls = 0;
    int32_t announced = 0;  ///< the choice last logged
    bool pinned = false;    ///< a round failed: the agreed best runs for good
  };
  struct Pending {  ///< a call waiting for its duration
    int32_t collective;
    int32_t bucket;
    int32_t group;
    std::shared_ptr<AdaptivePolicy> policy;
  };
  void agreeRound(const TunerAdaptKey& key, KeyState& state, uint64_t call, uint64_t bytes);
  void pin(const TunerAdaptKey& key, KeyState& state, const std::string& why);

  TunerAdaptSettings settings_;
  uint64_t commId_;
  int32_t nRanks_;
  ncclDebugLogger_t logger_;
  std::atomic<int32_t> rank_{-1};
  std::mutex decideMutex_;  ///< keys_ and the rendezvous (getCollInfo's thread)
  std::map<TunerAdaptKey, KeyState> keys_;
  Rendezvous rendezvous_;
  mutable std::mutex pendingMutex_;  ///< pending_ and lastGroups_ (getCollInfo and the intake)
  std::deque<Pending> pending_;
  std::map<TunerAdaptKey, int32_t> lastGroups_;
};

/// The process's contexts by communicator id, for the intake. register at init, unregister
/// before a context is destroyed.
void registerCommAdaptation(CommAdaptation* adaptation);
void unregisterCommAdaptation(CommAdaptation* adaptation);

}  // namespace tuccl
