// libtuccl's C API: making and ending communicators (api_internal.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/api_internal.h"
#include "backend/bootstrap.h"
#include "backend/communicator.h"
#include "backend/cuda_driver.h"
#include "support/environment.h"
#include "support/log.h"
#include "support/text_values.h"
#include "tuccl/tuccl.h"

using tuccl::ErrorCode;
using tuccl::Status;
using tuccl::api::finish;
using tuccl::api::guarded;
using tuccl::api::invalid;
using tuccl::api::lastError;
using tuccl::api::resultOf;
using tuccl::api::Use;
using tuccl::api::waitIdle;
using tuccl::backend::Communicator;

namespace {

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

}  // extern "C"
