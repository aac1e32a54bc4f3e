// What the files of libtuccl's C API share (api.cc: calls, groups, streams; api_comm.cc: making and
// ending communicators; api_ops.cc: PreMulSum operators): the handle, the per-thread last error, results, guards against
// exceptions, the use count that abort and destroy wait on, and the calling thread's group.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/communicator.h"
#include "support/raw_value.h"
#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::api {

/// A handle's Communicator. `->` first waits while a non-blocking init (or split, shrink) is still
/// making it on the handle's thread, so every call on the handle sees it made — or failed, and it
/// then answers the init's error (Communicator::make: an init that failed leaves a communicator
/// whose calls fail). get() does not wait (null while an exchange decides its rank and size).
class CommRef {
 public:
  CommRef() = default;
  ~CommRef() {
    if (thread.joinable()) thread.join();
  }
  CommRef(const CommRef&) = delete;
  CommRef& operator=(const CommRef&) = delete;

  tuccl::backend::Communicator* operator->() const {
    wait();
    return comm.get();
  }
  tuccl::backend::Communicator& operator*() const { return *operator->(); }
  tuccl::backend::Communicator* get() const { return comm.get(); }
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  void wait() const {
    if (ready()) return;
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return ready(); });
  }
  /// Done (made or failed): wakes the waiters. Under no lock.
  void finish() {
    {
      std::lock_guard lock(mutex);
      ready_.store(true, std::memory_order_release);
    }
    done.notify_all();
  }
  void setPending() { ready_.store(false, std::memory_order_relaxed); }

  // Guarded by `mutex` while not ready: the communicator (set once its rank and size are known),
  // and whether tucclCommAbort asked to stop the init (the init then stops at its next wait).
  mutable std::mutex mutex;
  std::unique_ptr<tuccl::backend::Communicator> comm;
  bool cancelled = false;
  /// The init's result once ready (Ok, or why the communicator is unusable).
  tuccl::Status made;
  /// The thread of a non-blocking init: joined by destroy and abort.
  std::thread thread;

 private:
  mutable std::condition_variable done;
  std::atomic<bool> ready_{true};
};

}  // namespace tuccl::api

struct tucclComm {
  tuccl::api::CommRef impl;
  // Calls inside the communicator; abort and destroy wait for them to leave.
  std::mutex mutex;
  std::condition_variable idle;
  int active = 0;
  /// tucclCommFinalize was called: only destroy and abort remain (and the queries).
  std::atomic<bool> finalized{false};
  /// Non-blocking splits and shrinks whose exchange over this communicator still runs in the
  /// background: tucclCommGetAsyncError says tucclInProgress meanwhile (a NOCOLOR rank has no
  /// new handle to poll).
  std::atomic<int> exchanges{0};
};

namespace tuccl::api {

/// The calling thread's last failure (tucclGetLastError).
std::string& lastError();

tucclResult_t resultOf(ErrorCode code);

using ::tuccl::rawValue;

/// Records the status as the thread's last error (logged at WARN) and returns its code.
tucclResult_t finish(const char* function, const Status& status, int rank = -1);
tucclResult_t invalid(const char* function, const std::string& why);

/// Runs `body`, turning an escaping exception into tucclInternalError.
tucclResult_t guardedCall(const char* function, const std::function<tucclResult_t()>& body);
template <typename Body>
tucclResult_t guarded(const char* function, Body&& body) {
  return guardedCall(function, std::function<tucclResult_t()>(std::forward<Body>(body)));
}

/// A use of a communicator by one call: abort/destroy wait until every use ended.
class Use {
 public:
  explicit Use(tucclComm* comm);
  ~Use();
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

 private:
  tucclComm* comm_;
};
void waitIdle(tucclComm* comm);

/// The calling thread's group (tucclGroupStart .. tucclGroupEnd): its depth, and the work kept
/// for the outermost end. Communicators initialised inside the group are made first, together
/// (each on its own thread: they rendezvous with one another), then the calls are launched.
struct GroupWork {
  int depth = 0;
  /// Deferred inits: each makes one communicator, and answers its result.
  std::vector<std::function<tucclResult_t()>> inits;
};
GroupWork& threadGroup();

}  // namespace tuccl::api
