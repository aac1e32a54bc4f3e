// The runtime phase inside NCCL (tuner_adapt.h) and the duration intake
// (include/tuccl/tuner_adapt.h).
#include "plugin/tuner_adapt.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "plugin/tuner_log.h"
#include "support/text_values.h"
#include "support/vocabulary.h"
#include "tuccl/tuner_adapt.h"
#include "support/environment.h"

namespace tuccl {
namespace {

/// Calls waiting for their duration, per communicator: beyond this the oldest are dropped (a
/// duration source that reports nothing must not grow the tuner without bound).
constexpr size_t kMaxPendingCalls = 4096;

/// Logs `message` at `level` once per process (and message).
void logOnce(ncclDebugLogger_t logger, ncclDebugLogLevel level, const std::string& message) {
  static auto* mutex = new std::mutex;  // never destroyed: contexts may outlive statics
  static auto* said = new std::set<std::string>;
  {
    std::lock_guard lock(*mutex);
    if (!said->insert(message).second) return;
  }
  TUCCL_TUNER_LOG(logger, level, "%s", message.c_str());
}

std::string collectiveText(int32_t collective) {
  return collective >= 0 && collective < kTunerCollectives
             ? toLowerCase(collectiveName(static_cast<Collective>(collective)))
             : "?";
}

/// A file-name-safe word naming a key in the rendezvous.
std::string keyWord(const TunerAdaptKey& key) {
  return collectiveText(key.collective) + "-b" + std::to_string(key.bucket) + "-e" + std::to_string(key.entry);
}

struct Registry {
  std::mutex mutex;
  std::vector<CommAdaptation*> contexts;  ///< init order
  std::map<size_t, uint64_t> legacyInits;  ///< v2..v4 inits per communicator size
};

Registry& registry() {
  static auto* instance = new Registry;  // never destroyed: contexts may outlive statics
  return *instance;
}

}  // namespace

std::optional<TunerAdaptSettings> tunerAdaptSettings(ncclDebugLogger_t logger) noexcept {
  try {
    Expected<AdaptationSwitches> switches = adaptationSwitchesFromEnvironment();
    if (!switches) {
      logOnce(logger, NCCL_LOG_WARN,
              "TuCCL adapt: " + switches.status().message() + "; the tuner serves the table's static choices");
      return std::nullopt;
    }
    if (!switches->enabled) return std::nullopt;
    TunerAdaptSettings settings;
    settings.rule = switches->rule;
    // A tuner learns its rank from the profiler's first reports: the first agreement waits for
    // syncEvery calls.
    settings.rule.firstSync = settings.rule.syncEvery;
    if (std::optional<std::string> value = env::text("TUCCL_ADAPT_TIMEOUT_MS")) {
      const Expected<int64_t> millis = parseIntegerInRange(*value, 1, 600'000);
      if (!millis) {
        logOnce(logger, NCCL_LOG_WARN,
                "TuCCL adapt: TUCCL_ADAPT_TIMEOUT_MS=" + *value +
                    ": expected a whole number of milliseconds from 1 to 600000; adaptation stays off");
        return std::nullopt;
      }
      settings.timeout = std::chrono::milliseconds(*millis);
    }
    std::optional<std::string> rendezvous = env::text("TUCCL_ADAPT_RENDEZVOUS");
    if (!rendezvous) {
      // The phase needs a rendezvous in NCCL: said to a job that turned it on without one.
      if (env::isSet("TUCCL_ADAPT")) {
        logOnce(logger, NCCL_LOG_INFO,
                "TuCCL adapt: TUCCL_ADAPT=1 but TUCCL_ADAPT_RENDEZVOUS is unset: without a rendezvous the ranks "
                "cannot agree, so the tuner serves the table's static choices");
      }
      return std::nullopt;
    }
    settings.rendezvous = std::move(*rendezvous);
    settings.secretFile = env::text("TUCCL_ADAPT_SECRET_FILE").value_or("");
    return settings;
  } catch (...) {
    return std::nullopt;  // out of memory: no adaptation
  }
}

std::unique_ptr<RendezvousStore> openTunerRendezvous(const TunerAdaptSettings& settings,
                                                     ncclDebugLogger_t logger) noexcept {
  try {
    Expected<std::unique_ptr<RendezvousStore>> store =
        openRendezvousStore(settings.rendezvous, settings.timeout, settings.secretFile);
    if (store) return std::move(*store);
    logOnce(logger, NCCL_LOG_WARN,
            "TuCCL adapt: TUCCL_ADAPT_RENDEZVOUS=" + settings.rendezvous + ": " + store.status().message() +
                "; adaptation stays off, the tuner serves the table's static choices");
  } catch (...) {
  }
  return nullptr;
}

uint64_t legacyCommunicatorId(size_t nRanks) noexcept {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  uint64_t ordinal = 0;
  try {
    ordinal = reg.legacyInits[nRanks]++;
  } catch (...) {
  }
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(nRanks & 0x7fffffff) << 32) | (ordinal & 0xffffffff);
}

CommAdaptation::CommAdaptation(TunerAdaptSettings settings, std::unique_ptr<RendezvousStore> store,
                               uint64_t commId, int32_t nRanks, ncclDebugLogger_t logger)
    : settings_(std::move(settings)),
      commId_(commId),
      nRanks_(nRanks),
      logger_(logger),
      rendezvous_(std::move(store), commId, nRanks, settings_.timeout) {}

CommAdaptation::~CommAdaptation() {
  std::lock_guard lock(decideMutex_);
  rendezvous_.finish();
}

bool CommAdaptation::join(const std::string& settings) noexcept {
  try {
    std::lock_guard lock(decideMutex_);
    Expected<bool> joined = rendezvous_.join(settings);
    if (!joined) {
      TUCCL_TUNER_LOG(logger_, NCCL_LOG_WARN,
                      "TuCCL adapt: communicator 0x%016llx: cannot join the rendezvous (%s); the tuner serves "
                      "the table's static choices",
                      static_cast<unsigned long long>(commId_), joined.status().message().c_str());
      return false;
    }
    if (!*joined) {
      TUCCL_TUNER_LOG(logger_, NCCL_LOG_WARN,
                      "TuCCL adapt: communicator 0x%016llx: not every one of its %d ranks joined the rendezvous "
                      "within %lld ms with the same table and TUCCL_ADAPT* settings; no rank adapts, the tuner "
                      "serves the table's static choices",
                      static_cast<unsigned long long>(commId_), nRanks_,
                      static_cast<long long>(settings_.timeout.count()));
    }
    return *joined;
  } catch (...) {
    return false;
  }
}

bool CommAdaptation::bindRank(int32_t rank) {
  int32_t unbound = -1;
  return rank_.compare_exchange_strong(unbound, rank) || unbound == rank;
}

void CommAdaptation::pin(const TunerAdaptKey& key, KeyState& state, const std::string& why) {
  state.pinned = true;
  TUCCL_TUNER_LOG(logger_, NCCL_LOG_WARN,
                  "TuCCL adapt: rank=%d coll=%s bucket=%d entry=%u: %s; the key keeps group %d and stops adapting",
                  rank_.load(), collectiveText(key.collective).c_str(), key.bucket, key.entry, why.c_str(),
                  state.policy->best());
}

void CommAdaptation::agreeRound(const TunerAdaptKey& key, KeyState& state, uint64_t call, uint64_t bytes) {
  AdaptivePolicy& policy = *state.policy;
  const uint64_t round = call / static_cast<uint64_t>(std::max(1, settings_.rule.syncEvery));
  policy.exchangeStarted();
  Expected<RoundOutcome> outcome = rendezvous_.agree(keyWord(key), round, rank_.load(), policy.summary());
  if (!outcome) {
    pin(key, state,
        "cannot read or create the outcome of agreement round " + std::to_string(round) + " (" +
            outcome.status().message() + "); other ranks may have applied it");
    return;
  }
  if (!outcome->agreed) {
    pin(key, state,
        "agreement round " + std::to_string(round) + " at call " + std::to_string(call) +
            " was abandoned (a rank's summary was missing after " + std::to_string(settings_.timeout.count()) +
            " ms)");
    return;
  }
  if (Status agreed = policy.agree(outcome->summaries, call); !agreed) {
    pin(key, state, "agreement round " + std::to_string(round) + ": " + agreed.message());
    return;
  }
  if (state.announced == policy.best()) return;
  state.announced = policy.best();
  TUCCL_TUNER_LOG(logger_, NCCL_LOG_INFO, "TuCCL adapt: rank=%d call=%llu coll=%s bytes=%llu group=%d",
                  rank_.load(), static_cast<unsigned long long>(call), collectiveText(key.collective).c_str(),
                  static_cast<unsigned long long>(bytes), policy.best());
}

int32_t CommAdaptation::chooseGroup(const TunerAdaptKey& key, int32_t groups, uint64_t bytes) noexcept {
  if (groups < 2) return 0;
  try {
    std::lock_guard lock(decideMutex_);
    KeyState& state = keys_[key];
    if (!state.policy || state.policy->groups() != groups) {
      state = KeyState{};
      state.policy = std::make_shared<AdaptivePolicy>(groups, settings_.rule);
    }
    const uint64_t call = state.calls++;
    if (!state.pinned && state.policy->exchangeDue(call)) agreeRound(key, state, call, bytes);
    const int32_t group = state.pinned ? state.policy->best() : state.policy->groupFor(call);
    std::lock_guard pendingLock(pendingMutex_);
    pending_.push_back({key.collective, key.bucket, group, state.policy});
    if (pending_.size() > kMaxPendingCalls) pending_.pop_front();
    lastGroups_[key] = group;
    return group;
  } catch (...) {
    return 0;  // out of memory: the static choice
  }
}

int32_t CommAdaptation::lastGroup(const TunerAdaptKey& key) const noexcept {
  std::lock_guard lock(pendingMutex_);
  auto it = lastGroups_.find(key);
  return it == lastGroups_.end() ? -1 : it->second;
}

bool CommAdaptation::record(int32_t rank, int32_t collective, uint64_t bytes, double micros) noexcept {
  if (rank != rank_.load()) return false;
  const int32_t bucket = sizeBucket(bytes);
  std::shared_ptr<AdaptivePolicy> policy;
  int32_t group = 0;
  {
    std::lock_guard lock(pendingMutex_);
    auto it = pending_.begin();
    while (it != pending_.end() && (it->collective != collective || it->bucket != bucket)) ++it;
    if (it == pending_.end()) return false;
    policy = std::move(it->policy);
    group = it->group;
    // Collectives of a communicator complete in order: older calls will not be reported.
    pending_.erase(pending_.begin(), it + 1);
  }
  policy->record(group, micros * 1e-6);
  return true;
}

void registerCommAdaptation(CommAdaptation* adaptation) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.contexts.push_back(adaptation);
}

