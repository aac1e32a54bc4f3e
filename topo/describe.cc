// The readable summary of `tuccl-topo show`.
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>

#include "topo/load.h"
#include "topo/paths.h"

namespace tuccl {

namespace {

std::string number(double value) {
  std::ostringstream out;
  out << std::setprecision(4) << value;
  return out.str();
}

std::string rankList(const std::vector<int32_t>& ranks) {
  std::string text;
  for (int32_t r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text.empty() ? "-" : text;
}

}  // namespace

std::string describeTopology(const Topology& topology) {
  std::ostringstream out;
  out << "topology  " << (topology.name.empty() ? "(unnamed)" : topology.name) << "\n";
  out << "signature " << signatureHex(topologySignature(topology)) << "\n";
  out << "nodes " << topology.nNodes() << ", GPUs " << topology.nRanks() << ", NICs " << topology.nics.size()
      << ", switches " << topology.switches.size() << ", links " << topology.links.size() << "\n";
  if (topology.empty()) {
    out << "no GPUs: nothing to route or prune\n";
    return out.str();
  }
  Router router(topology);
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    std::vector<int32_t> ranks = ranksOfNode(topology, node);
    out << "node " << node;
    if (!topology.nodes[node].name.empty()) out << " (" << topology.nodes[node].name << ")";
    out << ": ranks " << rankList(ranks) << "\n";
    for (int32_t nic : nicsOfNode(topology, node)) {
      std::vector<int32_t> bound;
      for (int32_t r : ranks) {
        if (router.nicOfRank()[r] == nic) bound.push_back(r);
      }
      const Nic& n = topology.nics[nic];
      out << "  " << deviceName(topology, nicRef(nic));
      if (!n.name.empty()) out << " " << n.name;
      out << "  " << number(n.bandwidthGBps) << " GB/s" << (n.gdr ? "" : " (no GPUDirect RDMA)") << "  ranks "
          << rankList(bound) << "\n";
    }
    std::vector<int32_t> unbound;
    for (int32_t r : ranks) {
      if (router.nicOfRank()[r] < 0) unbound.push_back(r);
    }
    if (!unbound.empty()) out << "  no NIC for ranks " << rankList(unbound) << "\n";
  }
  // Link classes: (kind, alpha, bandwidth, lanes) → count.
  std::map<std::tuple<int, double, double, int32_t>, int32_t> classes;
  for (const Link& link : topology.links) {
    ++classes[{static_cast<int>(link.kind), link.alphaUs, link.bandwidthGBps, link.lanes}];
  }
  out << "link classes (bandwidth per direction):\n";
  for (const auto& [key, count] : classes) {
    const auto& [kind, alpha, bandwidth, lanes] = key;
    out << "  " << std::left << std::setw(8) << linkKindName(static_cast<LinkKind>(kind)) << std::right
        << std::setw(5) << count << " x  alpha " << number(alpha) << " us  " << number(bandwidth) << " GB/s";
    if (lanes > 1) out << "  (" << lanes << " lanes)";
    out << "\n";
  }
  return out.str();
}

}  // namespace tuccl
