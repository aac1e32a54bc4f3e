// Open MPI's collectives timed and checked as tuccl-bench does (cli/bench_driver.h): the same
// flags, loop and nccl-tests output, for bench/compare_cpu_collectives.sh.
//
//   mpirun --oversubscribe -n 4 bench_mpi_collectives allreduce -b 1K -e 256M -f 2
//
// Calls block, so complete() has nothing to wait for. In place is MPI_IN_PLACE; an in-place
// ReduceScatter leaves MPI's result at the start of the buffer, and is moved to the rank's block
// (nccl-tests' layout) inside the call. Out of place, a Broadcast root copies its input into its
// output first (MPI_Bcast works in one buffer). Types: float, double, int32, int64, uint8; ops:
// sum, prod, max, min (MPI has no half, bfloat16 or avg).
//
// sendrecv is MPI_Sendrecv to rank r+1 from rank r-1 (in place MPI_Sendrecv_replace), alltoallv
// MPI_Alltoallv with the benchmark's per-pair counts (cli/bench_report.h; its matrix is symmetric,
// so in place is MPI_IN_PLACE). Their bytes travel unchanged, so they take every type (as the
// unsigned integer of its size).
#include <mpi.h>

#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_driver.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

constexpr int kExitBadInput = 2;  ///< a bad command line or environment (cli/cli.h's kExitError)

int reportError(const Status& status) {
  std::cerr << "bench_mpi_collectives: error: " << status.message() << "\n";
  return kExitBadInput;
}

MPI_Datatype mpiType(DataType type) {
  switch (type) {
    case DataType::Float32:
      return MPI_FLOAT;
    case DataType::Float64:
      return MPI_DOUBLE;
    case DataType::Int32:
      return MPI_INT32_T;
    case DataType::Int64:
      return MPI_INT64_T;
    case DataType::Uint8:
      return MPI_UINT8_T;
    case DataType::Int8:
      return MPI_INT8_T;
    case DataType::Uint32:
      return MPI_UINT32_T;
    case DataType::Uint64:
      return MPI_UINT64_T;
    case DataType::Float16:
    case DataType::BFloat16:
    case DataType::Float8E4M3:
    case DataType::Float8E5M2:
      break;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
    case ReduceOp::Avg:
      break;
  }
  return MPI_OP_NULL;
}

/// The type a point-to-point pattern moves: its bytes, as the unsigned MPI integer of the size.
MPI_Datatype mpiBytesType(DataType type) {
  switch (dataTypeSize(type)) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    default:
      return MPI_UINT64_T;
  }
}

/// What this benchmark cannot run, named by the flag that asked for it.
Status checkSupported(const BenchOptions& options) {
  for (DataType type : options.types) {
    if (!options.collective.pattern() && mpiType(type) == MPI_DATATYPE_NULL) {
      return makeError(ErrorCode::Unsupported, "option -d (--datatype): MPI has no " +
                                                   std::string(ncclTestsTypeName(type)) +
                                                   " type; give float, double, int32, int64 or uint8");
    }
  }
  for (ReduceOp op : options.ops) {
    if (benchIsReduction(options.collective) && mpiOp(op) == MPI_OP_NULL) {
      return makeError(ErrorCode::Unsupported,
                       "option -o (--op): MPI has no avg; give sum, prod, max or min");
    }
  }
  if (options.aggIters > 1) {
    return makeError(ErrorCode::Unsupported,
                     "option -m (--agg_iters): MPI's blocking collectives have no groups");
  }
  return {};
}

int countOf(uint64_t elements) { return static_cast<int>(elements); }

