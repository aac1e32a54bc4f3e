// nccl-tests' benchmark loop (bench_driver.h).
#include "cli/bench_driver.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "kernelgen/host_buffer.h"
#include "cli/bench_check.h"

namespace tuccl::bench {
namespace {

/// The check iteration whose data the timed calls run on (nccl-tests initialises them with 99).
constexpr uint64_t kTimedDataSeed = 99;

/// The CPU's model name (/proc/cpuinfo).
std::string cpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    const size_t start =
        colon == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "host memory";
}

/// A RankInfo as fixed-size bytes, for allGatherBytes.
struct RankRecord {
  int32_t pid = 0;
  int32_t device = 0;
  std::array<char, 64> host{};
  std::array<char, 16> busId{};
  std::array<char, 168> deviceName{};
};

template <size_t N>
void copyText(std::array<char, N>& to, const std::string& from) {
  std::strncpy(to.data(), from.c_str(), N - 1);
}

class Driver {
 public:
  Driver(const BenchOptions& options, BenchBackend& backend, std::FILE* out)
      : options_(options),
        backend_(backend),
        out_(out),
        rank_(backend.rank()),
        nRanks_(backend.nRanks()),
        send_(std::max<uint64_t>(options.maxBytes, 1)),
        recv_(std::max<uint64_t>(options.maxBytes, 1)),
        deviceSend_(backend.deviceBuffer(send_.bytes())),
        deviceRecv_(backend.deviceBuffer(recv_.bytes())) {}

  int64_t run() {
    print(formatRunHeader(options_));
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
    std::fputs(text.c_str(), out_);
    std::fflush(out_);
  }

  void printDevices() {
    const RankInfo local = backend_.rankInfo();
    RankRecord mine;
    mine.pid = local.pid;
    mine.device = local.device;
    copyText(mine.host, local.host);
    copyText(mine.busId, local.busId);
    copyText(mine.deviceName, local.deviceName);
    std::vector<RankRecord> all(static_cast<size_t>(nRanks_));
    backend_.allGatherBytes(&mine, all.data(), sizeof(RankRecord));
    std::vector<RankInfo> ranks;
    for (int32_t r = 0; r < nRanks_; ++r) {
      const RankRecord& record = all[static_cast<size_t>(r)];
      ranks.push_back(
          {r, record.pid, record.host.data(), record.device, record.busId.data(), record.deviceName.data()});
    }
    print(formatDevices(ranks));
  }

  /// nccl-tests' TimeTest: warm-up at the largest and the smallest size, then one row per size.
  void runSeries(DataType type, std::optional<ReduceOp> op, int32_t root) {
    backend_.barrier();
    warmUp(makeCall(type, op, root, options_.maxBytes, false));
    warmUp(makeCall(type, op, root, options_.minBytes, false));
    // -N: the whole series again, a row per size each cycle (nccl-tests' run_cycles): repeated
    // rows are the samples a tuner takes its medians and intervals from.
    for (int32_t cycle = 0; cycle < options_.runCycles; ++cycle) {
      for (uint64_t bytes : benchSizes(options_)) {
        const BenchCall outOfPlace = makeCall(type, op, root, bytes, false);
        print(formatRowStart(outOfPlace.counts.rowBytes(dataTypeSize(type)), outOfPlace.counts.param, type, op,
                             root));
        benchTime(outOfPlace);
        benchTime(makeCall(type, op, root, bytes, true));
        print("\n");
      }
    }
  }

  void warmUp(const BenchCall& call) {
    for (int32_t i = 0; i < options_.warmupIters; ++i) start(call);
    backend_.complete();
  }

  /// The call for one size; in place, both buffers are views of the receive buffer (nccl-tests).
  BenchCall makeCall(DataType type, std::optional<ReduceOp> op, int32_t root, uint64_t bytes, bool inPlace) {
    BenchCall b;
    const int32_t typeSize = dataTypeSize(type);
    b.collective = options_.collective;
    b.counts = collectiveCounts(options_.collective, bytes, typeSize, nRanks_);
    b.call = {options_.collective.collective().value_or(Collective::AllReduce),
              nRanks_,
              root,
              type,
              op.value_or(ReduceOp::Sum),
              static_cast<int64_t>(b.counts.param),
              inPlace};
    const uint64_t rankBytes = static_cast<uint64_t>(rank_) * static_cast<uint64_t>(typeSize);
    b.hostSend = inPlace ? recv_.data() + b.counts.sendInPlaceOffset * rankBytes : send_.data();
    b.hostRecv = inPlace ? recv_.data() + b.counts.recvInPlaceOffset * rankBytes : recv_.data();
    b.send = onDevice(b.hostSend);
    b.recv = onDevice(b.hostRecv);
    if (options_.collective.pattern() == PeerPattern::AllToAllv)
      b.peers = allToAllvLayout(b.counts.param, nRanks_, rank_);
    return b;
  }

