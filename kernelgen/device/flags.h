// Flags and credits (SCCL/NCCL style: flags, not grid barriers). A flag is a monotonically
// increasing 64-bit counter; a waiter needs it to reach a value. Device: volatile accesses
// fenced with __threadfence_system (visible to peers over NVLink/PCIe). Host: std::atomic_ref
// with acquire/release. Every wait is bounded: after `spinLimit` cycles (device) or past the
// deadline (host), or once another TB gave up, the waiter writes what it waited for into its
// TbReport and returns false, so a hang becomes a diagnostic.
#pragma once

#include "kernel_args.h"
#include "tuccl_device.h"

#if !defined(TUCCL_CUDA_COMPILER)
#include <atomic>
#include <chrono>
#include <thread>
#endif

namespace tuccl::dev {

/// Reads a flag with acquire semantics.
TUCCL_DEVICE_INLINE uint64_t loadAcquire(uint64_t* flag) {
#if defined(TUCCL_DEVICE_COMPILE)
  const uint64_t value = *reinterpret_cast<volatile uint64_t*>(flag);
  __threadfence_system();
  return value;
#elif defined(TUCCL_CUDA_COMPILER)
  return *reinterpret_cast<volatile uint64_t*>(flag);  // nvcc's host pass of device-only code
#else
  return std::atomic_ref<uint64_t>(*flag).load(std::memory_order_acquire);
#endif
}

/// Publishes a flag value with release semantics (the data written before it is visible first).
TUCCL_DEVICE_INLINE void storeRelease(uint64_t* flag, uint64_t value) {
#if defined(TUCCL_DEVICE_COMPILE)
  __threadfence_system();
  *reinterpret_cast<volatile uint64_t*>(flag) = value;
#elif defined(TUCCL_CUDA_COMPILER)
  *reinterpret_cast<volatile uint64_t*>(flag) = value;
#else
  std::atomic_ref<uint64_t>(*flag).store(value, std::memory_order_release);
#endif
}

/// Adds one to a counter shared by the TBs of a rank; returns the new value.
TUCCL_DEVICE_INLINE uint64_t arrive(uint64_t* counter) {
#if defined(TUCCL_DEVICE_COMPILE)
  __threadfence_system();
  return atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull) + 1;
#elif defined(TUCCL_CUDA_COMPILER)
  return ++*counter;
#else
  return std::atomic_ref<uint64_t>(*counter).fetch_add(1, std::memory_order_acq_rel) + 1;
#endif
}

TUCCL_DEVICE_INLINE bool aborted(const KernelArgs& args) {
#if defined(TUCCL_DEVICE_COMPILE)
  return *reinterpret_cast<volatile int32_t*>(args.abort) != 0;
#elif defined(TUCCL_CUDA_COMPILER)
  return *args.abort != 0;
#else
  return std::atomic_ref<int32_t>(*args.abort).load(std::memory_order_relaxed) != 0;
#endif
}

TUCCL_DEVICE_INLINE void raiseAbort(const KernelArgs& args) {
#if defined(TUCCL_DEVICE_COMPILE)
  *reinterpret_cast<volatile int32_t*>(args.abort) = 1;
  __threadfence_system();
#elif defined(TUCCL_CUDA_COMPILER)
  *args.abort = 1;
#else
  std::atomic_ref<int32_t>(*args.abort).store(1, std::memory_order_relaxed);
#endif
}

/// What a wait is for, recorded in the TB's report when it gives up.
struct WaitSite {
  int32_t wait = kWaitNone;
  int32_t ring = -1;
  int32_t depTb = -1;
  int32_t depEntry = -1;
};

/// Spins (thread 0 only) until *flag >= expected. Returns false, with the report filled, when the
/// bound is hit or another TB aborted.
TUCCL_DEVICE_NOINLINE bool spinUntilAtLeast(const KernelArgs& args, TbReport& report, uint64_t* flag,
                                          uint64_t expected, WaitSite site) {
  uint64_t seen = loadAcquire(flag);
  if (seen >= expected) return true;
#if defined(TUCCL_DEVICE_COMPILE)
  const long long start = clock64();
#endif
  for (uint64_t spins = 1;; ++spins) {
    seen = loadAcquire(flag);
    if (seen >= expected) return true;
    if ((spins & 255u) == 0) {
      bool expired = aborted(args);
#if defined(TUCCL_DEVICE_COMPILE)
      expired = expired || (args.spinLimit > 0 && clock64() - start > args.spinLimit);
#elif !defined(TUCCL_CUDA_COMPILER)
      expired = expired || std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                         .count() > args.deadlineNs;
#endif
      if (expired) {
        report.state = aborted(args) ? kTbAborted : kTbTimedOut;
        report.wait = site.wait;
        report.ring = site.ring;
        report.depTb = site.depTb;
        report.depEntry = site.depEntry;
        report.expected = expected;
        report.seen = seen;
        raiseAbort(args);
        return false;
      }
    }
#if !defined(TUCCL_CUDA_COMPILER)
    // Many TB threads (and ranks) share few cores: yield at first, then sleep a little, so a
    // waiter whose peer is descheduled lets it run instead of taking its core.
    if (spins < 4096) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 65536 ? 20 : 200));
    }
#endif
  }
}

/// The TB-wide form: thread 0 waits, every thread learns the verdict.
TUCCL_DEVICE_INLINE bool waitAtLeast(const KernelArgs& args, TbReport& report, uint64_t* flag, uint64_t expected,
                                     WaitSite site) {
  bool ok = true;
  if (threadIdx.x == 0) ok = spinUntilAtLeast(args, report, flag, expected, site);
  return tbAgree(ok);
}

}  // namespace tuccl::dev
