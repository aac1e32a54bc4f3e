#include "topo/paths.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include "topo/binding.h"

namespace tuccl {

std::string_view pathKindName(PathKind kind) {
  switch (kind) {
    case PathKind::Local:
      return "local";
    case PathKind::NVLink:
      return "nvlink";
    case PathKind::NVSwitch:
      return "nvswitch";
    case PathKind::NVLinkViaGpu:
      return "nvlink-via-gpu";
    case PathKind::Pcie:
      return "pcie";
    case PathKind::Network:
      return "network";
    case PathKind::Xgmi:
      return "xgmi";
    case PathKind::XgmiViaGpu:
      return "xgmi-via-gpu";
  }
  return "?";
}

Router::Router(Topology topology) : topology_(std::move(topology)) {
  if (auto problem = validateTopology(topology_))
    throw std::invalid_argument("invalid topology: " + *problem);
  adjacency_.resize(topology_.gpus.size() + topology_.nics.size() + topology_.switches.size());
  resources_.reserve(topology_.links.size() * 2);
  for (size_t i = 0; i < topology_.links.size(); ++i) {
    const Link& link = topology_.links[i];
    adjacency_[vertexOf(link.a)].push_back(static_cast<int32_t>(i));
    adjacency_[vertexOf(link.b)].push_back(static_cast<int32_t>(i));
    std::string a = deviceName(topology_, link.a);
    std::string b = deviceName(topology_, link.b);
    for (bool reverse : {false, true}) {
      Resource resource;
      const std::string& from = reverse ? b : a;
      const std::string& to = reverse ? a : b;
      DeviceRef fromDevice = reverse ? link.b : link.a;
      DeviceRef toDevice = reverse ? link.a : link.b;
      if (link.kind == LinkKind::Network && fromDevice.kind == DeviceKind::Nic) {
        resource.name = from + ".tx";
      } else if (link.kind == LinkKind::Network && toDevice.kind == DeviceKind::Nic) {
        resource.name = to + ".rx";
      } else {
        resource.name = from + "->" + to;
      }
      resource.link = static_cast<int32_t>(i);
      resource.reverse = reverse;
      resource.kind = link.kind;
      resource.alphaUs = link.alphaUs;
      resource.bandwidthGBps = link.bandwidthGBps;
      resources_.push_back(std::move(resource));
    }
  }
  nicOfRank_ = bindGpusToNics(topology_);
}

int32_t Router::vertexOf(DeviceRef device) const {
  switch (device.kind) {
    case DeviceKind::Gpu:
      return device.index;
    case DeviceKind::Nic:
      return static_cast<int32_t>(topology_.gpus.size()) + device.index;
    case DeviceKind::Switch:
      return static_cast<int32_t>(topology_.gpus.size() + topology_.nics.size()) + device.index;
  }
  return -1;
}

DeviceRef Router::deviceOf(int32_t vertex) const {
  int32_t gpus = static_cast<int32_t>(topology_.gpus.size());
  int32_t nics = static_cast<int32_t>(topology_.nics.size());
  if (vertex < gpus) return gpuRef(vertex);
  if (vertex < gpus + nics) return nicRef(vertex - gpus);
  return switchRef(vertex - gpus - nics);
}

Router::Hop Router::hopOf(int32_t link, DeviceRef from) const {
  return Hop{link, topology_.links[link].a != from};
}

int32_t Router::directLink(DeviceRef a, DeviceRef b, LinkKind kind) const {
  int32_t best = -1;
  for (int32_t link : adjacency_[vertexOf(a)]) {
    const Link& l = topology_.links[link];
    if (l.kind != kind) continue;
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) {
      if (best < 0 || l.bandwidthGBps > topology_.links[best].bandwidthGBps) best = link;
    }
  }
  return best;
}

