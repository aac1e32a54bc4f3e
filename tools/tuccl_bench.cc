// tuccl-bench: nccl-tests for libtuccl. One rank per process, rank and size from the launcher
// (tucclCommInitFromEnv): `tuccl-run -n 4 -- tuccl-bench allreduce -b 8 -e 128M -f 2`. Rank 0
// prints nccl-tests' output; every rank checks its own results (cli/bench_driver.h runs the
// loop, this file is libtuccl's side of it).
//
// sendrecv is a tucclSend to rank r+1 and a tucclRecv from rank r-1 in one group (nccl-tests'
// sendrecv_perf), alltoallv one tucclAllToAllv (cli/bench_report.h defines both).
//
// Calls are stream-ordered: the timed calls are enqueued on one stream and waited for once. The
// barrier is an AllReduce of one integer; times are combined over ranks with an AllReduce (sum,
// min or max) or a Broadcast of rank 0's, the wrong-element counts with an AllReduce of an int64.
//
// The communicator's device decides the memory:
//   CPU device   host buffers and a CPU stream (tucclStreamCreate, tucclStreamSynchronize).
//   CUDA device  device buffers (cuMemAlloc on the communicator's GPU) and a CUDA stream, through
//                the driver API loaded at run time as libtuccl loads it (tuccl-bench does not link
//                libcuda either); the host copies the loop fills and checks are copied in and out
//                around the checked calls, and the stream's completion is followed by
//                tucclCommGetAsyncError, where the CUDA device reports a TB that did not finish.
//
// Exit status: 0, 1 when a result was wrong or a libtuccl or driver call failed (its
// tucclGetErrorString and tucclGetLastError are printed), 2 for a bad command line.
#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda_driver.h"
#include "cli/bench_driver.h"
#include "cli/cli.h"
#include "tools/cuda_memory.h"
#include "tuccl/tuccl.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;
using tuccl::tools::checkCuda;
using tuccl::tools::CudaMemory;

constexpr int kExitFailed = 1;  ///< a wrong result or a failed libtuccl call

/// A failed libtuccl call as a Status: the function, the result's name and the reason.
Status callStatus(tucclResult_t result, std::string_view function, tucclComm_t comm) {
  if (result == tucclSuccess) return {};
  const std::string reason = tucclGetLastError(comm);
  return makeError(ErrorCode::RemoteError, std::string(function) + " failed: " + tucclGetErrorString(result) +
                                               (reason.empty() ? "" : ": " + reason));
}

/// Throws the failed call's status, for main's one handler.
void check(tucclResult_t result, std::string_view function, tucclComm_t comm) {
  throwIfError(callStatus(result, function, comm));
}

tucclDataType_t toTuccl(DataType type) {
  switch (type) {
    case DataType::Float32:
      return tucclFloat32;
    case DataType::Float16:
      return tucclFloat16;
    case DataType::BFloat16:
      return tucclBfloat16;
    case DataType::Float64:
      return tucclFloat64;
    case DataType::Int32:
      return tucclInt32;
    case DataType::Int64:
      return tucclInt64;
    case DataType::Uint8:
      return tucclUint8;
    case DataType::Int8:
      return tucclInt8;
    case DataType::Uint32:
      return tucclUint32;
    case DataType::Uint64:
      return tucclUint64;
    case DataType::Float8E4M3:
      return tucclFloat8e4m3;
    case DataType::Float8E5M2:
      return tucclFloat8e5m2;
  }
  return tucclNumTypes;
}

tucclRedOp_t toTuccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return tucclSum;
    case ReduceOp::Prod:
      return tucclProd;
    case ReduceOp::Min:
      return tucclMin;
    case ReduceOp::Max:
      return tucclMax;
    case ReduceOp::Avg:
      return tucclAvg;
  }
  return tucclNumOps;
}

