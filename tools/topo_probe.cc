// tuccl-topo probe (topo_probe.h).
#include "tools/topo_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cli/cli.h"
#include "support/environment.h"
#include "support/hash.h"
#include "topo/topology.h"
#include "topo/topology_json.h"
#include "tools/cuda_memory.h"
#include "tuccl/tuccl.h"

namespace tuccl::tools {
namespace {

using Clock = std::chrono::steady_clock;
using tuccl::tools::CudaMemory;

struct ProbeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(tucclResult_t result, const std::string& what, tucclComm_t comm) {
  if (result == tucclSuccess) return;
  const char* last = comm != nullptr ? tucclGetLastError(comm) : nullptr;
  throw ProbeError(what + " failed: " + tucclGetErrorString(result) +
                   (last != nullptr && *last != '\0' ? std::string(": ") + last : std::string()));
}

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// This process's host: TUCCL_HOSTID, else the host name and boot id (as libtuccl groups hosts).
uint64_t hostHash() {
  if (std::optional<std::string> id = env::text("TUCCL_HOSTID")) return fnv1a64(*id);
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return fnv1a64(std::string(name) + "/" + boot);
}

/// One measured pair (a < b).
struct PairResult {
  double a = 0, b = 0;      ///< the ranks
  double latencyUs = 0;     ///< half the round trip of 8 bytes
  double abGBps = 0;        ///< a -> b
  double baGBps = 0;        ///< b -> a
  double inter = 0;         ///< 1: the ranks are on different hosts
};
static_assert(sizeof(PairResult) == 6 * sizeof(double));

class Probe {
 public:
  /// `cuda`: the device memory of a communicator on the CUDA device; nullptr on the CPU device.
  Probe(const ProbeOptions& options, tucclComm_t comm, int rank, int nRanks, CudaMemory* cuda)
      : options_(options), comm_(comm), rank_(rank), nRanks_(nRanks), cuda_(cuda) {
    if (cuda_ != nullptr) {
      small_ = static_cast<char*>(cuda_->allocate(8));
      large_ = static_cast<char*>(cuda_->allocate(static_cast<size_t>(options.bandwidthBytes)));
      stream_ = cuda_->stream();
    } else {
      hostSmall_.assign(8, 0);
      hostLarge_.assign(static_cast<size_t>(options.bandwidthBytes), 0);
      small_ = hostSmall_.data();
      large_ = hostLarge_.data();
    }
    if (std::optional<std::string> slow = env::text("TUCCL_TEST_SLOW_PAIR")) {
      int x = -1, y = -1;
      if (std::sscanf(slow->c_str(), "%d,%d", &x, &y) != 2 || x < 0 || y < 0 || x >= nRanks || y >= nRanks || x == y) {
        throw ProbeError("TUCCL_TEST_SLOW_PAIR='" + *slow + "': expected two different ranks A,B below " +
                         std::to_string(nRanks));
      }
      slowA_ = std::min(x, y);
      slowB_ = std::max(x, y);
    }
  }

  /// Every rank's host index (hosts numbered by their first rank).
  std::vector<int> hosts() {
    const uint64_t mine = hostHash();
    std::vector<uint64_t> all(static_cast<size_t>(nRanks_));
    check(tucclCommHostAllGather(comm_, &mine, all.data(), sizeof mine), "tucclCommHostAllGather", comm_);
    std::vector<int> index(all.size());
    std::map<uint64_t, int> seen;
    for (size_t r = 0; r < all.size(); ++r) {
      auto [it, fresh] = seen.emplace(all[r], static_cast<int>(seen.size()));
      index[r] = it->second;
    }
    return index;
  }

  void barrier() {
    const char mine = 1;
    std::vector<char> all(static_cast<size_t>(nRanks_));
    check(tucclCommHostAllGather(comm_, &mine, all.data(), 1), "tucclCommHostAllGather (barrier)", comm_);
  }

