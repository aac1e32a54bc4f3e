// Resource paths: which directed links a transfer between two ranks occupies.
//
// In:  a Topology.
// Out: for every ordered rank pair a Path (resource ids, summed alpha, bottleneck bandwidth), and
//      the list of resources with their capacities, for max-min fair sharing in the simulator.
//
// Every link gives two resources, one per direction: id 2·link is a→b, 2·link+1 is b→a. Names read
// "n0.gpu3->n0.nvswitch0"; a NIC's network link reads "n0.nic1.tx" (NIC→switch) and "n0.nic1.rx".
//
// Routing (what NCCL would do, so the simulator sees the same contention):
//   intra-node  1. a direct NVLink, else a direct xGMI link (AMD's GPU fabric, RCCL's LINK_NVL);
//               2. GPU → NVSwitch → GPU;
//               3. NVLink (else xGMI) through one intermediate GPU (NCCL's PATH_NVB; DGX-1 and NDv2
//                  pairs that are not adjacent in the hybrid cube mesh): the GPU with the widest
//                  bottleneck, lowest rank on ties;
//               4. the PCIe tree (through switches, root complexes and the CPU interconnect).
//   inter-node  source GPU → (PCIe) → its bound NIC (stage 1, binding.h) → tx → ToR [→ aggregation
//               → ToR] → rx → destination's bound NIC → (PCIe) → destination GPU. Without GPUDirect
//               RDMA (Nic::gdr false) the PCIe part bounces through the NIC's root complex.
//   The path alpha is the sum of the link alphas; its bandwidth is the narrowest link's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

using ResourceId = int32_t;

/// One direction of one link.
struct Resource {
  std::string name;
  int32_t link = 0;
  bool reverse = false;  ///< false: a→b, true: b→a
  LinkKind kind = LinkKind::PCIe;
  double alphaUs = 0;
  double bandwidthGBps = 0;
};

enum class PathKind : uint8_t { Local, NVLink, NVSwitch, NVLinkViaGpu, Pcie, Network, Xgmi, XgmiViaGpu };
std::string_view pathKindName(PathKind kind);

struct Path {
  PathKind kind = PathKind::Local;
  std::vector<ResourceId> resources;
  double alphaUs = 0;
  double bandwidthGBps = 0;  ///< bottleneck; 0 for Local
};

/// Precomputed routing state for one topology (a copy of it, the adjacency and the NIC binding).
class Router {
 public:
  explicit Router(Topology topology);

  const Topology& topology() const { return topology_; }
  const std::vector<Resource>& resources() const { return resources_; }
  /// Stage-1 binding: nicOfRank()[r] is the NIC rank r uses, -1 when its node has none.
  const std::vector<int32_t>& nicOfRank() const { return nicOfRank_; }
  /// The path of a transfer from rank `src` to rank `dst`; throws std::runtime_error when the
  /// topology does not connect them.
  Path pathBetween(int32_t src, int32_t dst) const;
  /// pathBetween(src, dst).alphaUs (and whether it is a network path) for every ordered pair of
  /// distinct ranks, src-major, without routing each pair: node-local pairs as pathBetween,
  /// inter-node pairs from every rank's route to its NIC (once per rank) and one breadth-first
  /// search per source NIC (the tree pathBetween's own searches walk), the hop alphas summed in
  /// pathBetween's order, so every alpha is bitwise the same. Throws where pathBetween throws.
  void forEachPathAlpha(const std::function<void(int32_t src, int32_t dst, double alphaUs, bool network)>& visit) const;

 private:
  struct Hop {
    int32_t link;
    bool reverse;
  };
  int32_t vertexOf(DeviceRef device) const;
  DeviceRef deviceOf(int32_t vertex) const;
  std::vector<Hop> route(DeviceRef from, DeviceRef to, bool network) const;
  /// route's breadth-first search: the link each vertex was reached by (-1 the start, -2 never),
  /// stopping once `to` is taken from the queue (never, for a vertex index of -1).
  std::vector<int32_t> search(DeviceRef from, int32_t toVertex, bool network) const;
  std::vector<Hop> walkBack(const std::vector<int32_t>& viaLink, DeviceRef from, DeviceRef to) const;
  std::vector<Hop> hostRoute(DeviceRef from, DeviceRef to) const;
  int32_t directLink(DeviceRef a, DeviceRef b, LinkKind kind) const;
  Path makePath(PathKind kind, const std::vector<Hop>& hops) const;
  Hop hopOf(int32_t link, DeviceRef from) const;

  Topology topology_;
  std::vector<Resource> resources_;
  std::vector<int32_t> nicOfRank_;
  std::vector<std::vector<int32_t>> adjacency_;  // vertex → incident links
};

/// Convenience: Router(topology).pathBetween(src, dst).
Path pathBetween(const Topology& topology, int32_t src, int32_t dst);
/// Convenience: Router(topology).resources().
std::vector<Resource> resourcesOf(const Topology& topology);

}  // namespace tuccl