/// The "# Rank" facts of a rank on the CUDA device: the GPU's ordinal, name and PCI bus ("0x1b", as
/// nccl-tests prints it).
RankInfo gpuRankInfo(const CudaMemory& cuda, int32_t rank) {
  const backend::CudaDriver& driver = cuda.driver();
  RankInfo info = localCpuRankInfo(rank);
  info.device = cuda.ordinal();
  std::array<char, 256> name{};
  if (driver.cuDeviceGetName(name.data(), static_cast<int>(name.size()) - 1, cuda.device()) == backend::CUDA_SUCCESS) {
    info.deviceName = name.data();
  }
  std::array<char, 64> busId{};  // "0000:1B:00.0"
  unsigned domain = 0;
  unsigned bus = 0;
  if (driver.cuDeviceGetPCIBusId(busId.data(), static_cast<int>(busId.size()) - 1, cuda.device()) ==
          backend::CUDA_SUCCESS &&
      std::sscanf(busId.data(), "%x:%x", &domain, &bus) == 2) {
    std::array<char, 16> text{};
    std::snprintf(text.data(), text.size(), "0x%02x", bus);
    info.busId = text.data();
  }
  return info;
}

/// libtuccl: one communicator and one stream; on the CUDA device, device memory (CudaMemory).
class TucclBackend final : public BenchBackend {
 public:
  TucclBackend(tucclComm_t comm, int32_t rank, int32_t nRanks, std::unique_ptr<CudaMemory> cuda)
      : comm_(comm), rank_(rank), nRanks_(nRanks), cuda_(std::move(cuda)) {
    if (cuda_) {
      stream_ = cuda_->stream();
    } else {
      check(tucclStreamCreate(&stream_), "tucclStreamCreate", comm_);
    }
  }
  // A run that failed leaves the stream to the process's exit: destroying it would wait for calls
  // that only main's tucclCommAbort ends.
  ~TucclBackend() override = default;
  TucclBackend(const TucclBackend&) = delete;
  TucclBackend& operator=(const TucclBackend&) = delete;

  /// Destroys the CPU stream once every call completed (a CUDA stream goes with CudaMemory).
  void close() {
    tucclStream_t stream = stream_;
    stream_ = nullptr;
    if (!cuda_) check(tucclStreamDestroy(stream), "tucclStreamDestroy", comm_);
  }

  int32_t rank() const override { return rank_; }
  int32_t nRanks() const override { return nRanks_; }

  void allGatherBytes(const void* mine, void* all, size_t bytes) override {
    exchange(mine, bytes, all, bytes * static_cast<size_t>(nRanks_), [&](const void* send, void* recv) {
      check(tucclAllGather(send, recv, bytes, tucclUint8, comm_, stream_), "tucclAllGather", comm_);
    });
  }

  void start(const BenchCall& b) override {
    const CollectiveCall& c = b.call;
    const auto count = static_cast<size_t>(c.count);
    const tucclDataType_t type = toTuccl(c.dataType);
    const tucclRedOp_t op = toTuccl(c.op);
    if (std::optional<PeerPattern> pattern = b.collective.pattern()) {
      startPeers(*pattern, b, count, type);
      return;
    }
    switch (*b.collective.collective()) {
      case Collective::AllReduce:
        check(tucclAllReduce(b.send, b.recv, count, type, op, comm_, stream_), "tucclAllReduce", comm_);
        break;
      case Collective::AllGather:
        check(tucclAllGather(b.send, b.recv, count, type, comm_, stream_), "tucclAllGather", comm_);
        break;
      case Collective::ReduceScatter:
        check(tucclReduceScatter(b.send, b.recv, count, type, op, comm_, stream_), "tucclReduceScatter",
              comm_);
        break;
      case Collective::Broadcast:
        check(tucclBroadcast(b.send, b.recv, count, type, c.root, comm_, stream_), "tucclBroadcast", comm_);
        break;
      case Collective::Reduce:
        check(tucclReduce(b.send, b.recv, count, type, op, c.root, comm_, stream_), "tucclReduce", comm_);
        break;
      case Collective::AllToAll:
        check(tucclAllToAll(b.send, b.recv, count, type, comm_, stream_), "tucclAllToAll", comm_);
        break;
    }
  }

