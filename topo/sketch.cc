#include "topo/sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "topo/binding.h"
#include "topo/paths.h"

namespace tuccl {

std::string_view sketchVariantName(SketchVariant variant) {
  switch (variant) {
    case SketchVariant::FullMesh:
      return "full-mesh";
    case SketchVariant::Pruned:
      return "pruned";
    case SketchVariant::Relay:
      return "relay";
  }
  return "?";
}

std::optional<SketchVariant> parseSketchVariant(std::string_view name) {
  for (SketchVariant variant : {SketchVariant::FullMesh, SketchVariant::Pruned, SketchVariant::Relay}) {
    if (sketchVariantName(variant) == name) return variant;
  }
  return std::nullopt;
}

std::vector<int32_t> Sketch::interNodePeersOf(int32_t rank) const {
  std::vector<int32_t> peers;
  auto first =
      std::lower_bound(interNodePairs.begin(), interNodePairs.end(), std::make_pair(rank, INT32_MIN));
  for (auto it = first; it != interNodePairs.end() && it->first == rank; ++it) peers.push_back(it->second);
  return peers;
}

Sketch buildSketch(const Topology& topology, SketchVariant variant) {
  Router router(topology);
  Sketch sketch;
  sketch.variant = variant;
  sketch.nNodes = topology.nNodes();
  sketch.nicOfRank = router.nicOfRank();
  sketch.groups = groupNics(topology);
  int32_t n = topology.nRanks();
  for (int32_t a = 0; a < n; ++a) {
    for (int32_t b = 0; b < n; ++b) {
      if (a == b || topology.gpus[a].node != topology.gpus[b].node) continue;
      PathKind kind = router.pathBetween(a, b).kind;
      if (kind == PathKind::NVLink || kind == PathKind::NVSwitch || kind == PathKind::Pcie) {
        sketch.intraNodeLinks.emplace_back(a, b);
      }
    }
  }
  std::vector<std::vector<int32_t>> boundTo(topology.nics.size());
  for (int32_t r = 0; r < n; ++r) {
    if (sketch.nicOfRank[r] >= 0) boundTo[sketch.nicOfRank[r]].push_back(r);
  }
  sketch.forwardedBy.assign(n, {});
  std::set<std::pair<int32_t, int32_t>> pairs;
  if (variant == SketchVariant::FullMesh) {
    for (int32_t a = 0; a < n; ++a) {
      sketch.forwardedBy[a] = {a};
      for (int32_t b = 0; b < n; ++b) {
        if (topology.gpus[a].node != topology.gpus[b].node) pairs.emplace(a, b);
      }
    }
  } else {
    for (const std::vector<int32_t>& group : sketch.groups) {
      for (int32_t from : group) {
        const std::vector<int32_t>& senders = boundTo[from];
        if (senders.empty()) continue;
        if (variant == SketchVariant::Relay) sketch.forwardedBy[senders.back()] = senders;
        for (int32_t to : group) {
          const std::vector<int32_t>& receivers = boundTo[to];
          if (to == from || receivers.empty()) continue;
          if (variant == SketchVariant::Pruned) {
            for (int32_t a : senders) {
              for (int32_t b : receivers) pairs.emplace(a, b);
            }
          } else {
            pairs.emplace(senders.back(), receivers.front());
          }
        }
      }
    }
    if (variant == SketchVariant::Pruned) {
      for (int32_t r = 0; r < n; ++r) sketch.forwardedBy[r] = {r};
    }
  }
  sketch.interNodePairs.assign(pairs.begin(), pairs.end());
  return sketch;
}

namespace {

// Local index (position within its node) of every rank.
std::vector<int32_t> localIndices(const Topology& topology) {
  std::vector<int32_t> local(topology.gpus.size());
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    std::vector<int32_t> ranks = ranksOfNode(topology, node);
    for (size_t i = 0; i < ranks.size(); ++i) local[ranks[i]] = static_cast<int32_t>(i);
  }
  return local;
}

}  // namespace

