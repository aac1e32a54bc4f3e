#include "synth/exact_topology.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

namespace tuccl {

namespace {

// Lanes between GPU pairs and from GPUs to each NVSwitch, read off the fabric links.
struct FabricLanes {
  std::vector<std::vector<int32_t>> direct;             // [a][b], symmetric (links are full duplex)
  std::map<int32_t, std::vector<int32_t>> switchPorts;  // switch index -> lanes per GPU (0: none)
};

FabricLanes fabricLanesOf(const Topology& topology) {
  const int32_t n = topology.nRanks();
  FabricLanes lanes;
  lanes.direct.assign(n, std::vector<int32_t>(n, 0));
  for (const Link& link : topology.links) {
    if (!isGpuFabric(link.kind)) continue;
    const DeviceRef a = link.a.kind == DeviceKind::Gpu ? link.a : link.b;
    const DeviceRef b = link.a.kind == DeviceKind::Gpu ? link.b : link.a;
    if (a.kind != DeviceKind::Gpu) continue;
    const int32_t width = std::max(link.lanes, 1);
    if (b.kind == DeviceKind::Gpu) {
      lanes.direct[a.index][b.index] += width;
      lanes.direct[b.index][a.index] += width;
    } else if (b.kind == DeviceKind::Switch && topology.switches[b.index].kind == SwitchKind::NVSwitch) {
      auto& ports = lanes.switchPorts[b.index];
      ports.resize(n, 0);
      ports[a.index] += width;
    }
  }
  return lanes;
}

int32_t commonLaneDivisor(const FabricLanes& lanes) {
  int32_t divisor = 0;
  for (const auto& row : lanes.direct) {
    for (int32_t width : row) divisor = std::gcd(divisor, width);
  }
  for (const auto& [index, ports] : lanes.switchPorts) {
    for (int32_t width : ports) divisor = std::gcd(divisor, width);
  }
  return divisor;
}

// An NVSwitch joins every pair of its GPUs; what one GPU sends (receives) through it in a round is
// bounded by its port, whoever the peers are (SCCL's switch groups; TACCL's switch hyperedges).
void addSwitch(ExactTopology& exact, int32_t switchIndex, const std::vector<int32_t>& ports,
               int32_t divisor) {
  const int32_t n = exact.nGpus;
  for (int32_t g = 0; g < n; ++g) {
    if (ports[g] == 0) continue;
    BandwidthGroup out{
        {}, ports[g] / divisor, "gpu" + std::to_string(g) + " out to nvswitch" + std::to_string(switchIndex)};
    BandwidthGroup in{{},
                      ports[g] / divisor,
                      "gpu" + std::to_string(g) + " in from nvswitch" + std::to_string(switchIndex)};
    for (int32_t h = 0; h < n; ++h) {
      if (h == g || ports[h] == 0) continue;
      out.links.emplace_back(g, h);
      in.links.emplace_back(h, g);
      // A pair through the switch runs at the slower of its two ports.
      exact.capacity[g][h] += std::min(ports[g], ports[h]) / divisor;
    }
    exact.groups.push_back(std::move(out));
    exact.groups.push_back(std::move(in));
  }
}

Status checkConnected(const ExactTopology& exact) {
  const auto distances = hopDistances(exact);
  for (int32_t a = 0; a < exact.nGpus; ++a) {
    for (int32_t b = 0; b < exact.nGpus; ++b) {
      if (distances[a][b] < 0) {
        return makeError(ErrorCode::InvalidArgument,
                         "exact synthesis uses the GPU fabric (NVLink, xGMI) only, and GPU " +
                             std::to_string(a) + " cannot reach GPU " + std::to_string(b) + " over it");
      }
    }
  }
  return {};
}

// Chunks per round a GPU can take in (or send out): its links, capped by any group that holds
// only links into (out of) it.
int64_t portCapacity(const ExactTopology& topology, int32_t gpu, bool incoming) {
  auto touches = [&](std::pair<int32_t, int32_t> link) {
    return incoming ? link.second == gpu : link.first == gpu;
  };
  int64_t total = 0;
  for (int32_t peer = 0; peer < topology.nGpus; ++peer)
    total += incoming ? topology.capacity[peer][gpu] : topology.capacity[gpu][peer];
  int64_t best = total;
  for (const BandwidthGroup& group : topology.groups) {
    if (group.links.empty() || !std::all_of(group.links.begin(), group.links.end(), touches)) continue;
    int64_t outside = total;
    for (auto [src, dst] : group.links) outside -= topology.capacity[src][dst];
    best = std::min(best, group.chunksPerRound + std::max<int64_t>(outside, 0));
  }
  return best;
}

}  // namespace

Expected<ExactTopology> exactTopologyOf(const Topology& topology) {
  if (topology.nNodes() != 1 || topology.nRanks() > kMaxExactGpus) {
    return makeError(ErrorCode::InvalidArgument,
                     "exact synthesis takes one node of at most " + std::to_string(kMaxExactGpus) +
                         " GPUs; topology '" + topology.name + "' has " + std::to_string(topology.nNodes()) +
                         " node(s) and " + std::to_string(topology.nRanks()) + " GPUs");
  }
  if (topology.nRanks() < 2) {
    return makeError(ErrorCode::InvalidArgument, "exact synthesis needs at least 2 GPUs; topology '" +
                                                     topology.name + "' has " +
                                                     std::to_string(topology.nRanks()));
  }
  const FabricLanes lanes = fabricLanesOf(topology);
  const int32_t divisor = commonLaneDivisor(lanes);
  if (divisor == 0) {
    return makeError(ErrorCode::InvalidArgument,
                     "exact synthesis uses the GPU fabric (NVLink, xGMI) only, and topology '" +
                         topology.name + "' has no such links between its GPUs");
  }
  ExactTopology exact;
  exact.nGpus = topology.nRanks();
  exact.capacity.assign(exact.nGpus, std::vector<int32_t>(exact.nGpus, 0));
  for (int32_t a = 0; a < exact.nGpus; ++a) {
    for (int32_t b = 0; b < exact.nGpus; ++b) exact.capacity[a][b] = lanes.direct[a][b] / divisor;
  }
  for (const auto& [index, ports] : lanes.switchPorts) addSwitch(exact, index, ports, divisor);
  if (Status connected = checkConnected(exact); !connected.ok()) return connected;
  return exact;
}

ExactTopology transposed(const ExactTopology& topology) {
  ExactTopology result = topology;
  for (int32_t a = 0; a < topology.nGpus; ++a) {
    for (int32_t b = 0; b < topology.nGpus; ++b) result.capacity[a][b] = topology.capacity[b][a];
  }
  for (BandwidthGroup& group : result.groups) {
    for (auto& [src, dst] : group.links) std::swap(src, dst);
  }
  return result;
}

bool isSymmetric(const ExactTopology& topology) {
  const ExactTopology reversed = transposed(topology);
  if (reversed.capacity != topology.capacity) return false;
  // Groups of a switch come in out/in pairs, which transpose into each other.
  auto canonical = [](const ExactTopology& t) {
    std::vector<std::pair<int32_t, std::vector<std::pair<int32_t, int32_t>>>> groups;
    for (const BandwidthGroup& group : t.groups) {
      auto links = group.links;
      std::sort(links.begin(), links.end());
      groups.emplace_back(group.chunksPerRound, std::move(links));
    }
    std::sort(groups.begin(), groups.end());
    return groups;
  };
  return canonical(reversed) == canonical(topology);
}

std::vector<std::vector<int32_t>> hopDistances(const ExactTopology& topology) {
  const int32_t n = topology.nGpus;
  std::vector<std::vector<int32_t>> distances(n, std::vector<int32_t>(n, -1));
  for (int32_t source = 0; source < n; ++source) {
    std::deque<int32_t> frontier{source};
    distances[source][source] = 0;
    while (!frontier.empty()) {
      const int32_t at = frontier.front();
      frontier.pop_front();
      for (int32_t next = 0; next < n; ++next) {
        if (!topology.hasLink(at, next) || distances[source][next] >= 0) continue;
        distances[source][next] = distances[source][at] + 1;
        frontier.push_back(next);
      }
    }
  }
  return distances;
}

int64_t cutCapacity(const ExactTopology& topology, uint32_t inside) {
  auto in = [&](int32_t gpu) { return ((inside >> gpu) & 1u) != 0; };
  int64_t direct = 0;
  int64_t receivers = 0;
  int64_t senders = 0;
  for (int32_t a = 0; a < topology.nGpus; ++a) {
    if (in(a)) {
      receivers += portCapacity(topology, a, /*incoming=*/true);
    } else {
      senders += portCapacity(topology, a, /*incoming=*/false);
    }
    for (int32_t b = 0; b < topology.nGpus; ++b) {
      if (!in(a) && in(b)) direct += topology.capacity[a][b];
    }
  }
  return std::min({direct, receivers, senders});
}

}  // namespace tuccl
