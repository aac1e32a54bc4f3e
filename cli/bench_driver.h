// The benchmark loop of nccl-tests (src/common.cu: TimeTest, BenchTime) over any collective
// library: tuccl-bench drives libtuccl with it, bench/ drives Gloo and Open MPI with it, so every
// library is timed, checked and printed the same way.
//
// In:  the options (bench_report.h) and one rank's BenchBackend: the library under test.
// Out: nccl-tests' output on rank 0 (header, devices, one row per size and type / op / root,
//      footer), and the wrong elements summed over ranks and rows.
//
// Per (type, op, root): warm-up calls at the largest and the smallest size; per size and for
// out-of-place then in-place: an untimed call, a barrier, `iters` × `agg` calls started back to
// back and one complete() (time per call, combined over ranks per -a), a barrier, then `-c`
// checked calls, each on fresh input (bench_check.h) with a poisoned output. In place, the send
// and receive buffers are views of one buffer, at the rank's block where nccl-tests puts them.
// The point-to-point patterns (SendRecv, AllToAllv: bench_report.h) run the same loop; their
// in-place half is timed but not checked (checksInPlace), and prints "N/A".
//
// Failures of the library are thrown as StatusError by the backend and leave runBenchmark.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernelgen/collective_reference.h"
#include "cli/bench_report.h"

namespace tuccl::bench {

/// One call of the benchmark: what it is and where its buffers are. A backend switches on
/// `collective`: for a point-to-point pattern, call.collective means nothing (it is AllReduce)
/// and `call` gives the ranks, datatype, count and in place only.
struct BenchCall {
  BenchCollective collective = Collective::AllReduce;
  CollectiveCall call;  ///< count: nccl-tests' param count (collectiveCounts)
  CollectiveCounts counts;
  /// AllToAllv: this rank's counts and displacements by peer (allToAllvLayout); empty otherwise.
  PeerLayout peers;
  void* send = nullptr;  ///< the buffers the library gets (device memory on a device backend)
  void* recv = nullptr;
  void* hostSend = nullptr;  ///< their host copies, which the driver fills and checks (== send, recv
  void* hostRecv = nullptr;  ///< for a library of host memory)
};

/// One rank's handle on the library under test. Every rank calls the same methods in the same
/// order; a failure throws StatusError.
class BenchBackend {
 public:
  virtual ~BenchBackend() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t nRanks() const = 0;
  /// Every rank's `bytes` bytes, by rank, into `all` (nRanks × bytes).
  virtual void allGatherBytes(const void* mine, void* all, size_t bytes) = 0;
  /// Starts one call; a blocking library completes it before returning.
  virtual void start(const BenchCall& call) = 0;
  /// Waits until every started call completed.
  virtual void complete() = 0;
  /// Brackets the -m calls of one iteration (when -m > 1); libraries without groups ignore them.
  virtual void groupStart() {}
  virtual void groupEnd() {}
  /// Returns once every rank called it.
  virtual void barrier() = 0;
  /// `seconds` of every rank combined: rank 0's, the mean, the minimum or the maximum.
  virtual double combineTime(double seconds, TimeAverage average) = 0;
  /// The sum over ranks.
  virtual int64_t sumOverRanks(int64_t value) = 0;

  // The memory the library's calls take. By default host memory: the driver passes its own
  // buffers and no copies are made. A device backend returns device buffers it owns (freed when
  // the backend is), and copies between them and the driver's host copies.
  /// `bytes` of device memory, or nullptr for a library of host memory.
  virtual void* deviceBuffer(size_t bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual void copyToDevice(void* device, const void* host, size_t bytes) {
    (void)device, (void)host, (void)bytes;
  }
  virtual void copyToHost(void* host, const void* device, size_t bytes) {
    (void)host, (void)device, (void)bytes;
  }
  /// This rank's "# Rank" facts (localCpuRankInfo for a library of host memory).
  virtual RankInfo rankInfo();
};

/// Runs every series of `options` on `backend`, printing on rank 0 to `out`; returns the wrong
/// elements of all ranks and rows (0 without checks).
int64_t runBenchmark(const BenchOptions& options, BenchBackend& backend, std::FILE* out);

/// This process's "# Rank" facts: pid, host name, device 0, "cpu" and the CPU's model name.
RankInfo localCpuRankInfo(int32_t rank);

}  // namespace tuccl::bench
