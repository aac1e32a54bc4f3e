// libtuccl's C API: making and ending communicators (api_internal.h).
//
// Making. Every way to a communicator — init, split, shrink — ends in makeHandle: a rank and size
// and a unique id (given, or decided by an exchange over a parent), then Communicator::make and
// init. Blocking (the default) does it in the caller; a non-blocking config (blocking = 0) returns
// tucclInProgress with the handle at once and does it on the handle's thread: the handle's calls
// wait for it (CommRef), tucclCommGetAsyncError says tucclInProgress until then, and abort stops
// it at its next wait on the peers. Inside a group (tucclGroupStart) init, split and shrink are
// deferred to the outermost tucclGroupEnd, which runs them all at once, each on its own thread, so
// one thread may make several ranks of one communicator (*comm is NULL until then).
//
// Ending. Destroy is local (Communicator::finalize): it waits for this rank's calls, not for its
// peers, so communicators may be destroyed in any order on any rank. Finalize drains and leaves
// the communicator to destroy (and abort). Abort stops everything at once.
#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "backend/api_internal.h"
#include "backend/bootstrap.h"
#include "backend/communicator.h"
#include "backend/cuda_device.h"
#include "backend/cuda_driver.h"
#include "support/environment.h"
#include "support/log.h"
#include "support/text_values.h"
#include "tuccl/tuccl.h"

using tuccl::ErrorCode;
using tuccl::Expected;
using tuccl::Status;
using tuccl::api::finish;
using tuccl::api::guarded;
using tuccl::api::invalid;
using tuccl::api::lastError;
using tuccl::api::resultOf;
using tuccl::api::threadGroup;
using tuccl::api::Use;
using tuccl::api::waitIdle;
using tuccl::backend::CommOptions;
using tuccl::backend::Communicator;
using tuccl::backend::UniqueIdBytes;

