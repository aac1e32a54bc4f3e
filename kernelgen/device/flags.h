// Flags and credits (SCCL/NCCL style: flags, not grid barriers). A flag is a monotonically
// increasing 64-bit counter; a waiter needs it to reach a value. Device: one thread polls with
// volatile loads and no fence, orders once after the wait (fence.acq_rel), and a post is one
// fence.acq_rel then a volatile store, at GPU scope between a rank's own TBs and system scope
// across GPUs, processes and the host (nccl-data-path.md §2). Host: std::atomic_ref with
// acquire/release. Every wait is bounded: after `spinLimit` cycles (device) or past the deadline
// (host), or once another TB gave up, the waiter writes what it waited for into its TbReport and
// returns false, so a hang becomes a diagnostic.
#pragma once

#include "kernel_args.h"
#include "tuccl_device.h"

#if !defined(TUCCL_CUDA_COMPILER)
#include <atomic>
#include <chrono>
#include <thread>
#endif

namespace tuccl::dev {

/// Reads a flag without ordering (device: ld.volatile, no fence; NCCL polls this way,
/// nccl-data-path.md §2): a wait polls with it and orders once, with fence, after it saw
/// the value it waited for. Host: an acquire load (as cheap as a plain one on x86).
TUCCL_DEVICE_INLINE uint64_t loadRelaxed(const uint64_t* flag) {
#if defined(TUCCL_CUDA_COMPILER)
  return *reinterpret_cast<const volatile uint64_t*>(flag);
#else
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(flag)).load(std::memory_order_acquire);
#endif
}

/// Memory scopes of the device's fences: GPU for flags both ends of which run on this GPU (a
/// rank's own TBs), system for flags other GPUs, processes or the host read (staging rings).
enum FenceScope : int32_t { kScopeGpu = 0, kScopeSystem = 1 };

/// One fence.acq_rel at the scope (device; the host's acquire loads and release stores order
/// themselves): after a wait it makes what the writer published before the flag visible to this
/// thread's later loads; before a store it publishes this thread's writes, and those of every
/// thread of the TB that met it at a barrier since, ahead of the store.
TUCCL_DEVICE_INLINE void fence(FenceScope scope) {
#if defined(TUCCL_DEVICE_COMPILE)
  if (scope == kScopeGpu) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  } else {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  }
#else
  (void)scope;
#endif
}

/// Publishes a flag value with release semantics: the writes of this thread, and of every thread
/// of the TB that met it at a barrier since, are visible before the value (device: fence.acq_rel
/// at the scope, then a relaxed store, nccl-data-path.md §2 "Post rule").
TUCCL_DEVICE_INLINE void storeRelease(uint64_t* flag, uint64_t value, FenceScope scope = kScopeSystem) {
#if defined(TUCCL_DEVICE_COMPILE)
  fence(scope);
  *reinterpret_cast<volatile uint64_t*>(flag) = value;
#elif defined(TUCCL_CUDA_COMPILER)
  (void)scope;
  *reinterpret_cast<volatile uint64_t*>(flag) = value;
#else
  (void)scope;
  std::atomic_ref<uint64_t>(*flag).store(value, std::memory_order_release);
#endif
}

/// Publishes a flag value that orders nothing but the reads before it (a returned credit: the
/// slot's loads completed before the barrier that preceded it). Device: a volatile store.
TUCCL_DEVICE_INLINE void storeRelaxed(uint64_t* flag, uint64_t value) {
#if defined(TUCCL_CUDA_COMPILER)
  *reinterpret_cast<volatile uint64_t*>(flag) = value;
#else
  std::atomic_ref<uint64_t>(*flag).store(value, std::memory_order_release);
#endif
}

/// Reads a word another rank wrote before a flag this thread already acquired.
TUCCL_DEVICE_INLINE uint64_t loadPlain(const uint64_t* word) {
#if defined(TUCCL_DEVICE_COMPILE)
  return *reinterpret_cast<const volatile uint64_t*>(word);
#else
  return *word;
#endif
}

