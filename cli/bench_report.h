// nccl-tests' command line and output, for tuccl-bench and the comparison benchmarks in bench/
// (Gloo, Open MPI): the same flags, the same size series, the same byte / element conventions per
// collective, the same bandwidth figures and the same text, so one parser (tune/nccl_tests_output.h,
// the tuner's command profiler, scripts written for nccl-tests) reads all of them.
//
// In:  the command line (COLLECTIVE [flags]); per result the size, time and wrong-element count.
// Out: BenchOptions, the sizes to run, per-collective counts and in-place offsets, algbw / busbw,
//      and the header, rows and footer exactly as nccl-tests' all_reduce_perf prints them.
//
// Conventions follow nccl-tests (src/common.cu and each collective's GetCollByteCount / GetBw),
// with n ranks and `bytes` one size of the series:
//   AllReduce, Broadcast, Reduce   count = bytes / typeSize on every buffer; busbw = algbw × 2(n-1)/n
//                                  (AllReduce) or × 1
//   AllGather                      sendcount = count / n, receive n × sendcount (the row's size is
//                                  the total received); algbw = n × sendcount bytes / time
//   ReduceScatter                  send n × recvcount, recvcount = count / n
//   AllToAll                       n × (count / n) on both sides, count / n per pair
//   busbw factors: support/bus_bandwidth.h.
//
// Besides the collectives (support/vocabulary.h's Collective, which the compiler, plans and tuner
// share), the benchmark runs two point-to-point patterns of its own (PeerPattern; nothing else of
// the project knows them, so they are no Collective):
//   SendRecv    nccl-tests' sendrecv_perf (src/sendrecv.cu): in one group every rank r sends
//               count = bytes / typeSize elements to (r+1) % n and receives count from
//               (r-1+n) % n. send = recv = param = count, no in-place offset; algbw = count ×
//               typeSize / time, busbw factor 1. In place, the send and the receive buffer are one
//               buffer (the receive buffer), as nccl-tests has it; the receive may then overwrite
//               what is still being sent, so, as nccl-tests (SendRecvInitData: reportErrors = 0
//               in place), the in-place half is timed but not checked: its #wrong is "N/A".
//               nccl-tests' sendrecv_perf prints its -o op in the redop column although nothing is
//               reduced; we print "none" (as for AllGather and AllToAll) and ignore -o.
//   AllToAllv   ours (nccl-tests 2.19 has no alltoallv_perf): alltoall_perf's sizes — count =
//               bytes / typeSize, b = count / n, every rank sends and receives T = n × b elements,
//               param = b (printed), the size printed is T × typeSize — but the pairs' counts
//               vary: ranks i and j exchange part s = (i + j) % n of T split in proportion
//               1 : 2 : ... : n, c(s) = F(s + 1) - F(s) with F(s) = floor(T × s(s+1) / (n(n+1))),
//               in both directions (the matrix is symmetric). As s runs over every part once for
//               a fixed i (or j), every rank sends and receives exactly T, like alltoall, so the
//               bandwidths compare: algbw = T × typeSize / time, busbw factor (n-1)/n (alltoall's,
//               although a rank's share to itself is not exactly 1/n here). Blocks are packed by
//               peer: the block to (and from) rank j starts at the sum of the counts of the ranks
//               below j. In place, both are the receive buffer (sendcounts = recvcounts, so each block is
//               exchanged in its place, as MPI_IN_PLACE defines it); as for SendRecv the in-place
//               half is timed, not checked.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl::bench {

/// -a: which rank's time a row reports (nccl-tests: 0 = rank 0, 1 = mean, 2 = min, 3 = max).
enum class TimeAverage : uint8_t { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

/// The point-to-point patterns the benchmark runs beside the collectives (see above).
enum class PeerPattern : uint8_t { SendRecv, AllToAllv };

/// What a benchmark runs: a Collective or a PeerPattern. Converts implicitly from either, and
/// compares equal to the one it holds.
class BenchCollective {
 public:
  constexpr BenchCollective(Collective collective) : value_(collective) {}  // NOLINT: implicit by design
  constexpr BenchCollective(PeerPattern pattern) : value_(pattern) {}       // NOLINT: implicit by design
  /// The collective, or nullopt for a point-to-point pattern.
  constexpr std::optional<Collective> collective() const {
    if (const Collective* c = std::get_if<Collective>(&value_)) return *c;
    return std::nullopt;
  }
  /// The point-to-point pattern, or nullopt for a collective.
  constexpr std::optional<PeerPattern> pattern() const {
    if (const PeerPattern* p = std::get_if<PeerPattern>(&value_)) return *p;
    return std::nullopt;
  }
  constexpr bool operator==(const BenchCollective&) const = default;