namespace {

// ---- Configurations ------------------------------------------------------------------------------

struct Settings {
  bool blocking = true;
  std::string name;  ///< commName
};

// A tucclConfig_t (NULL: the defaults). blocking INT_MIN (NCCL's NCCL_CONFIG_UNDEF_INT) is the
// default too; splitShare is accepted and has no effect (a child never shares its parent's staging).
Expected<Settings> settingsOf(const tucclConfig_t* config) {
  Settings settings;
  if (config == nullptr) return settings;
  if (config->blocking != 0 && config->blocking != 1 && config->blocking != INT_MIN) {
    return tuccl::makeError(ErrorCode::InvalidArgument,
                            "config->blocking " + std::to_string(config->blocking) + " is not 0 or 1");
  }
  settings.blocking = config->blocking != 0;
  if (config->commName != nullptr) settings.name = config->commName;
  return settings;
}

// The caller's current CUDA device, as NCCL takes it at init: read here, on the caller's thread,
// because a deferred or non-blocking init runs on another. -1: none (the CPU device, no driver, no
// GPU), and the init decides as a blocking one would.
int callerCudaDevice(const CommOptions& options) {
  if (tuccl::equalsIgnoreCase(options.device, "cpu")) return -1;
  Expected<const tuccl::backend::CudaDriver*> driver = tuccl::backend::loadCudaDriver();
  if (!driver || (*driver)->deviceCount < 1) return -1;
  Expected<int> ordinal = tuccl::backend::currentCudaOrdinal(**driver);
  return ordinal ? *ordinal : -1;
}

tuccl::backend::BootstrapOptions bootstrapOptionsOf(const CommOptions& options) {
  tuccl::backend::BootstrapOptions bootstrap;
  bootstrap.timeoutSeconds = options.timeoutSeconds;
  bootstrap.interfaceName = options.interfaceName;
  return bootstrap;
}

// ---- Making a handle -----------------------------------------------------------------------------

/// What a rank joins: its rank, the size, the rendezvous. rank -1: no new communicator for it.
struct Target {
  int32_t rank = -1;
  int32_t nRanks = 0;
  UniqueIdBytes id;
};
using TargetFn = std::function<Expected<Target>()>;

// Makes the handle *out of the communicator `target` decides: here (blocking; *out stays NULL on
// failure) or on the handle's thread (non-blocking: *out at once, tucclInProgress).
tucclResult_t makeHandle(const char* function, tucclComm_t* out, const Settings& settings, const CommOptions& options,
                         int cudaDevice, TargetFn target) {
  auto handle = std::make_unique<tucclComm>();
  tucclComm* raw = handle.get();
  auto run = [raw, options, cudaDevice, target = std::move(target)]() -> Status {
    tuccl::api::CommRef& ref = raw->impl;
    Expected<Target> decided = target();
    Status status = decided ? Status() : decided.status();
    if (decided) {
      Expected<std::unique_ptr<Communicator>> made = Communicator::make(decided->rank, decided->nRanks, options);
      if (made) {
        Communicator* comm = made->get();
        {
          std::lock_guard lock(ref.mutex);
          ref.comm = std::move(*made);
          if (ref.cancelled) comm->cancelInit();
        }
        status = comm->init(decided->id, cudaDevice);
      } else {
        status = made.status();
      }
    }
    {
      std::lock_guard lock(ref.mutex);
      if (!ref.comm) {
        ref.comm = Communicator::failed(decided ? decided->rank : 0, decided ? decided->nRanks : 1, options, status);
      }
      ref.made = status;
    }
    ref.finish();
    return status;
  };
  if (settings.blocking) {
    const Status status = run();
    if (!status) return finish(function, status, raw->impl.get()->rank());
    *out = handle.release();
    return tucclSuccess;
  }
  raw->impl.setPending();
  try {
    raw->impl.thread = std::thread([raw, run, function] {
      const Status status = run();
      bool cancelled = false;
      {
        std::lock_guard lock(raw->impl.mutex);
        cancelled = raw->impl.cancelled;
      }
      // An init tucclCommAbort stopped is no failure to warn about.
      if (!status && !cancelled) (void)finish(function, status, raw->impl.get()->rank());
    });
  } catch (const std::system_error&) {
    // No thread to spare: made here, as a blocking init would be.
    const Status status = run();
    if (!status) return finish(function, status, raw->impl.get()->rank());
    *out = handle.release();
    return tucclSuccess;
  }
  *out = handle.release();
  return tucclInProgress;
}

// Inside a group: `make` runs at the outermost tucclGroupEnd (on a thread of its own); *out is
// NULL until then. Outside: now.
tucclResult_t deferOrRun(tucclComm_t* out, std::function<tucclResult_t()> make) {
  *out = nullptr;
  if (threadGroup().depth > 0) {
    threadGroup().inits.push_back(std::move(make));
    return tucclSuccess;
  }
  return make();
}

tucclResult_t initRankConfig(const char* function, tucclComm_t* comm, int nranks, const tucclUniqueId& commId,
                             int rank, const tucclConfig_t* config, int cudaDevice = -2) {
  if (comm == nullptr) return invalid(function, "comm is NULL");
  *comm = nullptr;
  Expected<Settings> settings = settingsOf(config);
  if (!settings) return finish(function, settings.status());
  Expected<CommOptions> options = tuccl::backend::commOptionsFromEnvironment();
  if (!options) return finish(function, options.status());
  options->name = settings->name;
  // The arguments are checked now, whatever runs the init.
  if (nranks < 1) return invalid(function, "nranks " + std::to_string(nranks) + " is not positive");
  if (rank < 0 || rank >= nranks) {
    return invalid(function, "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  }
  UniqueIdBytes id;
  std::memcpy(id.bytes, commId.internal, TUCCL_UNIQUE_ID_BYTES);
  const int device = cudaDevice == -2 ? callerCudaDevice(*options) : cudaDevice;
  TargetFn target = [id, rank, nranks] { return Expected<Target>(Target{rank, nranks, id}); };
  return deferOrRun(comm, [=] { return makeHandle(function, comm, *settings, *options, device, target); });
}

// The GPU of a rank a launcher started: its local rank modulo the GPUs the driver sees, so the
// ranks of a node spread over its GPUs and several share one when there are fewer GPUs than ranks
// (nccl-tests' choice). 0 where no driver loads or TUCCL_DEVICE=cpu.
int launchedRankDevice(int localRank) {
  if (tuccl::equalsIgnoreCase(tuccl::env::text("TUCCL_DEVICE").value_or(""), "cpu")) return 0;
  Expected<const tuccl::backend::CudaDriver*> driver = tuccl::backend::loadCudaDriver();
  if (!driver || (*driver)->deviceCount < 1) return 0;
  return std::max(localRank, 0) % (*driver)->deviceCount;
}

// ---- Split and shrink ----------------------------------------------------------------------------

// A child inherits its parent's settings and device; its name is the config's.
CommOptions childOptions(const Communicator& parent, const Settings& settings) {
  CommOptions options = parent.options();
  options.device = parent.deviceKind() == tuccl::backend::DeviceKind::Cuda ? "cuda" : "cpu";
  options.name = settings.name;
  return options;
}

bool emptyId(const UniqueIdBytes& id) {
  return std::all_of(std::begin(id.bytes), std::end(id.bytes), [](char c) { return c == 0; });
}

// tucclCommSplit's exchange over the parent (collective; a NOCOLOR rank takes part): every rank's
// (colour, key), then the unique id of each colour, made by its lowest parent rank (a fresh
// root listener in that process, whatever TUCCL_COMM_ID says). A rank's child rank is its place
// among its colour ordered by (key, parent rank).
Expected<Target> splitExchange(Communicator& parent, int color, int key) {
  const int32_t n = parent.nRanks();
  const int32_t me = parent.rank();
  struct Entry {
    int32_t color;
    int32_t key;
  };
  const Entry mine{color, key};
  std::vector<Entry> all(static_cast<size_t>(n));
  if (Status gathered = parent.hostAllGather(&mine, all.data(), sizeof mine); !gathered) return gathered;
  std::vector<int32_t> members;
  for (int32_t r = 0; r < n; ++r) {
    if (color != TUCCL_SPLIT_NOCOLOR && all[static_cast<size_t>(r)].color == color) members.push_back(r);
  }
  const int32_t maker = members.empty() ? -1 : members.front();
  UniqueIdBytes made;
  Status making;
  if (maker == me) {
    Expected<UniqueIdBytes> fresh = tuccl::backend::makeFreshUniqueId(bootstrapOptionsOf(parent.options()));
    if (fresh) {
      made = *fresh;
    } else {
      making = fresh.status();  // the others learn it from the empty id
    }
  }
  std::vector<UniqueIdBytes> ids(static_cast<size_t>(n));
  if (Status gathered = parent.hostAllGather(&made, ids.data(), sizeof made); !gathered) return gathered;
  if (color == TUCCL_SPLIT_NOCOLOR) return Target{};
  if (!making) return making;
  if (emptyId(ids[static_cast<size_t>(maker)])) {
    return tuccl::makeError(ErrorCode::RemoteError, "rank " + std::to_string(maker) +
                                                        " could not make the new communicator's unique id (its log "
                                                        "says why)");
  }
  std::stable_sort(members.begin(), members.end(), [&](int32_t a, int32_t b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  const auto at = std::find(members.begin(), members.end(), me);
  return Target{static_cast<int32_t>(at - members.begin()), static_cast<int32_t>(members.size()),
                ids[static_cast<size_t>(maker)]};
}

// tucclCommShrink's abort mode: the excluded ranks are gone, so the ranks that remain exchange
// nothing collective over the parent. The lowest of them makes the id and sends it to each other
// one over the parent's bootstrap (point to point: no excluded rank is involved); each takes its
// place in the parent's order.
Expected<Target> shrinkAbortExchange(Communicator& parent, const std::vector<int32_t>& remaining) {
  const int32_t me = parent.rank();
  const int32_t maker = remaining.front();
  const auto size = static_cast<int32_t>(remaining.size());
  const auto rank = static_cast<int32_t>(std::find(remaining.begin(), remaining.end(), me) - remaining.begin());
  if (me == maker) {
    Expected<UniqueIdBytes> fresh = tuccl::backend::makeFreshUniqueId(bootstrapOptionsOf(parent.options()));
    const UniqueIdBytes id = fresh ? *fresh : UniqueIdBytes{};
    Status sent = fresh ? Status() : fresh.status();
    for (int32_t peer : remaining) {
      if (peer == me) continue;
      Status one = parent.hostSend(peer, std::string(id.bytes, sizeof id.bytes));
      if (!one && sent) sent = one;
    }
    if (!sent) return sent;
    return Target{rank, size, id};
  }
  Expected<std::string> got = parent.hostRecv(maker);
  if (!got) return got.status();
  Target target{rank, size, {}};
  if (got->size() != sizeof target.id.bytes) {
    return tuccl::makeError(ErrorCode::RemoteError, "rank " + std::to_string(maker) + " sent a unique id of " +
                                                        std::to_string(got->size()) + " bytes");
  }
  std::memcpy(target.id.bytes, got->data(), sizeof target.id.bytes);
  if (emptyId(target.id)) {
    return tuccl::makeError(ErrorCode::RemoteError, "rank " + std::to_string(maker) +
                                                        " could not make the new communicator's unique id (its log "
                                                        "says why)");
  }
  return target;
}

/// The parent of an exchange while it runs: in use (finalize, destroy and abort wait for it), and
/// counted as busy when the exchange runs in the background.
class Exchanging {
 public:
  Exchanging(tucclComm* parent, bool background) : use_(parent), parent_(parent), background_(background) {
    if (background_) ++parent_->exchanges;
  }
  ~Exchanging() {
    if (background_) --parent_->exchanges;
  }
  Exchanging(const Exchanging&) = delete;
  Exchanging& operator=(const Exchanging&) = delete;

 private:
  Use use_;
  tucclComm* parent_;
  bool background_;
};

// The child of `parent` for this rank, from `exchange` (run with the parent in use). A rank that
// joins none (`joins` false) gets NULL, after taking part in the exchange (in the background
// when non-blocking).
tucclResult_t makeChild(const char* function, tucclComm_t parent, bool joins, tucclComm_t* newcomm,
                        const Settings& settings,
                        std::function<Expected<Target>(Communicator&)> exchange) {
  // The parent stays in use (finalize and destroy wait) until the exchange is over.
  auto use = std::make_shared<Exchanging>(parent, !settings.blocking);
  TargetFn target = [parent, use, exchange]() mutable -> Expected<Target> {
    std::shared_ptr<Exchanging> held = std::move(use);
    Expected<Target> decided = exchange(*parent->impl);
    held.reset();
    return decided;
  };
  if (!joins) {
    *newcomm = nullptr;
    if (settings.blocking) {
      Expected<Target> decided = target();
      return decided ? tucclSuccess : finish(function, decided.status(), parent->impl->rank());
    }
    try {
      std::thread([target, function]() mutable {
        if (Expected<Target> decided = target(); !decided) (void)finish(function, decided.status());
      }).detach();
    } catch (const std::system_error&) {
      Expected<Target> decided = target();
      return decided ? tucclSuccess : finish(function, decided.status(), parent->impl->rank());
    }
    return tucclSuccess;
  }
  Communicator& made = *parent->impl;
  return makeHandle(function, newcomm, settings, childOptions(made, settings), made.deviceOrdinal(), target);
}

tucclResult_t refusedWhenFinalized(const char* function, tucclComm_t comm) {
  return finish(function, tuccl::makeError(ErrorCode::Unsupported,
                                           "the communicator was finalized (tucclCommFinalize): it may only be destroyed"),
                comm->impl.get() != nullptr ? comm->impl.get()->rank() : -1);
}

}  // namespace

extern "C" {

tucclResult_t tucclGetUniqueId(tucclUniqueId* uniqueId) {
  return guarded("tucclGetUniqueId", [&] {
    if (uniqueId == nullptr) return invalid("tucclGetUniqueId", "uniqueId is NULL");
    Expected<CommOptions> options = tuccl::backend::commOptionsFromEnvironment();
    if (!options) return finish("tucclGetUniqueId", options.status());
    const std::optional<std::string> address = tuccl::env::text("TUCCL_COMM_ID");
    Expected<UniqueIdBytes> id = address ? tuccl::backend::uniqueIdFromAddress(*address)
                                         : tuccl::backend::makeUniqueId(bootstrapOptionsOf(*options));
    if (!id) return finish("tucclGetUniqueId", id.status());
    std::memcpy(uniqueId->internal, id->bytes, TUCCL_UNIQUE_ID_BYTES);
    return tucclSuccess;
  });
}

tucclResult_t tucclCommInitRank(tucclComm_t* comm, int nranks, tucclUniqueId commId, int rank) {
  return guarded("tucclCommInitRank",
                 [&] { return initRankConfig("tucclCommInitRank", comm, nranks, commId, rank, nullptr); });
}

tucclResult_t tucclCommInitRankConfig(tucclComm_t* comm, int nranks, tucclUniqueId commId, int rank,
                                      tucclConfig_t* config) {
  return guarded("tucclCommInitRankConfig",
                 [&] { return initRankConfig("tucclCommInitRankConfig", comm, nranks, commId, rank, config); });
}

// Every rank passes the same nId ids, so all of them meet at the first: correct whatever nId is.
// NCCL spreads its rendezvous over several roots because its root's work grows with the ranks;
// TuCCL's root (bootstrap_root.cc) is one poll loop that takes a small hello from each rank and
// answers each with the address table, after which the ranks talk among themselves (ring and
// point to point), so one root serves the whole rendezvous. The roots of the other ids (started
// by tucclGetUniqueId in their makers' processes) serve nobody and end at TUCCL_TIMEOUT_S. A rank
// that passed other ids than the rest meets nobody and times out.
tucclResult_t tucclCommInitRankScalable(tucclComm_t* newcomm, int nranks, int myrank, int nId,
                                        tucclUniqueId* commIds, tucclConfig_t* config) {
  return guarded("tucclCommInitRankScalable", [&] {
    const char* function = "tucclCommInitRankScalable";
    if (newcomm == nullptr) return invalid(function, "newcomm is NULL");
    *newcomm = nullptr;
    if (nId < 1) return invalid(function, "nId " + std::to_string(nId) + " is not positive");
    if (commIds == nullptr) return invalid(function, "commIds is NULL");
    return initRankConfig(function, newcomm, nranks, commIds[0], myrank, config);
  });
}

tucclResult_t tucclCommInitFromEnv(tucclComm_t* comm) {
  return guarded("tucclCommInitFromEnv", [&] {
    if (comm == nullptr) return invalid("tucclCommInitFromEnv", "comm is NULL");
    *comm = nullptr;
    Expected<tuccl::backend::LaunchEnvironment> launch = tuccl::backend::readLaunchEnvironment();
    if (!launch) return finish("tucclCommInitFromEnv", launch.status());
    Expected<UniqueIdBytes> id = tuccl::backend::uniqueIdFromAddress(launch->commId);
    if (!id) return finish("tucclCommInitFromEnv", id.status());
    tucclUniqueId unique;
    std::memcpy(unique.internal, id->bytes, TUCCL_UNIQUE_ID_BYTES);
    return initRankConfig("tucclCommInitFromEnv", comm, launch->nRanks, unique, launch->rank, nullptr,
                          launchedRankDevice(launch->localRank));
  });
}

tucclResult_t tucclCommInitAll(tucclComm_t* comms, int ndev, const int* devlist) {
  return guarded("tucclCommInitAll", [&] {
    if (comms == nullptr) return invalid("tucclCommInitAll", "comms is NULL");
    if (ndev < 1) return invalid("tucclCommInitAll", "ndev " + std::to_string(ndev) + " is not positive");
    tucclUniqueId unique;
    if (tucclResult_t made = tucclGetUniqueId(&unique); made != tucclSuccess) return made;
    Expected<CommOptions> options = tuccl::backend::commOptionsFromEnvironment();
    if (!options) return finish("tucclCommInitAll", options.status());
    UniqueIdBytes id;
    std::memcpy(id.bytes, unique.internal, TUCCL_UNIQUE_ID_BYTES);
    std::vector<tucclResult_t> results(static_cast<size_t>(ndev), tucclSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      threads.emplace_back([&, r] {
        comms[r] = nullptr;
        const int device = devlist != nullptr ? devlist[r] : r;
        results[r] = guarded("tucclCommInitAll", [&] {
          return makeHandle("tucclCommInitAll", &comms[r], Settings{}, *options, device,
                            [&] { return Expected<Target>(Target{r, ndev, id}); });
        });
        errors[r] = lastError();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] == tucclSuccess) continue;
      for (int other = 0; other < ndev; ++other) {
        if (comms[other] != nullptr) tucclCommAbort(comms[other]);
        comms[other] = nullptr;
      }
      lastError() = errors[r];
      return results[r];
    }
    return tucclSuccess;
  });
}

tucclResult_t tucclCommSplit(tucclComm_t comm, int color, int key, tucclComm_t* newcomm, tucclConfig_t* config) {
  return guarded("tucclCommSplit", [&] {
    const char* function = "tucclCommSplit";
    if (comm == nullptr) return invalid(function, "comm is NULL");
    if (newcomm == nullptr) return invalid(function, "newcomm is NULL");
    *newcomm = nullptr;
    if (color < 0 && color != TUCCL_SPLIT_NOCOLOR) {
      return invalid(function, "color " + std::to_string(color) + " is negative (TUCCL_SPLIT_NOCOLOR is -1)");
    }
    Expected<Settings> settings = settingsOf(config);
    if (!settings) return finish(function, settings.status());
    if (comm->finalized) return refusedWhenFinalized(function, comm);
    return deferOrRun(newcomm, [=, settings = *settings] {
      return makeChild(function, comm, color != TUCCL_SPLIT_NOCOLOR, newcomm, settings,
                       [color, key](Communicator& parent) { return splitExchange(parent, color, key); });
    });
  });
}

tucclResult_t tucclCommShrink(tucclComm_t comm, int* excludeRanks, int excludeCount, tucclComm_t* newcomm,
                              tucclConfig_t* config, int flags) {
  return guarded("tucclCommShrink", [&] {
    const char* function = "tucclCommShrink";
    if (comm == nullptr) return invalid(function, "comm is NULL");
    if (newcomm == nullptr) return invalid(function, "newcomm is NULL");
    *newcomm = nullptr;
    if (flags != 0 && flags != 1) {
      return invalid(function, "flags " + std::to_string(flags) + " is not 0 (NCCL_SHRINK_DEFAULT) or 1 (NCCL_SHRINK_ABORT)");
    }
    if (excludeCount < 0) return invalid(function, "excludeCount " + std::to_string(excludeCount) + " is negative");
    if (excludeCount > 0 && excludeRanks == nullptr) return invalid(function, "excludeRanks is NULL");
    Expected<Settings> settings = settingsOf(config);
    if (!settings) return finish(function, settings.status());
    if (comm->finalized) return refusedWhenFinalized(function, comm);
    Communicator& parent = *comm->impl;
    const int32_t n = parent.nRanks();
    std::vector<bool> excluded(static_cast<size_t>(n), false);
    for (int i = 0; i < excludeCount; ++i) {
      const int r = excludeRanks[i];
      if (r < 0 || r >= n) {
        return invalid(function, "excludeRanks[" + std::to_string(i) + "] = " + std::to_string(r) + " is outside [0, " +
                                     std::to_string(n) + ")");
      }
      if (excluded[static_cast<size_t>(r)]) return invalid(function, "rank " + std::to_string(r) + " is excluded twice");
      excluded[static_cast<size_t>(r)] = true;
    }
    std::vector<int32_t> remaining;
    for (int32_t r = 0; r < n; ++r) {
      if (!excluded[static_cast<size_t>(r)]) remaining.push_back(r);
    }
    if (remaining.empty()) return invalid(function, "every rank is excluded");
    const bool joins = !excluded[static_cast<size_t>(parent.rank())];
    if (flags == 0) {
      // The excluded ranks take part: a split of one colour, keyed by the parent rank.
      const int color = joins ? 0 : TUCCL_SPLIT_NOCOLOR;
      const int key = parent.rank();
      return deferOrRun(newcomm, [=, settings = *settings] {
        return makeChild(function, comm, joins, newcomm, settings,
                         [color, key](Communicator& from) { return splitExchange(from, color, key); });
      });
    }
    // Abort mode: the excluded ranks are gone. One of them that calls anyway gets NULL, at once.
    if (!joins) return tucclSuccess;
    parent.abortCalls("tucclCommShrink with NCCL_SHRINK_ABORT: the calls in flight are aborted");
    return deferOrRun(newcomm, [=, settings = *settings] {
      return makeChild(function, comm, true, newcomm, settings,
                       [remaining](Communicator& from) { return shrinkAbortExchange(from, remaining); });
    });
  });
}

tucclResult_t tucclCommFinalize(tucclComm_t comm) {
  return guarded("tucclCommFinalize", [&] {
    if (comm == nullptr) return invalid("tucclCommFinalize", "comm is NULL");
    Communicator& c = *comm->impl;
    if (comm->finalized.exchange(true)) {
      return finish("tucclCommFinalize",
                    tuccl::makeError(ErrorCode::Unsupported, "the communicator was finalized already"), c.rank());
    }
    // Outstanding work: calls of other threads and the exchanges of non-blocking splits first.
    waitIdle(comm);
    Use use(comm);
    return finish("tucclCommFinalize", c.drain(), c.rank());
  });
}

tucclResult_t tucclCommDestroy(tucclComm_t comm) {
  return guarded("tucclCommDestroy", [&] {
    if (comm == nullptr) return invalid("tucclCommDestroy", "comm is NULL");
    comm->impl.wait();  // a non-blocking init finishes first (Like NCCL, destroy does not cancel it)
    if (comm->impl.thread.joinable()) comm->impl.thread.join();
    waitIdle(comm);
    Communicator& c = *comm->impl;
    const int rank = c.rank();
    Status status = c.finalize();
    delete comm;
    return finish("tucclCommDestroy", status, rank);
  });
}

tucclResult_t tucclCommAbort(tucclComm_t comm) {
  return guarded("tucclCommAbort", [&] {
    if (comm == nullptr) return tucclSuccess;  // like NCCL: aborting nothing is fine
    {
      // An init in progress stops at its next wait on the peers (or as soon as it starts).
      std::lock_guard lock(comm->impl.mutex);
      comm->impl.cancelled = true;
      if (!comm->impl.ready() && comm->impl.get() != nullptr) comm->impl.get()->cancelInit();
    }
    comm->impl.wait();
    if (comm->impl.thread.joinable()) comm->impl.thread.join();
    comm->impl->abort("tucclCommAbort was called");
    waitIdle(comm);  // blocked calls return at their next wait
    delete comm;
    return tucclSuccess;
  });
}

tucclResult_t tucclCommGetAsyncError(tucclComm_t comm, tucclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return invalid("tucclCommGetAsyncError", "comm or asyncError is NULL");
  if (!comm->impl.ready() || comm->exchanges.load() > 0) {
    *asyncError = tucclInProgress;
    return tucclSuccess;
  }
  // After tucclCommFinalize only a real failure counts, not the refusal of further calls.
  const Status status = comm->impl.get()->failure();
  *asyncError = resultOf(status.code());
  // The reason, for tucclGetLastError on this thread: the failure happened on another one.
  if (!status) lastError() = "asynchronous error: " + status.message();
  return tucclSuccess;
}

tucclResult_t tucclCommCount(const tucclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return invalid("tucclCommCount", "comm or count is NULL");
  *count = comm->impl->nRanks();
  return tucclSuccess;
}

tucclResult_t tucclCommUserRank(const tucclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return invalid("tucclCommUserRank", "comm or rank is NULL");
  *rank = comm->impl->rank();
  return tucclSuccess;
}

tucclResult_t tucclCommCuDevice(const tucclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return invalid("tucclCommCuDevice", "comm or device is NULL");
  comm->impl.wait();
  if (!comm->impl.made) return finish("tucclCommCuDevice", comm->impl.made, comm->impl->rank());
  *device = comm->impl->deviceOrdinal();
  return tucclSuccess;
}

tucclResult_t tucclCommDeviceKind(const tucclComm_t comm, tucclDeviceKind_t* kind) {
  if (comm == nullptr || kind == nullptr) return invalid("tucclCommDeviceKind", "comm or kind is NULL");
  comm->impl.wait();
  if (!comm->impl.made) return finish("tucclCommDeviceKind", comm->impl.made, comm->impl->rank());
  *kind = comm->impl->deviceKind() == tuccl::backend::DeviceKind::Cuda ? tucclDeviceCuda : tucclDeviceCpu;
  return tucclSuccess;
}

tucclResult_t tucclCommHostAllGather(tucclComm_t comm, const void* sendbuff, void* recvbuff, size_t bytes) {
  return guarded("tucclCommHostAllGather", [&] {
    if (comm == nullptr) return invalid("tucclCommHostAllGather", "comm is NULL");
    if (bytes > 0 && (sendbuff == nullptr || recvbuff == nullptr)) {
      return invalid("tucclCommHostAllGather", "sendbuff or recvbuff is NULL");
    }
    if (bytes > (64u << 20)) return invalid("tucclCommHostAllGather", "more than 64 MiB of control data");
    Use use(comm);
    return finish("tucclCommHostAllGather", comm->impl->hostAllGather(sendbuff, recvbuff, bytes), comm->impl->rank());
  });
}

}  // extern "C"
