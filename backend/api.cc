// The C API of libtuccl (include/tuccl/tuccl.h): argument checks, errors as result codes and a
// per-thread last-error text, streams, collectives, point-to-point and groups (communicators are
// made and ended in api_comm.cc). No exception crosses it.
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/api_internal.h"
#include "backend/communicator.h"
#include "backend/cpu_stream.h"
#include "support/log.h"
#include "support/environment.h"
#include "support/text_values.h"
#include "tuccl/tuccl.h"

using tuccl::ErrorCode;
using tuccl::Status;
using tuccl::backend::Communicator;

namespace tuccl::api {

std::string& lastError() {
  thread_local std::string text;
  return text;
}

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

tucclResult_t finish(const char* function, const Status& status, int rank) {
  if (status) return tucclSuccess;
  lastError() = std::string(function) + ": " + status.message();
  tuccl::logLine(tuccl::LogLevel::Warn, rank, lastError());
  return resultOf(status.code());
}

tucclResult_t invalid(const char* function, const std::string& why) {
  return finish(function, tuccl::makeError(ErrorCode::InvalidArgument, why));
}

tucclResult_t guardedCall(const char* function, const std::function<tucclResult_t()>& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return finish(function, tuccl::makeError(ErrorCode::Internal, std::string("unexpected: ") + error.what()));
  } catch (...) {
    return finish(function, tuccl::makeError(ErrorCode::Internal, "unexpected exception"));
  }
}

Use::Use(tucclComm* comm) : comm_(comm) {
  std::lock_guard lock(comm_->mutex);
  ++comm_->active;
}

Use::~Use() {
  std::lock_guard lock(comm_->mutex);
  if (--comm_->active == 0) comm_->idle.notify_all();
}

void waitIdle(tucclComm* comm) {
  std::unique_lock lock(comm->mutex);
  comm->idle.wait(lock, [&] { return comm->active == 0; });
}

GroupWork& threadGroup() {
  thread_local GroupWork group;
  return group;
}

}  // namespace tuccl::api

namespace {

using namespace tuccl::api;

// ---- Groups ----------------------------------------------------------------------------------

// A call kept for the end of the group: a collective, or one send or receive.
struct PendingCall {
  tucclComm* comm;
  bool isPeer;
  tuccl::CollectiveCall call;
  tuccl::backend::PeerCall peer;
  tucclStream_t stream;
};
thread_local std::vector<PendingCall> groupCalls;

// One communicator's part of a group: its collectives in the order issued, then its sends and
// receives, stream by stream, each stream's as one batch that runs all of them at once (so their
// order inside the group never matters).
Status launchOnComm(tucclComm* comm, const std::vector<PendingCall>& calls) {
  Use use(comm);
  Status first;
  auto keep = [&](const Status& status) {
    if (!status && first) first = status;
  };
  for (const PendingCall& call : calls) {
    if (call.comm == comm && !call.isPeer) keep(comm->impl->enqueue(call.call, call.stream));
  }
  std::vector<tucclStream_t> streams;
  for (const PendingCall& call : calls) {
    if (call.comm == comm && call.isPeer && std::find(streams.begin(), streams.end(), call.stream) == streams.end()) {
      streams.push_back(call.stream);
    }
  }
  for (tucclStream_t stream : streams) {
    std::vector<tuccl::backend::PeerCall> batch;
    for (const PendingCall& call : calls) {
      if (call.comm == comm && call.isPeer && call.stream == stream) batch.push_back(call.peer);
    }
    keep(comm->impl->enqueuePeers(batch, stream));
  }
  return first;
}

// Launches the calls of a group: on the CPU device, NULL-stream calls of different communicators
// must run together (each waits for its peers), so every communicator's calls get a thread.
Status launchGroup(const std::vector<PendingCall>& calls) {
  std::vector<tucclComm*> comms;
  for (const PendingCall& call : calls) {
    if (std::find(comms.begin(), comms.end(), call.comm) == comms.end()) comms.push_back(call.comm);
  }
  std::vector<Status> results(comms.size());
  if (comms.size() == 1) {
    results[0] = launchOnComm(comms[0], calls);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < comms.size(); ++i) threads.emplace_back([&, i] { results[i] = launchOnComm(comms[i], calls); });
    for (std::thread& thread : threads) thread.join();
  }
  for (Status& status : results) {
    if (!status) return status;
  }
  return {};
}

