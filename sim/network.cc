// The one translation unit of sim/ that reads a Topology (see network.h for why).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "sim/network.h"
#include "sim/network_topology.h"
#include "topo/load.h"
#include "topo/paths.h"
#include "topo/presets.h"
#include "topo/topology_json.h"

namespace tuccl {

struct Network::Impl {
  explicit Impl(Topology topology) : router(std::move(topology)) {}
  Router router;
  std::vector<NetworkResource> resources;
  std::vector<int32_t> nodeOfRank;
  int32_t maxGpusPerNode = 0;
  mutable std::mutex mutex;
  mutable std::unordered_map<int64_t, std::unique_ptr<NetworkPath>> paths;
  mutable bool boundsReady = false;
  mutable std::vector<double> ingressGBps;
  mutable std::vector<double> minAlphaIntoUs;
  mutable std::vector<double> nicRxGBps;
  mutable double minNetworkAlphaUs = 0;
  mutable double bisectionGBps = 0;

  const NetworkPath& path(int32_t src, int32_t dst) const;
  void computeBounds() const;
};

namespace {

DeviceRef destinationOf(const Topology& topology, const Resource& resource) {
  const Link& link = topology.links[resource.link];
  return resource.reverse ? link.a : link.b;
}
DeviceRef sourceOf(const Topology& topology, const Resource& resource) {
  const Link& link = topology.links[resource.link];
  return resource.reverse ? link.b : link.a;
}

HopClass hopClassOf(PathKind kind) {
  switch (kind) {
    case PathKind::Network:
      return HopClass::Network;
    case PathKind::Pcie:
      return HopClass::Pcie;
    default:
      return HopClass::NVLink;
  }
}

}  // namespace

const NetworkPath& Network::Impl::path(int32_t src, int32_t dst) const {
  const int32_t n = router.topology().nRanks();
  if (src < 0 || dst < 0 || src >= n || dst >= n) throw std::out_of_range("Network::path: rank out of range");
  const int64_t key = static_cast<int64_t>(src) * n + dst;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = paths.find(key);
  if (it != paths.end()) return *it->second;
  const Path route = router.pathBetween(src, dst);
  auto path = std::make_unique<NetworkPath>();
  path->hop = hopClassOf(route.kind);
  path->network = route.kind == PathKind::Network;
  path->resources = route.resources;
  std::sort(path->resources.begin(), path->resources.end());
  path->resources.erase(std::unique(path->resources.begin(), path->resources.end()), path->resources.end());
  path->alphaUs = route.alphaUs;
  return *paths.emplace(key, std::move(path)).first->second;
}

void Network::Impl::computeBounds() const {
  // Called under no lock: the fields are written once, guarded by boundsReady under `mutex`.
  const Topology& topology = router.topology();
  const int32_t n = topology.nRanks();
  std::vector<double> ingress(n, 0.0), nicRx(topology.nNodes(), 0.0), alphaInto(n, 0.0);
  for (const Resource& resource : router.resources()) {
    const DeviceRef to = destinationOf(topology, resource);
    const DeviceRef from = sourceOf(topology, resource);
    if (to.kind == DeviceKind::Gpu) ingress[to.index] += resource.bandwidthGBps;
    if (resource.kind == LinkKind::Network && to.kind == DeviceKind::Nic && from.kind == DeviceKind::Switch)
      nicRx[topology.nics[to.index].node] += resource.bandwidthGBps;
  }
  double minNetwork = std::numeric_limits<double>::infinity();
  for (int32_t r = 0; r < n; ++r) {
    double alpha = std::numeric_limits<double>::infinity();
    for (int32_t src = 0; src < n; ++src) {
      if (src == r) continue;
      const NetworkPath& p = path(src, r);
      alpha = std::min(alpha, p.alphaUs);
      if (p.network) minNetwork = std::min(minNetwork, p.alphaUs);
    }
    alphaInto[r] = std::isfinite(alpha) ? alpha : 0;
  }
  // Bisection: nodes [0, m/2) against the rest.
  const int32_t m = topology.nNodes();
  const int32_t mA = m / 2;
  double cut = 0;
  for (int32_t node = 0; node < mA; ++node) cut += nicRx[node];
  std::vector<std::set<int32_t>> nodesOfTor(topology.switches.size());
  for (const Link& link : topology.links) {
    if (link.kind != LinkKind::Network) continue;
    const DeviceRef nic = link.a.kind == DeviceKind::Nic ? link.a : link.b;
    const DeviceRef tor = link.a.kind == DeviceKind::Nic ? link.b : link.a;
    if (nic.kind == DeviceKind::Nic && tor.kind == DeviceKind::Switch)
      nodesOfTor[tor.index].insert(topology.nics[nic.index].node);
  }
  bool aligned = true;
  bool aggregation = false;
  double downlinks = 0;
  for (size_t t = 0; t < topology.switches.size(); ++t) {
    if (nodesOfTor[t].empty()) continue;
    const bool inA = *nodesOfTor[t].begin() < mA;
    for (int32_t node : nodesOfTor[t]) aligned = aligned && ((node < mA) == inA);
    if (!inA) continue;
    for (const Resource& resource : router.resources()) {
      const DeviceRef to = destinationOf(topology, resource);
      const DeviceRef from = sourceOf(topology, resource);
      if (to.kind == DeviceKind::Switch && to.index == static_cast<int32_t>(t) && from.kind == DeviceKind::Switch &&
          topology.switches[from.index].kind == SwitchKind::Aggregation) {
        downlinks += resource.bandwidthGBps;
        aggregation = true;
      }
    }
  }
  if (aligned && aggregation) cut = std::min(cut, downlinks);
  std::lock_guard<std::mutex> lock(mutex);
  ingressGBps = std::move(ingress);
  nicRxGBps = std::move(nicRx);
  minAlphaIntoUs = std::move(alphaInto);
  minNetworkAlphaUs = std::isfinite(minNetwork) ? minNetwork : 0;
  bisectionGBps = cut;
  boundsReady = true;
}

namespace {
const Network::Impl& impl(const std::shared_ptr<Network::Impl>& pointer) {
  if (!pointer) throw std::logic_error("Network: empty (build it with makeNetwork or loadNetwork)");
  return *pointer;
}
const Network::Impl& bounds(const std::shared_ptr<Network::Impl>& pointer) {
  const Network::Impl& network = impl(pointer);
  bool ready;
  {
    std::lock_guard<std::mutex> lock(network.mutex);
    ready = network.boundsReady;
  }
  if (!ready) network.computeBounds();
  return network;
}
}  // namespace

const std::string& Network::name() const { return impl(impl_).router.topology().name; }
int32_t Network::nRanks() const { return impl(impl_).router.topology().nRanks(); }
int32_t Network::nNodes() const { return impl(impl_).router.topology().nNodes(); }
int32_t Network::nodeOf(int32_t rank) const { return impl(impl_).nodeOfRank.at(rank); }
int32_t Network::maxGpusPerNode() const { return impl(impl_).maxGpusPerNode; }
const std::vector<NetworkResource>& Network::resources() const { return impl(impl_).resources; }
const NetworkPath& Network::path(int32_t src, int32_t dst) const { return impl(impl_).path(src, dst); }
double Network::ingressGBps(int32_t rank) const { return bounds(impl_).ingressGBps.at(rank); }
double Network::minAlphaIntoUs(int32_t rank) const { return bounds(impl_).minAlphaIntoUs.at(rank); }
double Network::nicRxGBps(int32_t node) const { return bounds(impl_).nicRxGBps.at(node); }
double Network::minNetworkAlphaUs() const { return bounds(impl_).minNetworkAlphaUs; }
double Network::bisectionGBps() const { return bounds(impl_).bisectionGBps; }

Network makeNetwork(const Topology& topology) {
  if (auto problem = validateTopology(topology)) throw std::invalid_argument("invalid topology: " + *problem);
  auto network = std::make_shared<Network::Impl>(topology);
  for (const Resource& resource : network->router.resources())
    network->resources.push_back(NetworkResource{resource.name, resource.bandwidthGBps});
  for (const Gpu& gpu : topology.gpus) network->nodeOfRank.push_back(gpu.node);
  network->maxGpusPerNode = tuccl::maxGpusPerNode(topology);
  return Network(network);
}

Network loadNetwork(std::string_view spec) { return makeNetwork(loadSimTopology(spec)); }

Network networkFromTopologyJson(const SourceText& source) { return makeNetwork(readTopologyJson(source)); }

Topology reduceNodeGpus(const Topology& node, int32_t gpus) {
  if (node.nNodes() != 1) throw std::invalid_argument("gpus=K applies to a one-node topology");
  if (gpus < 1 || gpus > node.nRanks())
    throw std::invalid_argument("gpus=" + std::to_string(gpus) + " is outside 1.." + std::to_string(node.nRanks()));
  std::vector<char> keepGpu(node.gpus.size(), 0), keepNic(node.nics.size(), 0), keepSwitch(node.switches.size(), 0);
  for (int32_t g = 0; g < gpus; ++g) keepGpu[g] = 1;
  auto kept = [&](DeviceRef d) {
    switch (d.kind) {
      case DeviceKind::Gpu:
        return keepGpu[d.index] != 0;
      case DeviceKind::Nic:
        return keepNic[d.index] != 0;
      case DeviceKind::Switch:
        return keepSwitch[d.index] != 0;
    }
    return false;
  };
  // 1. switches a kept GPU hangs from; 2. root complexes above kept PCIe switches; 3. NICs on kept
  // PCIe switches.
  for (const Link& link : node.links) {
    for (auto [gpu, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (gpu.kind == DeviceKind::Gpu && keepGpu[gpu.index] && other.kind == DeviceKind::Switch)
        keepSwitch[other.index] = 1;
    }
  }
  for (const Link& link : node.links) {
    for (auto [sw, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (sw.kind == DeviceKind::Switch && keepSwitch[sw.index] &&
          node.switches[sw.index].kind == SwitchKind::PCIeSwitch && other.kind == DeviceKind::Switch &&
          node.switches[other.index].kind == SwitchKind::RootComplex)
        keepSwitch[other.index] = 2;
    }
  }
  for (const Link& link : node.links) {
    for (auto [sw, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (sw.kind == DeviceKind::Switch && keepSwitch[sw.index] == 1 &&
          node.switches[sw.index].kind == SwitchKind::PCIeSwitch && other.kind == DeviceKind::Nic)
        keepNic[other.index] = 1;
    }
  }
  Topology reduced;
  reduced.name = node.name + ":gpus=" + std::to_string(gpus);
  reduced.nodes = node.nodes;
  std::vector<int32_t> gpuIndex(node.gpus.size(), -1), nicIndex(node.nics.size(), -1), switchIndex(node.switches.size(), -1);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!keepGpu[i]) continue;
    gpuIndex[i] = static_cast<int32_t>(reduced.gpus.size());
    reduced.gpus.push_back(node.gpus[i]);
    reduced.gpus.back().rank = gpuIndex[i];
  }
  for (size_t i = 0; i < node.nics.size(); ++i) {
    if (!keepNic[i]) continue;
    nicIndex[i] = static_cast<int32_t>(reduced.nics.size());
    reduced.nics.push_back(node.nics[i]);
  }
  for (size_t i = 0; i < node.switches.size(); ++i) {
    if (!keepSwitch[i]) continue;
    switchIndex[i] = static_cast<int32_t>(reduced.switches.size());
    reduced.switches.push_back(node.switches[i]);
  }
  auto remap = [&](DeviceRef d) {
    switch (d.kind) {
      case DeviceKind::Gpu:
        return DeviceRef{d.kind, gpuIndex[d.index]};
      case DeviceKind::Nic:
        return DeviceRef{d.kind, nicIndex[d.index]};
      case DeviceKind::Switch:
        return DeviceRef{d.kind, switchIndex[d.index]};
    }
    return d;
  };
  for (const Link& link : node.links) {
    if (!kept(link.a) || !kept(link.b)) continue;
    Link copy = link;
    copy.a = remap(link.a);
    copy.b = remap(link.b);
    reduced.links.push_back(copy);
  }
  if (auto problem = validateTopology(reduced)) throw std::invalid_argument("gpus=K: " + *problem);
  return reduced;
}

Topology loadSimTopology(std::string_view spec) {
  if (!isPresetSpec(spec)) {
    Expected<LoadedTopology> loaded = loadTopology(spec);
    throwIfError(loaded.status());
    return std::move(loaded)->topology;
  }
  // Pull gpus=K out of the option list; the rest goes to the preset.
  const std::string_view rest = spec.substr(7);
  const size_t colon = rest.find(':');
  const std::string name(rest.substr(0, colon));
  std::string_view options = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  std::string kept;
  int32_t gpus = 0;
  while (!options.empty()) {
    const size_t comma = options.find(',');
    const std::string_view item = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    if (item.starts_with("gpus=")) {
      const std::string_view value = item.substr(5);
      auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), gpus);
      if (error != std::errc() || end != value.data() + value.size() || gpus < 1)
        throw std::invalid_argument("preset option gpus=" + std::string(value) + " is not a positive number");
    } else {
      kept += (kept.empty() ? "" : ",") + std::string(item);
    }
  }
  const std::string presetSpec = "preset:" + name + (kept.empty() ? "" : ":" + kept);
  if (gpus == 0) {
    Topology topology = makePreset(presetSpec);
    return topology;
  }
  // Parse the remaining options through makePreset on a one-node copy to learn the cluster options.
  ClusterOptions cluster = presetClusterOptions(name);
  const Topology full = makePreset(presetSpec);
  cluster.nodes = full.nNodes();
  // Recover fabric options the spec may have overridden: re-read them the same way makePreset does.
  std::string_view again = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  while (!again.empty()) {
    const size_t comma = again.find(',');
    const std::string_view item = again.substr(0, comma);
    again = comma == std::string_view::npos ? std::string_view() : again.substr(comma + 1);
    const size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    const std::string value(item.substr(equals + 1));
    if (key == "fabric") cluster.fabric = value == "switch" ? Fabric::Switch : Fabric::Clos;
    if (key == "oversub") cluster.oversubscription = std::stod(value);
    if (key == "rack") cluster.nodesPerTor = std::stoi(value);
  }
  Topology topology = composeCluster(reduceNodeGpus(presetNode(name), gpus), cluster);
  topology.name = std::string(spec.substr(7));
  return topology;
}

}  // namespace tuccl
