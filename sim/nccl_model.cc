#include "sim/nccl_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <vector>

#include "support/bus_bandwidth.h"
#include "topo/paths.h"

namespace tuccl {

namespace {

// ---------------------------------------------------------------- the graph search (search.cc)

// NCCL search.cc: ring graphs are searched with at most MAXCHANNELS/2 channels (init.cc).
constexpr int32_t kMaxSearchChannels = 16;
// NCCL search.cc: speeds tried per channel (GB/s), one node (intra) and several (inter).
constexpr std::array<double, 13> kSpeedsIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 19> kSpeedsInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9,
                                                 7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 11> kSm90SpeedsIntra = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 17> kSm90SpeedsInter = {48, 45, 42, 40, 30, 24, 22, 20, 17.5,
                                                     15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
// NCCL search.cc: after a speed with a solution, lower speeds are tried while s / best > 0.49.
constexpr double kLowerSpeedRatio = 0.49;
// NCCL search.cc: rings of at least 25 GB/s per channel are duplicated at half the speed.
constexpr double kDuplicateFromGBps = 25.0;
// Bound on the ring search's backtracking (NCCL bounds its own with NCCL_SEARCH_TIMEOUT).
constexpr int64_t kSearchSteps = 200000;

/// NCCL topo.h: the rate NCCL counts per NVLink, by compute capability; 0 for unknown GPUs, which
/// keep the topology's own rate.
double ncclNvlinkLaneGBps(int32_t sm) {
  if (sm >= 100) return 40.1;  // SM100_NVLINK_BW
  if (sm >= 90) return 20.6;   // SM90_NVLINK_BW
  if (sm == 86) return 12.0;   // SM86_NVLINK_BW
  if (sm >= 70) return 20.0;   // SM70_NVLINK_BW, SM80_NVLINK_BW
  if (sm >= 60) return 18.0;   // SM60_NVLINK_BW
  return 0;
}

/// A resource's capacity as NCCL's topology counts it.
double ncclCapacity(const Topology& topology, const Resource& resource, int32_t sm) {
  const double lane = ncclNvlinkLaneGBps(sm);
  if (resource.kind == LinkKind::NVLink && lane > 0) return lane * topology.links[resource.link].lanes;
  return resource.bandwidthGBps;
}

/// The rings of one node: local GPUs 0..g-1, the resources of every ordered pair's path, the
/// remaining capacity of each resource (indexed densely), and the NICs.
struct RingSearch {
  int32_t g = 0;
  std::vector<std::vector<std::vector<int32_t>>> pathResources;  // [i][j] -> dense ids
  std::vector<std::vector<bool>> pathIsPcie;
  std::vector<double> capacity;            // dense id -> GB/s
  std::vector<double> nicCapacity;         // per NIC of the node
  std::vector<std::vector<int32_t>> nearNic;  // per NIC, the local GPUs under it
  bool multiNode = false;
};

/// Local GPUs sharing a PCIe switch with `nic` (NCCL's PATH_PXB): GPUDirect RDMA entry points.
std::vector<int32_t> gpusUnderNic(const Topology& topology, int32_t nic, const std::vector<int32_t>& ranks) {
  auto pcieSwitchesOf = [&](DeviceRef device) {
    std::vector<int32_t> switches;
    for (const Link& link : topology.links) {
      const DeviceRef other = link.a == device ? link.b : link.b == device ? link.a : DeviceRef{DeviceKind::Nic, -1};
      if (other.kind == DeviceKind::Switch && other.index >= 0 &&
          topology.switches[other.index].kind == SwitchKind::PCIeSwitch)
        switches.push_back(other.index);
    }
    return switches;
  };
  const std::vector<int32_t> nicSwitches = pcieSwitchesOf(nicRef(nic));
  std::vector<int32_t> near;
  for (size_t local = 0; local < ranks.size(); ++local) {
    for (int32_t s : pcieSwitchesOf(gpuRef(ranks[local]))) {
      if (std::find(nicSwitches.begin(), nicSwitches.end(), s) != nicSwitches.end()) {
        near.push_back(static_cast<int32_t>(local));
        break;
      }
    }
  }
  return near;
}

RingSearch makeRingSearch(const Topology& topology, int32_t sm) {
  RingSearch search;
  const std::vector<int32_t> ranks = ranksOfNode(topology, 0);
  search.g = static_cast<int32_t>(ranks.size());
  search.multiNode = topology.nNodes() > 1;
  const Router router(topology);
  std::map<ResourceId, int32_t> dense;
  search.pathResources.assign(search.g, std::vector<std::vector<int32_t>>(search.g));
  search.pathIsPcie.assign(search.g, std::vector<bool>(search.g, false));
  for (int32_t i = 0; i < search.g; ++i) {
    for (int32_t j = 0; j < search.g; ++j) {
      if (i == j) continue;
      const Path path = router.pathBetween(ranks[i], ranks[j]);
      search.pathIsPcie[i][j] = path.kind == PathKind::Pcie;
      for (ResourceId id : path.resources) {
        auto [it, added] = dense.emplace(id, static_cast<int32_t>(search.capacity.size()));
        if (added) search.capacity.push_back(ncclCapacity(topology, router.resources()[id], sm));
        search.pathResources[i][j].push_back(it->second);
      }
    }
  }
  if (search.multiNode) {
    for (int32_t nic : nicsOfNode(topology, 0)) {
      search.nicCapacity.push_back(topology.nics[nic].bandwidthGBps);
      std::vector<int32_t> near = gpusUnderNic(topology, nic, ranks);
      // No GPU under the NIC (no GPUDirect RDMA, NDv2): every GPU reaches it through the host.
      if (near.empty())
        for (int32_t local = 0; local < search.g; ++local) near.push_back(local);
      search.nearNic.push_back(std::move(near));
    }
  }
  return search;
}

/// Depth-first search of one ring at speed s over the remaining capacities (taken as it goes,
/// given back on backtracking). `order` holds the GPUs so far; `last` may end the ring.
class RingDfs {
 public:
  RingDfs(const RingSearch& search, std::vector<double>& remaining, double s)
      : search_(search), remaining_(remaining), s_(s) {}

  /// A Hamiltonian cycle from local GPU 0 (one node), capacities taken.
  bool findCycle(std::vector<int32_t>& order) {
    order = {0};
    std::vector<bool> used(search_.g, false);
    used[0] = true;
    return extend(order, used, [&](int32_t last) { return take(last, 0); });
  }

  /// A Hamiltonian path from `start` to a GPU of `ends` (several nodes), capacities taken.
  bool findPath(int32_t start, const std::vector<int32_t>& ends, std::vector<int32_t>& order) {
    order = {start};
    std::vector<bool> used(search_.g, false);
    used[start] = true;
    auto endsHere = [&](int32_t last) {
      return search_.g == 1 || ends.size() < 2 || std::find(ends.begin(), ends.end(), last) != ends.end();
    };
    return extend(order, used, endsHere);
  }

 private:
  /// `close(last)` says whether the ring may end at `last` (taking what closing it needs, or
  /// nothing when it cannot).
  template <typename Close>
  bool extend(std::vector<int32_t>& order, std::vector<bool>& used, Close&& close) {
    if (++steps_ > kSearchSteps) return false;
    const int32_t last = order.back();
    if (static_cast<int32_t>(order.size()) == search_.g) return close(last);
    // NCCL tries the next GPU in index order first (rings 0→1→…→g-1 on an NVSwitch).
    for (int32_t k = 1; k < search_.g; ++k) {
      const int32_t next = (last + k) % search_.g;
      if (used[next] || !take(last, next)) continue;
      used[next] = true;
      order.push_back(next);
      if (extend(order, used, close)) return true;
      order.pop_back();
      used[next] = false;
      give(last, next);
    }
    return false;
  }

  /// Takes s from every resource of the path a→b, or nothing when one lacks it.
  bool take(int32_t a, int32_t b) {
    const std::vector<int32_t>& path = search_.pathResources[a][b];
    for (size_t i = 0; i < path.size(); ++i) {
      if (remaining_[path[i]] + 1e-9 < s_) {
        for (size_t j = 0; j < i; ++j) remaining_[path[j]] += s_;
        return false;
      }
      remaining_[path[i]] -= s_;
    }
    return true;
  }
  void give(int32_t a, int32_t b) {
    for (int32_t id : search_.pathResources[a][b]) remaining_[id] += s_;
  }

  const RingSearch& search_;
  std::vector<double>& remaining_;
  double s_;
  int64_t steps_ = 0;
};

struct Packing {
  int32_t channels = 0;
  bool pcie = false;  ///< a ring hop inside the node crosses PCIe
  std::vector<std::vector<int32_t>> orders;  ///< per channel, the local GPUs in ring order
};

bool ringCrossesPcie(const RingSearch& search, const std::vector<int32_t>& order, bool cycle) {
  for (size_t i = 0; i + 1 < order.size(); ++i)
    if (search.pathIsPcie[order[i]][order[i + 1]]) return true;
  return cycle && order.size() > 1 && search.pathIsPcie[order.back()][order.front()];
}

/// As many rings of speed s as fit (at most kMaxSearchChannels). On several nodes channel c
/// tries the NICs from c mod nNics on, so the channels spread over the NICs as NCCL's do.
Packing packRings(const RingSearch& search, double s) {
  Packing packing;
  std::vector<double> remaining = search.capacity;
  std::vector<double> nicRemaining = search.nicCapacity;
  std::vector<int32_t> order;
  while (packing.channels < kMaxSearchChannels) {
    bool found = false;
    if (!search.multiNode) {
      found = RingDfs(search, remaining, s).findCycle(order);
      if (found) packing.pcie = packing.pcie || ringCrossesPcie(search, order, true);
    } else {
      const size_t nics = nicRemaining.size();
      for (size_t k = 0; k < nics && !found; ++k) {
        const size_t nic = (packing.channels + k) % nics;
        if (nicRemaining[nic] + 1e-9 < s) continue;
        for (int32_t start : search.nearNic[nic]) {
          if (RingDfs(search, remaining, s).findPath(start, search.nearNic[nic], order)) {
            nicRemaining[nic] -= s;
            packing.pcie = packing.pcie || ringCrossesPcie(search, order, false);
            found = true;
            break;
          }
        }
      }
    }
    if (!found) break;
    ++packing.channels;
    packing.orders.push_back(order);
  }
  return packing;
}

/// The widest GPU's total fabric bandwidth (NVLink/xGMI at NCCL's rate, else PCIe): totalBw.
double totalGpuBandwidth(const Topology& topology, int32_t sm) {
  double widest = 0;
  for (const int32_t rank : ranksOfNode(topology, 0)) {
    double fabric = 0, pcie = 0;
    for (const Link& link : topology.links) {
      if (link.a != gpuRef(rank) && link.b != gpuRef(rank)) continue;
      const double lane = ncclNvlinkLaneGBps(sm);
      if (link.kind == LinkKind::NVLink) fabric += lane > 0 ? lane * link.lanes : link.bandwidthGBps;
      else if (isGpuFabric(link.kind)) fabric += link.bandwidthGBps;
      else if (link.kind == LinkKind::PCIe) pcie += link.bandwidthGBps;
    }
    widest = std::max(widest, fabric > 0 ? fabric : pcie);
  }
  return widest;
}

/// NCCL's maxBw: where the speed search starts. One node: the widest GPU-to-GPU path; several:
/// the widest NIC.
double maxPathBandwidth(const RingSearch& search) {
  double widest = 0;
  if (search.multiNode) {
    for (double nic : search.nicCapacity) widest = std::max(widest, nic);
    return widest;
  }
  for (int32_t i = 0; i < search.g; ++i) {
    for (int32_t j = 0; j < search.g; ++j) {
      if (i == j) continue;
      double narrowest = std::numeric_limits<double>::infinity();
      for (int32_t id : search.pathResources[i][j]) narrowest = std::min(narrowest, search.capacity[id]);
      widest = std::max(widest, narrowest);
    }
  }
  return widest;
}

/// LL128 as NCCL enables it by default (tuning.cc): GPUs of one validated architecture (Volta,
/// Ampere, Hopper, Blackwell), NVLink inside the node, and GPUDirect RDMA to a NIC under the GPUs'
/// PCIe switch between nodes.
bool ll128Enabled(const Topology& topology, const RingSearch& search, int32_t minSm, int32_t maxSm, bool pcie) {
  if (minSm != maxSm) return false;
  if (minSm != 70 && minSm != 80 && minSm != 90 && minSm != 100) return false;
  if (pcie) return false;
  if (!search.multiNode) return true;
  for (int32_t nic : nicsOfNode(topology, 0)) {
    if (!topology.nics[nic].gdr) return false;
  }
  const std::vector<int32_t> ranks = ranksOfNode(topology, 0);
  for (int32_t nic : nicsOfNode(topology, 0)) {
    if (gpusUnderNic(topology, nic, ranks).empty()) return false;
  }
  return true;
}

template <size_t N>
std::vector<double> speedsOf(const std::array<double, N>& speeds) {
  return std::vector<double>(speeds.begin(), speeds.end());
}

/// The rings over all ranks: every node runs the channel's local order (NCCL's graphs are the
/// same on every node), node after node; the last node's last GPU closes the ring to the first's
/// first through the network. No order found (NCCL's slow fallback ring): local index order.
std::vector<std::vector<int32_t>> globalRings(const Topology& topology, std::vector<std::vector<int32_t>> orders) {
  const std::vector<int32_t> first = ranksOfNode(topology, 0);
  if (orders.empty()) {
    orders.emplace_back(first.size());
    std::iota(orders.back().begin(), orders.back().end(), 0);
  }
  std::vector<std::vector<int32_t>> rings;
  for (const std::vector<int32_t>& order : orders) {
    std::vector<int32_t> ring;
    for (int32_t node = 0; node < topology.nNodes(); ++node) {
      const std::vector<int32_t> ranks = ranksOfNode(topology, node);
      if (ranks.size() != order.size()) {  // a node unlike the first: its GPUs in index order
        ring.insert(ring.end(), ranks.begin(), ranks.end());
        continue;
      }
      for (int32_t local : order) ring.push_back(ranks[static_cast<size_t>(local)]);
    }
    rings.push_back(std::move(ring));
  }
  return rings;
}

}  // namespace

NcclGraph searchNcclGraph(const Topology& topology) {
  if (topology.empty()) throw std::invalid_argument("the NCCL model needs a topology with GPUs");
  NcclGraph graph;
  graph.nRanks = topology.nRanks();
  graph.nNodes = topology.nNodes();
  graph.gpusPerNode = static_cast<int32_t>(ranksOfNode(topology, 0).size());
  int32_t minSm = std::numeric_limits<int32_t>::max(), maxSm = 0;
  for (const Gpu& gpu : topology.gpus) minSm = std::min(minSm, gpu.sm), maxSm = std::max(maxSm, gpu.sm);
  graph.sm = minSm;
  for (int32_t nic : nicsOfNode(topology, 0)) graph.nicGBpsPerNode += topology.nics[nic].bandwidthGBps;
  graph.gpuFabricGBps = totalGpuBandwidth(topology, minSm);
  if (graph.nRanks == 1) return graph;

  const RingSearch search = makeRingSearch(topology, minSm);
  const bool hopper = minSm >= 90;
  const std::vector<double> speeds = search.multiNode ? (hopper ? speedsOf(kSm90SpeedsInter) : speedsOf(kSpeedsInter))
                                                      : (hopper ? speedsOf(kSm90SpeedsIntra) : speedsOf(kSpeedsIntra));
  const double maxBw = maxPathBandwidth(search);
  size_t index = 0;
  while (index + 1 < speeds.size() && speeds[index] > maxBw + 1e-9) ++index;
  double bestSpeed = 0;
  Packing best;
  for (; index < speeds.size(); ++index) {
    const double s = speeds[index];
    if (best.channels > 0 && s / bestSpeed <= kLowerSpeedRatio) break;
    const Packing packing = packRings(search, s);
    if (packing.channels * s > best.channels * bestSpeed + 1e-9) best = packing, bestSpeed = s;
    if (best.channels * bestSpeed >= graph.gpuFabricGBps - 1e-9) break;  // NCCL: optimal, stop
  }
  if (best.channels == 0) best.channels = 1, bestSpeed = speeds.back();  // NCCL falls back to a slow ring
  graph.nChannels = best.channels;
  graph.bwPerChannelGBps = bestSpeed;
  if (bestSpeed >= kDuplicateFromGBps && best.channels < kMaxSearchChannels && best.channels > 0) {
    const int32_t duplicated = std::min(2 * best.channels, kMaxSearchChannels);
    graph.bwPerChannelGBps /= (duplicated + best.channels - 1) / best.channels;
    graph.nChannels = duplicated;
  }
  graph.intraHop = best.pcie ? HopClass::Pcie : HopClass::NVLink;
  graph.ll128 = ll128Enabled(topology, search, minSm, maxSm, best.pcie);
  graph.rings = globalRings(topology, best.orders);
  return graph;
}

namespace {

// ---------------------------------------------------------------- the tuning model (tuning.cc)

constexpr int kTree = 0, kRing = 1;
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;

// cost-model.md: base latency (µs), {LL, LL128, Simple}; Tree, Ring.
constexpr double kBaseLatencyUs[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
// cost-model.md: per-hop latency (µs) [hop: NVLink, PCIe, Network][Tree, Ring][LL, LL128, Simple].
constexpr double kHopLatencyUs[3][2][3] = {{{0.6, 1.25, 4}, {0.6, 1.9, 3.4}},
                                           {{1, 1.9, 4}, {1, 2.5, 5.7}},
                                           {{5, 8.5, 14}, {2.7, 4, 14}}};
// cost-model.md: the network overhead of an inter-node ring step (1 µs; 2 on AMD CPUs, which the
// topology does not tell), ×3 for Simple.
constexpr double kNetOverheadUs = 1.0;
constexpr double kSimpleNetOverheadFactor = 3.0;
// cost-model.md: protocol derating of a ring's bus bandwidth.
constexpr double kRingLLFactor = 0.5;
constexpr double kRingLL128Factor = 0.92;
// NCCL tuning.cc: Tree derating, AllReduce (.92), LL (1/3.8), LL128 (7/9 one node, 120/128 more).
constexpr double kTreeFactor = 0.92;
constexpr double kTreeLLFactor = 1.0 / 3.8;
constexpr double kTreeLL128FactorOneNode = 7.0 / 9.0;
constexpr double kTreeLL128Factor = 120.0 / 128.0;
// NCCL's p2p path runs LL up to NCCL_P2P_LL_THRESHOLD bytes per peer (enqueue.cc, 16 KiB).
constexpr uint64_t kP2pLLThresholdBytes = 16384;

/// Architecture rows of NCCL's per-architecture tables: Volta, Ampere, Hopper, Blackwell.
int archIndex(int32_t sm) { return sm >= 100 ? 3 : sm >= 90 ? 2 : sm >= 80 ? 1 : 0; }
/// Columns by node count: 1, 2, 4+ nodes.
int nodeIndex(int32_t nNodes) { return nNodes <= 1 ? 0 : nNodes == 2 ? 1 : 2; }

// cost-model.md: per-channel ring LL128 caps (GB/s): 20 Volta and Ampere, 36.7 Hopper, 40 Blackwell.
constexpr double kRingLL128CapGBps[4] = {20.0, 20.0, 36.7, 40.0};
// cost-model.md (one node) and NCCL tuning.cc llMaxBws (2, 4+ nodes); Blackwell as Hopper.
constexpr double kLLMaxGBps[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {141.0, 45.0, 35.0}};
// cost-model.md (Ampere, Hopper) and NCCL tuning.cc perChMaxTreeBws (Volta); Blackwell as Hopper.
constexpr double kTreeCapGBps[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {38.7, 41.4, 36.0}};
// NCCL tuning.cc perChMaxTreeLL128Bws; Blackwell as Hopper.
constexpr double kTreeLL128CapGBps[4][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {36.7, 36.7, 29.0}};

int log2Floor(int32_t n) {
  int log = 0;
  while (n > 1) n >>= 1, ++log;
  return log;
}

int32_t ringSteps(Collective collective, int32_t nRanks) {
  if (collective == Collective::AllReduce) return 2 * (nRanks - 1);
  if (collective == Collective::AllGather || collective == Collective::ReduceScatter) return nRanks - 1;
  return nRanks;
}

/// The algorithm bandwidth of (algorithm, protocol) in GB/s (tuning.cc: bus bandwidth, derated,
/// times the ring's nRanks/nsteps or the tree's 1/2).
double algorithmBandwidth(const NcclGraph& graph, Collective collective, int a, int p) {
  const int arch = archIndex(graph.sm), nodes = nodeIndex(graph.nNodes);
  const int32_t ch = graph.nChannels;
  double busBw = ch * graph.bwPerChannelGBps;
  if (a == kRing) {
    if (p == kLL) busBw = std::min(kLLMaxGBps[arch][nodes], kRingLLFactor * busBw);
    if (p == kLL128) busBw = std::min(kRingLL128Factor * busBw, ch * kRingLL128CapGBps[arch]);
    return busBw * graph.nRanks / ringSteps(collective, graph.nRanks);
  }
  busBw = std::min(kTreeFactor * busBw, ch * kTreeCapGBps[arch][nodes]);
  if (p == kLL) busBw = std::min(busBw * kTreeLLFactor, kLLMaxGBps[arch][nodes]);
  if (p == kLL128) {
    const double factor = graph.nNodes == 1 ? kTreeLL128FactorOneNode : kTreeLL128Factor;
    busBw = std::min(busBw * factor, ch * kTreeLL128CapGBps[arch][nodes]);
  }
  return busBw * 0.5;
}

/// The latency of (algorithm, protocol) in µs (tuning.cc, cost-model.md).
double algorithmLatency(const NcclGraph& graph, Collective collective, int a, int p) {
  const int intraHw = static_cast<int>(graph.intraHop);
  const int net = static_cast<int>(HopClass::Network);
  double latency = kBaseLatencyUs[a][p];
  double intraLat = kHopLatencyUs[intraHw][a][p];
  double interLat = kHopLatencyUs[net][a][p];
  if (p == kSimple) interLat *= 2;  // the flush: inter latency counted twice for Simple
  const int32_t n = graph.nRanks, nodes = graph.nNodes;
  if (a == kTree) {
    return latency + 2 * ((n / nodes - 1) * intraLat + log2Floor(nodes) * interLat);
  }
  const int32_t steps = ringSteps(collective, n);
  if (collective == Collective::Broadcast || collective == Collective::Reduce) {
    // tuning.cc: nsteps × the hop latency; Simple takes the tree's (chunk latency).
    const int hw = nodes > 1 ? net : intraHw;
    return latency + steps * kHopLatencyUs[hw][p == kSimple ? kTree : kRing][p];
  }
  const int32_t interSteps = nodes <= 1 ? 0 : collective == Collective::AllReduce ? 2 * (nodes - 1) : nodes - 1;
  if (nodes > 1) intraLat = std::max(intraLat, kNetOverheadUs * (p == kSimple ? kSimpleNetOverheadFactor : 1.0));
  return latency + (steps - interSteps) * intraLat + interSteps * interLat;
}

/// NCCL's p2p AllToAll: every rank sends bytes/n to each peer at once; inside the node over its
/// fabric, between nodes through the node's NICs, which all the node's GPUs share.
NcclChoice p2pAllToAll(const NcclGraph& graph, uint64_t bytes, Protocol protocol) {
  const int p = static_cast<int>(protocol);
  const double n = graph.nRanks, g = graph.gpusPerNode;
  const double perPeer = static_cast<double>(bytes) / n;
  const double efficiency = protocol == Protocol::LL ? kRingLLFactor : 1.0;
  double intraGBps = graph.gpuFabricGBps * efficiency;
  double interGBps = graph.nicGBpsPerNode * efficiency;
  if (protocol == Protocol::LL) {
    const double cap = kLLMaxGBps[archIndex(graph.sm)][nodeIndex(graph.nNodes)];
    intraGBps = std::min(intraGBps, cap);
    interGBps = std::min(interGBps, cap * g);
  }
  const double intraUs = intraGBps > 0 ? (g - 1) * perPeer / (1000 * intraGBps) : 0;
  const double interUs = graph.nNodes > 1 && interGBps > 0 ? g * (n - g) * perPeer / (1000 * interGBps) : 0;
  const int hw = graph.nNodes > 1 ? static_cast<int>(HopClass::Network) : static_cast<int>(graph.intraHop);
  NcclChoice choice;
  choice.p2p = true;
  choice.protocol = protocol;
  choice.nChannels = graph.nChannels;
  choice.timeUs = kBaseLatencyUs[kRing][p] + kHopLatencyUs[hw][kRing][p] + std::max(intraUs, interUs);
  return choice;
}

void fillBandwidths(NcclChoice& choice, Collective collective, int32_t nRanks, uint64_t bytes) {
  choice.algBwGBs = choice.timeUs > 0 ? static_cast<double>(bytes) / (1000 * choice.timeUs) : 0;
  choice.busBwGBs = choice.algBwGBs * busBandwidthFactor(collective, nRanks);
}

}  // namespace

Expected<NcclChoice> evaluateNcclChoice(const NcclGraph& graph, Collective collective, uint64_t bytes,
                                        NcclAlgorithm algorithm, Protocol protocol) {
  auto unavailable = [&](const std::string& why) -> Status {
    return makeError(ErrorCode::Unsupported, std::string(ncclAlgorithmName(algorithm)) + "/" +
                                                 std::string(protocolName(protocol)) + " for " +
                                                 std::string(collectiveName(collective)) + ": " + why);
  };
  if (algorithm != NcclAlgorithm::Ring && algorithm != NcclAlgorithm::Tree)
    return unavailable("the model covers Ring and Tree only");
  if (algorithm == NcclAlgorithm::Tree && collective != Collective::AllReduce)
    return unavailable("NCCL runs Tree for AllReduce only");
  if (collective == Collective::AllToAll) {
    if (protocol == Protocol::LL128) return unavailable("NCCL's p2p path runs LL or Simple");
    NcclChoice choice = p2pAllToAll(graph, bytes, protocol);
    fillBandwidths(choice, collective, graph.nRanks, bytes);
    return choice;
  }
  if (protocol == Protocol::LL128 && !graph.ll128) return unavailable("LL128 is disabled on this topology");
  NcclChoice choice;
  choice.algorithm = algorithm;
  choice.protocol = protocol;
  choice.nChannels = graph.nChannels;
  const int a = algorithm == NcclAlgorithm::Tree ? kTree : kRing, p = static_cast<int>(protocol);
  if (graph.nRanks <= 1) {
    choice.timeUs = kBaseLatencyUs[a][p];
  } else {
    const double bw = algorithmBandwidth(graph, collective, a, p);
    if (!(bw > 0)) return unavailable("the graph search found no channel");
    choice.timeUs = algorithmLatency(graph, collective, a, p) + static_cast<double>(bytes) / (1000 * bw);
  }
  fillBandwidths(choice, collective, graph.nRanks, bytes);
  return choice;
}

NcclChoice ncclModelChoice(const NcclGraph& graph, Collective collective, uint64_t bytes) {
  if (collective == Collective::AllToAll) {
    const Protocol protocol = bytes / std::max(1, graph.nRanks) <= kP2pLLThresholdBytes ? Protocol::LL : Protocol::Simple;
    return evaluateNcclChoice(graph, collective, bytes, NcclAlgorithm::Ring, protocol).value();
  }
  std::optional<NcclChoice> best;
  for (NcclAlgorithm algorithm : {NcclAlgorithm::Tree, NcclAlgorithm::Ring}) {
    for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
      Expected<NcclChoice> choice = evaluateNcclChoice(graph, collective, bytes, algorithm, protocol);
      if (choice && (!best || choice->timeUs < best->timeUs)) best = *choice;
    }
  }
  if (!best) throw std::logic_error("NCCL model: Ring/LL is always available");
  return *best;
}

NcclChoice ncclModelChoice(const Topology& topology, Collective collective, uint64_t bytes) {
  return ncclModelChoice(searchNcclGraph(topology), collective, bytes);
}

std::string describeNcclChoice(const NcclChoice& choice) {
  const std::string algorithm = choice.p2p ? "P2P" : std::string(ncclAlgorithmName(choice.algorithm));
  return algorithm + "/" + std::string(protocolName(choice.protocol)) + "/" + std::to_string(choice.nChannels) + "ch";
}

}  // namespace tuccl
