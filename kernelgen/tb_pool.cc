// The TB pool (tb_pool.h).
#include "kernelgen/tb_pool.h"

#include <string>
#include <system_error>

namespace tuccl {

TbPool::~TbPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

Status TbPool::startWorkers(int32_t n) {
  try {
    while (static_cast<int32_t>(threads_.size()) < n) {
      const auto worker = static_cast<int32_t>(threads_.size());
      threads_.emplace_back([this, worker] { work(worker); });
    }
  } catch (const std::system_error& error) {
    return makeError(ErrorCode::SystemError, std::string("cannot start a TB thread: ") + error.what());
  }
  return {};
}

Expected<bool> TbPool::run(const HostKernels& kernels, std::span<const HostLaunch> launches,
                           const TbWatchdog* watchdog) {
  int32_t n = 0;
  for (const HostLaunch& launch : launches) n += launch.blocks;
  // Job i: block i of the launches, in order.
  const std::function<void(int32_t)> job = [&](int32_t index) {
    size_t l = 0;
    while (index >= launches[l].blocks) index -= launches[l++].blocks;
    kernels.setBlock(static_cast<unsigned>(index));
    launches[l].kernel(*launches[l].args);
  };
  const int32_t onCaller = watchdog == nullptr && n > 0 ? 1 : 0;
  if (n - onCaller == 0) {
    if (onCaller == 1) job(0);
    return false;
  }
  if (Status started = startWorkers(n - onCaller); !started) return started;
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    first_ = onCaller;
    width_ = n;
    remaining_.store(n - onCaller);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  if (onCaller == 1) job(0);
  return waitForWorkers(watchdog);
}

// Waits until every worker finished its job; with a watchdog, raises its abort flag when they
// still run at its time. Whether it did.
bool TbPool::waitForWorkers(const TbWatchdog* watchdog) {
  for (int spin = 0; spin < kSpins && remaining_.load() != 0; ++spin) std::this_thread::yield();
  std::unique_lock lock(mutex_);
  bool fired = false;
  if (watchdog != nullptr && !done_.wait_until(lock, watchdog->at, [&] { return remaining_.load() == 0; })) {
    std::atomic_ref<int32_t>(*watchdog->abort).store(1, std::memory_order_relaxed);
    fired = true;
  }
  done_.wait(lock, [&] { return remaining_.load() == 0; });
  job_ = nullptr;
  return fired;
}

void TbPool::work(int32_t worker) {
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < kSpins && generation_.load() == seen && !stop_.load(); ++spin) {
      std::this_thread::yield();
    }
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
    if (stop_.load()) return;
    seen = generation_.load();
    const int32_t index = first_ + worker;
    if (index >= width_) continue;
    const std::function<void(int32_t)>* job = job_;
    lock.unlock();
    (*job)(index);
    if (remaining_.fetch_sub(1) == 1) {
      std::lock_guard done(mutex_);
      done_.notify_all();
    }
  }
}

}  // namespace tuccl
