// The one translation unit of sim/ that reads a Topology (see network.h for why).
#include <algorithm>
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
  // The fastest path into each rank: every pair's alpha, without building (or caching) each route.
  double minNetwork = std::numeric_limits<double>::infinity();
  std::vector<double> alphaMin(n, std::numeric_limits<double>::infinity());
  router.forEachPathAlpha([&](int32_t, int32_t dst, double alphaUs, bool network) {
    alphaMin[dst] = std::min(alphaMin[dst], alphaUs);
    if (network) minNetwork = std::min(minNetwork, alphaUs);
  });
  for (int32_t r = 0; r < n; ++r) alphaInto[r] = std::isfinite(alphaMin[r]) ? alphaMin[r] : 0;
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

// makeNetwork refuses an invalid topology with std::invalid_argument; it stops here.
Expected<Network> networkFromTopology(const Topology& topology, std::string_view where) {
  try {
    return makeNetwork(topology);
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidInput, std::string(where), SourceLoc{}, error.what());
  }
}

Expected<Network> loadNetwork(std::string_view spec, const LoadOptions& options) {
  Expected<LoadedTopology> loaded = loadTopology(spec, options);
  if (!loaded) return loaded.status();
  return networkFromTopology(loaded->topology, spec);
}

Expected<Network> networkFromTopologyJson(const SourceText& source) {
  try {
    return networkFromTopology(readTopologyJson(source), source.name());
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error);
  }
}

}  // namespace tuccl
