// The C API of libtuccl (include/tuccl/tuccl.h): argument checks, errors as result codes and a
// per-thread last-error text, groups, and the lifetime of communicators. No exception crosses it.
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/bootstrap.h"
#include "backend/communicator.h"
#include "backend/cpu_stream.h"
#include "backend/cuda_driver.h"
#include "support/log.h"
#include "support/environment.h"
#include "support/text_values.h"
#include "tuccl/tuccl.h"

using tuccl::ErrorCode;
using tuccl::Status;
using tuccl::backend::Communicator;

struct tucclComm {
  std::unique_ptr<Communicator> impl;
  // Calls inside the communicator; abort and destroy wait for them to leave.
  std::mutex mutex;
  std::condition_variable idle;
  int active = 0;
};

namespace {

thread_local std::string lastError;

tucclResult_t resultOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return tucclSuccess;
    case ErrorCode::InvalidArgument:
    case ErrorCode::InvalidInput:
    case ErrorCode::NotFound: return tucclInvalidArgument;
    case ErrorCode::Unsupported: return tucclInvalidUsage;
    case ErrorCode::Timeout: return tucclTimeout;
    case ErrorCode::RemoteError:
    case ErrorCode::Aborted: return tucclRemoteError;
    case ErrorCode::IoError:
    case ErrorCode::SystemError:
    case ErrorCode::ResourceExhausted: return tucclSystemError;
    case ErrorCode::Internal: return tucclInternalError;
  }
  return tucclInternalError;
}

// The value a caller passed for an enum parameter, read as the int it is: a C caller may pass any
// int, and loading it as the enum would be undefined where it names no enumerator.
template <typename Enum>
int rawValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// Records the status as the thread's last error (logged at WARN) and returns its code.
tucclResult_t finish(const char* function, const Status& status, int rank = -1) {
  if (status) return tucclSuccess;
  lastError = std::string(function) + ": " + status.message();
  tuccl::logLine(tuccl::LogLevel::Warn, rank, lastError);
  return resultOf(status.code());
}

tucclResult_t invalid(const char* function, const std::string& why) {
  return finish(function, tuccl::makeError(ErrorCode::InvalidArgument, why));
}

template <typename Body>
tucclResult_t guarded(const char* function, Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return finish(function, tuccl::makeError(ErrorCode::Internal, std::string("unexpected: ") + error.what()));
  } catch (...) {
    return finish(function, tuccl::makeError(ErrorCode::Internal, "unexpected exception"));
  }
}

