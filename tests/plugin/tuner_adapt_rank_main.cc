// One simulated rank of an NCCL job for the tuner's runtime phase (tuner_adapt_test.cc): loads the
// built libnccl-tuner-tuccl.so as NCCL does, creates the communicator's tuner context, and for
// every call asks getCollInfo (AllReduce, 1 MiB, every algorithm and protocol available), reads
// the configuration group it chose from the cost table and reports an injected duration for that
// group through the duration intake, as a profiler plugin would.
//
//   TUCCL_RANK=r TUCCL_NRANKS=n [TUNER_ADAPT_RANK_STOP_AFTER=s] tuner_adapt_rank VERSION COMM_ID CALLS US0,US1,US2
//
// VERSION 6 (init with NCCL's commId) or 4 (no id: the plugin's v2..v4 id). USg: the duration of
// a call of group g in µs (each rank adds its own small deterministic noise). The rank and rank
// count come from the multi-process launcher's variables (tests/backend/rank_processes.h); after
// s calls the rank ends without finalizing, as a crashed rank would.
// With TUNER_ADAPT_RANK_PROFILER=<libnccl-profiler-tuccl.so> (VERSION 6) the durations go through
// the profiler plugin instead, as NCCL 2.28+ drives it: its init before the tuner's, then per call
// a GroupApi event (ignored), the Coll on this thread and two KernelCh on another (the proxy
// thread), whose GPU times (the longer one the duration) the plugin reports to the intake; the
// Coll stops before the channels on even calls, after them on odd ones.
// Prints "call=<k> group=<g>" per call and NCCL's log lines ("[INFO] ...", "[WARN] ...").
#include <dlfcn.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tuccl/nccl_profiler.h"
#include "tuccl/nccl_tuner.h"
#include "tuccl/tuner_adapt.h"

