// tuccl-bench: nccl-tests for libtuccl. One rank per process, rank and size from the launcher
// (tucclCommInitFromEnv): `tuccl-run -n 4 -- tuccl-bench allreduce -b 8 -e 128M -f 2`. Rank 0
// prints nccl-tests' output (tools/bench_report.h); every rank checks its own results
// (tools/bench_check.h).
//
// Per size, as nccl-tests' BenchTime: one untimed call, a barrier, `iters` × `agg` calls enqueued
// on a CPU stream and one tucclStreamSynchronize (the time per call across ranks per -a), then
// `-c` checked calls on fresh data whose wrong elements are summed over the ranks.
//
// Buffers are host memory, so the communicator must be on the CPU device. Exit status: 0, 1 when
// a result was wrong or a libtuccl call failed (its tucclGetErrorString and tucclGetLastError are
// printed), 2 for a bad command line.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "kernelgen/host_buffer.h"
#include "tools/bench_check.h"
#include "tools/bench_report.h"
#include "tools/cli.h"
#include "tuccl/tuccl.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

constexpr int kExitFailed = 1;  ///< a wrong result or a failed libtuccl call

/// The check iteration nccl-tests fills the timed calls' data with.
constexpr uint64_t kTimedDataSeed = 99;

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
    case DataType::Float32: return tucclFloat32;
    case DataType::Float16: return tucclFloat16;
    case DataType::BFloat16: return tucclBfloat16;
    case DataType::Float64: return tucclFloat64;
    case DataType::Int32: return tucclInt32;
    case DataType::Int64: return tucclInt64;
    case DataType::Uint8: return tucclUint8;
  }
  return tucclNumTypes;
}

tucclRedOp_t toTuccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return tucclSum;
    case ReduceOp::Prod: return tucclProd;
    case ReduceOp::Min: return tucclMin;
    case ReduceOp::Max: return tucclMax;
    case ReduceOp::Avg: return tucclAvg;
  }
  return tucclNumOps;
}

/// The CPU's model name (/proc/cpuinfo), the "device" of a CPU rank.
std::string cpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "host memory";
}

/// One rank's "# Rank" line as fixed-size bytes, all-gathered to rank 0.
struct RankRecord {
  int32_t pid = 0;
  std::array<char, 64> host{};
  std::array<char, 188> device{};
};

RankRecord thisRank() {
  RankRecord record;
  record.pid = static_cast<int32_t>(getpid());
  gethostname(record.host.data(), record.host.size() - 1);
  const std::string model = cpuModelName();
  std::strncpy(record.device.data(), model.c_str(), record.device.size() - 1);
  return record;
}

/// One collective call of the benchmark: what it is and where its buffers are.
struct BenchCall {
  CollectiveCall call;  ///< count: nccl-tests' param count
  CollectiveCounts counts;
  void* send = nullptr;
  void* recv = nullptr;
};

class Bench {
 public:
  Bench(const BenchOptions& options, tucclComm_t comm, tucclStream_t stream, int32_t rank, int32_t nRanks)
      : options_(options), comm_(comm), stream_(stream), rank_(rank), nRanks_(nRanks),
        send_(std::max<uint64_t>(options.maxBytes, 1)), recv_(std::max<uint64_t>(options.maxBytes, 1)) {}

  /// Prints the devices, the column header, every row and the footer (rank 0); returns the wrong
  /// elements of every rank.
  int64_t run() {
    printDevices();
    print(formatColumnHeader());
    for (DataType type : options_.types)
      for (std::optional<ReduceOp> op : benchOps(options_))
        for (int32_t root : benchRoots(options_, nRanks_)) runSeries(type, op, root);
    print(summary_.formatFooter());
    return summary_.wrong();
  }