// A use of a communicator by one call: abort/destroy wait until every use ended.
class Use {
 public:
  explicit Use(tucclComm* comm) : comm_(comm) {
    std::lock_guard lock(comm_->mutex);
    ++comm_->active;
  }
  ~Use() {
    std::lock_guard lock(comm_->mutex);
    if (--comm_->active == 0) comm_->idle.notify_all();
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

 private:
  tucclComm* comm_;
};

void waitIdle(tucclComm* comm) {
  std::unique_lock lock(comm->mutex);
  comm->idle.wait(lock, [&] { return comm->active == 0; });
}

// ---- Groups ----------------------------------------------------------------------------------

struct PendingCall {
  tucclComm* comm;
  tuccl::CollectiveCall call;
  tucclStream_t stream;
};
thread_local int groupDepth = 0;
thread_local std::vector<PendingCall> groupCalls;

// Launches the calls of a group: on the CPU device, NULL-stream calls of different communicators
// must run together (each waits for its peers), so every communicator's calls get a thread.
Status launchGroup(std::vector<PendingCall> calls) {
  std::vector<tucclComm*> comms;
  for (const PendingCall& call : calls) {
    if (std::find(comms.begin(), comms.end(), call.comm) == comms.end()) comms.push_back(call.comm);
  }
  std::vector<Status> results(comms.size());
  auto runComm = [&](size_t index) {
    for (const PendingCall& call : calls) {
      if (call.comm != comms[index]) continue;
      Use use(call.comm);
      Status status = call.comm->impl->enqueue(call.call, call.stream);
      if (!status && results[index]) results[index] = status;
    }
  };
  if (comms.size() == 1) {
    runComm(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < comms.size(); ++i) threads.emplace_back(runComm, i);
    for (std::thread& thread : threads) thread.join();
  }
  for (Status& status : results) {
    if (!status) return status;
  }
  return {};
}

tucclResult_t collective(const char* function, tuccl::Collective kind, const void* sendbuff, void* recvbuff,
                         size_t count, int datatype, int op, int root, tucclComm_t comm,
                         tucclStream_t stream) {
  return guarded(function, [&] {
    if (comm == nullptr) return invalid(function, "comm is NULL");
    tuccl::Expected<tuccl::CollectiveCall> call = comm->impl->callOf(kind, sendbuff, recvbuff, count, datatype, op, root);
    if (!call) return finish(function, call.status(), comm->impl->rank());
    if (groupDepth > 0) {
      groupCalls.push_back(PendingCall{comm, *call, stream});
      return tucclSuccess;
    }
    Use use(comm);
    return finish(function, comm->impl->enqueue(*call, stream), comm->impl->rank());
  });
}

tucclResult_t initRank(tucclComm_t* comm, int nranks, const tuccl::backend::UniqueIdBytes& id, int rank,
                       int cudaDevice) {
  tuccl::Expected<tuccl::backend::CommOptions> options = tuccl::backend::commOptionsFromEnvironment();
  if (!options) return finish("tucclCommInitRank", options.status());
  tuccl::Expected<std::unique_ptr<Communicator>> created =
      Communicator::create(id, rank, nranks, *options, cudaDevice);
  if (!created) return finish("tucclCommInitRank", created.status(), rank);
  auto* handle = new tucclComm();
  handle->impl = std::move(*created);
  *comm = handle;
  return tucclSuccess;
}

// The GPU of a rank a launcher started: its local rank modulo the GPUs the driver sees, so the
// ranks of a node spread over its GPUs and several share one when there are fewer GPUs than ranks
// (nccl-tests' choice). 0 where no driver loads or TUCCL_DEVICE=cpu.
int launchedRankDevice(int localRank) {
  if (tuccl::equalsIgnoreCase(tuccl::env::text("TUCCL_DEVICE").value_or(""), "cpu")) return 0;
  tuccl::Expected<const tuccl::backend::CudaDriver*> driver = tuccl::backend::loadCudaDriver();
  if (!driver || (*driver)->deviceCount < 1) return 0;
  return std::max(localRank, 0) % (*driver)->deviceCount;
}

}  // namespace