 private:
  std::variant<Collective, PeerPattern> value_;
};

/// The command-line name: "allreduce", ..., "alltoall", "sendrecv", "alltoallv".
std::string benchCollectiveName(BenchCollective collective);
/// Reads a command-line name: the collectives as parseCollective does (NCCL's and MSCCL's
/// spellings), "sendrecv" and "alltoallv" in any case, with or without '_'.
std::optional<BenchCollective> parseBenchCollective(std::string_view name);
/// Whether the collective takes a root (-r) / a reduction (-o): never for a point-to-point pattern.
bool benchHasRoot(BenchCollective collective);
bool benchIsReduction(BenchCollective collective);
/// Whether the in-place half is checked: not for the point-to-point patterns, whose in-place
/// receives may overwrite what is still being sent (nccl-tests' sendrecv reports "N/A" there).
bool checksInPlace(BenchCollective collective);

/// The command line, with nccl-tests' defaults.
struct BenchOptions {
  BenchCollective collective = Collective::AllReduce;
  uint64_t minBytes = 32ull << 20;                 ///< -b
  uint64_t maxBytes = 32ull << 20;                 ///< -e
  uint64_t stepBytes = 1ull << 20;                 ///< -i: increment when stepFactor is 1
  uint64_t stepFactor = 1;                         ///< -f: multiplication factor (> 1 replaces -i)
  int32_t iters = 20;                              ///< -n: timed iterations per size
  int32_t warmupIters = 1;                         ///< -w
  int32_t aggIters = 1;                            ///< -m: calls grouped (tucclGroupStart/End) per iteration
  int32_t runCycles = 1;                           ///< -N: the series of sizes, run and printed this many times
  int32_t checkIters = 1;                          ///< -c: checked iterations per size (0: no check, "N/A")
  bool blocking = false;                           ///< -z: wait for completion and barrier after each call
  TimeAverage average = TimeAverage::Mean;         ///< -a
  std::vector<DataType> types{DataType::Float32};  ///< -d (all: every type libtuccl supports)
  std::vector<ReduceOp> ops{ReduceOp::Sum};        ///< -o (all: sum, prod, max, min, avg)
  int32_t root = 0;                                ///< -r: -1 (or "all") runs every rank as the root in turn
  int32_t nThreads = 1;                            ///< -t: accepted, only 1
  int32_t nGpus = 1;                               ///< -g: accepted, only 1
  bool help = false;                               ///< -h
};

/// Parses `COLLECTIVE [flags]` (the arguments after the program name). Flags take their value as
/// the next argument or attached (-b8, --minbytes=8); sizes accept K/M/G suffixes
/// (support/text_values.h). Errors are InvalidArgument naming the flag and the value.
Expected<BenchOptions> parseBenchOptions(std::span<const std::string> args);
/// The --help text.
std::string benchUsage(std::string_view program);

/// What one rank allocates in host memory: its send and receive buffers, each of the largest
/// size (-e).
uint64_t rankHostBytes(const BenchOptions& options);
/// This machine's memory available to new allocations (Linux: /proc/meminfo's MemAvailable,
/// else the free physical pages); 0 when it cannot be read.
uint64_t availableHostBytes();
/// Whether one rank's buffers fit `available` bytes (0: not known, so any size is let through):
/// InvalidArgument naming -e, what a rank needs and what the machine has, before anything is
/// allocated.
Status checkHostMemory(const BenchOptions& options, uint64_t available);

/// Checks what depends on the communicator: a root (-r) inside [0, nRanks).
Status checkRoot(const BenchOptions& options, int32_t nRanks);

/// The sizes (bytes) of the series: minBytes, then × stepFactor (or + stepBytes) while <= maxBytes.
std::vector<uint64_t> benchSizes(const BenchOptions& options);
/// The roots a collective runs with: {-1} without a root, every rank for -r -1, else {root}.
std::vector<int32_t> benchRoots(const BenchOptions& options, int32_t nRanks);
/// The operations a collective runs with: {nullopt} ("none") for collectives that do not reduce.
std::vector<std::optional<ReduceOp>> benchOps(const BenchOptions& options);

/// Element counts of one size (nccl-tests' GetCollByteCount). In place, rank r's send buffer is
/// the receive buffer at r × sendInPlaceOffset, its receive buffer at r × recvInPlaceOffset.
struct CollectiveCounts {
  uint64_t send = 0;   ///< elements of the send buffer
  uint64_t recv = 0;   ///< elements of the receive buffer
  uint64_t param = 0;  ///< the count passed to the call (and printed)
  uint64_t sendInPlaceOffset = 0;
  uint64_t recvInPlaceOffset = 0;
  /// The row's size: the larger buffer in bytes.
  uint64_t rowBytes(int32_t typeSize) const {
    return (send > recv ? send : recv) * static_cast<uint64_t>(typeSize);
  }
};
CollectiveCounts collectiveCounts(BenchCollective collective, uint64_t bytes, int32_t typeSize,
                                  int32_t nRanks);

/// AllToAllv's elements between ranks `from` and `to` (either direction: the matrix is
/// symmetric) when alltoall would move `block` elements per pair: part (from + to) % n of
/// n × block split in proportion 1 : 2 : ... : n (see above).
uint64_t allToAllvPairCount(uint64_t block, int32_t nRanks, int32_t from, int32_t to);
/// One rank's counts and displacements (elements) of a point-to-point call, by peer: it sends
/// sendCounts[j] elements at sendDispls[j] to rank j and receives recvCounts[i] at recvDispls[i]
/// from rank i.
struct PeerLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
};
/// AllToAllv's layout of `rank`: blocks packed by peer, sends and receives alike.
PeerLayout allToAllvLayout(uint64_t block, int32_t nRanks, int32_t rank);