 private:
  void print(const std::string& text) const {
    if (rank_ != 0) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  void printDevices() {
    const RankRecord mine = thisRank();
    std::vector<RankRecord> all(static_cast<size_t>(nRanks_));
    check(tucclAllGather(&mine, all.data(), sizeof(RankRecord), tucclUint8, comm_, stream_), "tucclAllGather", comm_);
    synchronize();
    std::vector<RankInfo> ranks;
    for (int32_t r = 0; r < nRanks_; ++r) {
      const RankRecord& record = all[static_cast<size_t>(r)];
      ranks.push_back({r, record.pid, record.host.data(), 0, "cpu", record.device.data()});
    }
    print(formatDevices(ranks));
  }

  /// nccl-tests' TimeTest: warm-up at the largest and the smallest size, then one row per size.
  void runSeries(DataType type, std::optional<ReduceOp> op, int32_t root) {
    barrier();
    warmUp(type, op, root, options_.maxBytes);
    warmUp(type, op, root, options_.minBytes);
    for (uint64_t bytes : benchSizes(options_)) {
      const BenchCall out = makeCall(type, op, root, bytes, false);
      print(formatRowStart(out.counts.rowBytes(dataTypeSize(type)), out.counts.param, type, op, root));
      benchTime(out);
      benchTime(makeCall(type, op, root, bytes, true));
      print("\n");
    }
  }

  void warmUp(DataType type, std::optional<ReduceOp> op, int32_t root, uint64_t bytes) {
    const BenchCall call = makeCall(type, op, root, bytes, false);
    for (int32_t i = 0; i < options_.warmupIters; ++i) launch(call);
    synchronize();
  }

  /// The call for one size; in place, the buffers are views of the receive buffer (nccl-tests).
  BenchCall makeCall(DataType type, std::optional<ReduceOp> op, int32_t root, uint64_t bytes, bool inPlace) {
    BenchCall b;
    const int32_t typeSize = dataTypeSize(type);
    b.counts = collectiveCounts(options_.collective, bytes, typeSize, nRanks_);
    b.call = {options_.collective, nRanks_, root, type, op.value_or(ReduceOp::Sum),
              static_cast<int64_t>(b.counts.param), inPlace};
    const uint64_t rankOffset = static_cast<uint64_t>(rank_) * static_cast<uint64_t>(typeSize);
    b.send = inPlace ? recv_.data() + b.counts.sendInPlaceOffset * rankOffset : send_.data();
    b.recv = inPlace ? recv_.data() + b.counts.recvInPlaceOffset * rankOffset : recv_.data();
    return b;
  }

  /// Enqueues the call (with -z 1: and waits for it and every rank).
  void launch(const BenchCall& b) {
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
        check(tucclReduceScatter(b.send, b.recv, count, type, op, comm_, stream_), "tucclReduceScatter", comm_);
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
    if (options_.blocking) {
      synchronize();
      barrier();
    }
  }

  void synchronize() { check(tucclStreamSynchronize(stream_), "tucclStreamSynchronize", comm_); }

  /// Every rank reached this point: an AllReduce of one integer, completed.
  void barrier() {
    int32_t one = 1;
    int32_t ranks = 0;
    check(tucclAllReduce(&one, &ranks, 1, tucclInt32, tucclSum, comm_, stream_), "tucclAllReduce (barrier)", comm_);
    synchronize();
  }

  /// nccl-tests' BenchTime for one half of a row: time, then check; prints the half.
  void benchTime(const BenchCall& b) {
    if (options_.checkIters > 0) prepareData(b, kTimedDataSeed);
    launch(b);
    synchronize();
    barrier();
    const double seconds = timedSeconds(b);
    const Bandwidths bw = bandwidths(b.call.collective, b.counts.param, dataTypeSize(b.call.dataType), nRanks_,
                                     seconds);
    barrier();
    std::optional<int64_t> wrong;
    for (int32_t c = 0; c < options_.checkIters; ++c) {
      wrong = checkedWrongElements(b);
      if (*wrong != 0) break;
    }
    summary_.add(bw.busGBps, wrong);
    print(formatHalf(seconds * 1e6, bw, wrong));
  }

  /// The time per call of `iters` × `agg` calls enqueued back to back, over the ranks per -a.
  double timedSeconds(const BenchCall& b) {
    const auto start = std::chrono::steady_clock::now();
    for (int32_t i = 0; i < options_.iters; ++i) {
      if (options_.aggIters > 1) check(tucclGroupStart(), "tucclGroupStart", comm_);
      for (int32_t a = 0; a < options_.aggIters; ++a) launch(b);
      if (options_.aggIters > 1) check(tucclGroupEnd(), "tucclGroupEnd", comm_);
    }
    synchronize();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return acrossRanks(elapsed.count() / (static_cast<double>(options_.iters) * options_.aggIters));
  }

  /// The rank's time combined over ranks: rank 0's, the mean, the minimum or the maximum.
  double acrossRanks(double seconds) {
    double combined = 0;
    if (options_.average == TimeAverage::Rank0) {
      check(tucclBroadcast(&seconds, &combined, 1, tucclFloat64, 0, comm_, stream_), "tucclBroadcast (time)", comm_);
    } else {
      const tucclRedOp_t op = options_.average == TimeAverage::Min   ? tucclMin
                              : options_.average == TimeAverage::Max ? tucclMax
                                                                     : tucclSum;
      check(tucclAllReduce(&seconds, &combined, 1, tucclFloat64, op, comm_, stream_), "tucclAllReduce (time)", comm_);
    }
    synchronize();
    return options_.average == TimeAverage::Mean ? combined / nRanks_ : combined;
  }

  /// Poisons the receive buffer and writes the rank's input of check iteration `seed`.
  void prepareData(const BenchCall& b, uint64_t seed) {
    const uint64_t typeSize = static_cast<uint64_t>(dataTypeSize(b.call.dataType));
    std::memset(recv_.data(), HostBuffer::kPoison, std::max(b.counts.send, b.counts.recv) * typeSize);
    if (!b.call.inPlace) std::memset(send_.data(), HostBuffer::kPoison, b.counts.send * typeSize);
    fillBenchInput(b.call, rank_, seed, b.send);
  }

  /// One call on fresh data; the wrong elements of every rank, summed.
  int64_t checkedWrongElements(const BenchCall& b) {
    const uint64_t seed = ++checkIteration_;
    prepareData(b, seed);
    launch(b);
    synchronize();
    int64_t wrong = countWrongElements(b.call, rank_, seed, b.recv);
    int64_t total = 0;
    check(tucclAllReduce(&wrong, &total, 1, tucclInt64, tucclSum, comm_, stream_), "tucclAllReduce (#wrong)", comm_);
    synchronize();
    return total;
  }

  const BenchOptions& options_;
  tucclComm_t comm_;
  tucclStream_t stream_;
  int32_t rank_;
  int32_t nRanks_;
  HostBuffer send_, recv_;
  BenchSummary summary_;
  uint64_t checkIteration_ = 0;
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
    throwIfError(makeError(ErrorCode::Unsupported,
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
  if (rank == 0) std::fputs(formatRunHeader(options).c_str(), stdout);
  tucclStream_t stream = nullptr;
  check(tucclStreamCreate(&stream), "tucclStreamCreate", comm);
  const int64_t wrong = Bench(options, comm, stream, rank, nRanks).run();
  check(tucclStreamDestroy(stream), "tucclStreamDestroy", comm);
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
