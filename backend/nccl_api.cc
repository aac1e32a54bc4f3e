// libtuccl-nccl.so: NCCL's C API on top of libtuccl, so an NCCL program runs on TuCCL by
// LD_PRELOAD or by linking it in place of libnccl (design.md "libtuccl").
//
// Every function is exported twice, as ncclX and as its profiling twin pncclX (NCCL's PROFAPI
// scheme, nccl-api.md), both the same code. Communicators are TuCCL's. What TuCCL does not serve
// — point-to-point, split/shrink, dynamic (PreMulSum) operators, datatypes the kernels lack,
// registration and NCCL's memory pool — goes to the real NCCL: the library named by
// TUCCL_NCCL_LIBRARY, else libnccl.so.2 (found as long as it is not this library), reached
// through its pncclX entry points with a real communicator (the twin) made beside TuCCL's at init
// when the TuCCL communicator runs on a GPU or TUCCL_NCCL_LIBRARY names the library: rank 0's real
// unique id travels over TuCCL's bootstrap, and every rank has a twin or none does. Without one,
// such a call fails with ncclInvalidUsage and says why (ncclGetLastError, and the log at
// TUCCL_DEBUG=WARN).
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/log.h"
#include "support/environment.h"
#include "tuccl/tuccl.h"

// This library's marker: the real-NCCL finder refuses a library that exports it (ourselves).
extern "C" {
__attribute__((visibility("default"))) int tucclNcclShimMarker = 1;
}

struct ncclComm {
  tucclComm_t tuccl = nullptr;
  ncclComm_t real = nullptr;  // the real NCCL's communicator, when one could be made
};

namespace {

thread_local std::string shimError;

// ---- The real NCCL ---------------------------------------------------------------------------

struct RealNccl {
  void* handle = nullptr;
  std::string why;  // why there is none
  template <typename F>
  F get(const char* name) const {
    return handle == nullptr ? nullptr : reinterpret_cast<F>(dlsym(handle, name));
  }
};

const RealNccl& realNccl() {
  static RealNccl real = [] {
    RealNccl found;
    const std::string path = tuccl::env::text("TUCCL_NCCL_LIBRARY").value_or("libnccl.so.2");
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* error = dlerror();
      found.why = "no real NCCL to forward to (" + path + ": " + (error != nullptr ? error : "not found") +
                  "; set TUCCL_NCCL_LIBRARY)";
    } else if (dlsym(handle, "tucclNcclShimMarker") != nullptr) {
      found.why = "no real NCCL to forward to (" + path + " is TuCCL's own NCCL library; set TUCCL_NCCL_LIBRARY)";
    } else {
      found.handle = handle;
    }
    return found;
  }();
  return real;
}

ncclResult_t resultOf(tucclResult_t result) { return static_cast<ncclResult_t>(result); }  // same numbering

ncclResult_t unserved(const char* function, const std::string& why) {
  shimError = std::string(function) + ": " + why;
  tuccl::warnOnce(function, shimError);
  return ncclInvalidUsage;
}

