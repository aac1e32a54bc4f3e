// The communicator (communicator.h).
#include "backend/communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "backend/builtin_algorithms.h"
#include "backend/cpu_device.h"
#include "backend/cuda_device.h"
#include "backend/cuda_driver.h"
#include "support/log.h"
#include "backend/net_plugin.h"
#include "backend/net_proxy.h"
#include "backend/plan_cache.h"
#include "backend/plan_selection.h"
#include "backend/staging_layout.h"
#include "kernelgen/datatype.h"
#include "support/hash.h"
#include "support/environment.h"
#include "support/text_values.h"
#include "transport/socket.h"

namespace tuccl::backend {
namespace {

// tucclDataType_t -> the kernels' datatypes (every one NCCL defines).
std::optional<DataType> dataTypeOf(int type) {
  switch (type) {
    case tucclInt8: return DataType::Int8;
    case tucclUint8: return DataType::Uint8;
    case tucclInt32: return DataType::Int32;
    case tucclUint32: return DataType::Uint32;
    case tucclInt64: return DataType::Int64;
    case tucclUint64: return DataType::Uint64;
    case tucclFloat16: return DataType::Float16;
    case tucclFloat32: return DataType::Float32;
    case tucclFloat64: return DataType::Float64;
    case tucclBfloat16: return DataType::BFloat16;
    case tucclFloat8e4m3: return DataType::Float8E4M3;
    case tucclFloat8e5m2: return DataType::Float8E5M2;
    default: return std::nullopt;
  }
}

// A PreMulSum operator (Communicator::createPreMulSum).
struct PreMulSumOp {
  DataType type = DataType::Float32;
  uint64_t bits = 0;                ///< the scalar's bytes (host residence)
  const void* address = nullptr;    ///< device residence: read by every call
};

std::optional<ReduceOp> reduceOpOf(int op) {
  switch (op) {
    case tucclSum: return ReduceOp::Sum;
    case tucclProd: return ReduceOp::Prod;
    case tucclMax: return ReduceOp::Max;
    case tucclMin: return ReduceOp::Min;
    case tucclAvg: return ReduceOp::Avg;
    default: return std::nullopt;
  }
}

// Bytes of an element of every NCCL datatype (nccl.h ncclDataType_t, 2.28: int8, uint8, int32,
// uint32, int64, uint64, float16, float32, float64, bfloat16, float8 e4m3, float8 e5m2), for
// point-to-point, which moves bytes whatever they hold. 0: not a datatype.
int64_t anyTypeSize(int type) {
  static constexpr int64_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return type >= 0 && type < static_cast<int>(std::size(kSizes)) ? kSizes[type] : 0;
}

bool usesOp(Collective collective) {
  return collective == Collective::AllReduce || collective == Collective::ReduceScatter ||
         collective == Collective::Reduce;
}

// What every rank reports at init, compared across ranks.
struct InitReport {
  uint64_t hostHash = 0;
  uint64_t tableHash = 0;
  int64_t stagingBytes = 0;
  int32_t deviceKind = 0;
  int32_t ok = 1;  ///< this rank's local setup succeeded
  uint64_t adaptHash = 0;  ///< the runtime phase's settings (adaptRuleHash): every rank must agree on them
  uint64_t planHash = 0;   ///< what shapes every plan besides the table (planSettingsHash)
  int32_t gpuOrdinal = -1;      ///< the GPU this rank runs on (CUDA device)
  int32_t multiprocessors = 0;  ///< its SMs (0: not a GPU)
};

// The TBs each rank's kernel may run at once (PlanCacheOptions::maxBlocksPerRank): for every GPU,
// its SMs over the ranks that share it (one TB per SM: the kernels use up to 128 registers of 512
// threads), the least over all ranks, so every rank cuts its plans' channels alike. 0: no GPU.
int32_t blocksPerRank(const std::vector<InitReport>& reports) {
  int32_t least = 0;
  for (const InitReport& mine : reports) {
    if (mine.multiprocessors <= 0) continue;
    int32_t sharing = 0;
    for (const InitReport& other : reports) {
      sharing += other.hostHash == mine.hostHash && other.gpuOrdinal == mine.gpuOrdinal ? 1 : 0;
    }
    const int32_t share = std::max(1, mine.multiprocessors / std::max(1, sharing));
    least = least == 0 ? share : std::min(least, share);
  }
  return least;
}

// The environment's overrides of the plans and the ring depth: ranks that differ would build
// other plans or place rings elsewhere, and wait on each other forever.
uint64_t planSettingsHash(const CommOptions& options) {
  // A program file by its name: hosts may keep it under other directories.
  const std::string algorithm = options.algorithm.empty() || isBuiltinFamily(options.algorithm)
                                    ? options.algorithm
                                    : "file " + std::filesystem::path(options.algorithm).filename().string();
  return fnv1a64(algorithm + "/" + std::to_string(options.channels) + "/" +
                 (options.chunkSizeForced ? std::to_string(options.chunkSize) : std::string("-")) + "/" +
                 (options.protocol ? std::string(protocolName(*options.protocol)) : std::string("-")) + "/" +
                 std::to_string(options.stagingSlots) + (options.fuse ? "" : "/unfused"));
}

// What every rank must share for the runtime phase to stay in step: whether it runs and when its
// agreements fall.
uint64_t adaptRuleHash(const AdaptSettings& adapt) {
  if (!adapt.enabled) return 0;
  const AdaptationOptions& rule = adapt.rule;
  return fnv1a64(std::to_string(rule.minSamples) + "/" + std::to_string(rule.syncEvery) + "/" +
                 std::to_string(rule.probeEvery) + "/" + std::to_string(rule.window) + "/" +
                 std::to_string(rule.budget) + "/" + std::to_string(adapt.warmup) + "/" +
                 std::to_string(adapt.firstAgreement));
}

std::string bytesOf(const InitReport& report) {
  return std::string(reinterpret_cast<const char*>(&report), sizeof(report));
}

/// The CUDA device's plans when the table names none: 16 channels of 1 MiB slices. One TB (one
/// SM) of the fused ring moves ~12 GB/s of AllReduce bus bandwidth, so the ring needs many
/// replicas; on an H100 with 4 ranks under MPS, 16 channels reached 175 GB/s at 512 MB in place
/// with 1 MiB slices, 4 channels 45 GB/s (docs/runtime.md "On a GPU"). Plans of more TBs per
/// channel get fewer channels (the rank's share of the SMs; plan_cache.cc fitChannels).
constexpr int32_t kCudaDefaultChannels = 16;
constexpr int64_t kCudaDefaultChunkBytes = 1 << 20;
/// Staging per rank on the CUDA device unless TUCCL_STAGING_BYTES says: the rings of a ring
/// AllReduce, AllGather and ReduceScatter at the defaults (16 channels x 4 slots x 1 MiB each)
/// and the direct AllReduce's side by side, so switching collectives never restarts the staging.
/// Twice that when the ranks span hosts (openStaging).
constexpr int64_t kCudaDefaultStagingBytes = 256ll << 20;
constexpr size_t kBlobBytes = 1024;  // staging export blobs travel length-prefixed, padded to this size

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds);
  return text;
}  // staging export blobs travel padded to this size

/// Where the inter-node proxy's failures go: the communicator while it lives, then the reaper
/// that keeps the proxy after destroy. A report runs under the lock, so once retarget returns the
/// old target is called no more.
class ErrorRelay {
 public:
  void retarget(std::function<void(const Status&)> target) {
    std::lock_guard lock(mutex_);
    target_ = std::move(target);
  }
  void report(const Status& status) {
    std::lock_guard lock(mutex_);
    if (target_) target_(status);
  }

 private:
  std::mutex mutex_;
  std::function<void(const Status&)> target_;
};