// Makes the communicators initialised inside the group, all at once (they may be ranks of one
// communicator, which meet each other): the first failure is answered, else tucclInProgress when
// a non-blocking one is still being made (NCCL's group end answers it then), else tucclSuccess.
tucclResult_t runDeferredInits(std::vector<std::function<tucclResult_t()>> inits) {
  if (inits.empty()) return tucclSuccess;
  std::vector<tucclResult_t> results(inits.size(), tucclSuccess);
  std::vector<std::string> errors(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = inits[i]();
      errors[i] = lastError();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < inits.size(); ++i) {
    if (results[i] != tucclSuccess && results[i] != tucclInProgress) {
      lastError() = errors[i];
      return results[i];
    }
  }
  return std::find(results.begin(), results.end(), tucclInProgress) != results.end() ? tucclInProgress : tucclSuccess;
}

tucclResult_t collective(const char* function, tuccl::Collective kind, const void* sendbuff, void* recvbuff,
                         size_t count, int datatype, int op, int root, tucclComm_t comm,
                         tucclStream_t stream) {
  return guarded(function, [&] {
    if (comm == nullptr) return invalid(function, "comm is NULL");
    tuccl::Expected<tuccl::CollectiveCall> call = comm->impl->callOf(kind, sendbuff, recvbuff, count, datatype, op, root);
    if (!call) return finish(function, call.status(), comm->impl->rank());
    if (threadGroup().depth > 0) {
      groupCalls.push_back(PendingCall{comm, false, *call, {}, stream});
      return tucclSuccess;
    }
    Use use(comm);
    return finish(function, comm->impl->enqueue(*call, stream), comm->impl->rank());
  });
}

// Sends and receives of one call (a send, Gather, AllToAllv...): kept when a group is open, else
// launched as one batch.
tucclResult_t peerCalls(const char* function, tucclComm_t comm, const std::vector<tuccl::backend::PeerCall>& calls,
                        tucclStream_t stream) {
  if (threadGroup().depth > 0) {
    for (const tuccl::backend::PeerCall& call : calls) groupCalls.push_back(PendingCall{comm, true, {}, call, stream});
    return tucclSuccess;
  }
  Use use(comm);
  return finish(function, comm->impl->enqueuePeers(calls, stream), comm->impl->rank());
}

tucclResult_t peerCall(const char* function, bool send, const void* buffer, size_t count, int datatype, int peer,
                       tucclComm_t comm, tucclStream_t stream) {
  return guarded(function, [&] {
    if (comm == nullptr) return invalid(function, "comm is NULL");
    tuccl::Expected<tuccl::backend::PeerCall> call = comm->impl->peerCallOf(send, buffer, count, datatype, peer);
    if (!call) return finish(function, call.status(), comm->impl->rank());
    return peerCalls(function, comm, {*call}, stream);
  });
}

