// The one CPU runner of TBs (design.md "Kernels": on the host a TB is a thread): a pool of threads
// that runs every block of one or more host kernel launches at once and returns when all finished.
// The host executor (host_executor.h: a pool per run, the TBs of every rank it runs, under a
// watchdog) and libtuccl's CPU device (backend/cpu_device.cc: a pool per rank, kept between calls,
// its rank's TBs) both run their TBs through it.
//
// Without a watchdog, block 0 runs on the calling thread and the others on workers; with one,
// every block runs on a worker and the caller watches the clock. Between runs a worker yields for
// a while before it sleeps, and so does the caller waiting for the workers: back-to-back calls (a
// training step's collectives) then start without a wake-up.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kernelgen/device/kernel_args.h"
#include "kernelgen/host_build.h"
#include "support/status.h"

namespace tuccl {

/// One rank's kernel on the host: blocks 0..blocks-1 of `kernel`, each called with `*args`.
struct HostLaunch {
  HostKernels::Kernel kernel = nullptr;
  const dev::KernelArgs* args = nullptr;
  int32_t blocks = 0;
};

/// When TBs still run at `at`, the watchdog raises `*abort` (the abort flag every TB of the
/// launches watches): they stop at their next wait.
struct TbWatchdog {
  int32_t* abort = nullptr;
  std::chrono::steady_clock::time_point at;
};

class TbPool {
 public:
  TbPool() = default;
  TbPool(const TbPool&) = delete;
  TbPool& operator=(const TbPool&) = delete;
  ~TbPool();

  /// Runs every block of every launch at once, each on its own thread (blockIdx.x set through
  /// `kernels.setBlock`), and returns when all finished: whether the watchdog fired. SystemError
  /// when a thread cannot be started (then no block ran). One run at a time.
  Expected<bool> run(const HostKernels& kernels, std::span<const HostLaunch> launches,
                     const TbWatchdog* watchdog = nullptr);

 private:
  // Yields before sleeping: about as long as a few calls of small messages take here.
  static constexpr int kSpins = 2000;

  Status startWorkers(int32_t n);
  bool waitForWorkers(const TbWatchdog* watchdog);
  void work(int32_t worker);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;
  const std::function<void(int32_t)>* job_ = nullptr;  // set under the mutex before generation_ moves
  int32_t first_ = 0;  // the job of worker 0: 1 when the caller runs job 0
  int32_t width_ = 0;
  std::atomic<int32_t> remaining_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tuccl