// ---- Leaving ------------------------------------------------------------------------------------
//
// Destroy waits for no peer: ranks may destroy several communicators in different orders, and a
// rank that waited for its peers in each would wait for one that waits for it in another. A rank
// drains its own calls and then only its peers' last calls may still touch what it owns:
//   - the CUDA device's staging: in the PUSH model a receiver returns the credit of a slice it
//     consumed by writing `consumed` into the sender's segment, through its IPC mapping, after
//     the sender may have finished its part of the call; the segment must not be freed (and its
//     address reused) while a peer of the host still runs a call;
//   - the inter-node proxy: it forwards the slices this rank's kernels posted, which the peers on
//     other hosts still read, and a proxy thread that finds a peer's connection closed reports a
//     failure; so every proxy keeps serving until the peers on other hosts are done, stops, and
//     closes its connections only once their proxies stopped too (two notes per pair of ranks).
// The CPU device's staging needs nothing: it is POSIX shared memory whose name is already
// unlinked, and a peer's mapping stays valid after this rank unmaps its own.
// So destroy hands those resources to a reaper thread, which sends "done" to the peers concerned
// (bootstrap point-to-point), waits for theirs, then, with a proxy, stops it, exchanges
// "stopped", and frees. A peer that ended (its bootstrap's connection closed) is not waited for;
// the whole wait is bounded by the timeout. The process waits for its reapers at exit.

/// The tag of the notes leaving ranks exchange over the bootstrap.
constexpr uint32_t kLeaveTag = 0x6c656176;
/// A note to a peer that ended is retried this long at most (connectTo retries a refusal).
constexpr double kNoteSendSeconds = 2;

struct Reapers {
  std::mutex mutex;
  std::condition_variable idle;
  int running = 0;
  bool waitAtExit = false;
};

Reapers& reapers() {
  static auto* running = new Reapers();  // never destroyed: reapers may end during exit
  return *running;
}

void waitForReapers() {
  Reapers& r = reapers();
  std::unique_lock lock(r.mutex);
  r.idle.wait(lock, [&] { return r.running == 0; });
}

/// What a destroyed communicator leaves to its reaper.
struct Leaving {
  int32_t rank = 0;
  std::string label;
  double timeoutSeconds = 0;
  std::vector<int32_t> peers;  ///< those that may still touch the staging or need the proxy
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<NetProxy> proxy;  ///< before `device`: it reads and writes the staging
  std::unique_ptr<Device> device;
  std::shared_ptr<ErrorRelay> proxyErrors;

  /// Sends `note` to `to`, waits for the same from them: answers those that sent it.
  std::vector<int32_t> exchange(const std::vector<int32_t>& to, const std::string& note,
                                std::chrono::steady_clock::time_point deadline) {
    auto left = [&] { return std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count()); };
    std::vector<int32_t> reached;
    for (int32_t peer : to) {
      // A peer the note cannot reach has let go of the communicator already, or ended.
      if (bootstrap->sendWithin(peer, kLeaveTag, note, std::min(left(), kNoteSendSeconds))) reached.push_back(peer);
    }
    std::vector<int32_t> answered;
    for (const auto& [peer, text] : bootstrap->awaitNotes(reached, kLeaveTag, left())) {
      if (text == note) answered.push_back(peer);
    }
    return answered;
  }

  void run() {
    const auto begin = std::chrono::steady_clock::now();
    const auto deadline = begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(timeoutSeconds));
    std::vector<int32_t> done = exchange(peers, "done", deadline);
    if (proxy) {
      proxy->stop();
      logLine(LogLevel::Info, kLogInit, rank, label + "inter-node proxy: " + proxy->summary());
      done = exchange(done, "stopped", deadline);
    }
    const bool timedOut = std::chrono::steady_clock::now() >= deadline && done.size() < peers.size();
    if (timedOut) {
      logLine(LogLevel::Warn, rank,
              label + "left the communicator, but " + std::to_string(peers.size() - done.size()) + " of its " +
                  std::to_string(peers.size()) + " peers did not finish their calls within " +
                  formatSeconds(timeoutSeconds) + " (TUCCL_TIMEOUT_S): freeing the staging and proxy they may still use");
    } else {
      const size_t ended = peers.size() - done.size();
      logLine(LogLevel::Info, kLogInit, rank,
              label + "left the communicator: its staging" + std::string(proxy ? " and proxy" : "") +
                  " freed once its " + std::to_string(peers.size()) + " peer(s) concerned were done" +
                  (ended > 0 ? " (" + std::to_string(ended) + " of them ended without saying so)" : std::string()) +
                  ", " + formatSeconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count()) +
                  " after it left");
    }
    if (proxyErrors) proxyErrors->retarget(nullptr);
    proxy.reset();
    device.reset();
    bootstrap.reset();
  }
};

/// Runs `leaving` on a thread of its own (inline when none can be made).
void startReaper(std::unique_ptr<Leaving> leaving) {
  Reapers& r = reapers();
  {
    std::lock_guard lock(r.mutex);
    if (!r.waitAtExit) {
      r.waitAtExit = true;
      std::atexit(waitForReapers);
    }
    ++r.running;
  }
  auto reap = [](Leaving* job) {
    job->run();
    delete job;
    Reapers& all = reapers();
    std::lock_guard lock(all.mutex);
    if (--all.running == 0) all.idle.notify_all();
  };
  try {
    std::thread(reap, leaving.get()).detach();
    leaving.release();
  } catch (const std::system_error&) {
    reap(leaving.release());
  }
}

}  // namespace

Expected<CommOptions> commOptionsFromEnvironment() {
  CommOptions options;
  if (std::optional<std::string> value = env::text("TUCCL_TIMEOUT_S")) {
    Expected<double> seconds = parseNumberInRange(*value, 0, std::numeric_limits<double>::max());
    if (!seconds || !(*seconds > 0)) return env::invalid("TUCCL_TIMEOUT_S", *value, "a positive number of seconds");
    options.timeoutSeconds = *seconds;
  }
  Expected<std::optional<std::string>> device = env::choice("TUCCL_DEVICE", {"auto", "cpu", "cuda"});
  if (!device) return device.status();
  if (*device) options.device = **device;
  // Byte sizes from `minimum` to 1 TiB.
  auto bytes = [](const char* name, int64_t minimum, int64_t& out, bool& set) -> Status {
    Expected<std::optional<uint64_t>> value = env::byteSize(name, static_cast<uint64_t>(minimum), uint64_t{1} << 40);
    if (!value) return value.status();
    set = value->has_value();
    if (set) out = static_cast<int64_t>(**value);
    return {};
  };
  if (Status s = bytes("TUCCL_STAGING_BYTES", 1 << 20, options.stagingBytes, options.stagingBytesSet); !s) return s;
  if (Status s = bytes("TUCCL_CHUNK_SIZE", 16, options.chunkSize, options.chunkSizeForced); !s) return s;
  if (std::optional<std::string> value = env::text("TUCCL_ALGO")) {
    // A program file is read relative to the working directory of the process that set it.
    options.algorithm = isBuiltinFamily(*value) ? *value : std::filesystem::absolute(*value).string();
  }
  Expected<std::optional<int64_t>> channels = env::integer("TUCCL_NCHANNELS", 1, 64);
  if (!channels) return channels.status();
  if (*channels) options.channels = static_cast<int32_t>(**channels);
  if (std::optional<std::string> value = env::text("TUCCL_PROTO")) {
    options.protocol = parseProtocol(*value);
    if (!options.protocol) return env::invalid("TUCCL_PROTO", *value, "LL, LL128 or Simple");
  }
  if (std::optional<std::string> value = env::text("TUCCL_FUSE")) {
    if (*value != "0" && *value != "1") return env::invalid("TUCCL_FUSE", *value, "0 or 1");
    options.fuse = *value == "1";
  }
  Expected<std::optional<int64_t>> slots = env::integer("TUCCL_STAGING_SLOTS", 1, 64);
  if (!slots) return slots.status();
  if (*slots) options.stagingSlots = static_cast<int32_t>(**slots);
  options.interfaceName = env::text("TUCCL_SOCKET_IFNAME").value_or("");
  options.tablePath = env::text("TUCCL_TUNER_TABLE").value_or("");
  options.cacheDir = defaultCacheDir();
  Expected<AdaptSettings> adapt = adaptSettingsFromEnvironment(options.cacheDir);
  if (!adapt) return adapt.status();
  options.adapt = std::move(*adapt);
  return options;
}