  /// The library's view of a pointer into the host copies: the same place in the device buffers.
  void* onDevice(void* host) const {
    if (deviceSend_ == nullptr) return host;
    auto* at = static_cast<unsigned char*>(host);
    if (at >= recv_.data() && at < recv_.data() + recv_.bytes()) {
      return static_cast<unsigned char*>(deviceRecv_) + (at - recv_.data());
    }
    return static_cast<unsigned char*>(deviceSend_) + (at - send_.data());
  }

  /// Starts the call; with -z 1 also waits for it and for every rank.
  void start(const BenchCall& call) {
    backend_.start(call);
    if (!options_.blocking) return;
    backend_.complete();
    backend_.barrier();
  }

  /// nccl-tests' BenchTime for one half of a row: time, then check; prints the half.
  void benchTime(const BenchCall& b) {
    if (options_.checkIters > 0) prepareData(b, kTimedDataSeed);
    start(b);
    backend_.complete();
    backend_.barrier();
    const double seconds = timedSeconds(b);
    const Bandwidths bw =
        bandwidths(b.collective, b.counts.param, dataTypeSize(b.call.dataType), nRanks_, seconds);
    backend_.barrier();
    std::optional<int64_t> wrong;
    const int32_t checks = b.call.inPlace && !checksInPlace(b.collective) ? 0 : options_.checkIters;
    for (int32_t c = 0; c < checks; ++c) {
      wrong = checkedWrongElements(b);
      if (*wrong != 0) break;
    }
    summary_.add(bw.busGBps, wrong);
    print(formatHalf(seconds * 1e6, bw, wrong));
  }

  /// The time per call of `iters` × `agg` calls started back to back, combined over ranks.
  double timedSeconds(const BenchCall& b) {
    const auto begin = std::chrono::steady_clock::now();
    for (int32_t i = 0; i < options_.iters; ++i) {
      if (options_.aggIters > 1) backend_.groupStart();
      for (int32_t a = 0; a < options_.aggIters; ++a) start(b);
      if (options_.aggIters > 1) backend_.groupEnd();
    }
    backend_.complete();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - begin;
    const double perCall = elapsed.count() / (static_cast<double>(options_.iters) * options_.aggIters);
    return backend_.combineTime(perCall, options_.average);
  }

  /// Poisons the buffers the call touches and writes the rank's input of check iteration `seed`.
  void prepareData(const BenchCall& b, uint64_t seed) {
    const auto typeSize = static_cast<uint64_t>(dataTypeSize(b.call.dataType));
    const uint64_t recvBytes = std::max(b.counts.send, b.counts.recv) * typeSize;
    std::memset(recv_.data(), HostBuffer::kPoison, recvBytes);
    if (!b.call.inPlace) std::memset(send_.data(), HostBuffer::kPoison, b.counts.send * typeSize);
    fillBenchInput(b.collective, b.call, rank_, seed, b.hostSend);
    if (deviceSend_ == nullptr) return;
    if (recvBytes > 0) backend_.copyToDevice(deviceRecv_, recv_.data(), recvBytes);
    if (!b.call.inPlace && b.counts.send > 0) backend_.copyToDevice(deviceSend_, send_.data(), b.counts.send * typeSize);
  }

  /// One call on fresh data; the wrong elements of every rank, summed.
  int64_t checkedWrongElements(const BenchCall& b) {
    const uint64_t seed = ++checkIteration_;
    prepareData(b, seed);
    start(b);
    backend_.complete();
    const uint64_t recvBytes = std::max(b.counts.send, b.counts.recv) * static_cast<uint64_t>(dataTypeSize(b.call.dataType));
    if (deviceRecv_ != nullptr && recvBytes > 0) backend_.copyToHost(recv_.data(), deviceRecv_, recvBytes);
    return backend_.sumOverRanks(countWrongElements(b.collective, b.call, rank_, seed, b.hostRecv));
  }

  const BenchOptions& options_;
  BenchBackend& backend_;
  std::FILE* out_;
  int32_t rank_;
  int32_t nRanks_;
  HostBuffer send_, recv_;          ///< what the driver fills and checks
  void* deviceSend_ = nullptr;      ///< the backend's device copies, or nullptr: the host buffers
  void* deviceRecv_ = nullptr;
  BenchSummary summary_;
  uint64_t checkIteration_ = 0;
};

}  // namespace

RankInfo BenchBackend::rankInfo() { return localCpuRankInfo(rank()); }

int64_t runBenchmark(const BenchOptions& options, BenchBackend& backend, std::FILE* out) {
  return Driver(options, backend, out).run();
}

RankInfo localCpuRankInfo(int32_t rank) {
  RankInfo info;
  info.rank = rank;
  info.pid = static_cast<int32_t>(getpid());
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  info.host = host.data();
  info.device = 0;
  info.busId = "cpu";
  info.deviceName = cpuModelName();
  return info;
}

}  // namespace tuccl::bench