// Gather (toRoot) or Scatter: the root sends or receives rank r's block at r * count, every rank
// its own block; the root's own block is a send to itself.
tucclResult_t rooted(const char* function, bool toRoot, const void* sendbuff, void* recvbuff, size_t count,
                     int datatype, int root, tucclComm_t comm, tucclStream_t stream) {
  return guarded(function, [&] {
    if (comm == nullptr) return invalid(function, "comm is NULL");
    Communicator& c = *comm->impl;
    if (root < 0 || root >= c.nRanks()) {
      return invalid(function, "root " + std::to_string(root) + " is outside [0, " + std::to_string(c.nRanks()) + ")");
    }
    std::vector<tuccl::backend::PeerCall> calls;
    auto add = [&](bool send, const void* buffer, int peer) {
      tuccl::Expected<tuccl::backend::PeerCall> call = c.peerCallOf(send, buffer, count, datatype, peer);
      if (!call) return call.status();
      calls.push_back(*call);
      return Status();
    };
    Status made = add(toRoot, toRoot ? sendbuff : recvbuff, root);
    if (made && c.rank() == root) {
      const tuccl::Expected<size_t> block = c.blockBytes(count, datatype);
      for (int r = 0; made && r < c.nRanks() && block; ++r) {
        const size_t at = static_cast<size_t>(r) * *block;
        made = toRoot ? add(false, static_cast<char*>(recvbuff) + at, r)
                      : add(true, static_cast<const char*>(sendbuff) + at, r);
      }
      if (!block) made = block.status();
    }
    if (!made) return finish(function, made, c.rank());
    return peerCalls(function, comm, calls, stream);
  });
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

const char* tucclGetLastError(tucclComm_t /*comm*/) { return lastError().c_str(); }

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

tucclResult_t tucclSend(const void* sendbuff, size_t count, tucclDataType_t datatype, int peer, tucclComm_t comm,
                        tucclStream_t stream) {
  return peerCall("tucclSend", true, sendbuff, count, rawValue(datatype), peer, comm, stream);
}

tucclResult_t tucclRecv(void* recvbuff, size_t count, tucclDataType_t datatype, int peer, tucclComm_t comm,
                        tucclStream_t stream) {
  return peerCall("tucclRecv", false, recvbuff, count, rawValue(datatype), peer, comm, stream);
}

tucclResult_t tucclGather(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                          tucclComm_t comm, tucclStream_t stream) {
  return rooted("tucclGather", true, sendbuff, recvbuff, count, rawValue(datatype), root, comm, stream);
}

tucclResult_t tucclScatter(const void* sendbuff, void* recvbuff, size_t count, tucclDataType_t datatype, int root,
                           tucclComm_t comm, tucclStream_t stream) {
  return rooted("tucclScatter", false, sendbuff, recvbuff, count, rawValue(datatype), root, comm, stream);
}

tucclResult_t tucclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                             const size_t recvcounts[], const size_t rdispls[], tucclDataType_t datatype,
                             tucclComm_t comm, tucclStream_t stream) {
  return guarded("tucclAllToAllv", [&] {
    if (comm == nullptr) return invalid("tucclAllToAllv", "comm is NULL");
    if (sendcounts == nullptr || sdispls == nullptr || recvcounts == nullptr || rdispls == nullptr) {
      return invalid("tucclAllToAllv", "a count or displacement array is NULL");
    }
    Communicator& c = *comm->impl;
    const tuccl::Expected<size_t> unit = c.blockBytes(1, rawValue(datatype));
    if (!unit) return finish("tucclAllToAllv", unit.status(), c.rank());
    std::vector<tuccl::backend::PeerCall> calls;
    for (int r = 0; r < c.nRanks(); ++r) {
      for (bool send : {true, false}) {
        const size_t count = send ? sendcounts[r] : recvcounts[r];
        const size_t displ = send ? sdispls[r] : rdispls[r];
        if (count > 0 && displ > SIZE_MAX / *unit) return invalid("tucclAllToAllv", "a displacement overflows");
        const void* base = send ? sendbuff : static_cast<const void*>(recvbuff);
        const void* at = count == 0 ? nullptr : static_cast<const char*>(base) + displ * *unit;
        tuccl::Expected<tuccl::backend::PeerCall> call = c.peerCallOf(send, at, count, rawValue(datatype), r);
        if (!call) return finish("tucclAllToAllv", call.status(), c.rank());
        calls.push_back(*call);
      }
    }
    return peerCalls("tucclAllToAllv", comm, calls, stream);
  });
}

tucclResult_t tucclGroupStart(void) {
  ++threadGroup().depth;
  return tucclSuccess;
}

tucclResult_t tucclGroupEnd(void) {
  return guarded("tucclGroupEnd", [&] {
    GroupWork& group = threadGroup();
    if (group.depth == 0) {
      return finish("tucclGroupEnd", tuccl::makeError(ErrorCode::Unsupported, "tucclGroupEnd without tucclGroupStart"));
    }
    if (--group.depth > 0) return tucclSuccess;
    std::vector<std::function<tucclResult_t()>> inits = std::move(group.inits);
    group.inits.clear();
    std::vector<PendingCall> calls = std::move(groupCalls);
    groupCalls.clear();
    const tucclResult_t made = runDeferredInits(std::move(inits));
    if (made != tucclSuccess && made != tucclInProgress) return made;
    const tucclResult_t launched = finish("tucclGroupEnd", launchGroup(calls));
    return launched != tucclSuccess ? launched : made;
  });
}

}  // extern "C"