// Whether rank `r`'s report agrees with this rank's (`mine`): RemoteError naming what differs.
Status sameSettings(const InitReport& theirs, const InitReport& mine, int32_t r) {
  auto mismatch = [&](const std::string& what) {
    return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " " + what);
  };
  if (!theirs.ok) return mismatch("failed to initialise (its log says why)");
  if (theirs.tableHash != mine.tableHash) {
    return mismatch("holds another lookup table (TUCCL_TUNER_TABLE differs): every rank must load the same table");
  }
  if (theirs.deviceKind != mine.deviceKind) return mismatch("chose another device (TUCCL_DEVICE differs)");
  if (theirs.stagingBytes != mine.stagingBytes) return mismatch("has another TUCCL_STAGING_BYTES");
  if (theirs.planHash != mine.planHash) {
    return mismatch("plans otherwise (TUCCL_ALGO, TUCCL_NCHANNELS, TUCCL_CHUNK_SIZE, TUCCL_PROTO or "
                    "TUCCL_STAGING_SLOTS differs): every rank must set them alike");
  }
  if (theirs.adaptHash != mine.adaptHash) {
    return mismatch(
        "adapts otherwise (TUCCL_ADAPT, TUCCL_ADAPT_SYNC, TUCCL_ADAPT_PROBE, TUCCL_ADAPT_BUDGET, TUCCL_ADAPT_WARMUP "
        "or TUCCL_ADAPT_FIRST differs)");
  }
  return {};
}

struct Communicator::Impl {
  int32_t rank = 0;
  int32_t nRanks = 1;
  CommOptions options;
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<Device> device;
  std::unique_ptr<PlanCache> plans;
  std::vector<int32_t> hostOf;      ///< by rank: its host, numbered by the host's first rank
  std::vector<bool> remote;         ///< by rank: on another host
  std::unique_ptr<NetProxy> proxy;  ///< ranks on several hosts: carries their rings (after `device`)
  std::shared_ptr<ErrorRelay> proxyErrors;  ///< where `proxy` reports: this object, then its reaper
  std::shared_ptr<transport::AbortSignal> cancel;  ///< the bootstrap's abort signal, from make() on
  std::shared_ptr<AdaptiveRuntime> adapt;  ///< the runtime phase; null when off (calls still queued hold it)

  std::mutex mutex;  // placement, sequence
  std::unique_ptr<StagingAllocator> allocator;
  /// The point-to-point rings (StagingAllocator::placePeerRings), placed first on every fresh
  /// allocator; null when the staging cannot hold them (peerRefusal says why).
  std::unique_ptr<PlanPlacement> peerRings;
  std::string peerRefusal;
  int64_t peerSlot = 0;  ///< their slot (payload) bytes
  std::vector<uint32_t> sentTo, receivedFrom;  ///< by peer: transfers issued so far (slices carry the number)
  std::map<std::string, std::unique_ptr<PlanPlacement>> placements;
  int64_t stagingRestarts = 0;  ///< restartStaging calls so far
  std::set<std::string> logged;
  std::set<std::pair<std::string, int32_t>> loggedChannels;  ///< (plan, channels a call ran) said at INFO
  uint64_t nextSequence = 0;

  mutable std::mutex errorMutex;
  Status asyncError;

  mutable std::mutex opsMutex;  // the PreMulSum operators
  std::map<int, PreMulSumOp> ops;
  int64_t nextOp = tucclNumOps;
  Status closed;  ///< Unsupported "finalized" once drain()ed

  /// "comm \"name\": " for the communicator's own log lines; empty without a name.
  std::string label() const { return options.name.empty() ? std::string() : "comm \"" + options.name + "\": "; }

  std::atomic<bool> stopWatchdog{false};
  std::thread watchdog;

  void fail(const Status& status) {
    {
      std::lock_guard lock(errorMutex);
      if (!asyncError) return;  // the first error stays
      asyncError = status;
    }
    // A runtime error names no file: "error: ...", not a parser's "<input>: error: ...".
    logLine(LogLevel::Warn, rank,
            label() + (status.diagnostic().file.empty() ? "error: " + status.message() : status.toString()));
  }

  /// After a failed init (or none): everything made so far goes, a CPU device that runs nothing
  /// stays (it answers checkStream and drain), and every call fails with `why`.
  void abandon(const Status& why) {
    stopWatchdogThread();
    if (device) device->setErrorSink(nullptr);
    if (bootstrap) bootstrap->abort();
    if (adapt) adapt->shutdown();
    if (proxyErrors) proxyErrors->retarget(nullptr);
    proxy.reset();
    adapt.reset();
    device.reset();
    bootstrap.reset();
    device = createCpuDevice(rank, nRanks);
    std::lock_guard lock(errorMutex);
    asyncError = why;
  }