  /// nccl-tests' sendrecv (a send to the next rank and a receive from the previous one, in one
  /// group) or tucclAllToAllv with the call's per-peer layout.
  void startPeers(PeerPattern pattern, const BenchCall& b, size_t count, tucclDataType_t type) {
    switch (pattern) {
      case PeerPattern::SendRecv: {
        const int next = (rank_ + 1) % nRanks_;
        const int previous = (rank_ - 1 + nRanks_) % nRanks_;
        check(tucclGroupStart(), "tucclGroupStart", comm_);
        const tucclResult_t sent = tucclSend(b.send, count, type, next, comm_, stream_);
        const tucclResult_t received =
            sent == tucclSuccess ? tucclRecv(b.recv, count, type, previous, comm_, stream_) : tucclSuccess;
        // The group is closed even when a call was refused, so this thread's group depth stays right.
        const tucclResult_t ended = tucclGroupEnd();
        check(sent, "tucclSend", comm_);
        check(received, "tucclRecv", comm_);
        check(ended, "tucclGroupEnd", comm_);
        break;
      }
      case PeerPattern::AllToAllv:
        check(tucclAllToAllv(b.send, b.peers.sendCounts.data(), b.peers.sendDispls.data(), b.recv,
                             b.peers.recvCounts.data(), b.peers.recvDispls.data(), type, comm_, stream_),
              "tucclAllToAllv", comm_);
        break;
    }
  }

  void complete() override {
    if (!cuda_) {
      check(tucclStreamSynchronize(stream_), "tucclStreamSynchronize", comm_);
      return;
    }
    cuda_->synchronize();
    tucclResult_t asyncError = tucclSuccess;
    check(tucclCommGetAsyncError(comm_, &asyncError), "tucclCommGetAsyncError", comm_);
    check(asyncError, "a collective on the stream", comm_);
  }
  void groupStart() override { check(tucclGroupStart(), "tucclGroupStart", comm_); }
  void groupEnd() override { check(tucclGroupEnd(), "tucclGroupEnd", comm_); }

  void barrier() override {
    int32_t one = 1;
    int32_t ranks = 0;
    exchange(&one, sizeof one, &ranks, sizeof ranks, [&](const void* send, void* recv) {
      check(tucclAllReduce(send, recv, 1, tucclInt32, tucclSum, comm_, stream_), "tucclAllReduce (barrier)", comm_);
    });
  }

  double combineTime(double seconds, TimeAverage average) override {
    double combined = 0;
    exchange(&seconds, sizeof seconds, &combined, sizeof combined, [&](const void* send, void* recv) {
      if (average == TimeAverage::Rank0) {
        check(tucclBroadcast(send, recv, 1, tucclFloat64, 0, comm_, stream_), "tucclBroadcast (time)", comm_);
        return;
      }
      const tucclRedOp_t op = average == TimeAverage::Min   ? tucclMin
                              : average == TimeAverage::Max ? tucclMax
                                                            : tucclSum;
      check(tucclAllReduce(send, recv, 1, tucclFloat64, op, comm_, stream_), "tucclAllReduce (time)", comm_);
    });
    return average == TimeAverage::Mean ? combined / nRanks_ : combined;
  }

  int64_t sumOverRanks(int64_t value) override {
    int64_t total = 0;
    exchange(&value, sizeof value, &total, sizeof total, [&](const void* send, void* recv) {
      check(tucclAllReduce(send, recv, 1, tucclInt64, tucclSum, comm_, stream_), "tucclAllReduce (#wrong)", comm_);
    });
    return total;
  }

  void* deviceBuffer(size_t bytes) override { return cuda_ ? cuda_->allocate(bytes) : nullptr; }
  void copyToDevice(void* device, const void* host, size_t bytes) override {
    if (cuda_) cuda_->toDevice(device, host, bytes);
  }
  void copyToHost(void* host, const void* device, size_t bytes) override {
    if (cuda_) cuda_->toHost(host, device, bytes);
  }
  RankInfo rankInfo() override { return cuda_ ? gpuRankInfo(*cuda_, rank_) : localCpuRankInfo(rank_); }

 private:
  /// Runs `call(send, recv)` to completion, on `in` and `out` themselves on the CPU device and on
  /// device copies of them on the CUDA device.
  template <typename Call>
  void exchange(const void* in, size_t inBytes, void* out, size_t outBytes, Call&& call) {
    if (!cuda_) {
      call(in, out);
      complete();
      return;
    }
    void* send = scratch(0, inBytes);
    void* recv = scratch(1, outBytes);
    cuda_->toDevice(send, in, inBytes);
    call(send, recv);
    complete();
    cuda_->toHost(out, recv, outBytes);
  }

