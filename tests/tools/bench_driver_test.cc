// The benchmark loop (cli/bench_driver.h) over an in-process library: ranks are threads and
// every collective is computed from the ranks' buffers by the collectives' reference, so the
// loop's buffers, in-place views, checks, bandwidths and output are tested without libtuccl. A
// library of "device memory" (buffers of its own that the loop copies to and from, as
// tuccl-bench's CUDA device) is one option of it.
#include "cli/bench_driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernelgen/element_values.h"
#include "tune/nccl_tests_output.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

/// What the ranks of one run share.
struct World {
  explicit World(int32_t n) : nRanks(n), sync(n), inputs(n), doubles(n), ints(n), bytes(n), sent(n) {}
  int32_t nRanks;
  std::barrier<> sync;
  std::vector<std::vector<double>> inputs;  ///< each rank's input of the current call
  std::vector<double> doubles;
  std::vector<int64_t> ints;
  std::vector<const void*> bytes;
  std::vector<std::vector<unsigned char>> sent;  ///< each rank's send buffer of the current call
  /// Rank and flat element index of a deliberately wrong output element (-1: none).
  int32_t corruptRank = -1;
  int64_t corruptIndex = 0;
};

/// A blocking library whose collectives are the reference: every rank publishes its input, then
/// writes its output from all of them. Point-to-point patterns copy the bytes of the blocks each
/// rank sends it (a copy of every send buffer is taken first, so in place works too).
class ThreadBackend final : public BenchBackend {
 public:
  ThreadBackend(World& world, int32_t rank, bool deviceMemory = false)
      : world_(world), rank_(rank), deviceMemory_(deviceMemory) {}
  int32_t rank() const override { return rank_; }
  int32_t nRanks() const override { return world_.nRanks; }

  void allGatherBytes(const void* mine, void* all, size_t bytes) override {
    world_.bytes[rank_] = mine;
    world_.sync.arrive_and_wait();
    for (int32_t q = 0; q < world_.nRanks; ++q)
      std::memcpy(static_cast<char*>(all) + q * bytes, world_.bytes[q], bytes);
    world_.sync.arrive_and_wait();
  }

  void start(const BenchCall& b) override {
    ++calls;
    if (deviceMemory_ && (!onDevice(b.send) || !onDevice(b.recv))) ++hostPointers;
    const CollectiveCall& c = b.call;
    const int64_t size = dataTypeSize(c.dataType);
    if (std::optional<PeerPattern> pattern = b.collective.pattern()) return exchange(*pattern, b, size);
    std::vector<double>& mine = world_.inputs[rank_];
    mine.resize(static_cast<size_t>(inputElements(c)));
    // Broadcast reads only the root's input (others' in-place buffers hold anything).
    for (size_t i = 0; i < mine.size(); ++i)
      mine[i] = readElement(c.dataType, static_cast<const char*>(b.send) + static_cast<int64_t>(i) * size);
    world_.sync.arrive_and_wait();
    if (c.collective != Collective::Reduce || rank_ == c.root) {
      const InputElement input = [&](int32_t q, int64_t j) { return world_.inputs[q][j]; };
      for (int64_t i = 0; i < outputElements(c); ++i) {
        double value = referenceElement(c, rank_, i, input);
        if (rank_ == world_.corruptRank && i == world_.corruptIndex) value += 1;
        writeElement(c.dataType, static_cast<char*>(b.recv) + i * size, value);
      }
    }
    world_.sync.arrive_and_wait();
  }

  /// SendRecv: count elements from rank r-1; AllToAllv: b.peers' blocks, where the sender's
  /// layout places them.
  void exchange(PeerPattern pattern, const BenchCall& b, int64_t size) {
    const int32_t n = world_.nRanks;
    const auto elements =
        static_cast<size_t>(pattern == PeerPattern::SendRecv ? b.call.count : b.call.count * n);
    const auto* send = static_cast<const unsigned char*>(b.send);
    world_.sent[rank_].assign(send, send + elements * size);
    world_.sync.arrive_and_wait();
    auto* recv = static_cast<unsigned char*>(b.recv);
    if (pattern == PeerPattern::SendRecv) {
      const std::vector<unsigned char>& from = world_.sent[(rank_ - 1 + n) % n];
      std::copy(from.begin(), from.end(), recv);
    } else {
      for (int32_t q = 0; q < n; ++q) {
        const PeerLayout theirs = allToAllvLayout(b.call.count, n, q);
        const size_t count = b.peers.recvCounts[q];
        EXPECT_EQ(count, theirs.sendCounts[rank_])
            << "rank " << q << " sends what rank " << rank_ << " receives";
        std::memcpy(recv + b.peers.recvDispls[q] * size,
                    world_.sent[q].data() + theirs.sendDispls[rank_] * size, count * size);
      }
    }
    if (rank_ == world_.corruptRank)
      writeElement(b.call.dataType, recv + world_.corruptIndex * size, 100);  // beyond the inputs
    world_.sync.arrive_and_wait();
  }