// Breadth-first search, fewest hops, ties to the lowest link index (links are scanned in order).
// Host routes use PCIe and CPU-interconnect links through PCIe switches and root complexes;
// network routes use network links through ToR and aggregation switches.
std::vector<int32_t> Router::search(DeviceRef from, int32_t toVertex, bool network) const {
  auto usable = [&](const Link& link) {
    return network ? link.kind == LinkKind::Network
                   : (link.kind == LinkKind::PCIe || link.kind == LinkKind::Smp);
  };
  auto transit = [&](DeviceRef device) {
    if (device.kind != DeviceKind::Switch) return false;
    SwitchKind kind = topology_.switches[device.index].kind;
    return network ? isNetworkSwitch(kind)
                   : (kind == SwitchKind::PCIeSwitch || kind == SwitchKind::RootComplex);
  };
  std::vector<int32_t> viaLink(adjacency_.size(), -2);
  std::deque<DeviceRef> queue{from};
  viaLink[vertexOf(from)] = -1;
  std::vector<int32_t> incident;
  while (!queue.empty()) {
    DeviceRef here = queue.front();
    queue.pop_front();
    if (vertexOf(here) == toVertex) break;
    if (here != from && !transit(here)) continue;
    incident = adjacency_[vertexOf(here)];
    std::sort(incident.begin(), incident.end());
    for (int32_t link : incident) {
      const Link& l = topology_.links[link];
      if (!usable(l)) continue;
      DeviceRef next = l.a == here ? l.b : l.a;
      if (viaLink[vertexOf(next)] != -2) continue;
      viaLink[vertexOf(next)] = link;
      queue.push_back(next);
    }
  }
  return viaLink;
}

std::vector<Router::Hop> Router::walkBack(const std::vector<int32_t>& viaLink, DeviceRef from, DeviceRef to) const {
  if (viaLink[vertexOf(to)] == -2) return {};
  std::vector<Hop> hops;
  for (DeviceRef here = to; here != from;) {
    int32_t link = viaLink[vertexOf(here)];
    const Link& l = topology_.links[link];
    DeviceRef previous = l.a == here ? l.b : l.a;
    hops.push_back(hopOf(link, previous));
    here = previous;
  }
  std::reverse(hops.begin(), hops.end());
  return hops;
}

std::vector<Router::Hop> Router::route(DeviceRef from, DeviceRef to, bool network) const {
  return walkBack(search(from, vertexOf(to), network), from, to);
}

// A host route between a GPU and a NIC; without GPUDirect RDMA the data bounces through host
// memory at the root complex nearest the NIC, even when GPU and NIC share a PCIe switch.
std::vector<Router::Hop> Router::hostRoute(DeviceRef gpu, DeviceRef nic) const {
  const Nic& n = topology_.nics[nic.index];
  if (n.gdr) return route(gpu, nic, false);
  std::vector<int32_t> distance = hostFabricDistances(topology_, nic);
  int32_t cpu = -1;
  for (size_t s = 0; s < topology_.switches.size(); ++s) {
    const Switch& sw = topology_.switches[s];
    int32_t d = distance[vertexOf(switchRef(static_cast<int32_t>(s)))];
    if (sw.kind != SwitchKind::RootComplex || sw.node != n.node || d < 0) continue;
    if (cpu < 0 || d < distance[vertexOf(switchRef(cpu))]) cpu = static_cast<int32_t>(s);
  }
  if (cpu < 0) return route(gpu, nic, false);
  std::vector<Hop> up = route(gpu, switchRef(cpu), false);
  std::vector<Hop> down = route(switchRef(cpu), nic, false);
  if (up.empty() || down.empty()) return {};
  up.insert(up.end(), down.begin(), down.end());
  return up;
}

Path Router::makePath(PathKind kind, const std::vector<Hop>& hops) const {
  Path path;
  path.kind = kind;
  for (const Hop& hop : hops) {
    ResourceId id = 2 * hop.link + (hop.reverse ? 1 : 0);
    path.resources.push_back(id);
    const Resource& resource = resources_[id];
    path.alphaUs += resource.alphaUs;
    path.bandwidthGBps = path.resources.size() == 1 ? resource.bandwidthGBps
                                                    : std::min(path.bandwidthGBps, resource.bandwidthGBps);
  }
  return path;
}