class MpiBackend final : public BenchBackend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nRanks_);
  }
  int32_t rank() const override { return rank_; }
  int32_t nRanks() const override { return nRanks_; }

  void allGatherBytes(const void* mine, void* all, size_t bytes) override {
    MPI_Allgather(mine, countOf(bytes), MPI_BYTE, all, countOf(bytes), MPI_BYTE, MPI_COMM_WORLD);
  }

  void start(const BenchCall& b) override {
    const CollectiveCall& c = b.call;
    const MPI_Datatype type = mpiType(c.dataType);
    const MPI_Op op = mpiOp(c.op);
    const int count = countOf(b.counts.param);
    if (std::optional<PeerPattern> pattern = b.collective.pattern()) {
      startPeers(*pattern, b, count, mpiBytesType(c.dataType));
      return;
    }
    switch (*b.collective.collective()) {
      case Collective::AllReduce:
        MPI_Allreduce(c.inPlace ? MPI_IN_PLACE : b.send, b.recv, count, type, op, MPI_COMM_WORLD);
        break;
      case Collective::AllGather:
        MPI_Allgather(c.inPlace ? MPI_IN_PLACE : b.send, count, type, b.recv, count, type, MPI_COMM_WORLD);
        break;
      case Collective::AllToAll:
        MPI_Alltoall(c.inPlace ? MPI_IN_PLACE : b.send, count, type, b.recv, count, type, MPI_COMM_WORLD);
        break;
      case Collective::Reduce: {
        const bool inPlaceRoot = c.inPlace && rank_ == c.root;
        MPI_Reduce(inPlaceRoot ? MPI_IN_PLACE : b.send, b.recv, count, type, op, c.root, MPI_COMM_WORLD);
        break;
      }
      case Collective::Broadcast:
        if (!c.inPlace && rank_ == c.root)
          std::memcpy(b.recv, b.send, b.counts.param * dataTypeSize(c.dataType));
        MPI_Bcast(b.recv, count, type, c.root, MPI_COMM_WORLD);
        break;
      case Collective::ReduceScatter:
        if (!c.inPlace) {
          MPI_Reduce_scatter_block(b.send, b.recv, count, type, op, MPI_COMM_WORLD);
        } else {
          MPI_Reduce_scatter_block(MPI_IN_PLACE, b.send, count, type, op, MPI_COMM_WORLD);
          std::memmove(b.recv, b.send, b.counts.param * dataTypeSize(c.dataType));
        }
        break;
    }
  }

  void startPeers(PeerPattern pattern, const BenchCall& b, int count, MPI_Datatype type) {
    const bool inPlace = b.call.inPlace;
    switch (pattern) {
      case PeerPattern::SendRecv: {
        const int next = (rank_ + 1) % nRanks_;
        const int previous = (rank_ - 1 + nRanks_) % nRanks_;
        if (inPlace) {
          MPI_Sendrecv_replace(b.recv, count, type, next, 0, previous, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Sendrecv(b.send, count, type, next, 0, b.recv, count, type, previous, 0, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
        }
        break;
      }
      case PeerPattern::AllToAllv:
        // The layout's counts, as MPI's ints (converted on every call; no allocation after the first).
        counts_.assign(b.peers.sendCounts.begin(), b.peers.sendCounts.end());
        displs_.assign(b.peers.sendDispls.begin(), b.peers.sendDispls.end());
        MPI_Alltoallv(inPlace ? MPI_IN_PLACE : b.send, counts_.data(), displs_.data(), type, b.recv,
                      counts_.data(), displs_.data(), type, MPI_COMM_WORLD);
        break;
    }
  }

  void complete() override {}
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  double combineTime(double seconds, TimeAverage average) override {
    if (average == TimeAverage::Rank0) {
      MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      return seconds;
    }
    const MPI_Op op = average == TimeAverage::Min ? MPI_MIN : average == TimeAverage::Max ? MPI_MAX : MPI_SUM;
    double combined = 0;
    MPI_Allreduce(&seconds, &combined, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return average == TimeAverage::Mean ? combined / nRanks_ : combined;
  }

  int64_t sumOverRanks(int64_t value) override {
    int64_t total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return total;
  }

 private:
  int rank_ = 0;
  int nRanks_ = 0;
  std::vector<int> counts_, displs_;  ///< AllToAllv's, sent and received alike (symmetric)
};

/// The options, or the exit status of a bad command line (reported by rank 0).
int run(const std::vector<std::string>& args) {
  MpiBackend backend;
  const bool reporter = backend.rank() == 0;
  Expected<BenchOptions> options = parseBenchOptions(args);
  Status status = options.ok() ? checkSupported(*options) : options.status();
  if (status.ok() && !options->help) status = checkRoot(*options, backend.nRanks());
  if (!status) return reporter ? reportError(status) : kExitBadInput;
  if (options->help) {
    if (reporter) std::cout << benchUsage("bench_mpi_collectives");
    return 0;
  }
  return runBenchmark(*options, backend, stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int exitStatus = run(std::vector<std::string>(argv + 1, argv + argc));
  MPI_Finalize();
  return exitStatus;
}
