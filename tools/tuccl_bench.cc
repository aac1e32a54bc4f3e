// tuccl-bench: nccl-tests for libtuccl. One rank per process, rank and size from the launcher
// (tucclCommInitFromEnv): `tuccl-run -n 4 -- tuccl-bench allreduce -b 8 -e 128M -f 2`. Rank 0
// prints nccl-tests' output; every rank checks its own results (tools/bench_driver.h runs the
// loop, this file is libtuccl's side of it).
//
// Calls are stream-ordered: the timed calls are enqueued on one CPU stream (tucclStreamCreate)
// and waited for with one tucclStreamSynchronize. The barrier is an AllReduce of one integer;
// times are combined over ranks with an AllReduce (sum, min or max) or a Broadcast of rank 0's,
// the wrong-element counts with an AllReduce of an int64.
//
// Buffers are host memory, so the communicator must be on the CPU device. Exit status: 0, 1 when
// a result was wrong or a libtuccl call failed (its tucclGetErrorString and tucclGetLastError are
// printed), 2 for a bad command line.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "tools/bench_driver.h"
#include "tools/cli.h"
#include "tuccl/tuccl.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

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

/// libtuccl on the CPU device, one communicator and one stream.
class TucclBackend final : public BenchBackend {
 public:
  TucclBackend(tucclComm_t comm, int32_t rank, int32_t nRanks) : comm_(comm), rank_(rank), nRanks_(nRanks) {
    check(tucclStreamCreate(&stream_), "tucclStreamCreate", comm_);
  }
  // A run that failed leaves the stream to the process's exit: destroying it would wait for calls
  // that only main's tucclCommAbort ends.
  ~TucclBackend() override = default;
  TucclBackend(const TucclBackend&) = delete;
  TucclBackend& operator=(const TucclBackend&) = delete;

  /// Destroys the stream once every call completed.
  void close() {
    tucclStream_t stream = stream_;
    stream_ = nullptr;
    check(tucclStreamDestroy(stream), "tucclStreamDestroy", comm_);
  }

  int32_t rank() const override { return rank_; }
  int32_t nRanks() const override { return nRanks_; }

  void allGatherBytes(const void* mine, void* all, size_t bytes) override {
    check(tucclAllGather(mine, all, bytes, tucclUint8, comm_, stream_), "tucclAllGather", comm_);
    complete();
  }

  void start(const BenchCall& b) override {
    const CollectiveCall& c = b.call;
    const auto count = static_cast<size_t>(c.count);
    const tucclDataType_t type = toTuccl(c.dataType);
    const tucclRedOp_t op = toTuccl(c.op);
    switch (c.collective) {
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

  void complete() override { check(tucclStreamSynchronize(stream_), "tucclStreamSynchronize", comm_); }
  void groupStart() override { check(tucclGroupStart(), "tucclGroupStart", comm_); }
  void groupEnd() override { check(tucclGroupEnd(), "tucclGroupEnd", comm_); }

  void barrier() override {
    int32_t one = 1;
    int32_t ranks = 0;
    check(tucclAllReduce(&one, &ranks, 1, tucclInt32, tucclSum, comm_, stream_), "tucclAllReduce (barrier)",
          comm_);
    complete();
  }

  double combineTime(double seconds, TimeAverage average) override {
    double combined = 0;
    if (average == TimeAverage::Rank0) {
      check(tucclBroadcast(&seconds, &combined, 1, tucclFloat64, 0, comm_, stream_), "tucclBroadcast (time)",
            comm_);
    } else {
      const tucclRedOp_t op = average == TimeAverage::Min   ? tucclMin
                              : average == TimeAverage::Max ? tucclMax
                                                            : tucclSum;
      check(tucclAllReduce(&seconds, &combined, 1, tucclFloat64, op, comm_, stream_), "tucclAllReduce (time)",
            comm_);
    }
    complete();
    return average == TimeAverage::Mean ? combined / nRanks_ : combined;
  }

  int64_t sumOverRanks(int64_t value) override {
    int64_t total = 0;
    check(tucclAllReduce(&value, &total, 1, tucclInt64, tucclSum, comm_, stream_), "tucclAllReduce (#wrong)",
          comm_);
    complete();
    return total;
  }

 private:
  tucclComm_t comm_;
  tucclStream_t stream_ = nullptr;
  int32_t rank_;
  int32_t nRanks_;
};

/// The communicator's rank and size, on the CPU device.
std::pair<int32_t, int32_t> rankAndSize(tucclComm_t comm) {
  int rank = 0;
  int nRanks = 0;
  tucclDeviceKind_t kind = tucclDeviceCpu;
  check(tucclCommUserRank(comm, &rank), "tucclCommUserRank", comm);
  check(tucclCommCount(comm, &nRanks), "tucclCommCount", comm);
  check(tucclCommDeviceKind(comm, &kind), "tucclCommDeviceKind", comm);
  if (kind != tucclDeviceCpu) {
    throwIfError(
        makeError(ErrorCode::Unsupported,
                  "the communicator is on the CUDA device, but tuccl-bench's buffers are host memory: "
                  "it runs on the CPU device only"));
  }
  return {rank, nRanks};
}

/// Runs the benchmark on an initialised communicator; the exit status.
int runOnComm(const BenchOptions& options, tucclComm_t comm) {
  const auto [rank, nRanks] = rankAndSize(comm);
  if (Status status = checkRoot(options, nRanks); !status) {
    if (rank == 0) std::cerr << "tuccl-bench: error: " << status.message() << "\n";
    return cli::kExitError;
  }
  TucclBackend backend(comm, rank, nRanks);
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
  }
  if (Status status = callStatus(tucclCommDestroy(comm), "tucclCommDestroy", nullptr); !status) {
    std::cerr << "tuccl-bench: error: " << status.message() << "\n";
    return kExitFailed;
  }
  return exitStatus;
}