void unregisterCommAdaptation(CommAdaptation* adaptation) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  std::erase(reg.contexts, adaptation);
}

}  // namespace tuccl

extern "C" __attribute__((visibility("default"))) tucclTunerReportResult_t tucclTunerReportDuration(
    uint64_t commId, int rank, int collective, size_t nBytes, double durationUs) {
  if (collective < 0 || collective >= tuccl::kTunerCollectives || rank < 0 || !(durationUs >= 0) ||
      !std::isfinite(durationUs)) {
    return tucclTunerReportInvalid;
  }
  tuccl::Registry& reg = tuccl::registry();
  std::lock_guard lock(reg.mutex);
  tuccl::CommAdaptation* target = nullptr;
  bool known = false;
  for (tuccl::CommAdaptation* context : reg.contexts) {
    if (context->commId() != commId) continue;
    known = true;
    if (rank >= context->nRanks()) return tucclTunerReportInvalid;
    if (context->rank() == rank) {
      target = context;
      break;
    }
  }
  if (target == nullptr && known) {
    // Contexts of one communicator in one process are interchangeable (they serve the same calls):
    // the first unbound one, in init order, takes the rank.
    for (tuccl::CommAdaptation* context : reg.contexts) {
      if (context->commId() == commId && context->bindRank(rank)) {
        target = context;
        break;
      }
    }
  }
  if (target == nullptr) return tucclTunerReportIgnored;
  return target->record(rank, collective, nBytes, durationUs) ? tucclTunerReportRecorded : tucclTunerReportIgnored;
}