  void complete() override {}
  void barrier() override { world_.sync.arrive_and_wait(); }

  double combineTime(double seconds, TimeAverage average) override {
    world_.doubles[rank_] = seconds;
    world_.sync.arrive_and_wait();
    double combined = world_.doubles[0];
    for (int32_t q = 1; q < world_.nRanks; ++q) {
      const double x = world_.doubles[q];
      if (average == TimeAverage::Mean) combined += x;
      if (average == TimeAverage::Min) combined = std::min(combined, x);
      if (average == TimeAverage::Max) combined = std::max(combined, x);
    }
    world_.sync.arrive_and_wait();
    return average == TimeAverage::Mean ? combined / world_.nRanks : combined;
  }

  int64_t sumOverRanks(int64_t value) override {
    world_.ints[rank_] = value;
    world_.sync.arrive_and_wait();
    int64_t total = 0;
    for (int64_t x : world_.ints) total += x;
    world_.sync.arrive_and_wait();
    return total;
  }

  // Device memory: buffers of the library's own, poisoned until the loop copies into them.
  void* deviceBuffer(size_t bytes) override {
    if (!deviceMemory_) return nullptr;
    device_.push_back(std::make_unique<std::vector<unsigned char>>(bytes, 0x3C));
    return device_.back()->data();
  }
  void copyToDevice(void* device, const void* host, size_t bytes) override {
    EXPECT_TRUE(onDevice(device) && onDevice(static_cast<char*>(device) + bytes - 1));
    std::memcpy(device, host, bytes);
    ++copies;
  }
  void copyToHost(void* host, const void* device, size_t bytes) override {
    EXPECT_TRUE(onDevice(device) && onDevice(static_cast<const char*>(device) + bytes - 1));
    std::memcpy(host, device, bytes);
    ++copies;
  }
  RankInfo rankInfo() override {
    if (!deviceMemory_) return BenchBackend::rankInfo();
    RankInfo info = localCpuRankInfo(rank_);
    info.device = rank_ % 2;
    info.busId = "0x1b";
    info.deviceName = "Test GPU";
    return info;
  }

  int64_t calls = 0;
  int64_t copies = 0;
  int64_t hostPointers = 0;  ///< calls given a pointer outside the device buffers

 private:
  bool onDevice(const void* pointer) const {
    const auto* at = static_cast<const unsigned char*>(pointer);
    for (const auto& buffer : device_) {
      if (at >= buffer->data() && at < buffer->data() + buffer->size()) return true;
    }
    return false;
  }

  World& world_;
  int32_t rank_;
  bool deviceMemory_;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> device_;
};

struct RunResult {
  std::string output;          ///< rank 0's
  std::vector<int64_t> wrong;  ///< per rank
  std::vector<int64_t> calls;  ///< per rank
  std::vector<int64_t> copies;        ///< per rank, with device memory
  std::vector<int64_t> hostPointers;  ///< per rank, with device memory
};

RunResult runRanks(const std::vector<std::string>& args, int32_t nRanks, int32_t corruptRank = -1,
                   int64_t corruptIndex = 0, bool deviceMemory = false) {
  Expected<BenchOptions> options = parseBenchOptions(args);
  EXPECT_TRUE(options.ok()) << options.status().message();
  World world(nRanks);
  world.corruptRank = corruptRank;
  world.corruptIndex = corruptIndex;
  RunResult result;
  result.wrong.resize(nRanks);
  result.calls.resize(nRanks);
  result.copies.resize(nRanks);
  result.hostPointers.resize(nRanks);
  std::FILE* out = std::tmpfile();
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < nRanks; ++r) {
    threads.emplace_back([&, r] {
      ThreadBackend backend(world, r, deviceMemory);
      result.wrong[r] = runBenchmark(*options, backend, out);
      result.calls[r] = backend.calls;
      result.copies[r] = backend.copies;
      result.hostPointers[r] = backend.hostPointers;
    });
  }
  for (std::thread& t : threads) t.join();
  std::rewind(out);
  char buffer[4096];
  for (size_t got; (got = std::fread(buffer, 1, sizeof buffer, out)) > 0;) result.output.append(buffer, got);
  std::fclose(out);
  return result;
}