extern "C" {

tucclResult_t tucclGetVersion(int* version) {
  if (version == nullptr) return invalid("tucclGetVersion", "version is NULL");
  *version = TUCCL_VERSION_CODE;
  return tucclSuccess;
}

const char* tucclGetErrorString(tucclResult_t result) {
  switch (rawValue(result)) {
    case tucclSuccess: return "no error";
    case tucclUnhandledCudaError: return "unhandled cuda error (run with TUCCL_DEBUG=INFO for details)";
    case tucclSystemError: return "unhandled system error (run with TUCCL_DEBUG=INFO for details)";
    case tucclInternalError: return "internal error - please report this issue to the TuCCL developers";
    case tucclInvalidArgument: return "invalid argument (run with TUCCL_DEBUG=WARN for details)";
    case tucclInvalidUsage: return "invalid usage (run with TUCCL_DEBUG=WARN for details)";
    case tucclRemoteError: return "remote process exited or there was a network error";
    case tucclInProgress: return "TuCCL operation in progress";
    case tucclTimeout: return "TuCCL operation timed out (TUCCL_TIMEOUT_S)";
    default: return "unknown result code";
  }
}

const char* tucclGetLastError(tucclComm_t /*comm*/) { return lastError.c_str(); }

tucclResult_t tucclGetUniqueId(tucclUniqueId* uniqueId) {
  return guarded("tucclGetUniqueId", [&] {
    if (uniqueId == nullptr) return invalid("tucclGetUniqueId", "uniqueId is NULL");
    tuccl::Expected<tuccl::backend::CommOptions> options = tuccl::backend::commOptionsFromEnvironment();
    if (!options) return finish("tucclGetUniqueId", options.status());
    const std::optional<std::string> address = tuccl::env::text("TUCCL_COMM_ID");
    tuccl::backend::BootstrapOptions bootstrapOptions;
    bootstrapOptions.timeoutSeconds = options->timeoutSeconds;
    bootstrapOptions.interfaceName = options->interfaceName;
    tuccl::Expected<tuccl::backend::UniqueIdBytes> id = address ? tuccl::backend::uniqueIdFromAddress(*address)
                                                                : tuccl::backend::makeUniqueId(bootstrapOptions);
    if (!id) return finish("tucclGetUniqueId", id.status());
    std::memcpy(uniqueId->internal, id->bytes, TUCCL_UNIQUE_ID_BYTES);
    return tucclSuccess;
  });
}

tucclResult_t tucclCommInitRank(tucclComm_t* comm, int nranks, tucclUniqueId commId, int rank) {
  return guarded("tucclCommInitRank", [&] {
    if (comm == nullptr) return invalid("tucclCommInitRank", "comm is NULL");
    *comm = nullptr;
    tuccl::backend::UniqueIdBytes id;
    std::memcpy(id.bytes, commId.internal, TUCCL_UNIQUE_ID_BYTES);
    return initRank(comm, nranks, id, rank, -1);  // the caller's current CUDA device, like NCCL
  });
}

tucclResult_t tucclCommInitFromEnv(tucclComm_t* comm) {
  return guarded("tucclCommInitFromEnv", [&] {
    if (comm == nullptr) return invalid("tucclCommInitFromEnv", "comm is NULL");
    *comm = nullptr;
    tuccl::Expected<tuccl::backend::LaunchEnvironment> launch = tuccl::backend::readLaunchEnvironment();
    if (!launch) return finish("tucclCommInitFromEnv", launch.status());
    tuccl::Expected<tuccl::backend::UniqueIdBytes> id = tuccl::backend::uniqueIdFromAddress(launch->commId);
    if (!id) return finish("tucclCommInitFromEnv", id.status());
    return initRank(comm, launch->nRanks, *id, launch->rank, launchedRankDevice(launch->localRank));
  });
}

tucclResult_t tucclCommInitAll(tucclComm_t* comms, int ndev, const int* devlist) {
  return guarded("tucclCommInitAll", [&] {
    if (comms == nullptr) return invalid("tucclCommInitAll", "comms is NULL");
    if (ndev < 1) return invalid("tucclCommInitAll", "ndev " + std::to_string(ndev) + " is not positive");
    tucclUniqueId unique;
    if (tucclResult_t made = tucclGetUniqueId(&unique); made != tucclSuccess) return made;
    tuccl::backend::UniqueIdBytes id;
    std::memcpy(id.bytes, unique.internal, TUCCL_UNIQUE_ID_BYTES);
    std::vector<tucclResult_t> results(static_cast<size_t>(ndev), tucclSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      threads.emplace_back([&, r] {
        comms[r] = nullptr;
        results[r] = guarded("tucclCommInitAll", [&] { return initRank(&comms[r], ndev, id, r, devlist != nullptr ? devlist[r] : r); });
        errors[r] = lastError;
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r] == tucclSuccess) continue;
      for (int other = 0; other < ndev; ++other) {
        if (comms[other] != nullptr) tucclCommAbort(comms[other]);
        comms[other] = nullptr;
      }
      lastError = errors[r];
      return results[r];
    }
    return tucclSuccess;
  });
}

tucclResult_t tucclCommDestroy(tucclComm_t comm) {
  return guarded("tucclCommDestroy", [&] {
    if (comm == nullptr) return invalid("tucclCommDestroy", "comm is NULL");
    waitIdle(comm);
    const int rank = comm->impl->rank();
    Status status = comm->impl->finalize();
    delete comm;
    return finish("tucclCommDestroy", status, rank);
  });
}

tucclResult_t tucclCommAbort(tucclComm_t comm) {
  return guarded("tucclCommAbort", [&] {
    if (comm == nullptr) return tucclSuccess;  // like NCCL: aborting nothing is fine
    comm->impl->abort("tucclCommAbort was called");
    waitIdle(comm);  // blocked calls return at their next wait
    delete comm;
    return tucclSuccess;
  });
}

tucclResult_t tucclCommGetAsyncError(tucclComm_t comm, tucclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return invalid("tucclCommGetAsyncError", "comm or asyncError is NULL");
  const Status status = comm->impl->asyncError();
  *asyncError = resultOf(status.code());
  // The reason, for tucclGetLastError on this thread: the failure happened on another one.
  if (!status) lastError = "asynchronous error: " + status.message();
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
  *device = comm->impl->deviceOrdinal();
  return tucclSuccess;
}

tucclResult_t tucclCommDeviceKind(const tucclComm_t comm, tucclDeviceKind_t* kind) {
  if (comm == nullptr || kind == nullptr) return invalid("tucclCommDeviceKind", "comm or kind is NULL");
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

tucclResult_t tucclStreamCreate(tucclStream_t* stream) {
  return guarded("tucclStreamCreate", [&] {
    if (stream == nullptr) return invalid("tucclStreamCreate", "stream is NULL");
    tuccl::Expected<tucclStream_t> created = tuccl::backend::CpuStream::create();
    if (!created) return finish("tucclStreamCreate", created.status());
    *stream = *created;
    return tucclSuccess;
  });
}

tucclResult_t tucclStreamSynchronize(tucclStream_t stream) {
  return guarded("tucclStreamSynchronize", [&] {
    if (stream == nullptr) return tucclSuccess;  // NULL-stream calls completed when they returned
    std::shared_ptr<tuccl::backend::CpuStream> cpu = tuccl::backend::CpuStream::find(stream);
    if (!cpu) return invalid("tucclStreamSynchronize", "not a live TuCCL CPU stream");
    return finish("tucclStreamSynchronize", cpu->synchronize());
  });
}

tucclResult_t tucclStreamDestroy(tucclStream_t stream) {
  return guarded("tucclStreamDestroy", [&] {
    if (stream == nullptr) return invalid("tucclStreamDestroy", "stream is NULL");
    return finish("tucclStreamDestroy", tuccl::backend::CpuStream::destroy(stream));
  });
}

tucclResult_t tucclAllReduce(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                             tucclRedOp_t op, tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclAllReduce", tuccl::Collective::AllReduce, sendbuff, recvbuff, count, rawValue(datatype),
                    rawValue(op), 0, comm, stream);
}

tucclResult_t tucclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, tucclDataType_t datatype,
                             tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclAllGather", tuccl::Collective::AllGather, sendbuff, recvbuff, sendcount,
                    rawValue(datatype), 0, 0, comm, stream);
}