Path Router::pathBetween(int32_t src, int32_t dst) const {
  if (src < 0 || dst < 0 || src >= topology_.nRanks() || dst >= topology_.nRanks()) {
    throw std::out_of_range("no path from rank " + std::to_string(src) + " to rank " + std::to_string(dst) +
                            ": the topology has ranks 0 to " + std::to_string(topology_.nRanks() - 1));
  }
  if (src == dst) return Path{};
  DeviceRef s = gpuRef(src);
  DeviceRef d = gpuRef(dst);
  auto unreachable = [&](const std::string& why) {
    return std::runtime_error("no route from rank " + std::to_string(src) + " to rank " +
                              std::to_string(dst) + ": " + why);
  };
  if (topology_.gpus[src].node == topology_.gpus[dst].node) {
    if (int32_t link = directLink(s, d, LinkKind::NVLink); link >= 0) {
      return makePath(PathKind::NVLink, {hopOf(link, s)});
    }
    if (int32_t link = directLink(s, d, LinkKind::Xgmi); link >= 0) {
      return makePath(PathKind::Xgmi, {hopOf(link, s)});
    }
    // Through an NVSwitch both GPUs reach: the widest, lowest index on ties.
    int32_t bestSwitch = -1;
    int32_t bestUp = -1;
    int32_t bestDown = -1;
    double bestWidth = 0;
    for (int32_t link : adjacency_[vertexOf(s)]) {
      const Link& l = topology_.links[link];
      DeviceRef other = l.a == s ? l.b : l.a;
      if (l.kind != LinkKind::NVLink || other.kind != DeviceKind::Switch) continue;
      if (topology_.switches[other.index].kind != SwitchKind::NVSwitch) continue;
      int32_t down = directLink(other, d, LinkKind::NVLink);
      if (down < 0) continue;
      double width = std::min(l.bandwidthGBps, topology_.links[down].bandwidthGBps);
      if (bestSwitch < 0 || width > bestWidth || (width == bestWidth && other.index < bestSwitch)) {
        bestSwitch = other.index;
        bestUp = link;
        bestDown = down;
        bestWidth = width;
      }
    }
    if (bestSwitch >= 0)
      return makePath(PathKind::NVSwitch, {hopOf(bestUp, s), hopOf(bestDown, switchRef(bestSwitch))});
    // NVLink (else xGMI) through one intermediate GPU (NCCL's PATH_NVB).
    for (auto [kind, pathKind] : {std::pair{LinkKind::NVLink, PathKind::NVLinkViaGpu},
                                  std::pair{LinkKind::Xgmi, PathKind::XgmiViaGpu}}) {
      int32_t via = -1;
      int32_t viaUp = -1;
      int32_t viaDown = -1;
      double viaWidth = 0;
      for (int32_t k : ranksOfNode(topology_, topology_.gpus[src].node)) {
        if (k == src || k == dst) continue;
        int32_t up = directLink(s, gpuRef(k), kind);
        int32_t down = up < 0 ? -1 : directLink(gpuRef(k), d, kind);
        if (down < 0) continue;
        double width = std::min(topology_.links[up].bandwidthGBps, topology_.links[down].bandwidthGBps);
        if (via < 0 || width > viaWidth) {
          via = k;
          viaUp = up;
          viaDown = down;
          viaWidth = width;
        }
      }
      if (via >= 0) return makePath(pathKind, {hopOf(viaUp, s), hopOf(viaDown, gpuRef(via))});
    }
    std::vector<Hop> hops = route(s, d, false);
    if (hops.empty()) throw unreachable("no NVLink, xGMI, NVSwitch or PCIe connection within the node");
    return makePath(PathKind::Pcie, hops);
  }

  int32_t srcNic = nicOfRank_[src];
  int32_t dstNic = nicOfRank_[dst];
  if (srcNic < 0) throw unreachable("node " + std::to_string(topology_.gpus[src].node) + " has no NIC");
  if (dstNic < 0) throw unreachable("node " + std::to_string(topology_.gpus[dst].node) + " has no NIC");
  std::vector<Hop> up = hostRoute(s, nicRef(srcNic));
  std::vector<Hop> across = route(nicRef(srcNic), nicRef(dstNic), true);
  std::vector<Hop> down = hostRoute(d, nicRef(dstNic));
  if (up.empty()) throw unreachable("rank " + std::to_string(src) + " has no PCIe path to its NIC");
  if (across.empty()) throw unreachable("the network does not connect their NICs");
  if (down.empty()) throw unreachable("rank " + std::to_string(dst) + " has no PCIe path to its NIC");
  // The destination side was routed GPU→NIC; traverse it the other way.
  std::reverse(down.begin(), down.end());
  for (Hop& hop : down) hop.reverse = !hop.reverse;
  std::vector<Hop> hops = up;
  hops.insert(hops.end(), across.begin(), across.end());
  hops.insert(hops.end(), down.begin(), down.end());
  return makePath(PathKind::Network, hops);
}