namespace {

constexpr int kAlgos = TUCCL_NCCL_NUM_ALGORITHMS;
constexpr int kProtos = TUCCL_NCCL_NUM_PROTOCOLS;
constexpr size_t kBytes = 1 << 20;
constexpr int kAllReduce = 4;
enum { TREE, RING };
enum { LL, LL128, SIMPLE };

void logToStdout(ncclDebugLogLevel level, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                 const char* format, ...) {
  const char* name = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  std::printf("[%s] ", name);
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

/// The group of the table tuner_adapt_test writes: 0 RING/SIMPLE, 1 TREE/SIMPLE, 2 RING/LL128.
int groupOf(const float* costs) {
  if (costs[RING * kProtos + SIMPLE] == 0.0f) return 0;
  if (costs[TREE * kProtos + SIMPLE] == 0.0f) return 1;
  if (costs[RING * kProtos + LL128] == 0.0f) return 2;
  return -1;
}

std::vector<double> parseDurations(const char* text) {
  std::vector<double> values;
  for (const char* at = text; *at != '\0';) {
    char* end = nullptr;
    values.push_back(std::strtod(at, &end));
    at = *end == ',' ? end + 1 : end;
    if (end == at && *end != '\0') break;
  }
  return values;
}

/// One AllReduce of call k through the profiler: its two channels ran `micros` (the longer) and
/// 90 % of it on the GPU clock.
void profileCall(const tucclNcclProfiler_v5_t& profiler, void* context, int rank, int k, double micros) {
  tucclNcclProfilerEventDescr_v5_t group{};
  group.type = tucclNcclProfileGroupApi;
  void* groupHandle = reinterpret_cast<void*>(1);
  profiler.startEvent(context, &groupHandle, &group);
  if (groupHandle != nullptr) std::printf("error: the plugin took a GroupApi event\n");
  tucclNcclProfilerEventDescr_v5_t coll{};
  coll.type = tucclNcclProfileColl;
  coll.rank = rank;
  coll.coll.common = tucclNcclProfilerColl_v4_t{static_cast<uint64_t>(k), "AllReduce", nullptr, nullptr, kBytes / 4, -1,
                                                "ncclFloat32", 2, 16, "RING", "SIMPLE"};
  void* collHandle = nullptr;
  profiler.startEvent(context, &collHandle, &coll);
  std::thread proxy([&] {
    const uint64_t base = 1756135989724672000ull + static_cast<uint64_t>(k) * 1000000;
    for (int channel = 0; channel < 2; ++channel) {
      tucclNcclProfilerEventDescr_v5_t kernel{};
      kernel.type = tucclNcclProfileKernelCh;
      kernel.parentObj = collHandle;
      kernel.kernelCh.channelId = static_cast<uint8_t>(channel);
      kernel.kernelCh.pTimer = base;
      void* handle = nullptr;
      profiler.startEvent(context, &handle, &kernel);
      tucclNcclProfilerEventStateArgs_v4_t stop{};
      stop.kernelCh.pTimer = base + static_cast<uint64_t>(micros * 1000.0 * (channel == 0 ? 0.9 : 1.0));
      profiler.recordEventState(handle, tucclNcclProfilerKernelChStop, &stop);
      profiler.stopEvent(handle);
    }
  });
  if (k % 2 == 0) profiler.stopEvent(collHandle);
  proxy.join();
  if (k % 2 == 1) profiler.stopEvent(collHandle);
}

int fail(const char* what) {
  std::printf("error: %s\n", what);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rankText = std::getenv("TUCCL_RANK");
  const char* ranksText = std::getenv("TUCCL_NRANKS");
  const char* stopText = std::getenv("TUNER_ADAPT_RANK_STOP_AFTER");
  if (argc != 5 || rankText == nullptr || ranksText == nullptr) {
    return fail("usage: TUCCL_RANK=r TUCCL_NRANKS=n tuner_adapt_rank VERSION COMM_ID CALLS US0,US1,US2");
  }
  const int version = std::atoi(argv[1]);
  uint64_t commId = std::strtoull(argv[2], nullptr, 0);
  const int calls = std::atoi(argv[3]);
  const std::vector<double> durations = parseDurations(argv[4]);
  const int rank = std::atoi(rankText);
  const int nRanks = std::atoi(ranksText);
  const int stopAfter = stopText != nullptr ? std::atoi(stopText) : -1;
  if (durations.size() != 3) return fail("three durations expected");

  // NCCL inits the profiler of a communicator before it loads the tuner.
  const char* profilerPath = std::getenv("TUNER_ADAPT_RANK_PROFILER");
  const tucclNcclProfiler_v5_t* profiler = nullptr;
  void* profilerContext = nullptr;
  if (profilerPath != nullptr) {
    void* library = dlopen(profilerPath, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return fail(dlerror());
    profiler = static_cast<const tucclNcclProfiler_v5_t*>(dlsym(library, "ncclProfiler_v6"));
    if (profiler == nullptr || version != 6) return fail("no ncclProfiler_v6, or not VERSION 6");
    static int mask = 0;  // NCCL's process-wide activation mask
    if (profiler->init(&profilerContext, commId, &mask, nullptr, 1, nRanks, rank, logToStdout) != ncclSuccess) {
      return fail("the profiler's init failed");
    }
    std::printf("profiler %s mask=%d\n", profiler->name, mask);
  }

  void* plugin = dlopen(TUCCL_TUNER_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) return fail(dlerror());
  auto report = reinterpret_cast<tucclTunerReportDuration_t>(dlsym(plugin, TUCCL_TUNER_REPORT_DURATION_SYMBOL));
  if (report == nullptr) return fail("no duration intake");

  void* context = nullptr;
  ncclResult_t (*getCollInfo)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*) = nullptr;
  ncclResult_t (*finalize)(void*) = nullptr;
  if (version == 6) {
    const auto* tuner = static_cast<const ncclTuner_v6_t*>(dlsym(plugin, "ncclTunerPlugin_v6"));
    if (tuner == nullptr) return fail("no ncclTunerPlugin_v6");
    ncclNvlDomainInfo_v5_t domain{1, nRanks, nRanks};
    static ncclTunerConstants_v5_t constants{};
    if (tuner->init(&context, commId, static_cast<size_t>(nRanks), 1, logToStdout, &domain, &constants) !=
        ncclSuccess) {
      return fail("init");
    }
    getCollInfo = tuner->getCollInfo;
    finalize = tuner->finalize;
  } else {
    const auto* tuner = static_cast<const ncclTuner_v4_t*>(dlsym(plugin, "ncclTunerPlugin_v4"));
    if (tuner == nullptr) return fail("no ncclTunerPlugin_v4");
    if (tuner->init(static_cast<size_t>(nRanks), 1, logToStdout, &context) != ncclSuccess) return fail("init");
    getCollInfo = tuner->getCollInfo;
    finalize = tuner->destroy;
    // The id of the first v2..v4 communicator of nRanks ranks in this process.
    commId = (uint64_t{1} << 63) | (static_cast<uint64_t>(nRanks) << 32);
  }

  int recorded = 0;
  for (int k = 0; k < calls; ++k) {
    if (k == stopAfter) {
      std::printf("stopping at call=%d\n", k);
      std::fflush(stdout);
      std::_Exit(0);  // no finalize: a rank that stopped
    }
    std::vector<float> costs(kAlgos * kProtos, 10.0f);
    int channels = 0;
    // Declared float** but a contiguous float[numAlgo][numProto] (nccl-tuner-abi.md).
    if (getCollInfo(context, static_cast<ncclFunc_t>(kAllReduce), kBytes, 1, reinterpret_cast<float**>(costs.data()),
                    kAlgos, kProtos, 0, &channels) != ncclSuccess) {
      return fail("getCollInfo");
    }
    const int group = groupOf(costs.data());
    std::printf("call=%d group=%d\n", k, group);
    std::fflush(stdout);
    if (group < 0) continue;
    // +-2% noise, different per rank and call, the same every run.
    const double noise = 1.0 + 0.02 * std::sin(static_cast<double>(rank * 7919 + k * 104729));
    if (profiler != nullptr) {
      profileCall(*profiler, profilerContext, rank, k, durations[static_cast<size_t>(group)] * noise);
    } else if (report(commId, rank, kAllReduce, kBytes, durations[static_cast<size_t>(group)] * noise) ==
               tucclTunerReportRecorded) {
      ++recorded;
    }
  }
  if (profiler != nullptr && profiler->finalize(profilerContext) != ncclSuccess) return fail("profiler finalize");
  if (finalize(context) != ncclSuccess) return fail("finalize");
  std::printf("finalized recorded=%d\n", recorded);
  return 0;
}