nlohmann::json tacclSketchJson(const Topology& topology, const Sketch& sketch,
                               const TacclSketchOptions& options) {
  using nlohmann::json;
  if (topology.nNodes() == 0 || topology.empty()) throw std::invalid_argument("the topology has no GPUs");
  int32_t perNode = static_cast<int32_t>(ranksOfNode(topology, 0).size());
  for (int32_t node = 1; node < topology.nNodes(); ++node) {
    if (static_cast<int32_t>(ranksOfNode(topology, node).size()) != perNode) {
      throw std::invalid_argument("TACCL sketches need nodes with equal GPU counts");
    }
  }
  std::vector<int32_t> local = localIndices(topology);
  std::vector<int32_t> node0 = ranksOfNode(topology, 0);

  // Intra-node: TACCL's switch strategy for NVSwitch nodes, the physical links otherwise.
  json intranode;
  std::vector<std::vector<int32_t>> switches;
  for (size_t s = 0; s < topology.switches.size(); ++s) {
    if (topology.switches[s].kind != SwitchKind::NVSwitch || topology.switches[s].node != 0) continue;
    std::vector<int32_t> members;
    for (const Link& link : topology.links) {
      DeviceRef self = switchRef(static_cast<int32_t>(s));
      if (link.kind != LinkKind::NVLink || (link.a != self && link.b != self)) continue;
      DeviceRef other = link.a == self ? link.b : link.a;
      if (other.kind == DeviceKind::Gpu) members.push_back(local[other.index]);
    }
    std::sort(members.begin(), members.end());
    if (!members.empty()) switches.push_back(members);
  }
  intranode["strategy"] = switches.empty() ? "none" : "switch";
  intranode["switches"] = switches;
  intranode["switch_hyperedge_strategy"] =
      std::vector<std::string>(switches.size(), std::string(options.hyperedgeStrategy));

  // Inter-node, in local indices as seen from node 0 (identical nodes).
  std::map<int32_t, std::set<int32_t>> conn;
  for (auto [a, b] : sketch.interNodePairs) {
    if (topology.gpus[a].node == 0) conn[local[a]].insert(local[b]);
  }
  json internodeConn = json::object();
  for (const auto& [sender, receivers] : conn) {
    internodeConn[std::to_string(sender)] = std::vector<int32_t>(receivers.begin(), receivers.end());
  }
  json revMap = json::object();
  for (int32_t rank : node0) {
    if (!conn.contains(local[rank])) continue;
    std::vector<int32_t> forwarded;
    for (int32_t r : sketch.forwardedBy[rank]) forwarded.push_back(local[r]);
    revMap[std::to_string(local[rank])] = forwarded;
  }
  json internode{{"strategy", "relay"},
                 {"internode_conn", internodeConn},
                 {"gpus_to_sender_rev_map", revMap},
                 {"enforce_ordering", true}};

  // Symmetry: the smallest rotation of local indices that maps links, NIC sharing and
  // connections of node 0 onto themselves; then rotation by whole nodes.
  auto preserved = [&](int32_t d) {
    auto rot = [&](int32_t i) { return (i + d) % perNode; };
    auto laneKey = [&](int32_t a, int32_t b) {
      int32_t lanes = 0;
      for (const Link& link : topology.links) {
        if (!isGpuFabric(link.kind)) continue;
        if ((link.a == gpuRef(node0[a]) && link.b == gpuRef(node0[b])) ||
            (link.b == gpuRef(node0[a]) && link.a == gpuRef(node0[b]))) {
          lanes += link.lanes;
        }
      }
      return lanes;
    };
    for (int32_t a = 0; a < perNode; ++a) {
      for (int32_t b = 0; b < perNode; ++b) {
        if (a != b && laneKey(a, b) != laneKey(rot(a), rot(b))) return false;
        bool shareNic = sketch.nicOfRank[node0[a]] == sketch.nicOfRank[node0[b]];
        if (shareNic != (sketch.nicOfRank[node0[rot(a)]] == sketch.nicOfRank[node0[rot(b)]])) return false;
      }
      std::set<int32_t> rotated;
      for (int32_t b : conn[a]) rotated.insert(rot(b));
      if (rotated != conn[rot(a)]) return false;
    }
    return true;
  };
  json symmetry = json::array();
  for (int32_t d = 1; d < perNode; ++d) {
    if (perNode % d == 0 && preserved(d)) {
      symmetry.push_back({d, perNode});
      break;
    }
  }
  if (topology.nNodes() > 1) symmetry.push_back({perNode, topology.nRanks()});

  return json{{"nnodes", topology.nNodes()},
              {"intranode_sketch", intranode},
              {"internode_sketch", internode},
              {"symmetry_offsets", symmetry},
              {"hyperparameters", {{"input_chunkup", options.inputChunkup}}}};
}

}  // namespace tuccl