// Forwards to the real NCCL's pncclX with the real communicator, or explains why it can't.
#define TUCCL_FORWARD(name, comm, reason, ...)                                                                  \
  do {                                                                                                       \
    const RealNccl& real = realNccl();                                                                       \
    using Fn = decltype(&::p##name);                                                                         \
    Fn fn = real.get<Fn>("p" #name);                                                                         \
    if (fn == nullptr) return unserved(#name, std::string(reason) + "; " + (real.why.empty() ? "the real NCCL lacks p" #name : real.why)); \
    if ((comm) != nullptr && (comm)->real == nullptr) {                                                      \
      return unserved(#name, std::string(reason) + "; the communicator has no real-NCCL twin (made for GPU communicators, or with TUCCL_NCCL_LIBRARY set)"); \
    }                                                                                                        \
    return fn(__VA_ARGS__);                                                                                  \
  } while (0)

// The value a caller passed for an enum parameter, read as the int it is (loading an int that names
// no enumerator as the enum would be undefined).
template <typename Enum>
int rawValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

bool tucclServes(const ncclDataType_t& datatype, const ncclRedOp_t& op) {
  const int type = rawValue(datatype);
  const bool typeOk = type == ncclUint8 || type == ncclInt32 || type == ncclInt64 || type == ncclFloat16 ||
                      type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16;
  const int raw = rawValue(op);
  return typeOk && raw >= 0 && raw < 5;
}

// Values NCCL itself defines: a datatype below ncclNumTypes; an op below ncclNumOps or one of
// the dynamic ones ncclRedOpCreatePreMulSum hands out (the real NCCL judges those).
bool ncclKnows(const ncclDataType_t& datatype, const ncclRedOp_t& op) {
  const int type = rawValue(datatype);
  return type >= 0 && type < ncclNumTypes && rawValue(op) >= 0;
}

constexpr ncclRedOp_t kSum = ncclSum;

ncclResult_t unknownValue() {
  shimError = "the datatype or reduction operation is not one NCCL defines";
  return ncclInvalidArgument;
}

tucclStream_t streamOf(cudaStream_t stream) { return reinterpret_cast<tucclStream_t>(stream); }

// Communicators with a real-NCCL twin: group calls go to the real NCCL too while there are any.
std::atomic<int> twins{0};

// Whether this rank offers a twin: a real NCCL is found and can serve the communicator's buffers
// (a GPU communicator), or TUCCL_NCCL_LIBRARY names the library explicitly.
bool offersTwin(tucclComm_t comm) {
  if (realNccl().handle == nullptr) return false;
  tucclDeviceKind_t kind = tucclDeviceCpu;
  if (tucclCommDeviceKind(comm, &kind) != tucclSuccess) return false;
  return kind == tucclDeviceCuda || tuccl::env::isSet("TUCCL_NCCL_LIBRARY");
}

// Makes the real-NCCL communicator beside TuCCL's, on every rank or on none: rank 0's real unique
// id and every rank's readiness travel over TuCCL's bootstrap (tucclCommHostAllGather). Without
// one, what TuCCL does not serve is refused (with the reason).
void attachTwin(ncclComm* shim, int nranks, int rank) {
  struct Offer {
    char ready;
    ncclUniqueId id;
  };
  const RealNccl& real = realNccl();
  Offer mine{};
  mine.ready = offersTwin(shim->tuccl) ? 1 : 0;
  if (mine.ready && rank == 0) {
    auto getId = real.get<decltype(&::pncclGetUniqueId)>("pncclGetUniqueId");
    mine.ready = getId != nullptr && getId(&mine.id) == ncclSuccess ? 1 : 0;
  }
  std::vector<Offer> offers(static_cast<size_t>(nranks));
  if (tucclCommHostAllGather(shim->tuccl, &mine, offers.data(), sizeof(Offer)) != tucclSuccess) return;
  for (const Offer& offer : offers) {
    if (!offer.ready) return;  // some rank has no real NCCL to offer: no twin anywhere
  }
  auto init = real.get<decltype(&::pncclCommInitRank)>("pncclCommInitRank");
  ncclComm_t twin = nullptr;
  const char made = init != nullptr && init(&twin, nranks, offers[0].id, rank) == ncclSuccess ? 1 : 0;
  std::vector<char> madeAll(static_cast<size_t>(nranks));
  const bool agreed = tucclCommHostAllGather(shim->tuccl, &made, madeAll.data(), 1) == tucclSuccess &&
                      std::all_of(madeAll.begin(), madeAll.end(), [](char m) { return m == 1; });
  if (agreed) {
    shim->real = twin;
    ++twins;
    return;
  }
  tuccl::warnOnce("nccl-twin", "the real NCCL communicator could not be made on every rank; calls TuCCL "
                                        "does not serve will be refused");
  if (twin != nullptr) {
    if (auto abortTwin = real.get<decltype(&::pncclCommAbort)>("pncclCommAbort")) abortTwin(twin);
  }
}

// Ends the twin with the real NCCL's `name` (pncclCommDestroy or pncclCommAbort).
void releaseTwin(ncclComm* shim, const char* name) {
  if (shim->real == nullptr) return;
  if (auto end = realNccl().get<decltype(&::pncclCommDestroy)>(name)) end(shim->real);
  shim->real = nullptr;
  --twins;
}

ncclResult_t wrap(ncclComm_t* out, tucclComm_t comm, int nranks, int rank) {
  auto* shim = new ncclComm();
  shim->tuccl = comm;
  attachTwin(shim, nranks, rank);
  *out = shim;
  return ncclSuccess;
}

// The real NCCL's group call `name`, while twins exist.
ncclResult_t realGroupCall(const char* name) {
  if (twins.load() == 0) return ncclSuccess;
  auto call = realNccl().get<decltype(&::pncclGroupStart)>(name);
  return call != nullptr ? call() : ncclSuccess;
}

}  // namespace

// Defines pncclX and exports ncclX as the same function.
#define TUCCL_NCCL_API(ret, name, ...)                                                    \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);             \
  extern "C" __attribute__((visibility("default"), alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" ret p##name(__VA_ARGS__)

TUCCL_NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;  // the API this library implements (its nccl.h)
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  static_assert(sizeof(ncclUniqueId) == sizeof(tucclUniqueId));
  return resultOf(tucclGetUniqueId(reinterpret_cast<tucclUniqueId*>(uniqueId)));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (comm == nullptr) return ncclInvalidArgument;
  tucclUniqueId id;
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  tucclComm_t tuccl = nullptr;
  const tucclResult_t result = tucclCommInitRank(&tuccl, nranks, id, rank);
  if (result != tucclSuccess) return resultOf(result);
  return wrap(comm, tuccl, nranks, rank);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
               ncclConfig_t* /*config*/) {
  // Blocking and non-blocking callers alike get a finished communicator (ncclSuccess is a valid
  // answer in non-blocking mode); the tuning fields are TuCCL's to decide.
  return pncclCommInitRank(comm, nranks, commId, rank);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return ncclInvalidArgument;
  std::vector<tucclComm_t> tuccl(static_cast<size_t>(ndev), nullptr);
  const tucclResult_t result = tucclCommInitAll(tuccl.data(), ndev, devlist);
  if (result != tucclSuccess) return resultOf(result);
  // The ranks are threads of this process: their twins are made together.
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) threads.emplace_back([&, i] { wrap(&comms[i], tuccl[i], ndev, i); });
  for (std::thread& thread : threads) thread.join();
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  return ncclSuccess;  // outstanding work is flushed by ncclCommDestroy, which waits for it
}

TUCCL_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  releaseTwin(comm, "pncclCommDestroy");
  const tucclResult_t result = tucclCommDestroy(comm->tuccl);
  delete comm;
  return resultOf(result);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  releaseTwin(comm, "pncclCommAbort");
  const tucclResult_t result = tucclCommAbort(comm->tuccl);
  delete comm;
  return resultOf(result);
}

TUCCL_NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  const int raw = rawValue(result);
  return raw >= 0 && raw < tucclNumResults ? tucclGetErrorString(static_cast<tucclResult_t>(raw))
                                           : "unknown result code";
}

TUCCL_NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  if (!shimError.empty()) return shimError.c_str();
  return tucclGetLastError(comm != nullptr ? comm->tuccl : nullptr);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return ncclInvalidArgument;
  tucclResult_t error = tucclSuccess;
  const tucclResult_t result = tucclCommGetAsyncError(comm->tuccl, &error);
  *asyncError = resultOf(error);
  return resultOf(result);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return comm == nullptr ? ncclInvalidArgument : resultOf(tucclCommCount(comm->tuccl, count));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return comm == nullptr ? ncclInvalidArgument : resultOf(tucclCommCuDevice(comm->tuccl, device));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return comm == nullptr ? ncclInvalidArgument : resultOf(tucclCommUserRank(comm->tuccl, rank));
}