  void startWatchdog() {
    watchdog = std::thread([this] {
      while (!stopWatchdog.load()) {
        if (bootstrap->peerLost()) {
          fail(makeError(ErrorCode::RemoteError, "a peer rank's process ended: the communicator is unusable"));
          device->abort();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }

  void stopWatchdogThread() {
    stopWatchdog.store(true);
    if (watchdog.joinable()) watchdog.join();
  }

  Status setup(const UniqueIdBytes& id, int cudaDevice);
  Status prepare(int cudaDevice);
  Expected<std::vector<InitReport>> agree(const Status& local);
  int32_t groupHosts(const std::vector<InitReport>& everyone);
  Status openStaging(int32_t nHosts);
  Status startServices(const UniqueIdBytes& id, int32_t nHosts);
  Status startProxy(const UniqueIdBytes& id);
  Status startAdaptation(int32_t nHosts);
  /// Before the communicator uses its bootstrap itself: the runtime phase's exchanges in flight
  /// finish first, so every rank sees the same sequence of bootstrap operations.
  void quiesceAdaptation() {
    if (adapt) adapt->quiesce();
  }
  Expected<std::unique_ptr<Device>> chooseDevice(PlanCacheOptions& planOptions, int cudaDevice);
  Expected<const PlanPlacement*> placementFor(const CompiledPlan& compiled);
  Status restartStaging(const std::string& algorithm);
  void placePeerRings();
  Status launchPeers(const std::vector<PeerCall>& calls, tucclStream_t stream);

  // ---- One call: decide -> choose -> settle (plan and place) -> launch

  /// What the runtime phase chose for a call: its configuration group, and the timing it wants.
  struct Choice {
    CallDecision decision;
    int32_t group = 0;  ///< 0: the static choice
    AdaptKey key;
    std::shared_ptr<AdaptivePolicy> policy;  ///< the key's, when it has groups to adapt among
    bool timeSetup = false;                  ///< the host work before the call counts into its time
    std::chrono::steady_clock::time_point setupBegin;
  };
  Expected<Choice> choose(CallDecision decision);
  Expected<KernelCall> settle(const CollectiveCall& call, Choice& choice);
  KernelCall kernelFor(const CollectiveCall& call, std::shared_ptr<const CompiledPlan> plan,
                       const PlanPlacement* placement);
  Status stagingFull(const Status& failed) const;
  Status launch(KernelCall kernel, const Choice& choice, tucclStream_t stream);
  Status copyLocally(const CollectiveCall& call, tucclStream_t stream);
};

// The configuration group the call runs: the runtime phase's choice for its key (the same on
// every rank), group 0 when the phase is off.
Expected<Communicator::Impl::Choice> Communicator::Impl::choose(CallDecision decision) {
  Choice choice;
  choice.decision = std::move(decision);
  const CallDecision& d = choice.decision;
  if (adapt) {
    choice.key = AdaptKey{d.query.collective, sizeBucket(d.bytes), d.entryIndex};
    Expected<int32_t> chosen = adapt->choose(choice.key, d.groups, d.bytes, &choice.policy);
    if (!chosen) {
      fail(chosen.status());
      return chosen.status();
    }
    choice.group = *chosen;
  }
  // Host work before the call (its plan built or loaded), timed only for a key that adapts and
  // only until the group's first timing (then its plan is cached).
  choice.timeSetup = choice.policy && choice.policy->timesSetup(choice.group);
  if (choice.timeSetup) choice.setupBegin = std::chrono::steady_clock::now();
  return choice;
}

// The group's plan, built or loaded, and placed in the staging, as the call the device runs. A
// group other than the static choice that cannot run here (its plan does not build, or does not
// fit the staging with the plans used so far) is dropped for the key and the call runs group 0.
// Both reasons are the same on every rank: the same table, call and plan sequence.
Expected<KernelCall> Communicator::Impl::settle(const CollectiveCall& call, Choice& choice) {
  for (;;) {
    Expected<std::shared_ptr<const CompiledPlan>> plan = plans->planFor(choice.decision, choice.group);
    Status failed = plan ? Status() : plan.status();
    if (plan) {
      std::lock_guard lock(mutex);
      Expected<const PlanPlacement*> placement = placementFor(**plan);
      if (placement) {
        KernelCall kernel = kernelFor(call, *plan, *placement);
        kernel.channels = plans->channelsFor(choice.decision, choice.group, **plan);
        const int32_t planChannels = (*plan)->layout.channels;
        if (kernel.channels < planChannels && logEnabled(LogLevel::Info, kLogColl) &&
            loggedChannels.emplace((*plan)->key, kernel.channels).second) {
          logLine(LogLevel::Info, kLogColl, rank,
                  std::string(collectiveName(call.collective)) + ": a call of " +
                      std::to_string(choice.decision.bytes) + " bytes runs " + std::to_string(kernel.channels) + " of its plan's " +
                      std::to_string(planChannels) + " channels (as many as its size fills)");
        }
        return kernel;
      }
      failed = stagingFull(placement.status());
    }
    if (choice.group == 0) return failed;
    adapt->exclude(choice.key, choice.group, failed.message());
    choice.group = 0;
  }
}

// The call as the device runs it: the plan, its rings, the next call number. Under `mutex`.
KernelCall Communicator::Impl::kernelFor(const CollectiveCall& call, std::shared_ptr<const CompiledPlan> plan,
                                         const PlanPlacement* placement) {
  KernelCall kernel{plan, placement, call, rank};
  kernel.sliceElems = std::max<int64_t>(1, plan->plan.config.chunkSize / dataTypeSize(call.dataType));
  kernel.timeoutSeconds = options.timeoutSeconds;
  kernel.sequence = nextSequence++;
  if (logEnabled(LogLevel::Info, kLogColl) && logged.insert(plan->key).second) {
    logLine(LogLevel::Info, kLogColl, rank, plan->description);
  }
  return kernel;
}

// A plan whose rings the staging cannot hold, said with what to change where the staging cannot
// restart (several hosts) and the runtime phase's groups hold rings too.
Status Communicator::Impl::stagingFull(const Status& failed) const {
  if (!adapt || !proxy) return failed;
  return makeError(failed.code(), failed.message() +
                                      " (across hosts the staging keeps every plan's rings, and the runtime phase's "
                                      "other configuration groups hold staging too: raise TUCCL_STAGING_BYTES, or "
                                      "set TUCCL_ADAPT=0)");
}

// The device runs the call; it times it (its turn to its end) for the runtime phase, on any
// stream, and the host work before it counts into a group's first call.
Status Communicator::Impl::launch(KernelCall kernel, const Choice& choice, tucclStream_t stream) {
  if (adapt) kernel.testDelayMicros = adapt->testDelayMicros(choice.group);
  if (choice.policy) {
    if (choice.timeSetup) {
      choice.policy->recordSetup(
          choice.group, std::chrono::duration<double>(std::chrono::steady_clock::now() - choice.setupBegin).count());
    }
    kernel.completed = [policy = choice.policy, group = choice.group](double seconds) { policy->record(group, seconds); };
  }
  if (proxy) proxy->kick();  // awake before the kernel posts its first slice
  Status launched = device->launch(kernel, stream);
  if (!launched) fail(launched);
  // Any other failure leaves a sequence number no rank will run past: nothing after it can run.
  if (!launched && launched.code() != ErrorCode::Timeout && launched.code() != ErrorCode::Aborted) device->abort();
  return launched;
}

// Every collective of one rank is a copy of its input (none in place, but for the rooted ones), or
// a PreMulSum's scaling of it.
Status Communicator::Impl::copyLocally(const CollectiveCall& call, tucclStream_t stream) {
  if (call.preMul) {
    return device->scale(call.recvbuff, call.sendbuff, call.count, call.dataType, call.preMulBits, call.preMulScalar,
                         stream);
  }
  if (call.collective != Collective::Reduce && call.collective != Collective::Broadcast && call.inPlace) return {};
  return device->copy(call.recvbuff, call.sendbuff, static_cast<size_t>(call.count) * dataTypeSize(call.dataType),
                      stream);
}

// A batch of sends and receives. Those with this rank itself pair up in order (the k-th send to
// itself with the k-th receive) and are copies, done first on the stream; the others get the next
// transfer number of their pair and direction and run as one batch, those of one pair and
// direction one after the other.
Status Communicator::Impl::launchPeers(const std::vector<PeerCall>& calls, tucclStream_t stream) {
  std::vector<const PeerCall*> selfSends, selfReceives;
  PeerBatch batch;
  batch.rank = rank;
  batch.timeoutSeconds = options.timeoutSeconds;
  for (const PeerCall& call : calls) {
    if (call.bytes == 0) continue;  // both sides skip it alike: nothing travels
    if (call.peer == rank) {
      (call.send ? selfSends : selfReceives).push_back(&call);
      continue;
    }
    batch.transfers.push_back(PeerTransfer{call.send, call.peer, call.buffer, call.bytes, 0, 0});
  }
  if (selfSends.size() != selfReceives.size()) {
    return makeError(ErrorCode::InvalidArgument, "send/receive: " + std::to_string(selfSends.size()) +
                                                     " send(s) to this rank itself but " +
                                                     std::to_string(selfReceives.size()) + " receive(s) from it");
  }
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfReceives[i]->bytes) {
      return makeError(ErrorCode::InvalidArgument, "send/receive: a send of " + std::to_string(selfSends[i]->bytes) +
                                                       " bytes to this rank itself meets a receive of " +
                                                       std::to_string(selfReceives[i]->bytes));
    }
    if (Status copied = device->copy(selfReceives[i]->buffer, selfSends[i]->buffer,
                                     static_cast<size_t>(selfSends[i]->bytes), stream);
        !copied) {
      return copied;
    }
  }
  if (batch.transfers.empty()) return {};
  {
    std::lock_guard lock(mutex);
    if (!peerRings) return makeError(ErrorCode::ResourceExhausted, "send/receive: " + peerRefusal);
    for (PeerTransfer& transfer : batch.transfers) {
      transfer.number = (transfer.send ? sentTo : receivedFrom)[transfer.peer]++;
      transfer.ring = transfer.send ? peerRingIndex(rank, transfer.peer, nRanks)
                                    : peerRingIndex(transfer.peer, rank, nRanks);
    }
    // The transfers of one ring and direction run as one chain, in issue order (peerChains).
    std::stable_sort(batch.transfers.begin(), batch.transfers.end(), [](const PeerTransfer& a, const PeerTransfer& b) {
      return std::make_pair(a.send, a.ring) < std::make_pair(b.send, b.ring);
    });
    batch.placement = peerRings.get();
    batch.sliceBytes = peerSlot;
    batch.sequence = nextSequence++;
  }
  if (proxy) proxy->kick();
  Status launched = device->launchPeers(batch, stream);
  if (!launched) fail(launched);
  if (!launched && launched.code() != ErrorCode::Timeout && launched.code() != ErrorCode::Aborted) device->abort();
  return launched;
}

// TUCCL_DEVICE: cuda needs the driver and a GPU; auto takes the GPU when the driver loads and
// finds one, else the CPU device (said at INFO).
Expected<std::unique_ptr<Device>> Communicator::Impl::chooseDevice(PlanCacheOptions& planOptions, int cudaDevice) {
  if (options.device != "cpu") {
    Expected<const CudaDriver*> driver = loadCudaDriver();
    if (driver) {
      Expected<int> ordinal = cudaDevice >= 0 ? Expected<int>(cudaDevice) : currentCudaOrdinal(**driver);
      if (!ordinal) return ordinal.status();
      Expected<std::string> arch = cudaArchitecture(**driver, *ordinal);
      if (!arch) return arch.status();
      Expected<std::unique_ptr<Device>> created = createCudaDevice(**driver, *ordinal);
      if (!created) return created.status();
      planOptions.hostKernels = false;
      planOptions.cudaArch = *arch;
      // A channel is a replica of the plan's TBs on its own share of the data: a GPU reaches its
      // copy bandwidth only with many TBs (one SM moves a few tens of GB/s), so the CUDA device
      // runs kCudaDefaultChannels unless the table or TUCCL_NCHANNELS says otherwise.
      planOptions.defaultChannels = kCudaDefaultChannels;
      if (!options.chunkSizeForced) planOptions.defaultChunkSize = kCudaDefaultChunkBytes;
      if (!options.stagingBytesSet) options.stagingBytes = kCudaDefaultStagingBytes;
      return created;
    }
    if (options.device == "cuda") {
      return makeError(driver.status().code(), "TUCCL_DEVICE=cuda: " + driver.status().message());
    }
    logLine(LogLevel::Info, rank, "no GPU (" + driver.status().message() + "): the CPU device runs this communicator");
  }
  planOptions.hostKernels = true;
  // On the CPU device a TB is a thread: channels would only multiply the threads that share the
  // host's cores, so a table's channels are not taken (TUCCL_NCHANNELS still forces them).
  planOptions.defaultChannels = 1;
  planOptions.maxChannels = 1;
  return createCpuDevice(rank, nRanks);
}

// Init: connect -> prepare (table, device, plan cache) -> agree -> group the hosts -> open the
// staging -> start the services. A local failure is reported to every rank at the agreement, so
// all fail together.
Status Communicator::Impl::setup(const UniqueIdBytes& id, int cudaDevice) {
  BootstrapOptions bootstrapOptions;
  bootstrapOptions.timeoutSeconds = options.timeoutSeconds;
  bootstrapOptions.interfaceName = options.interfaceName;
  bootstrapOptions.cancel = cancel;
  Expected<std::unique_ptr<Bootstrap>> connected = Bootstrap::connect(id, rank, nRanks, bootstrapOptions);
  if (!connected) return connected.status();
  bootstrap = std::move(*connected);
  const Status local = prepare(cudaDevice);
  Expected<std::vector<InitReport>> everyone = agree(local);
  if (!everyone) return everyone.status();
  const int32_t nHosts = groupHosts(*everyone);
  if (Status opened = openStaging(nHosts); !opened) return opened;
  return startServices(id, nHosts);
}

// This rank's own setup: the table, the device, the plan cache (shaped for one host until the
// agreement says more).
Status Communicator::Impl::prepare(int cudaDevice) {
  Expected<std::optional<LookupTable>> table = loadNamedTable(options.tablePath);
  if (!table) return table.status();
  PlanCacheOptions planOptions;
  planOptions.nRanks = nRanks;
  planOptions.nNodes = 1;
  planOptions.cacheDir = options.cacheDir;
  planOptions.defaultChunkSize = options.chunkSize;
  planOptions.forcedAlgorithm = options.algorithm;
  planOptions.forcedChannels = options.channels;
  planOptions.forcedChunkSize = options.chunkSizeForced ? options.chunkSize : 0;
  planOptions.forcedProtocol = options.protocol;
  planOptions.fuse = options.fuse;
  planOptions.tablePath = options.tablePath;
  Expected<std::unique_ptr<Device>> chosen = chooseDevice(planOptions, cudaDevice);
  if (!chosen) return chosen.status();
  device = std::move(*chosen);
  plans = std::make_unique<PlanCache>(std::move(*table), planOptions);
  return {};
}

// Every rank's report, all-gathered and compared: every rank fails alike when one failed or
// holds other settings.
Expected<std::vector<InitReport>> Communicator::Impl::agree(const Status& local) {
  InitReport mine;
  mine.hostHash = bootstrap->hostHash();
  mine.tableHash = plans ? plans->tableHash() : 0;
  mine.stagingBytes = options.stagingBytes;
  mine.deviceKind = device ? static_cast<int32_t>(device->kind()) : -1;
  mine.ok = local ? 1 : 0;
  mine.adaptHash = adaptRuleHash(options.adapt);
  mine.planHash = planSettingsHash(options);
  if (device && device->kind() == DeviceKind::Cuda) {
    mine.gpuOrdinal = device->deviceOrdinal();
    mine.multiprocessors = device->multiprocessors();
  }
  Expected<std::vector<std::string>> reports = bootstrap->allGather(bytesOf(mine));
  if (!reports) return reports.status();
  if (!local) return local;
  std::vector<InitReport> everyone(static_cast<size_t>(nRanks));
  for (int32_t r = 0; r < nRanks; ++r) {
    if ((*reports)[r].size() != sizeof(InitReport)) {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " runs another version of libtuccl");
    }
    std::memcpy(&everyone[r], (*reports)[r].data(), sizeof(InitReport));
    if (Status same = sameSettings(everyone[r], mine, r); !same) return same;
  }
  return everyone;
}

// The ranks of one host hash share memory; the others are reached through the network. What
// every rank learnt from the others shapes the plans: the hosts, and the TBs a rank's GPU share
// runs at once. Answers the number of hosts.
int32_t Communicator::Impl::groupHosts(const std::vector<InitReport>& everyone) {
  std::vector<uint64_t> hosts;
  remote.assign(static_cast<size_t>(nRanks), false);
  hostOf.assign(static_cast<size_t>(nRanks), 0);
  for (int32_t r = 0; r < nRanks; ++r) {
    auto known = std::find(hosts.begin(), hosts.end(), everyone[r].hostHash);
    hostOf[r] = static_cast<int32_t>(known - hosts.begin());
    if (known == hosts.end()) hosts.push_back(everyone[r].hostHash);
    remote[r] = everyone[r].hostHash != everyone[rank].hostHash;
  }
  const auto nHosts = static_cast<int32_t>(hosts.size());
  plans->setCommunicatorShape(nHosts, blocksPerRank(everyone));
  // A table made for another communicator shape is said once (rank 0), not left to INFO lines.
  if (const std::string mismatch = plans->tableMismatch(); !mismatch.empty() && rank == 0) {
    warnOnce("table-mismatch " + options.tablePath + " " + std::to_string(nRanks) + "/" + std::to_string(nHosts),
             "TuCCL: TUCCL_TUNER_TABLE=" + options.tablePath + ":\n" + mismatch);
  }
  return nHosts;
}

// Staging: create, exchange (length-prefixed: a CUDA blob is binary), map, then drop the names
// once every rank mapped every segment (or said it failed).
Status Communicator::Impl::openStaging(int32_t nHosts) {
  Status spans;
  if (nHosts > 1) spans = device->setRemoteRanks(remote);
  if (nHosts > 1 && device->kind() == DeviceKind::Cuda && !options.stagingBytesSet) {
    // Across hosts the default plans are hierarchical (rings inside each host and rings across),
    // and with the inter-node proxy watching them the staging is never restarted: the CUDA
    // device's default rings need twice the room.
    options.stagingBytes = 2 * kCudaDefaultStagingBytes;
  }
  Expected<std::string> blob =
      spans ? device->createStaging(static_cast<size_t>(options.stagingBytes)) : Expected<std::string>(spans);
  std::string padded(kBlobBytes, '\0');
  if (blob && blob->size() > kBlobBytes - 4) {
    blob = makeError(ErrorCode::Internal, "the staging blob of " + std::to_string(blob->size()) + " bytes is too long");
  }
  if (blob) {
    const auto length = static_cast<uint32_t>(blob->size());
    std::memcpy(padded.data(), &length, 4);
    std::memcpy(padded.data() + 4, blob->data(), blob->size());
  }
  Expected<std::vector<std::string>> blobs = bootstrap->allGather(padded);
  if (!blobs) return blobs.status();
  if (!blob) return blob.status();
  std::vector<std::string> names;
  for (int32_t r = 0; r < nRanks; ++r) {
    const std::string& raw = (*blobs)[r];
    uint32_t length = 0;
    if (raw.size() == kBlobBytes) std::memcpy(&length, raw.data(), 4);
    if (length == 0 || length > kBlobBytes - 4) {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " has no staging segment");
    }
    names.emplace_back(raw.data() + 4, length);
  }
  Status opened = device->openStaging(names);
  const std::string verdict(1, opened ? '1' : '0');
  Expected<std::vector<std::string>> verdicts = bootstrap->allGather(verdict);
  device->stagingShared();
  if (!opened) return opened;
  if (!verdicts) return verdicts.status();
  for (int32_t r = 0; r < nRanks; ++r) {
    if ((*verdicts)[r] != "1") {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " could not map the staging segments");
    }
  }
  allocator = std::make_unique<StagingAllocator>(nRanks, options.stagingBytes);
  placePeerRings();
  return {};
}

