// The runtime phase's host work per call (adapt/runtime.h), counted in one process:
// what TUCCL_ADAPT=1 adds to every collective call before it reaches the device, beside the
// cheapest thing a call could do instead (nothing) and the cost of timing a call (two clock
// reads), which the runtime pays only for the calls its policy asks to time.
//
// One rank (its all-gather returns its own summary), one key of two configuration groups whose
// timings are recorded as libtuccl's devices record them (only the calls handed a policy), the
// default settings (64 warm-up calls, the first agreement when the calls pay for an exchange,
// agreements every 8 calls while learning, backing off to 512), for a call of `--call-us`.
//
//   bench_adapt_overhead [--calls 300000] [--call-us 6]
//
// Each call spends its `--call-us` (twice that for the slower group) spinning after choose(), so
// the background agreements run at the pace they would beside real calls. Prints per phase
// (warm-up, learning, settled) the median and mean ns of choose() (the clock's own cost in the same
// loop taken off; the mean includes the agreements), the share of calls timed, and the host ns per
// call with the timed calls' clock pair (which the device reads).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "adapt/runtime.h"

namespace {

using namespace tuccl;
using Clock = std::chrono::steady_clock;

double nsSince(Clock::time_point begin, uint64_t calls) {
  return std::chrono::duration<double, std::nano>(Clock::now() - begin).count() / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t calls = 300'000;
  double callUs = 6;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--calls") calls = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--call-us") callUs = std::strtod(argv[i + 1], nullptr);
    else {
      std::fprintf(stderr, "usage: bench_adapt_overhead [--calls N] [--call-us US]\n");
      return 2;
    }
  }
  if (calls < 40'000 || !(callUs > 0)) {
    std::fprintf(stderr, "bench_adapt_overhead: --calls must be >= 40000 and --call-us > 0\n");
    return 2;
  }

  AdaptSettings settings;
  settings.enabled = true;
  AdaptiveRuntime runtime(settings, 0, 1, 1, 0, [](const std::string& bytes) -> Expected<std::vector<std::string>> {
    return std::vector<std::string>{bytes};
  });
  const uint64_t bytes = 256;
  const AdaptKey key{Collective::AllReduce, sizeBucket(bytes), -1};
  const double seconds = callUs * 1e-6;

  // The clock pair a timed call costs (the CPU device's start and end of a call).
  Clock::time_point sink{};
  auto begin = Clock::now();
  for (uint64_t i = 0; i < calls; ++i) sink += Clock::now() - Clock::now() + Clock::duration(1);
  const double clockNs = nsSince(begin, calls);

  struct Phase {
    const char* name;
    uint64_t first, last;  // calls [first, last)
    double ns = 0;      // the median choice
    double meanNs = 0;  // the mean choice (agreements included; a preemption capped)
    uint64_t timed = 0;
  };
  std::vector<Phase> phases = {{"warm-up (64 calls)", 0, 64},
                               {"learning (to call 20k)", 64, 20'000},
                               {"settled (the rest)", 20'000, calls}};
  // Each call: choose() timed on its own (less the clock pair), then the call's own time spent
  // spinning, so the background exchanges run at the pace they would beside real calls.
  uint64_t call = 0;
  const auto callTime = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(callUs));
  for (Phase& phase : phases) {
    // Per call three clock reads: the first two time nothing (the clock's own cost here), the
    // last two the choice; the means hide preemptions' outliers, so the medians are compared, and
    // the mean of the choice's excess over the median of the empty pair is what it costs.
    std::vector<double> emptyNs, chooseNs;
    emptyNs.reserve(phase.last - phase.first);
    chooseNs.reserve(phase.last - phase.first);
    for (; call < phase.last; ++call) {
      const Clock::time_point start = Clock::now();
      const Clock::time_point before = Clock::now();
      std::shared_ptr<AdaptivePolicy> policy;
      Expected<int32_t> group = runtime.choose(key, 2, bytes, &policy);
      const Clock::time_point chosen = Clock::now();
      emptyNs.push_back(std::chrono::duration<double, std::nano>(before - start).count());
      chooseNs.push_back(std::chrono::duration<double, std::nano>(chosen - before).count());
      if (!group) {
        std::fprintf(stderr, "bench_adapt_overhead: %s\n", group.status().toString().c_str());
        return 1;
      }
      if (policy) {
        ++phase.timed;
        policy->record(*group, *group == 0 ? seconds : 2 * seconds);  // the other group twice as slow
      }
      const Clock::duration wait = *group == 0 ? callTime : 2 * callTime;
      while (Clock::now() - start < wait) {
      }
    }
    auto median = [](std::vector<double> v) {
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    phase.ns = std::max(0.0, median(chooseNs) - median(emptyNs));
    phase.meanNs = 0;
    const double clockHere = median(emptyNs);
    for (double ns : chooseNs) phase.meanNs += std::min(ns, 100 * clockHere + 10'000) - clockHere;
    phase.meanNs /= static_cast<double>(chooseNs.size());
  }
  std::printf("# bench_adapt_overhead: one rank, one key of 2 groups (the other 2x slower), %llu calls of %.1f us;"
              " clock pair %.1f ns (%lld)\n",
              static_cast<unsigned long long>(calls), callUs, clockNs,
              static_cast<long long>(sink.time_since_epoch().count() % 2));
  std::printf("%-24s %12s %12s %10s %22s %14s\n", "phase", "median ns", "mean ns", "timed", "host ns/call (+clock)",
              "share of call");
  for (const Phase& p : phases) {
    const uint64_t n = p.last - p.first;
    const double timedShare = static_cast<double>(p.timed) / static_cast<double>(n);
    const double host = p.meanNs + timedShare * clockNs;
    std::printf("%-24s %12.1f %12.1f %9.2f%% %22.1f %13.3f%%\n", p.name, p.ns, p.meanNs, 100 * timedShare, host,
                100 * host / (callUs * 1e3));
  }
  std::printf("# agreements started: %llu; the runtime settled on group %d\n",
              static_cast<unsigned long long>(runtime.exchangesStarted()), runtime.best(key));
  return 0;
}