// ---- Collectives -------------------------------------------------------------------------------

TUCCL_NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (!tucclServes(datatype, op)) {
    TUCCL_FORWARD(ncclAllReduce, comm, "this datatype or operator is not served by TuCCL", sendbuff, recvbuff, count,
                  datatype, op, comm->real, stream);
  }
  return resultOf(tucclAllReduce(sendbuff, recvbuff, count, static_cast<tucclDataType_t>(datatype),
                                 static_cast<tucclRedOp_t>(op), comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  if (!tucclServes(datatype, kSum)) {
    TUCCL_FORWARD(ncclAllGather, comm, "this datatype is not served by TuCCL", sendbuff, recvbuff, sendcount, datatype,
                  comm->real, stream);
  }
  return resultOf(tucclAllGather(sendbuff, recvbuff, sendcount, static_cast<tucclDataType_t>(datatype), comm->tuccl,
                                 streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (!tucclServes(datatype, op)) {
    TUCCL_FORWARD(ncclReduceScatter, comm, "this datatype or operator is not served by TuCCL", sendbuff, recvbuff,
                  recvcount, datatype, op, comm->real, stream);
  }
  return resultOf(tucclReduceScatter(sendbuff, recvbuff, recvcount, static_cast<tucclDataType_t>(datatype),
                                     static_cast<tucclRedOp_t>(op), comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  if (!tucclServes(datatype, kSum)) {
    TUCCL_FORWARD(ncclBroadcast, comm, "this datatype is not served by TuCCL", sendbuff, recvbuff, count, datatype,
                  root, comm->real, stream);
  }
  return resultOf(tucclBroadcast(sendbuff, recvbuff, count, static_cast<tucclDataType_t>(datatype), root, comm->tuccl,
                                 streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
               cudaStream_t stream) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (!tucclServes(datatype, op)) {
    TUCCL_FORWARD(ncclReduce, comm, "this datatype or operator is not served by TuCCL", sendbuff, recvbuff, count,
                  datatype, op, root, comm->real, stream);
  }
  return resultOf(tucclReduce(sendbuff, recvbuff, count, static_cast<tucclDataType_t>(datatype),
                              static_cast<tucclRedOp_t>(op), root, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  if (!tucclServes(datatype, kSum)) {
    TUCCL_FORWARD(ncclAlltoAll, comm, "this datatype is not served by TuCCL", sendbuff, recvbuff, count, datatype,
                  comm->real, stream);
  }
  return resultOf(
      tucclAllToAll(sendbuff, recvbuff, count, static_cast<tucclDataType_t>(datatype), comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclGroupStart) {
  if (const ncclResult_t real = realGroupCall("pncclGroupStart"); real != ncclSuccess) return real;
  return resultOf(tucclGroupStart());
}

TUCCL_NCCL_API(ncclResult_t, ncclGroupEnd) {
  const ncclResult_t real = realGroupCall("pncclGroupEnd");
  const tucclResult_t result = tucclGroupEnd();
  return real != ncclSuccess ? real : resultOf(result);
}

// ---- What the real NCCL serves -----------------------------------------------------------------

TUCCL_NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclSend, comm, "point-to-point is not served by TuCCL", sendbuff, count, datatype, peer, comm->real,
                stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclRecv, comm, "point-to-point is not served by TuCCL", recvbuff, count, datatype, peer, comm->real,
                stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclGather, comm, "Gather is not served by TuCCL", sendbuff, recvbuff, count, datatype, root,
                comm->real, stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
               int root, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclScatter, comm, "Scatter is not served by TuCCL", sendbuff, recvbuff, count, datatype, root,
                comm->real, stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int /*color*/, int /*key*/, ncclComm_t* /*newcomm*/,
               ncclConfig_t* /*config*/) {
  if (comm == nullptr) return ncclInvalidArgument;
  return unserved("ncclCommSplit", "splitting a communicator is not served by TuCCL yet");
}

TUCCL_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
               ncclScalarResidence_t residence, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclRedOpCreatePreMulSum, comm, "PreMulSum operators are not served by TuCCL", op, scalar, datatype,
                residence, comm->real);
}

TUCCL_NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  TUCCL_FORWARD(ncclRedOpDestroy, comm, "PreMulSum operators are not served by TuCCL", op, comm->real);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* /*buff*/, size_t /*size*/,
               void** handle) {
  // Registration is a hint: TuCCL copies through its staging rings either way.
  if (comm == nullptr || handle == nullptr) return ncclInvalidArgument;
  *handle = nullptr;
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* /*handle*/) {
  return comm == nullptr ? ncclInvalidArgument : ncclSuccess;
}