// The point-to-point rings on a fresh allocator (before any plan's), their transfer numbers from
// zero: the same on every rank. Under `mutex` or before the communicator is shared.
void Communicator::Impl::placePeerRings() {
  peerRings.reset();
  sentTo.assign(static_cast<size_t>(nRanks), 0);
  receivedFrom.assign(static_cast<size_t>(nRanks), 0);
  if (nRanks < 2) return;
  peerSlot = peerSlotBytes(options.stagingBytes, nRanks, options.stagingSlots, options.chunkSize);
  Expected<PlanPlacement> placed = peerSlot > 0
                                       ? allocator->placePeerRings(peerSlot, options.stagingSlots)
                                       : Expected<PlanPlacement>(makeError(ErrorCode::ResourceExhausted, ""));
  if (placed) {
    peerRings = std::make_unique<PlanPlacement>(std::move(*placed));
    return;
  }
  peerRefusal = "the staging of " + formatByteSize(static_cast<uint64_t>(options.stagingBytes)) +
                " per rank cannot hold a point-to-point ring for each of the " + std::to_string(nRanks - 1) +
                " peers (raise TUCCL_STAGING_BYTES)";
}

// The services of a running communicator: the device's error sink, the inter-node proxy (several
// hosts), the runtime phase (TUCCL_ADAPT), the watchdog.
Status Communicator::Impl::startServices(const UniqueIdBytes& id, int32_t nHosts) {
  device->setErrorSink([this](const Status& status) { fail(status); });
  if (nHosts > 1) {
    if (Status started = startProxy(id); !started) return started;
  }
  if (options.adapt.enabled) {
    if (Status started = startAdaptation(nHosts); !started) return started;
  }
  startWatchdog();
  const uint64_t tableHash = plans->tableHash();
  logLine(LogLevel::Info, kLogInit, rank,
          "communicator " + (options.name.empty() ? std::string() : "\"" + options.name + "\" ") + "of " +
              std::to_string(nRanks) + " ranks" +
              (nHosts > 1 ? " (" + std::to_string(nHosts) + " hosts)" : std::string()) + " on " +
              (device->kind() == DeviceKind::Cuda ? "GPU " + std::to_string(device->deviceOrdinal())
                                                  : std::string("the CPU device")) +
              ", staging " + formatByteSize(static_cast<uint64_t>(options.stagingBytes)) + " per rank, timeout " +
              formatSeconds(options.timeoutSeconds) + ", " +
              (tableHash == 0 ? std::string("no table") : "table hash " + std::to_string(tableHash)));
  return {};
}