tucclResult_t tucclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, tucclDataType_t datatype,
                                 tucclRedOp_t op, tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclReduceScatter", tuccl::Collective::ReduceScatter, sendbuff, recvbuff, recvcount,
                    rawValue(datatype), rawValue(op), 0, comm, stream);
}

tucclResult_t tucclBroadcast(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                             tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclBroadcast", tuccl::Collective::Broadcast, sendbuff, recvbuff, count, rawValue(datatype), 0,
                    root, comm, stream);
}

tucclResult_t tucclReduce(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                          tucclRedOp_t op, int root, tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclReduce", tuccl::Collective::Reduce, sendbuff, recvbuff, count, rawValue(datatype),
                    rawValue(op), root, comm, stream);
}

tucclResult_t tucclAllToAll(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype,
                            tucclComm_t comm, tucclStream_t stream) {
  return collective("tucclAllToAll", tuccl::Collective::AllToAll, sendbuff, recvbuff, count, rawValue(datatype), 0, 0,
                    comm, stream);
}

tucclResult_t tucclGroupStart(void) {
  ++groupDepth;
  return tucclSuccess;
}

tucclResult_t tucclGroupEnd(void) {
  return guarded("tucclGroupEnd", [&] {
    if (groupDepth == 0) {
      return finish("tucclGroupEnd", tuccl::makeError(ErrorCode::Unsupported, "tucclGroupEnd without tucclGroupStart"));
    }
    if (--groupDepth > 0) return tucclSuccess;
    std::vector<PendingCall> calls = std::move(groupCalls);
    groupCalls.clear();
    return finish("tucclGroupEnd", launchGroup(std::move(calls)));
  });
}

}  // extern "C"