  /// Measures the pair (a, b): the latency and a -> b on rank a, b -> a on rank b (zeros elsewhere).
  PairResult measure(int a, int b, bool inter) {
    PairResult result{static_cast<double>(a), static_cast<double>(b), 0, 0, 0, inter ? 1.0 : 0.0};
    if (rank_ == a || rank_ == b) {
      const int peer = rank_ == a ? b : a;
      const bool first = rank_ == a;
      const bool slow = std::min(a, b) == slowA_ && std::max(a, b) == slowB_;
      std::vector<double> rounds;
      for (int i = 0; i < options_.latencyIters + 10; ++i) {
        const auto start = Clock::now();
        if (first) {
          send(small_, 8, peer, slow);
          recv(small_, 8, peer);
        } else {
          recv(small_, 8, peer);
          send(small_, 8, peer, slow);
        }
        if (i >= 10) rounds.push_back(seconds(start));  // the first ones warm up
      }
      const double round = median(rounds);
      result.latencyUs = round / 2 * 1e6;
      result.abGBps = oneWay(first, peer, slow, round);
      result.baGBps = oneWay(!first, peer, slow, round);
    }
    barrier();
    return result;
  }

  /// Pairs (a1, b1) and (a2, b2) at once: each one's bandwidth a -> b, on its a.
  double concurrent(int a1, int b1, int a2, int b2, double round) {
    double measured = 0;
    for (auto [a, b] : {std::pair{a1, b1}, std::pair{a2, b2}}) {
      if (rank_ == a) measured = oneWay(true, b, false, round);
      if (rank_ == b) oneWay(false, a, false, round);
    }
    barrier();
    return measured;
  }

 private:
  // Each transfer complete when it returns: the CPU device's NULL stream runs it in the call, a
  // CUDA stream is synchronised.
  void send(const void* data, size_t bytes, int peer, bool slow) {
    if (slow) std::this_thread::sleep_for(std::chrono::microseconds(kSlowPairMicros));
    check(tucclSend(data, bytes, tucclUint8, peer, comm_, stream_), "tucclSend to rank " + std::to_string(peer), comm_);
    if (cuda_ != nullptr) cuda_->synchronize();
  }
  void recv(void* data, size_t bytes, int peer) {
    check(tucclRecv(data, bytes, tucclUint8, peer, comm_, stream_), "tucclRecv from rank " + std::to_string(peer),
          comm_);
    if (cuda_ != nullptr) cuda_->synchronize();
  }

  /// Bandwidth of the large message from the sender (`sending`) to the other, each answered by 8
  /// bytes: bytes / (time - a round trip, at least half the time), median over the iterations; 0 on
  /// the receiver's side.
  double oneWay(bool sending, int peer, bool slow, double round) {
    std::vector<double> rates;
    const auto bytes = static_cast<size_t>(options_.bandwidthBytes);
    for (int i = 0; i < options_.bandwidthIters + 1; ++i) {
      const auto start = Clock::now();
      if (sending) {
        send(large_, bytes, peer, slow);
        recv(small_, 8, peer);
      } else {
        recv(large_, bytes, peer);
        send(small_, 8, peer, slow);
      }
      // The round trip is taken off only while it is the smaller part: on a loaded machine the
      // latency measured before may exceed a bulk transfer's whole time.
      const double total = seconds(start);
      const double time = std::max(total - round, total / 2);
      if (i > 0) rates.push_back(static_cast<double>(bytes) / time / 1e9);
    }
    return sending ? median(rates) : 0;
  }