// The runtime phase (adaptive_runtime.h): the topology signature from every rank's description,
// then the learned table rank 0 reads. Collective; every rank runs it (TUCCL_ADAPT agrees, see
// InitReport).
Status Communicator::Impl::startAdaptation(int32_t nHosts) {
  Expected<std::vector<std::string>> descriptions = bootstrap->allGather(localTopologyDescription());
  if (!descriptions) return descriptions.status();
  const uint64_t signature = topologySignatureOf(*descriptions, nHosts);
  // The exchanges run on the runtime's thread; the bootstrap serialises its calls, and the
  // communicator quiesces them before its own (quiesceAdaptation).
  Bootstrap* shared = bootstrap.get();
  adapt = std::make_shared<AdaptiveRuntime>(options.adapt, rank, nRanks, signature, plans->tableHash(),
                                            [shared](const std::string& bytes) { return shared->allGather(bytes); });
  return adapt->loadLearned();
}

// The inter-node proxy (net_proxy.h) over the plugin TUCCL_NET_PLUGIN / NCCL_NET_PLUGIN names;
// collective: every rank starts one, and a rank's failure fails every rank's init.
Status Communicator::Impl::startProxy(const UniqueIdBytes& id) {
  const uint64_t commId = std::hash<std::string_view>{}(std::string_view(id.bytes, kUniqueIdBytes));
  NetProxyOptions proxyOptions;
  proxyOptions.rank = rank;
  proxyOptions.hostOf = hostOf;
  proxyOptions.staging = device->hostSegments();
  proxyOptions.timeoutSeconds = options.timeoutSeconds;
  // The proxy reports through a relay: after destroy its thread outlives this object (a reaper
  // keeps it until the peers on other hosts are done), and its reports go to the reaper.
  proxyErrors = std::make_shared<ErrorRelay>();
  proxyErrors->retarget([this](const Status& status) {
    fail(status);
    device->abort();
  });
  Expected<std::unique_ptr<NetProxy>> started =
      NetProxy::start(loadNetPlugin(commId), proxyOptions, *bootstrap,
                      [relay = proxyErrors](const Status& status) { relay->report(status); });
  if (!started) return started.status();
  proxy = std::move(*started);
  device->setHostPoll(proxy->hostPoll());  // the CPU device's waiting TBs progress the proxy
  if (peerRings) proxy->addRings(*peerRings);
  logLine(LogLevel::Info, rank, "inter-node transfers: " + proxy->description());
  return {};
}

Expected<const PlanPlacement*> Communicator::Impl::placementFor(const CompiledPlan& compiled) {
  auto it = placements.find(compiled.key);
  if (it != placements.end()) return it->second.get();
  const int64_t slotBytes = stagingSlotBytes(compiled.plan.config.protocol, compiled.plan.config.chunkSize);
  // A plan with fused entries needs rings of two slots at least (plan.h: minStagingSlots).
  const int32_t slots = std::max(options.stagingSlots, minStagingSlots(compiled.plan));
  Expected<PlanPlacement> placed = allocator->place(compiled.layout, slotBytes, slots);
  if (!placed && placed.status().code() == ErrorCode::ResourceExhausted && !placements.empty() && !proxy) {
    // The staging holds the rings of earlier plans: start it afresh and place this plan alone.
    if (Status restarted = restartStaging(compiled.plan.algorithm); !restarted) return restarted;
    placed = allocator->place(compiled.layout, slotBytes, slots);
  }
  if (!placed) return placed.status();
  auto& slot = placements[compiled.key];
  slot = std::make_unique<PlanPlacement>(std::move(*placed));
  if (proxy) proxy->addRings(*slot, compiled.plan.config.protocol);
  return slot.get();
}