/// One arrival at a rank barrier's word, shared by the rank's TBs: (generation << 32) | arrivals.
/// Every arrival adds one; the last of `total` moves the word to the next generation with no
/// arrivals in a second add, so the word needs no reset between barriers or calls (a call slot's
/// word starts at zero, and a call whose TBs stopped leaves its slot unused). One atomic add per
/// arrival, where a compare-and-swap loop retried under contention. Returns the generation the
/// arrival belongs to: the barrier is passed once the word's generation is past it.
TUCCL_DEVICE_INLINE uint64_t arrive(uint64_t* word, uint64_t total) {
  constexpr uint64_t kArrivals = 0xffffffffu;
#if defined(TUCCL_DEVICE_COMPILE)
  fence(kScopeGpu);  // the TBs of a rank share its GPU
  unsigned long long* w = reinterpret_cast<unsigned long long*>(word);
  const unsigned long long old = atomicAdd(w, 1ull);
  if ((old & kArrivals) + 1 == total) atomicAdd(w, (1ull << 32) - total);
  return old >> 32;
#elif defined(TUCCL_CUDA_COMPILER)
  const uint64_t old = (*word)++;
  if ((old & kArrivals) + 1 == total) *word += (uint64_t{1} << 32) - total;
  return old >> 32;
#else
  std::atomic_ref<uint64_t> w(*word);
  const uint64_t old = w.fetch_add(1, std::memory_order_acq_rel);
  if ((old & kArrivals) + 1 == total) w.fetch_add((uint64_t{1} << 32) - total, std::memory_order_acq_rel);
  return old >> 32;
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

/// Claims the TB's report for the first thread that gives up (LL and LL128 waits run on every
/// thread of a TB; thread-0 waits find it unclaimed).
TUCCL_DEVICE_INLINE bool claimReport(TbReport& report, int32_t state) {
#if defined(TUCCL_DEVICE_COMPILE)
  return atomicCAS(&report.state, static_cast<int32_t>(kTbRunning), state) == kTbRunning;
#else
  if (report.state != kTbRunning) return false;
  report.state = state;
  return true;
#endif
}

/// Whether a bounded wait has run out: another TB gave up, the spin limit (device) or the
/// deadline (host) passed.
TUCCL_DEVICE_INLINE bool waitExpired(const KernelArgs& args, long long start) {
  bool expired = aborted(args);
#if defined(TUCCL_DEVICE_COMPILE)
  expired = expired || (args.spinLimit > 0 && clock64() - start > args.spinLimit);
#elif !defined(TUCCL_CUDA_COMPILER)
  (void)start;
  expired = expired || std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                               .count() > args.deadlineNs;
#else
  (void)start;
#endif
  return expired;
}

TUCCL_DEVICE_INLINE long long waitStart() {
#if defined(TUCCL_DEVICE_COMPILE)
  return clock64();
#else
  return 0;
#endif
}

/// Records why a wait gave up (if this thread is the TB's first to) and stops every TB.
TUCCL_DEVICE_NOINLINE void giveUp(const KernelArgs& args, TbReport& report, uint64_t expected, uint64_t seen,
                                  WaitSite site) {
  if (claimReport(report, aborted(args) ? kTbAborted : kTbTimedOut)) {
    report.wait = site.wait;
    report.ring = site.ring;
    report.depTb = site.depTb;
    report.depEntry = site.depEntry;
    report.expected = expected;
    report.seen = seen;
  }
  raiseAbort(args);
}

/// Lets a spinning host thread give its core away: yield at first, then sleep a little, so a
/// waiter whose peer is descheduled lets it run (many TB threads and ranks share few cores).
TUCCL_DEVICE_INLINE void backOff(uint64_t spins) {
#if !defined(TUCCL_CUDA_COMPILER)
  if (spins < 4096) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(spins < 65536 ? 20 : 200));
  }
#else
  (void)spins;
#endif
}

/// Polls between checks of the abort word and the clock. The device reads the abort word from host
/// memory, a PCIe round trip: NCCL checks every 10,000 spins (primitives.h); 1,024 spins of L2
/// loads are about a millisecond. The host backs off instead (backOff).
#if defined(TUCCL_DEVICE_COMPILE)
inline constexpr uint64_t kExpiryCheckMask = 1023u;
#else
inline constexpr uint64_t kExpiryCheckMask = 255u;
#endif

/// Spins until `ready(seen)` holds. Returns false, with the report filled (expected and the
/// value last seen), when the bound is hit or another TB aborted.
template <typename Ready>
TUCCL_DEVICE_INLINE bool spinUntil(const KernelArgs& args, TbReport& report, Ready ready, uint64_t expected,
                                   WaitSite site) {
  uint64_t seen = 0;
  if (ready(seen)) return true;
  const long long start = waitStart();
  for (uint64_t spins = 1;; ++spins) {
    if (ready(seen)) return true;
    if ((spins & kExpiryCheckMask) == 0 && waitExpired(args, start)) {
      giveUp(args, report, expected, seen, site);
      return false;
    }
#if !defined(TUCCL_CUDA_COMPILER)
    if (args.hostPoll != nullptr) {
      args.hostPoll(args.hostPollContext);
      if (ready(seen)) return true;
    }
#endif
    backOff(spins);
  }
}

/// Spins (thread 0 only) until *flag >= expected, without ordering: the caller fences once after
/// (fence) when it reads what the flag published. Returns false, with the report filled,
/// when the bound is hit or another TB aborted.
TUCCL_DEVICE_NOINLINE bool spinUntilAtLeast(const KernelArgs& args, TbReport& report, uint64_t* flag,
                                            uint64_t expected, WaitSite site) {
  return spinUntil(
      args, report,
      [&](uint64_t& seen) {
        seen = loadRelaxed(flag);
        return seen >= expected;
      },
      expected, site);
}

}  // namespace tuccl::dev
