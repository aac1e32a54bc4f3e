// The simulator's picture of a topology: resources with capacities, the path between any two
// ranks, and the physical numbers the lower bound needs. Built from a Topology (network.cc,
// sim/network_topology.h) and free of topo/ headers.
//
// Why a separate view: the event engine needs only capacities and paths, as flat arrays indexed
// by resource id, not the topology's device graph. Everything in sim/ that reads a Plan sees the
// topology through this header only; network.cc is the one such file that reads the Topology
// (through topo/paths.h's Router). The NCCL model (nccl_model.h) reads no plan: it takes the
// Topology itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_model.h"
#include "support/source_text.h"
#include "support/status.h"
#include "topo/load.h"

namespace tuccl {

struct NetworkResource {
  std::string name;  ///< Router naming: "n0.gpu3->n0.nvswitch0", "n1.nic0.tx"
  double capacityGBps = 0;
};

struct NetworkPath {
  HopClass hop = HopClass::NVLink;  ///< latency class (NCCL's per-hop table)
  bool network = false;             ///< goes through a NIC
  std::vector<int32_t> resources;   ///< sorted, unique
  double alphaUs = 0;               ///< sum of the link latencies
};

class Network {
 public:
  struct Impl;
  Network() = default;
  explicit Network(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

  const std::string& name() const;
  int32_t nRanks() const;
  int32_t nNodes() const;
  int32_t nodeOf(int32_t rank) const;
  int32_t maxGpusPerNode() const;
  const std::vector<NetworkResource>& resources() const;
  /// The route of a transfer (topo/paths.h Router::pathBetween), cached; thread-safe.
  const NetworkPath& path(int32_t src, int32_t dst) const;

  // Physical numbers for the lower bound (sim/lower_bound.h).
  double ingressGBps(int32_t rank) const;      ///< sum of the links into the GPU
  double minAlphaIntoUs(int32_t rank) const;   ///< fastest path into the rank from another rank
  double nicRxGBps(int32_t node) const;        ///< sum of the node's NIC rx links
  double minNetworkAlphaUs() const;            ///< fastest path through a NIC (0 when none)
  /// Capacity into the first half of the nodes ([0, nNodes/2)) from the rest: its NICs' rx, or
  /// the aggregation downlinks into its racks when the racks fall on one side and that is less.
  double bisectionGBps() const;

 private:
  std::shared_ptr<Impl> impl_;
};

/// Any spec loadTopology accepts ("preset:NAME[:nodes=N,gpus=K,...]", .json, .xml, "local"), with
/// its options (--gpu-fabric, --nodes).
Expected<Network> loadNetwork(std::string_view spec, const LoadOptions& options = {});
/// A topology in TuCCL JSON (docs/topology-format.md).
Expected<Network> networkFromTopologyJson(const SourceText& source);

}  // namespace tuccl