// The staging is full when a plan's rings no longer fit beside those of the plans placed before
// (placement is deterministic, so every rank finds it at the same call): every rank drains its
// calls, meets the others, zero-fills its segment and forgets every placement, meets them again,
// and the plans are placed afresh as they are next used. Single host only: the inter-node proxy
// keeps its rings for the communicator's life. Called with `mutex` held.
Status Communicator::Impl::restartStaging(const std::string& algorithm) {
  if (Status drained = device->drain(options.timeoutSeconds); !drained) return drained;
  quiesceAdaptation();
  if (Status met = bootstrap->barrier(); !met) return met;
  if (Status reset = device->resetStaging(); !reset) return reset;
  const size_t dropped = placements.size();
  placements.clear();
  allocator = std::make_unique<StagingAllocator>(nRanks, options.stagingBytes);
  placePeerRings();
  if (Status met = bootstrap->barrier(); !met) return met;
  ++stagingRestarts;
  logLine(LogLevel::Info, rank,
          "staging full (" + formatByteSize(static_cast<uint64_t>(options.stagingBytes)) +
              " per rank, TUCCL_STAGING_BYTES): every rank drained and started its rings afresh for " + algorithm +
              " (placements dropped: " + std::to_string(dropped) + ", each placed again when next used; restart " +
              std::to_string(stagingRestarts) + ")");
  if (stagingRestarts == 64) {
    warnOnce("staging-restarts", "TuCCL: the staging was restarted 64 times (each call that restarts it waits for "
                                 "every rank): raise TUCCL_STAGING_BYTES to hold the plans this job uses");
  }
  return {};
}

Communicator::Communicator() : impl_(std::make_unique<Impl>()) {}

Communicator::~Communicator() {
  impl_->stopWatchdogThread();
  if (impl_->device) impl_->device->setErrorSink(nullptr);  // queued calls outlive this object
  if (impl_->proxyErrors) impl_->proxyErrors->retarget(nullptr);  // the proxy stops after this object's members
  if (impl_->bootstrap) impl_->bootstrap->abort();
  // Queued calls may hold the runtime phase past this object: its exchange thread, which uses
  // the bootstrap, stops now (an exchange in flight fails on the aborted bootstrap).
  if (impl_->adapt) impl_->adapt->shutdown();
}

Expected<std::unique_ptr<Communicator>> Communicator::make(int32_t rank, int32_t nRanks, const CommOptions& options) {
  if (nRanks < 1) return makeError(ErrorCode::InvalidArgument, "nranks " + std::to_string(nRanks) + " is not positive");
  if (rank < 0 || rank >= nRanks) {
    return makeError(ErrorCode::InvalidArgument,
                     "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nRanks) + ")");
  }
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->impl_->rank = rank;
  comm->impl_->nRanks = nRanks;
  comm->impl_->options = options;
  comm->impl_->cancel = std::make_shared<transport::AbortSignal>();
  if (!comm->impl_->cancel->valid()) {
    return makeError(ErrorCode::SystemError, "cannot create an eventfd (out of file descriptors?)");
  }
  return comm;
}

Status Communicator::init(const UniqueIdBytes& id, int cudaDevice) {
  Status status = impl_->setup(id, cudaDevice);
  if (!status) impl_->abandon(status);
  return status;
}

void Communicator::cancelInit() {
  if (impl_->cancel) impl_->cancel->raise();
}

std::unique_ptr<Communicator> Communicator::failed(int32_t rank, int32_t nRanks, const CommOptions& options,
                                                   const Status& why) {
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->impl_->rank = rank;
  comm->impl_->nRanks = std::max(nRanks, 1);
  comm->impl_->options = options;
  comm->impl_->abandon(why);
  return comm;
}

Expected<std::unique_ptr<Communicator>> Communicator::create(const UniqueIdBytes& id, int32_t rank, int32_t nRanks,
                                                              const CommOptions& options, int cudaDevice) {
  Expected<std::unique_ptr<Communicator>> comm = make(rank, nRanks, options);
  if (!comm) return comm.status();
  if (Status status = (*comm)->init(id, cudaDevice); !status) return status;
  return comm;
}

const CommOptions& Communicator::options() const { return impl_->options; }

int32_t Communicator::rank() const { return impl_->rank; }
int32_t Communicator::nRanks() const { return impl_->nRanks; }
DeviceKind Communicator::deviceKind() const { return impl_->device->kind(); }
int Communicator::deviceOrdinal() const { return impl_->device->deviceOrdinal(); }

Expected<CollectiveCall> Communicator::callOf(Collective collective, const void* sendbuff, void* recvbuff,
                                             size_t count, int dataType, int op, int root) const {
  const std::string name(collectiveName(collective));
  auto invalid = [&](const std::string& why) { return makeError(ErrorCode::InvalidArgument, name + ": " + why); };
  const std::optional<DataType> type = dataTypeOf(dataType);
  if (!type) {
    return invalid("datatype " + std::to_string(dataType) +
                   " is not supported (int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, "
                   "bfloat16, float8e4m3, float8e5m2 are)");
  }
  std::optional<ReduceOp> reduction = usesOp(collective) ? reduceOpOf(op) : ReduceOp::Sum;
  std::optional<PreMulSumOp> preMul;
  if (!reduction && op >= tucclNumOps) {
    std::lock_guard lock(impl_->opsMutex);
    if (auto found = impl_->ops.find(op); found != impl_->ops.end()) preMul = found->second;
  }
  if (preMul && preMul->type != *type) {
    return invalid("reduction operation " + std::to_string(op) + " is a PreMulSum operator of datatype " +
                   std::string(dataTypeName(preMul->type)) + ", not " + std::string(dataTypeName(*type)));
  }
  if (preMul) reduction = ReduceOp::Sum;
  if (!reduction) {
    return invalid("reduction operation " + std::to_string(op) +
                   " is not sum, prod, max, min, avg or a live PreMulSum operator of this communicator");
  }
  const int32_t n = impl_->nRanks;
  if (hasRoot(collective) && (root < 0 || root >= n)) {
    return invalid("root " + std::to_string(root) + " is outside [0, " + std::to_string(n) + ")");
  }
  const auto elementSize = static_cast<size_t>(dataTypeSize(*type));
  const bool perRankBlocks = collective == Collective::AllGather || collective == Collective::ReduceScatter ||
                             collective == Collective::AllToAll;
  if (count > static_cast<size_t>(INT64_MAX) / elementSize / (perRankBlocks ? static_cast<size_t>(n) : 1) / 2) {
    return invalid("count " + std::to_string(count) + " overflows the buffer size");
  }
  CollectiveCall call{collective, n, hasRoot(collective) ? root : -1, *type, *reduction, static_cast<int64_t>(count),
                      false, sendbuff, recvbuff};
  if (preMul) {
    call.preMul = true;
    call.preMulBits = preMul->bits;
    call.preMulScalar = preMul->address;
  }
  if (count == 0) return call;
  const bool atRoot = root == impl_->rank;
  if (!(collective == Collective::Broadcast && !atRoot) && sendbuff == nullptr) return invalid("sendbuff is NULL");
  if (!(collective == Collective::Reduce && !atRoot) && recvbuff == nullptr) return invalid("recvbuff is NULL");
  // NCCL's in-place conditions.
  const char* send = static_cast<const char*>(sendbuff);
  const char* recv = static_cast<const char*>(recvbuff);
  const size_t block = count * elementSize;
  call.inPlace = send == recv;
  if (collective == Collective::AllGather) call.inPlace = recv != nullptr && send == recv + impl_->rank * block;
  if (collective == Collective::ReduceScatter) call.inPlace = send != nullptr && recv == send + impl_->rank * block;
  return call;
}

Status Communicator::enqueue(const CollectiveCall& call, tucclStream_t stream) {
  if (Status status = impl_->device->checkStream(stream); !status) {
    return makeError(ErrorCode::InvalidArgument, std::string(collectiveName(call.collective)) + ": " + status.message());
  }
  if (Status status = asyncError(); !status) return status;
  if (call.count == 0) return {};
  Impl& s = *impl_;
  if (s.nRanks == 1) return s.copyLocally(call, stream);
  Expected<Impl::Choice> choice = s.choose(s.plans->decide(call));
  if (!choice) return choice.status();
  Expected<KernelCall> kernel = s.settle(call, *choice);
  if (!kernel) return kernel.status();
  return s.launch(std::move(*kernel), *choice, stream);
}

