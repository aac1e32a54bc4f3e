// The NCCL profiler plugin, libnccl-profiler-tuccl.so (NCCL_PROFILER_PLUGIN=tuccl): it turns NCCL's
// Coll and KernelCh events into the on-GPU duration of each collective and reports it to TuCCL's
// tuner plugin (include/tuccl/tuner_adapt.h, tucclTunerReportDuration), so that the tuner's runtime
// phase (TUCCL_ADAPT=1) adapts inside NCCL. The facts of NCCL's side are in
// ../shared/reference/nccl-profiler-abi.md ("Minimal adapter checklist"); docs/tuning-table.md
// "The runtime phase in NCCL" says how the pair is used.
//
// - Exports ncclProfiler_v6, _v5 (NCCL 2.28+, one set of functions: v6's descriptor is v5's plus
//   copy-engine members) and _v4 (2.27: its own init argument order, a one-byte event type).
// - init never fails. With TUCCL_ADAPT other than 1 the tuner records nothing, so the communicator
//   opts out (a NULL context, no events asked for). Otherwise it asks for Coll | KernelCh (the
//   process-wide mask) and preallocates a pool of records: no allocation on the event path.
// - A Coll of the tuner's five collectives takes a record with 1 + nChannels references; each
//   KernelCh of it (from NCCL's proxy thread) keeps its channel's GPU start and stop times
//   (%globaltimer ns); Coll stop and each KernelCh stop drop one. The thread that drops the last
//   reports the longest channel's span (NCCL's Inspector's "kernel_gpu" time) and frees the record,
//   whatever order the events came in. An empty pool loses that sample; nothing blocks.
// - The intake is found at the first report, never in init (NCCL loads the tuner after the
//   profiler, both RTLD_LOCAL): dlopen("libnccl-tuner-tuccl.so", RTLD_NOLOAD), else the global
//   scope. Without it the samples are dropped, said once through NCCL's logger.
// - finalize takes back every record, reported or not (an aborted communicator's).
// Links only libc (the C++ runtime and TuCCL's environment reader statically), exports only the
// three structs.
#include <dlfcn.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "support/environment.h"
#include "tuccl/nccl_profiler.h"
#include "tuccl/tuner_adapt.h"