void Router::forEachPathAlpha(const std::function<void(int32_t, int32_t, double, bool)>& visit) const {
  const int32_t n = topology_.nRanks();
  auto alphaOf = [&](const Hop& hop) { return resources_[2 * hop.link + (hop.reverse ? 1 : 0)].alphaUs; };
  // Node-local pairs: pathBetween itself (a node holds few GPUs).
  std::vector<std::vector<int32_t>> ranksOf(topology_.nNodes());
  for (int32_t r = 0; r < n; ++r) ranksOf[topology_.gpus[r].node].push_back(r);
  for (const std::vector<int32_t>& ranks : ranksOf) {
    for (int32_t src : ranks) {
      for (int32_t dst : ranks) {
        if (src != dst) visit(src, dst, pathBetween(src, dst).alphaUs, false);
      }
    }
  }
  // Inter-node pairs: up (GPU to its NIC), across (NIC to NIC), down (NIC to GPU), as pathBetween
  // joins them. A rank without a NIC or a route: pathBetween says why.
  auto firstOtherNode = [&](int32_t rank) {
    for (int32_t r = 0; r < n; ++r) {
      if (topology_.gpus[r].node != topology_.gpus[rank].node) return r;
    }
    return rank;
  };
  std::vector<std::vector<double>> up(n), down(n);
  for (int32_t r = 0; r < n; ++r) {
    if (ranksOf[topology_.gpus[r].node].size() == static_cast<size_t>(n)) return;  // one node holds every rank
    const int32_t nic = nicOfRank_[r];
    std::vector<Hop> hops = nic < 0 ? std::vector<Hop>{} : hostRoute(gpuRef(r), nicRef(nic));
    if (hops.empty()) {
      const int32_t other = firstOtherNode(r);
      pathBetween(r, other);  // throws: no NIC, or no PCIe path to it
      pathBetween(other, r);
      throw std::runtime_error("no route from rank " + std::to_string(r) + " to its NIC");
    }
    for (const Hop& hop : hops) up[r].push_back(alphaOf(hop));
    down[r].assign(up[r].rbegin(), up[r].rend());  // the same links, walked the other way
  }
  std::vector<std::vector<int32_t>> ranksOfNic(topology_.nics.size());
  for (int32_t r = 0; r < n; ++r) ranksOfNic[nicOfRank_[r]].push_back(r);
  std::vector<std::vector<double>> across(topology_.nics.size());
  for (size_t srcNic = 0; srcNic < topology_.nics.size(); ++srcNic) {
    if (ranksOfNic[srcNic].empty()) continue;
    const DeviceRef from = nicRef(static_cast<int32_t>(srcNic));
    const std::vector<int32_t> viaLink = search(from, -1, true);
    for (size_t dstNic = 0; dstNic < topology_.nics.size(); ++dstNic) {
      across[dstNic].clear();
      if (ranksOfNic[dstNic].empty() || topology_.nics[dstNic].node == topology_.nics[srcNic].node) continue;
      const std::vector<Hop> hops = walkBack(viaLink, from, nicRef(static_cast<int32_t>(dstNic)));
      if (hops.empty()) pathBetween(ranksOfNic[srcNic].front(), ranksOfNic[dstNic].front());  // throws
      for (const Hop& hop : hops) across[dstNic].push_back(alphaOf(hop));
    }
    for (int32_t src : ranksOfNic[srcNic]) {
      for (int32_t dst = 0; dst < n; ++dst) {
        if (topology_.gpus[dst].node == topology_.gpus[src].node) continue;
        double alpha = 0;
        for (double a : up[src]) alpha += a;
        for (double a : across[nicOfRank_[dst]]) alpha += a;
        for (double a : down[dst]) alpha += a;
        visit(src, dst, alpha, true);
      }
    }
  }
}

Path pathBetween(const Topology& topology, int32_t src, int32_t dst) {
  return Router(topology).pathBetween(src, dst);
}

std::vector<Resource> resourcesOf(const Topology& topology) { return Router(topology).resources(); }

}  // namespace tuccl