Expected<size_t> Communicator::blockBytes(size_t count, int dataType) const {
  const int64_t size = anyTypeSize(dataType);
  if (size == 0) return makeError(ErrorCode::InvalidArgument, "datatype " + std::to_string(dataType) + " is not one NCCL defines");
  if (count > static_cast<size_t>(INT64_MAX / 2) / static_cast<size_t>(size)) {
    return makeError(ErrorCode::InvalidArgument, "count " + std::to_string(count) + " overflows the buffer size");
  }
  return count * static_cast<size_t>(size);
}

Expected<int> Communicator::createPreMulSum(const void* scalar, int dataType, bool hostResidence) {
  const std::optional<DataType> type = dataTypeOf(dataType);
  if (!type) return makeError(ErrorCode::InvalidArgument, "datatype " + std::to_string(dataType) + " is not one NCCL defines");
  if (scalar == nullptr) return makeError(ErrorCode::InvalidArgument, "the scalar is NULL");
  PreMulSumOp made;
  made.type = *type;
  if (hostResidence) {
    std::memcpy(&made.bits, scalar, static_cast<size_t>(dataTypeSize(*type)));
  } else {
    made.address = scalar;
  }
  std::lock_guard lock(impl_->opsMutex);
  if (impl_->nextOp > INT_MAX) {
    return makeError(ErrorCode::ResourceExhausted, "every PreMulSum operator number of this communicator was used");
  }
  const auto op = static_cast<int>(impl_->nextOp++);
  impl_->ops.emplace(op, made);
  return op;
}

Status Communicator::destroyOp(int op) {
  std::lock_guard lock(impl_->opsMutex);
  if (impl_->ops.erase(op) == 0) {
    return makeError(ErrorCode::InvalidArgument, "reduction operation " + std::to_string(op) +
                                                     " is not a live PreMulSum operator of this communicator");
  }
  return {};
}

Expected<PeerCall> Communicator::peerCallOf(bool send, const void* buffer, size_t count, int dataType, int peer) const {
  const std::string name = send ? "send" : "receive";
  Expected<size_t> bytes = blockBytes(count, dataType);
  if (!bytes) return makeError(ErrorCode::InvalidArgument, name + ": " + bytes.status().message());
  if (peer < 0 || peer >= impl_->nRanks) {
    return makeError(ErrorCode::InvalidArgument, name + ": peer " + std::to_string(peer) + " is outside [0, " +
                                                     std::to_string(impl_->nRanks) + ")");
  }
  if (*bytes > 0 && buffer == nullptr) return makeError(ErrorCode::InvalidArgument, name + ": the buffer is NULL");
  return PeerCall{send, peer, const_cast<void*>(buffer), static_cast<int64_t>(*bytes)};
}

Status Communicator::enqueuePeers(const std::vector<PeerCall>& calls, tucclStream_t stream) {
  if (Status status = impl_->device->checkStream(stream); !status) {
    return makeError(ErrorCode::InvalidArgument, "send/receive: " + status.message());
  }
  if (Status status = asyncError(); !status) return status;
  return impl_->launchPeers(calls, stream);
}

Status Communicator::hostAllGather(const void* send, void* recv, size_t bytes) {
  if (Status status = asyncError(); !status) return status;
  std::lock_guard lock(impl_->mutex);  // one bootstrap exchange at a time
  impl_->quiesceAdaptation();
  Expected<std::vector<std::string>> gathered =
      impl_->bootstrap->allGather(std::string(static_cast<const char*>(send), bytes));
  if (!gathered) return gathered.status();
  for (size_t r = 0; r < gathered->size(); ++r) {
    if ((*gathered)[r].size() != bytes) {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " gathered " +
                                                   std::to_string((*gathered)[r].size()) + " bytes, this rank " +
                                                   std::to_string(bytes));
    }
    std::memcpy(static_cast<char*>(recv) + r * bytes, (*gathered)[r].data(), bytes);
  }
  return {};
}

Status Communicator::hostSend(int32_t peer, const std::string& bytes) {
  if (!impl_->bootstrap) return failure();
  return impl_->bootstrap->sendWithin(peer, kLeaveTag + 1, bytes, impl_->options.timeoutSeconds);
}

Expected<std::string> Communicator::hostRecv(int32_t peer) {
  if (!impl_->bootstrap) return failure();
  return impl_->bootstrap->recvWithin(peer, kLeaveTag + 1, impl_->options.timeoutSeconds);
}

void Communicator::abortCalls(const std::string& reason) {
  {
    // Asked for, not a failure to warn about.
    std::lock_guard lock(impl_->errorMutex);
    if (impl_->asyncError) impl_->asyncError = makeError(ErrorCode::Aborted, reason);
  }
  logLine(LogLevel::Info, kLogInit, impl_->rank, impl_->label() + reason);
  if (impl_->device) impl_->device->abort();
  // An exchange of the runtime phase in flight may wait for the ranks that are gone; none starts.
  if (impl_->adapt) impl_->adapt->shutdown();
}

Status Communicator::drain() {
  Impl& s = *impl_;
  Status drained = s.device ? s.device->drain(s.options.timeoutSeconds) : Status();
  s.quiesceAdaptation();
  std::lock_guard lock(s.errorMutex);
  s.closed = makeError(ErrorCode::Unsupported,
                       s.label() + "the communicator was finalized (tucclCommFinalize): it may only be destroyed");
  return drained;
}

Status Communicator::finalize() {
  Impl& s = *impl_;
  s.stopWatchdogThread();
  const Status drained = drain();
  const Status failed = failure();
  // What the runtime phase learnt, for the next run (rank 0; a failed write is logged, not fatal).
  if (s.adapt) {
    if (drained && failed) (void)s.adapt->persist();
    s.adapt->shutdown();
  }
  if (!s.bootstrap) return drained;  // the init failed: nothing was shared
  if (s.device) s.device->setErrorSink(nullptr);
  s.bootstrap->leave();
  // The peers that may still touch what this rank owns (see "Leaving"). A communicator that
  // failed or did not drain waits for none: its calls were aborted on every rank of the host.
  std::vector<int32_t> peers;
  const bool gpuStaging = s.device && s.device->kind() == DeviceKind::Cuda;
  for (int32_t r = 0; r < s.nRanks && drained && failed; ++r) {
    const bool remote = static_cast<size_t>(r) < s.remote.size() && s.remote[static_cast<size_t>(r)];
    if (r != s.rank && ((s.proxy && remote) || (gpuStaging && !remote))) peers.push_back(r);
  }
  if (peers.empty()) {
    logLine(LogLevel::Info, kLogInit, s.rank, s.label() + "left the communicator");
    return drained;
  }
  auto leaving = std::make_unique<Leaving>();
  leaving->rank = s.rank;
  leaving->label = s.label();
  leaving->timeoutSeconds = s.options.timeoutSeconds;
  leaving->peers = std::move(peers);
  leaving->bootstrap = std::move(s.bootstrap);
  leaving->proxy = std::move(s.proxy);
  leaving->device = std::move(s.device);
  // A proxy failure while leaving (a peer on another host ended): nobody to wait for any more.
  // The relay goes with the proxy: this object no longer hears from it.
  leaving->proxyErrors = std::move(s.proxyErrors);
  if (leaving->proxyErrors) {
    leaving->proxyErrors->retarget([bootstrap = leaving->bootstrap.get()](const Status&) { bootstrap->abort(); });
  }
  startReaper(std::move(leaving));
  return drained;
}

void Communicator::abort(const std::string& reason) {
  impl_->fail(makeError(ErrorCode::Aborted, reason));
  if (impl_->device) impl_->device->abort();
  if (impl_->bootstrap) impl_->bootstrap->abort();
}

Status Communicator::failure() const {
  if (impl_->device) impl_->device->poll();  // calls that ended since hand in their errors first
  std::lock_guard lock(impl_->errorMutex);
  return impl_->asyncError;
}

Status Communicator::asyncError() const {
  Status failed = failure();
  if (!failed) return failed;
  std::lock_guard lock(impl_->errorMutex);
  return impl_->closed;
}

}  // namespace tuccl::backend