  /// Device scratch buffer `which` (0 send, 1 receive) of at least `bytes`, grown as needed.
  void* scratch(int which, size_t bytes) {
    auto& [pointer, size] = scratch_[static_cast<size_t>(which)];
    if (pointer == nullptr || size < bytes) {
      size = std::max<size_t>(bytes, 256);
      pointer = cuda_->allocate(size);  // the smaller one stays allocated until the end
    }
    return pointer;
  }

  tucclComm_t comm_;
  tucclStream_t stream_ = nullptr;
  int32_t rank_;
  int32_t nRanks_;
  std::unique_ptr<CudaMemory> cuda_;
  std::array<std::pair<void*, size_t>, 2> scratch_{};
};

/// The communicator's rank and size.
std::pair<int32_t, int32_t> rankAndSize(tucclComm_t comm) {
  int rank = 0;
  int nRanks = 0;
  check(tucclCommUserRank(comm, &rank), "tucclCommUserRank", comm);
  check(tucclCommCount(comm, &nRanks), "tucclCommCount", comm);
  return {rank, nRanks};
}

/// The device memory of a communicator on the CUDA device; nullptr on the CPU device.
std::unique_ptr<CudaMemory> cudaMemoryFor(tucclComm_t comm) {
  tucclDeviceKind_t kind = tucclDeviceCpu;
  check(tucclCommDeviceKind(comm, &kind), "tucclCommDeviceKind", comm);
  if (kind == tucclDeviceCpu) return nullptr;
  int ordinal = 0;
  check(tucclCommCuDevice(comm, &ordinal), "tucclCommCuDevice", comm);
  return std::make_unique<CudaMemory>(ordinal);
}

/// Runs the benchmark on an initialised communicator; the exit status.
int runOnComm(const BenchOptions& options, tucclComm_t comm) {
  const auto [rank, nRanks] = rankAndSize(comm);
  if (Status status = checkRoot(options, nRanks); !status) {
    if (rank == 0) std::cerr << "tuccl-bench: error: " << status.message() << "\n";
    return cli::kExitError;
  }
  TucclBackend backend(comm, rank, nRanks, cudaMemoryFor(comm));
  const int64_t wrong = runBenchmark(options, backend, stdout);
  backend.close();
  return wrong == 0 ? 0 : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  Expected<BenchOptions> options = parseBenchOptions(args);
  if (!options) return cli::reportError("tuccl-bench", options.status());
  if (options->help) {
    std::cout << benchUsage("tuccl-bench");
    return 0;
  }
  // Sizes this machine cannot hold are refused before anything is allocated (or any peer waits).
  if (Status fits = checkHostMemory(*options, availableHostBytes()); !fits) {
    return cli::reportError("tuccl-bench", fits);
  }
  tucclComm_t comm = nullptr;
  if (Status status = callStatus(tucclCommInitFromEnv(&comm), "tucclCommInitFromEnv", nullptr); !status) {
    std::cerr << "tuccl-bench: error: " << status.message() << "\n";
    return kExitFailed;
  }
  int exitStatus = kExitFailed;
  try {
    exitStatus = runOnComm(*options, comm);
  } catch (const StatusError& error) {
    int rank = -1;
    tucclCommUserRank(comm, &rank);
    std::cerr << "tuccl-bench: rank " << rank << ": error: " << error.status().message() << "\n";
    tucclCommAbort(comm);  // peers waiting on this rank fail instead of waiting for the timeout
    return kExitFailed;
  } catch (const std::bad_alloc&) {
    // Memory taken by others since the check: said, not a crash.
    std::cerr << "tuccl-bench: error: cannot allocate the buffers of -e " << formatByteSize(options->maxBytes)
              << " (" << formatBytesForPeople(rankHostBytes(*options)) << " per rank)\n";
    tucclCommAbort(comm);
    return cli::kExitError;
  }
  if (Status status = callStatus(tucclCommDestroy(comm), "tucclCommDestroy", nullptr); !status) {
    std::cerr << "tuccl-bench: error: " << status.message() << "\n";
    return kExitFailed;
  }
  return exitStatus;
}