TEST(BenchDriver, EveryCollectiveChecksCleanInAndOutOfPlace) {
  for (const char* collective :
       {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"}) {
    RunResult r = runRanks({collective, "-b", "4", "-e", "4K", "-f", "4", "-n", "2", "-w", "1", "-c", "2",
                            "-d", "all", "-o", "all", "-r", "all"},
                           3);
    NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
    ASSERT_TRUE(parsed.ok()) << parsed.error;
    const size_t ops = std::string(collective).find("reduce") != std::string::npos ? 5 : 1;
    const size_t roots =
        std::string(collective) == "broadcast" || std::string(collective) == "reduce" ? 3 : 1;
    EXPECT_EQ(parsed.rows.size(), 6 * 10 * ops * roots) << collective;  // -d all: every datatype but fp8
    for (const NcclTestsRow& row : parsed.rows) {
      EXPECT_EQ(row.outOfPlace.wrong, 0) << collective << " line " << row.line;
      EXPECT_EQ(row.inPlace.wrong, 0) << collective << " line " << row.line;
    }
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    for (int64_t wrong : r.wrong) EXPECT_EQ(wrong, 0) << collective;
  }
}

// A library of device memory gets only its own buffers; the loop's inputs reach them and its
// checks read their results, in place and out of place, for every collective.
TEST(BenchDriver, DeviceMemoryIsCopiedInAndOutAroundTheCheckedCalls) {
  for (const char* collective :
       {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"}) {
    RunResult r = runRanks({collective, "-b", "4", "-e", "1237", "-f", "7", "-n", "2", "-w", "1", "-c", "2",
                            "-d", "all", "-r", "all"},
                           3, -1, 0, true);
    NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
    ASSERT_TRUE(parsed.ok()) << parsed.error;
    EXPECT_FALSE(parsed.rows.empty());
    for (const NcclTestsRow& row : parsed.rows) {
      EXPECT_EQ(row.outOfPlace.wrong, 0) << collective << " line " << row.line;
      EXPECT_EQ(row.inPlace.wrong, 0) << collective << " line " << row.line;
    }
    for (int32_t q = 0; q < 3; ++q) {
      EXPECT_EQ(r.wrong[q], 0) << collective;
      EXPECT_EQ(r.hostPointers[q], 0) << collective << " rank " << q;
      EXPECT_GT(r.copies[q], 0) << collective << " rank " << q;
    }
    EXPECT_NE(r.output.find("device  1 [0x1b] Test GPU"), std::string::npos) << r.output;
  }
  // A wrong element on the device is found through the copy back.
  RunResult r = runRanks({"allreduce", "-b", "64", "-e", "64", "-c", "1"}, 2, 1, 3, true);
  EXPECT_NE(r.output.find("# Out of bounds values : 2 FAILED"), std::string::npos) << r.output;
}

// sendrecv and alltoallv: every element of every rank checked out of place, in any type; the
// in-place half is timed but not checked ("N/A", as nccl-tests' sendrecv); no op, no root.
TEST(BenchDriver, PeerPatternsCheckOutOfPlaceAndSayNotCheckedInPlace) {
  for (const char* pattern : {"sendrecv", "alltoallv"}) {
    for (int32_t nRanks : {1, 3, 4}) {
      RunResult r = runRanks({pattern, "-b", "4", "-e", "4K", "-f", "4", "-n", "2", "-w", "1", "-c", "2",
                              "-d", "all", "-o", "all", "-r", "all"},
                             nRanks);
      NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
      ASSERT_TRUE(parsed.ok()) << parsed.error;
      // 6 sizes × every type, one op, one root.
      EXPECT_EQ(parsed.rows.size(),
                6 * parseBenchOptions(std::vector<std::string>{"sendrecv", "-d", "all"})->types.size())
          << pattern;
      for (const NcclTestsRow& row : parsed.rows) {
        EXPECT_EQ(row.outOfPlace.wrong, 0) << pattern << " line " << row.line;
        EXPECT_FALSE(row.inPlace.wrong.has_value()) << pattern << " line " << row.line;
      }
      EXPECT_NE(r.output.find("    none      -1"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
      for (int64_t wrong : r.wrong) EXPECT_EQ(wrong, 0) << pattern;
    }
  }
}

// The check reads what arrived: one element off on one rank is one wrong element per checked
// half, and device memory is copied in and out as for the collectives.
TEST(BenchDriver, PeerPatternsFindAWrongElementAndRunOnDeviceMemory) {
  for (const char* pattern : {"sendrecv", "alltoallv"}) {
    RunResult r = runRanks({pattern, "-b", "1K", "-e", "4K", "-f", "2", "-c", "1", "-d", "int32"}, 4, 2, 37);
    EXPECT_NE(r.output.find("# Out of bounds values : 3 FAILED"), std::string::npos) << r.output;
    for (int64_t wrong : r.wrong) EXPECT_EQ(wrong, 3) << pattern;
    r = runRanks({pattern, "-b", "4", "-e", "1237", "-f", "7", "-n", "2", "-c", "2", "-d", "all"}, 3, -1, 0,
                 true);
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
    for (int32_t q = 0; q < 3; ++q) {
      EXPECT_EQ(r.hostPointers[q], 0) << pattern << " rank " << q;
      EXPECT_GT(r.copies[q], 0) << pattern << " rank " << q;
    }
  }
  // The sizes and bandwidths: sendrecv's count is the size / type size at factor 1, alltoallv's
  // alltoall's count per pair, n × that the size.
  RunResult r = runRanks({"sendrecv", "-b", "1K", "-e", "1K", "-d", "int32"}, 4);
  NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
  ASSERT_TRUE(parsed.ok() && parsed.rows.size() == 1u) << r.output;
  EXPECT_EQ(parsed.rows[0].bytes, 1024u);
  EXPECT_EQ(parsed.rows[0].count, 256u);
  EXPECT_DOUBLE_EQ(parsed.rows[0].outOfPlace.algBwGBps, parsed.rows[0].outOfPlace.busBwGBps);
  r = runRanks({"alltoallv", "-b", "1000", "-e", "1000", "-d", "int32"}, 3);
  parsed = parseNcclTestsOutput(r.output);
  ASSERT_TRUE(parsed.ok() && parsed.rows.size() == 1u) << r.output;
  EXPECT_EQ(parsed.rows[0].bytes, 996u);  // 3 × 83 int32
  EXPECT_EQ(parsed.rows[0].count, 83u);
}

TEST(BenchDriver, RowsFollowNcclTestsConventions) {
  RunResult r = runRanks({"allgather", "-b", "1K", "-e", "4K", "-f", "2", "-d", "int32"}, 4);
  NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  ASSERT_EQ(parsed.rows.size(), 3u);
  EXPECT_EQ(parsed.rows[0].bytes, 1024u);
  EXPECT_EQ(parsed.rows[0].count, 64u);  // per-rank send count
  EXPECT_EQ(parsed.rows[0].type, "int32");
  EXPECT_NE(r.output.find("int32    none      -1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("#  Rank  3 Group  0 Pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor)"),
            std::string::npos);
  ASSERT_TRUE(parsed.avgBusBwGBps.has_value());
}

TEST(BenchDriver, WrongElementsAreSummedOverRanksAndFailTheRun) {
  // Rank 2's element 5 is off on every call; 2 ranks' rows of 3 sizes, both halves.
  RunResult r = runRanks({"allreduce", "-b", "64", "-e", "256", "-f", "2", "-c", "3"}, 4, 2, 5);
  NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  ASSERT_EQ(parsed.rows.size(), 3u);
  for (const NcclTestsRow& row : parsed.rows) {
    EXPECT_EQ(row.outOfPlace.wrong, 1);
    EXPECT_EQ(row.inPlace.wrong, 1);
  }
  EXPECT_NE(r.output.find("# Out of bounds values : 6 FAILED"), std::string::npos) << r.output;
  for (int64_t wrong : r.wrong) EXPECT_EQ(wrong, 6);
}

TEST(BenchDriver, CallCountsFollowTheOptions) {
  // Per half: 1 untimed + iters × agg timed + checks; warm-up: 2 × warmup per series.
  RunResult r = runRanks(
      {"allreduce", "-b", "8", "-e", "32", "-f", "2", "-n", "5", "-m", "3", "-w", "2", "-c", "1"}, 2);
  EXPECT_EQ(r.calls[0], 2 * 2 + 3 * 2 * (1 + 5 * 3 + 1));
  // -N repeats the series (not the warm-up): a row per size and cycle.
  r = runRanks({"allreduce", "-b", "8", "-e", "32", "-f", "2", "-n", "5", "-w", "2", "-c", "0", "-N", "4"}, 2);
  EXPECT_EQ(r.calls[0], 2 * 2 + 4 * 3 * 2 * (1 + 5));
  NcclTestsOutput parsed = parseNcclTestsOutput(r.output);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  ASSERT_EQ(parsed.rows.size(), 12u);
  for (size_t i = 0; i < parsed.rows.size(); ++i) EXPECT_EQ(parsed.rows[i].bytes, 8u << (i % 3)) << i;
  r = runRanks({"allreduce", "-b", "8", "-e", "8", "-n", "4", "-w", "0", "-c", "0"}, 2);
  EXPECT_EQ(r.calls[1], 2 * (1 + 4));
  EXPECT_NE(r.output.find("N/A"), std::string::npos);
}

}  // namespace