namespace {

namespace env = tuccl::env;

// ---- NCCL's profiler ABI (include/tuccl/nccl_profiler.h) ------------------------------------------

using Logger = ncclDebugLogger_t;
using DescriptorV5 = tucclNcclProfilerEventDescr_v5_t;
using DescriptorV4 = tucclNcclProfilerEventDescr_v4_t;
using StateArgs = tucclNcclProfilerEventStateArgs_v4_t;
using CollV4 = tucclNcclProfilerColl_v4_t;
using KernelChV4 = tucclNcclProfilerKernelCh_v4_t;
constexpr ncclResult_t kSuccess = ncclSuccess;
constexpr unsigned long kLogProfile = 0x4000;  // NCCL_PROFILE
constexpr uint64_t kEventColl = tucclNcclProfileColl;
constexpr uint64_t kEventKernelCh = tucclNcclProfileKernelCh;
constexpr int kStateKernelChStop = tucclNcclProfilerKernelChStop;

// ---- Records -------------------------------------------------------------------------------------

constexpr uint32_t kRecordTag = 0x54436f6c;   // "TCol": a Coll handle
constexpr uint32_t kChannelTag = 0x5443684b;  // "TChK": a KernelCh handle
constexpr int kChannels = 64;                 // channel ids NCCL uses (MAXCHANNELS)
constexpr uint32_t kRecords = 256;            // collectives of one communicator in flight at once

struct Context;

struct Channel {
  uint32_t tag = kChannelTag;  // first: a handle's kind is read at offset 0
  struct Record* owner = nullptr;
  std::atomic<uint64_t> start{0}, stop{0};
};

struct Record {
  uint32_t tag = kRecordTag;
  Context* context = nullptr;
  uint32_t index = 0;
  std::atomic<int> refs{0};
  int collective = 0;
  size_t bytes = 0;
  Channel channels[kChannels];
};

struct Context {
  uint64_t commId = 0;
  int rank = 0;
  int nRanks = 0;
  Logger log = nullptr;
  Record* records = nullptr;  // kRecords
  // The free records: a stack of indices, the top in the low 32 bits, a counter above (ABA).
  std::atomic<uint64_t> freeTop{0};
  std::atomic<uint32_t> next[kRecords] = {};
  std::atomic<uint64_t> dropped{0};
};

constexpr uint32_t kNone = 0xffffffffu;

Record* take(Context& context) {
  uint64_t top = context.freeTop.load(std::memory_order_acquire);
  for (;;) {
    const auto index = static_cast<uint32_t>(top);
    if (index == kNone) return nullptr;
    const uint64_t next = ((top >> 32) + 1) << 32 | context.next[index].load(std::memory_order_relaxed);
    if (context.freeTop.compare_exchange_weak(top, next, std::memory_order_acq_rel)) return &context.records[index];
  }
}

void giveBack(Context& context, Record& record) {
  uint64_t top = context.freeTop.load(std::memory_order_relaxed);
  for (;;) {
    context.next[record.index].store(static_cast<uint32_t>(top), std::memory_order_relaxed);
    const uint64_t next = ((top >> 32) + 1) << 32 | record.index;
    if (context.freeTop.compare_exchange_weak(top, next, std::memory_order_release, std::memory_order_relaxed)) return;
  }
}

// ---- The tuner's intake --------------------------------------------------------------------------

std::atomic<tucclTunerReportDuration_t> intake{nullptr};
std::atomic<int> intakeState{0};  // 0 not looked for, 1 found, 2 missing (said once)

tucclTunerReportDuration_t findIntake(const Context& context) {
  if (tucclTunerReportDuration_t found = intake.load(std::memory_order_acquire)) return found;
  if (intakeState.load(std::memory_order_acquire) == 2) return nullptr;
  void* symbol = nullptr;
  if (void* tuner = dlopen("libnccl-tuner-tuccl.so", RTLD_NOW | RTLD_NOLOAD)) {
    symbol = dlsym(tuner, TUCCL_TUNER_REPORT_DURATION_SYMBOL);
    dlclose(tuner);  // NOLOAD took a reference to the library NCCL keeps loaded
  }
  if (symbol == nullptr) symbol = dlsym(RTLD_DEFAULT, TUCCL_TUNER_REPORT_DURATION_SYMBOL);
  if (symbol == nullptr) {
    int expected = 0;
    if (intakeState.compare_exchange_strong(expected, 2) && context.log != nullptr) {
      context.log(NCCL_LOG_WARN, kLogProfile, __FILE__, __LINE__,
                  "TuCCL profiler: TuCCL's tuner plugin is not loaded (NCCL_TUNER_PLUGIN=tuccl): the collectives' "
                  "durations have nowhere to go and are dropped");
    }
    return nullptr;
  }
  auto found = reinterpret_cast<tucclTunerReportDuration_t>(symbol);
  intake.store(found, std::memory_order_release);
  intakeState.store(1, std::memory_order_release);
  return found;
}

// The longest channel's GPU span, reported; the record goes back to the pool.
void finish(Record& record) {
  Context& context = *record.context;
  uint64_t longest = 0;
  for (Channel& channel : record.channels) {
    const uint64_t start = channel.start.load(std::memory_order_acquire);
    const uint64_t stop = channel.stop.load(std::memory_order_acquire);
    if (start != 0 && stop > start && stop - start > longest) longest = stop - start;
  }
  if (longest > 0) {
    if (tucclTunerReportDuration_t report = findIntake(context)) {
      report(context.commId, context.rank, record.collective, record.bytes, static_cast<double>(longest) / 1000.0);
    }
  }
  giveBack(context, record);
}

void release(Record& record) {
  if (record.refs.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(record);
}

// ---- What NCCL's Coll descriptor says ------------------------------------------------------------

/// NCCL's ncclFunc_t of the tuner's five collectives; -1 for others.
int collectiveOf(const char* func) {
  if (func == nullptr) return -1;
  static constexpr const char* kNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  for (int c = 0; c < 5; ++c) {
    if (std::strcmp(func, kNames[c]) == 0) return c;
  }
  return -1;
}

/// Bytes of one element of NCCL's datatype name ("Unknown", as ncclUint8 arrives, is one byte).
size_t sizeOf(const char* datatype) {
  if (datatype == nullptr) return 1;
  static constexpr struct {
    const char* name;
    size_t bytes;
  } kSizes[] = {{"ncclFloat32", 4}, {"ncclBfloat16", 2}, {"ncclFloat16", 2}, {"ncclInt32", 4},  {"ncclUint32", 4},
                {"ncclFloat64", 8}, {"ncclInt64", 8},    {"ncclUint64", 8},  {"ncclInt8", 1},   {"ncclFloat8e4m3", 1},
                {"ncclFloat8e5m2", 1}};
  for (const auto& size : kSizes) {
    if (std::strcmp(datatype, size.name) == 0) return size.bytes;
  }
  return 1;
}

// ---- The entry points ----------------------------------------------------------------------------

ncclResult_t initContext(void** context, uint64_t commId, int* mask, int nRanks, int rank, Logger log) {
  if (context == nullptr) return kSuccess;
  *context = nullptr;
  if (env::text("TUCCL_ADAPT").value_or("") != "1") {
    if (log != nullptr) {
      log(NCCL_LOG_INFO, kLogProfile, __FILE__, __LINE__,
          "TuCCL profiler: TUCCL_ADAPT is not 1, so TuCCL's tuner records no durations: no events for this "
          "communicator");
    }
    return kSuccess;
  }
  auto* created = new (std::nothrow) Context;
  auto* records = created != nullptr ? new (std::nothrow) Record[kRecords] : nullptr;
  if (records == nullptr) {
    delete created;
    return kSuccess;  // never fail init: this communicator is not profiled
  }
  created->commId = commId;
  created->rank = rank;
  created->nRanks = nRanks;
  created->log = log;
  created->records = records;
  for (uint32_t i = 0; i < kRecords; ++i) {
    records[i].context = created;
    records[i].index = i;
    for (Channel& channel : records[i].channels) channel.owner = &records[i];
    created->next[i].store(i + 1 < kRecords ? i + 1 : kNone, std::memory_order_relaxed);
  }
  created->freeTop.store(0);
  // Process-wide: every communicator writes the same value.
  if (mask != nullptr) std::atomic_ref<int>(*mask).store(static_cast<int>(kEventColl | kEventKernelCh));
  *context = created;
  return kSuccess;
}

ncclResult_t start(void* context, void** handle, uint64_t type, void* parent, const CollV4& coll,
                   const KernelChV4& kernelCh) {
  if (handle == nullptr) return kSuccess;
  *handle = nullptr;  // NCCL reuses some handle slots without clearing them
  auto* owner = static_cast<Context*>(context);
  if (owner == nullptr) return kSuccess;
  if (type == kEventColl) {
    const int collective = collectiveOf(coll.func);
    if (collective < 0 || coll.count == 0 || coll.nChannels == 0 || coll.nChannels > kChannels) return kSuccess;
    Record* record = take(*owner);
    if (record == nullptr) {
      owner->dropped.fetch_add(1, std::memory_order_relaxed);
      return kSuccess;
    }
    record->collective = collective;
    const size_t ranks = collective == 2 || collective == 3 ? static_cast<size_t>(owner->nRanks) : 1;
    record->bytes = coll.count * sizeOf(coll.datatype) * ranks;
    for (Channel& channel : record->channels) {
      channel.start.store(0, std::memory_order_relaxed);
      channel.stop.store(0, std::memory_order_relaxed);
    }
    record->refs.store(1 + coll.nChannels, std::memory_order_release);
    *handle = record;
    return kSuccess;
  }
  if (type == kEventKernelCh) {
    auto* record = static_cast<Record*>(parent);
    if (record == nullptr || record->tag != kRecordTag || record->context != owner || kernelCh.channelId >= kChannels) {
      return kSuccess;
    }
    Channel& channel = record->channels[kernelCh.channelId];
    channel.start.store(kernelCh.pTimer != 0 ? kernelCh.pTimer : 1, std::memory_order_release);
    *handle = &channel;
  }
  return kSuccess;
}

ncclResult_t startV5(void* context, void** handle, DescriptorV5* descriptor) {
  if (descriptor == nullptr) {
    if (handle != nullptr) *handle = nullptr;
    return kSuccess;
  }
  return start(context, handle, descriptor->type, descriptor->parentObj, descriptor->coll.common, descriptor->kernelCh);
}

ncclResult_t startV4(void* context, void** handle, DescriptorV4* descriptor) {
  if (descriptor == nullptr) {
    if (handle != nullptr) *handle = nullptr;
    return kSuccess;
  }
  return start(context, handle, descriptor->type, descriptor->parentObj, descriptor->coll, descriptor->kernelCh);
}

ncclResult_t stop(void* handle) {
  if (handle == nullptr) return kSuccess;
  uint32_t tag = 0;
  std::memcpy(&tag, handle, sizeof tag);
  if (tag == kRecordTag) {
    release(*static_cast<Record*>(handle));
  } else if (tag == kChannelTag) {
    release(*static_cast<Channel*>(handle)->owner);
  }
  return kSuccess;
}

ncclResult_t record(void* handle, int state, StateArgs* args) {
  if (handle == nullptr || state != kStateKernelChStop || args == nullptr) return kSuccess;
  uint32_t tag = 0;
  std::memcpy(&tag, handle, sizeof tag);
  if (tag == kChannelTag) static_cast<Channel*>(handle)->stop.store(args->kernelCh.pTimer, std::memory_order_release);
  return kSuccess;
}

ncclResult_t finalize(void* context) {
  auto* owner = static_cast<Context*>(context);
  if (owner == nullptr) return kSuccess;
  const uint64_t dropped = owner->dropped.load();
  if (dropped > 0 && owner->log != nullptr) {
    owner->log(NCCL_LOG_INFO, kLogProfile, __FILE__, __LINE__,
               "TuCCL profiler: %llu collective(s) found every record in use and were not timed",
               static_cast<unsigned long long>(dropped));
  }
  delete[] owner->records;
  delete owner;
  return kSuccess;
}

ncclResult_t initV5(void** context, uint64_t commId, int* mask, const char* /*commName*/, int /*nNodes*/, int nranks,
                    int rank, ncclDebugLogger_t log) {
  return initContext(context, commId, mask, nranks, rank, log);
}

ncclResult_t initV4(void** context, int* mask, const char* /*commName*/, uint64_t commHash, int /*nNodes*/, int nranks,
                    int rank, Logger log) {
  return initContext(context, commHash, mask, nranks, rank, log);
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) tucclNcclProfiler_v5_t ncclProfiler_v6 = {"TuCCL", initV5, startV5, stop, record,
                                                                                finalize};
__attribute__((visibility("default"))) tucclNcclProfiler_v5_t ncclProfiler_v5 = {"TuCCL", initV5, startV5, stop, record,
                                                                                finalize};
__attribute__((visibility("default"))) tucclNcclProfiler_v4_t ncclProfiler_v4 = {"TuCCL", initV4, startV4, stop, record,
                                                                                finalize};
}