struct Bandwidths {
  double algGBps = 0;
  double busGBps = 0;
};
/// nccl-tests' algbw (bytes of the call / time, 1e9 B/s) and busbw for `paramCount` elements.
Bandwidths bandwidths(BenchCollective collective, uint64_t paramCount, int32_t typeSize, int32_t nRanks,
                      double seconds);

/// nccl-tests' type column: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
/// "double", "bfloat16", "f8e4m3", "f8e5m2".
std::string_view ncclTestsTypeName(DataType type);
/// The redop column: the operation, or "none".
std::string_view ncclTestsOpName(std::optional<ReduceOp> op);

/// One rank's "# Rank" line.
struct RankInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  std::string host;
  int32_t device = 0;
  std::string busId = "cpu";  ///< nccl-tests prints the PCI bus id ("0x1b"); the CPU device "cpu"
  std::string deviceName;
};

/// "# nThread 1 nGpus 1 minBytes ... graph: 0", the blocking notice with -z 1, and "#".
std::string formatRunHeader(const BenchOptions& options);
/// "# Using devices" and one line per rank, then "#".
std::string formatDevices(std::span<const RankInfo> ranks);
/// The three column header lines (out-of-place / in-place, names, units).
std::string formatColumnHeader();
/// The row's first columns: size, count, type, redop, root.
std::string formatRowStart(uint64_t bytes, uint64_t count, DataType type, std::optional<ReduceOp> op,
                           int32_t root);
/// nccl-tests' time column: 7 wide, 2 decimals below 100 µs, 1 below 10 ms, none above.
std::string formatTime(double us);
/// One half of a row (out-of-place or in-place): time, algbw, busbw, #wrong ("N/A" unchecked).
std::string formatHalf(double timeUs, const Bandwidths& bw, std::optional<int64_t> wrong);

/// What the footer sums up: every half printed.
class BenchSummary {
 public:
  void add(double busGBps, std::optional<int64_t> wrong);
  int64_t wrong() const { return wrong_; }
  double averageBusGBps() const { return halves_ == 0 ? 0 : busSum_ / halves_; }
  /// "# Out of bounds values : W OK|FAILED", "# Avg bus bandwidth    : X ", "#".
  std::string formatFooter() const;

 private:
  int64_t wrong_ = 0;
  double busSum_ = 0;
  int64_t halves_ = 0;
};

}  // namespace tuccl::bench
