// Multi-node composition: N identical nodes on one switch, or a two-tier Clos.
#include <stdexcept>

#include "topo/limits.h"
#include "topo/topology.h"

namespace tuccl {

Topology composeCluster(const Topology& node, const ClusterOptions& options) {
  if (node.nodes.size() != 1)
    throw std::invalid_argument("a cluster is built from a one-node topology, and this one has " + std::to_string(node.nodes.size()) + " nodes");
  for (const Switch& sw : node.switches) {
    if (isNetworkSwitch(sw.kind))
      throw std::invalid_argument("a cluster is built from a node without a network, and this topology already has network switches");
  }
  if (std::optional<std::string> problem = rangeProblem(options.nodes, topo_limits::kNodes))
    throw std::invalid_argument(*problem);
  if (options.nodesPerTor < 1) throw std::invalid_argument("nodes per ToR must be at least 1");
  if (!(options.oversubscription >= 1.0)) throw std::invalid_argument("oversubscription must be at least 1");

  Topology cluster;
  cluster.name = node.name;
  auto offsetOf = [&](DeviceRef ref, int32_t copy) {
    switch (ref.kind) {
      case DeviceKind::Gpu:
        ref.index += copy * static_cast<int32_t>(node.gpus.size());
        break;
      case DeviceKind::Nic:
        ref.index += copy * static_cast<int32_t>(node.nics.size());
        break;
      case DeviceKind::Switch:
        ref.index += copy * static_cast<int32_t>(node.switches.size());
        break;
    }
    return ref;
  };
  // Devices first (node-major), so that every kind stays grouped by node.
  for (int32_t copy = 0; copy < options.nodes; ++copy) {
    Node n = node.nodes[0];
    if (options.nodes > 1 || n.name.empty()) n.name = "node" + std::to_string(copy);
    cluster.nodes.push_back(n);
  }
  for (int32_t copy = 0; copy < options.nodes; ++copy) {
    for (Gpu gpu : node.gpus) {
      gpu.rank = static_cast<int32_t>(cluster.gpus.size());
      gpu.node = copy;
      cluster.gpus.push_back(gpu);
    }
  }
  for (int32_t copy = 0; copy < options.nodes; ++copy) {
    for (Nic nic : node.nics) {
      nic.node = copy;
      cluster.nics.push_back(nic);
    }
  }
  for (int32_t copy = 0; copy < options.nodes; ++copy) {
    for (Switch sw : node.switches) {
      sw.node = copy;
      cluster.switches.push_back(sw);
    }
  }
  for (int32_t copy = 0; copy < options.nodes; ++copy) {
    for (Link link : node.links) {
      link.a = offsetOf(link.a, copy);
      link.b = offsetOf(link.b, copy);
      cluster.links.push_back(link);
    }
  }
  if (node.nics.empty()) return cluster;

  // The network: NIC ↔ ToR links (tx is NIC→ToR, rx is ToR→NIC), then ToR ↔ aggregation uplinks.
  int32_t nodesPerTor = options.fabric == Fabric::Switch ? options.nodes : options.nodesPerTor;
  int32_t tors = (options.nodes + nodesPerTor - 1) / nodesPerTor;
  int32_t firstTor = static_cast<int32_t>(cluster.switches.size());
  for (int32_t t = 0; t < tors; ++t) cluster.switches.push_back(Switch{SwitchKind::ToR, -1, "", ""});
  std::vector<double> torDownlink(tors, 0.0);
  std::vector<int32_t> torPorts(tors, 0);
  for (size_t i = 0; i < cluster.nics.size(); ++i) {
    const Nic& nic = cluster.nics[i];
    int32_t tor = nic.node / nodesPerTor;
    cluster.links.push_back(Link{nicRef(static_cast<int32_t>(i)), switchRef(firstTor + tor),
                                 LinkKind::Network, options.networkAlphaUs, nic.bandwidthGBps, 1});
    torDownlink[tor] += nic.bandwidthGBps;
    ++torPorts[tor];
  }
  if (options.fabric == Fabric::Clos) {
    // One logical aggregation switch: the ECMP spread of a rack's uplinks over the aggregation
    // tier is folded into one uplink resource per ToR, so oversubscription shows as one bottleneck.
    int32_t agg = static_cast<int32_t>(cluster.switches.size());
    cluster.switches.push_back(Switch{SwitchKind::Aggregation, -1, "", ""});
    for (int32_t t = 0; t < tors; ++t) {
      cluster.links.push_back(Link{switchRef(firstTor + t), switchRef(agg), LinkKind::Network,
                                   options.uplinkAlphaUs, torDownlink[t] / options.oversubscription,
                                   torPorts[t]});
    }
  }
  return cluster;
}

}  // namespace tuccl