  const ProbeOptions& options_;
  tucclComm_t comm_;
  int rank_, nRanks_;
  int slowA_ = -1, slowB_ = -1;
  CudaMemory* cuda_ = nullptr;
  tucclStream_t stream_ = nullptr;
  std::vector<char> hostSmall_, hostLarge_;
  char* small_ = nullptr;
  char* large_ = nullptr;
};

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

/// The topology of what was measured (topo_probe.h).
Topology measuredTopology(const std::vector<int>& hostOf, const std::vector<PairResult>& pairs) {
  const int nRanks = static_cast<int>(hostOf.size());
  const int nHosts = *std::max_element(hostOf.begin(), hostOf.end()) + 1;
  Topology topology;
  topology.name = "probed";
  for (int h = 0; h < nHosts; ++h) topology.nodes.push_back(Node{"host" + std::to_string(h)});
  for (int r = 0; r < nRanks; ++r) topology.gpus.push_back(Gpu{r, hostOf[static_cast<size_t>(r)], "", 0, ""});
  std::vector<double> interLatency, interBandwidth, allBandwidth;
  for (const PairResult& p : pairs) {
    allBandwidth.push_back(std::min(p.abGBps, p.baGBps));
    if (p.inter != 0) {
      interLatency.push_back(p.latencyUs);
      interBandwidth.push_back(std::min(p.abGBps, p.baGBps));
      continue;
    }
    Link link;
    link.a = gpuRef(static_cast<int32_t>(p.a));
    link.b = gpuRef(static_cast<int32_t>(p.b));
    link.kind = LinkKind::NVLink;
    link.alphaUs = p.latencyUs;
    link.bandwidthGBps = std::max(std::min(p.abGBps, p.baGBps), 1e-3);
    topology.links.push_back(link);
  }
  // Each host: a PCIe switch joining its GPUs and its NIC, wide enough never to be the narrowest.
  const double wide = std::max(1.0, 4 * (allBandwidth.empty() ? 1.0 : *std::max_element(allBandwidth.begin(), allBandwidth.end())));
  const double netBandwidth = std::max(median(interBandwidth), 1e-3);
  for (int h = 0; h < nHosts; ++h) {
    const auto sw = static_cast<int32_t>(topology.switches.size());
    topology.switches.push_back(Switch{SwitchKind::PCIeSwitch, h, "pcisw", ""});
    for (int r = 0; r < nRanks; ++r) {
      if (hostOf[static_cast<size_t>(r)] != h) continue;
      topology.links.push_back(Link{gpuRef(r), switchRef(sw), LinkKind::PCIe, 0, wide, 1});
    }
    if (nHosts > 1) {
      const auto nic = static_cast<int32_t>(topology.nics.size());
      topology.nics.push_back(Nic{h, "probed-nic", netBandwidth, "", true});
      topology.links.push_back(Link{nicRef(nic), switchRef(sw), LinkKind::PCIe, 0, wide, 1});
    }
  }
  if (nHosts > 1) {
    const auto tor = static_cast<int32_t>(topology.switches.size());
    topology.switches.push_back(Switch{SwitchKind::ToR, -1, "tor", ""});
    for (int32_t nic = 0; nic < static_cast<int32_t>(topology.nics.size()); ++nic) {
      topology.links.push_back(Link{nicRef(nic), switchRef(tor), LinkKind::Network, median(interLatency) / 2, netBandwidth, 1});
    }
  }
  return topology;
}

/// The report: every pair, the concurrent pairs, the flags.
std::string reportText(const std::vector<int>& hostOf, const std::vector<PairResult>& pairs, double slowFraction,
                       const std::vector<std::string>& concurrentLines, std::vector<std::string>& flags) {
  std::ostringstream out;
  const int nHosts = *std::max_element(hostOf.begin(), hostOf.end()) + 1;
  out << "# tuccl-topo probe: " << hostOf.size() << " ranks on " << nHosts << " host(s), " << pairs.size()
      << " pairs measured\n";
  std::map<bool, std::vector<double>> latency, bandwidth;
  for (const PairResult& p : pairs) {
    latency[p.inter != 0].push_back(p.latencyUs);
    bandwidth[p.inter != 0].push_back(p.abGBps);
    bandwidth[p.inter != 0].push_back(p.baGBps);
  }
  for (bool inter : {false, true}) {
    if (latency[inter].empty()) continue;
    out << "# " << (inter ? "between hosts" : "within a host") << ": median latency "
        << fixed(median(latency[inter]), 2) << " us, median bandwidth " << fixed(median(bandwidth[inter]), 3)
        << " GB/s\n";
  }
  out << "pair   class   latency_us   a->b_GBps   b->a_GBps   flags\n";
  for (const PairResult& p : pairs) {
    const bool inter = p.inter != 0;
    const double lat = median(latency[inter]), bw = median(bandwidth[inter]);
    std::vector<std::string> mine;
    if (p.latencyUs > lat / slowFraction) mine.push_back("slow (latency)");
    if (std::min(p.abGBps, p.baGBps) < bw * slowFraction) mine.push_back("slow (bandwidth)");
    if (std::min(p.abGBps, p.baGBps) < std::max(p.abGBps, p.baGBps) * slowFraction) mine.push_back("asymmetric");
    std::string joined;
    for (const std::string& flag : mine) joined += (joined.empty() ? "" : ", ") + flag;
    const std::string name = std::to_string(static_cast<int>(p.a)) + "-" + std::to_string(static_cast<int>(p.b));
    if (!joined.empty()) flags.push_back("pair " + name + ": " + joined);
    char line[256];
    std::snprintf(line, sizeof line, "%-6s %-7s %10.2f %11.3f %11.3f   %s\n", name.c_str(), inter ? "inter" : "intra",
                  p.latencyUs, p.abGBps, p.baGBps, joined.empty() ? "-" : joined.c_str());
    out << line;
  }
  for (const std::string& line : concurrentLines) out << line << "\n";
  if (flags.empty()) out << "no pair flagged (slow: below " << fixed(slowFraction, 2) << " of its class's median)\n";
  for (const std::string& flag : flags) out << "flagged: " << flag << "\n";
  return out.str();
}

}  // namespace

int runProbe(const ProbeOptions& options) {
  tucclComm_t comm = nullptr;
  int rank = -1;
  try {
    if (options.bandwidthBytes < 8 || options.latencyIters < 1 || options.bandwidthIters < 1 ||
        !(options.slowFraction > 0 && options.slowFraction < 1)) {
      throw ProbeError("--bytes must be at least 8, the iterations at least 1, --slow-fraction in (0, 1)");
    }
    check(tucclCommInitFromEnv(&comm), "tucclCommInitFromEnv", nullptr);
    int nRanks = 0;
    check(tucclCommUserRank(comm, &rank), "tucclCommUserRank", comm);
    check(tucclCommCount(comm, &nRanks), "tucclCommCount", comm);
    tucclDeviceKind_t kind = tucclDeviceCpu;
    check(tucclCommDeviceKind(comm, &kind), "tucclCommDeviceKind", comm);
    std::unique_ptr<CudaMemory> cuda;
    if (kind == tucclDeviceCuda) {
      int ordinal = -1;
      check(tucclCommCuDevice(comm, &ordinal), "tucclCommCuDevice", comm);
      cuda = std::make_unique<CudaMemory>(ordinal);
    }
    if (rank == 0) {
      if (Status free = cli::checkOutputFree(options.output, options.force); !free) throw ProbeError(free.message());
      if (!options.report.empty()) {
        if (Status free = cli::checkOutputFree(options.report, options.force); !free) throw ProbeError(free.message());
      }
    }
    Probe probe(options, comm, rank, nRanks, cuda.get());
    const std::vector<int> hostOf = probe.hosts();
    for (size_t r = 1; r < hostOf.size(); ++r) {
      if (hostOf[r] < hostOf[r - 1]) {
        throw ProbeError("rank " + std::to_string(r) + " is on an earlier host than rank " + std::to_string(r - 1) +
                         ": the topology numbers ranks host by host (tuccl-run --ranks-per-node does)");
      }
    }
    // The pairs, the same order on every rank.
    std::vector<std::pair<int, int>> pairs;
    std::vector<int> localIndex(hostOf.size());
    std::map<int, int> perHost;
    for (size_t r = 0; r < hostOf.size(); ++r) localIndex[r] = perHost[hostOf[r]]++;
    for (int a = 0; a < nRanks; ++a) {
      for (int b = a + 1; b < nRanks; ++b) {
        const bool inter = hostOf[a] != hostOf[b];
        if (!inter || nRanks <= kAllPairsRanks || localIndex[a] == localIndex[b]) pairs.emplace_back(a, b);
      }
    }
    std::vector<PairResult> mine;
    for (auto [a, b] : pairs) mine.push_back(probe.measure(a, b, hostOf[a] != hostOf[b]));
    // Everybody's results to everybody (each pair's numbers live on its first rank).
    std::vector<PairResult> all(mine.size() * static_cast<size_t>(nRanks));
    check(tucclCommHostAllGather(comm, mine.data(), all.data(), mine.size() * sizeof(PairResult)),
          "tucclCommHostAllGather (results)", comm);
    std::vector<PairResult> results;
    for (size_t i = 0; i < pairs.size(); ++i) {
      // Latency and a -> b were measured on a, b -> a on b (each direction on its sender).
      PairResult pair = all[static_cast<size_t>(pairs[i].first) * mine.size() + i];
      pair.baGBps = all[static_cast<size_t>(pairs[i].second) * mine.size() + i].baGBps;
      results.push_back(pair);
    }
    // Two pairs between the first two hosts at once (local indices 0 and 1 of each).
    std::vector<std::string> concurrentLines;
    const int nHosts = hostOf.empty() ? 0 : hostOf.back() + 1;
    if (nHosts >= 2 && perHost[0] >= 2 && perHost[1] >= 2) {
      const int a1 = 0, a2 = 1, b1 = perHost[0], b2 = perHost[0] + 1;
      double alone1 = 0, alone2 = 0, round = 0;
      for (const PairResult& p : results) {
        if (static_cast<int>(p.a) == a1 && static_cast<int>(p.b) == b1) alone1 = p.abGBps, round = 2 * p.latencyUs / 1e6;
        if (static_cast<int>(p.a) == a2 && static_cast<int>(p.b) == b2) alone2 = p.abGBps;
      }
      const double measured = probe.concurrent(a1, b1, a2, b2, round);
      std::vector<double> both(static_cast<size_t>(nRanks));
      check(tucclCommHostAllGather(comm, &measured, both.data(), sizeof measured), "tucclCommHostAllGather", comm);
      char line[256];
      std::snprintf(line, sizeof line,
                    "concurrent: pairs %d-%d and %d-%d between hosts 0 and 1 at once: %.3f and %.3f GB/s, alone %.3f and "
                    "%.3f (%.0f %% of the sum alone: what they share)",
                    a1, b1, a2, b2, both[a1], both[a2], alone1, alone2,
                    alone1 + alone2 > 0 ? 100 * (both[a1] + both[a2]) / (alone1 + alone2) : 0.0);
      concurrentLines.emplace_back(line);
    }
    if (rank == 0) {
      std::vector<std::string> flags;
      const std::string report = reportText(hostOf, results, options.slowFraction, concurrentLines, flags);
      const Topology topology = measuredTopology(hostOf, results);
      if (std::optional<std::string> invalid = validateTopology(topology)) {
        throw ProbeError("the measured topology is not valid: " + *invalid);
      }
      if (Status written = cli::writeOutput(options.output, writeTopologyJson(topology)); !written) {
        throw ProbeError(written.message());
      }
      if (options.report.empty()) {
        std::cout << report;
      } else if (Status written = cli::writeOutput(options.report, report); !written) {
        throw ProbeError(written.message());
      }
    }
    check(tucclCommDestroy(comm), "tucclCommDestroy", nullptr);
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "tuccl-topo probe: rank " << rank << ": error: " << error.what() << "\n";
    if (comm != nullptr) {
      tucclCommAbort(comm);  // ends the communicator (as destroy does), and the other ranks stop waiting
    }
    return cli::kExitError;
  }
}

}  // namespace tuccl::tools
