#include "topo/gpu_fabric.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "topo/defaults.h"

namespace tuccl {

namespace {

using namespace topo_defaults;

constexpr std::string_view kNames[] = {"nvswitch", "hybrid-cube-mesh", "pcie"};

int32_t nvswitchLanes(int32_t sm) {
  if (sm >= 90) return kH100NvswitchLanes;
  if (sm >= 70 && sm < 80) return kV100NvswitchLanes;
  return kA100NvswitchLanes;
}

// The topology without GPU-fabric links and NVSwitches; switch indices renumbered.
Topology withoutGpuFabric(Topology topology) {
  std::vector<int32_t> newIndex(topology.switches.size(), -1);
  std::vector<Switch> kept;
  for (size_t s = 0; s < topology.switches.size(); ++s) {
    if (topology.switches[s].kind == SwitchKind::NVSwitch) continue;
    newIndex[s] = static_cast<int32_t>(kept.size());
    kept.push_back(topology.switches[s]);
  }
  std::vector<Link> links;
  for (Link link : topology.links) {
    if (isGpuFabric(link.kind)) continue;
    bool dropped = false;
    for (DeviceRef* end : {&link.a, &link.b}) {
      if (end->kind != DeviceKind::Switch) continue;
      end->index = newIndex[end->index];
      dropped = dropped || end->index < 0;
    }
    if (!dropped) links.push_back(link);
  }
  topology.switches = std::move(kept);
  topology.links = std::move(links);
  return topology;
}

void addNvSwitch(Topology& topology, int32_t node, const std::vector<int32_t>& ranks) {
  topology.switches.push_back(Switch{SwitchKind::NVSwitch, node, "nvswitch", ""});
  DeviceRef nvswitch = switchRef(static_cast<int32_t>(topology.switches.size()) - 1);
  for (int32_t rank : ranks) {
    int32_t sm = topology.gpus[rank].sm;
    int32_t lanes = nvswitchLanes(sm);
    topology.links.push_back(Link{gpuRef(rank), nvswitch, LinkKind::NVLink, kNvswitchHopAlphaUs,
                                  lanes * nvlinkLaneGBps(sm), lanes});
  }
}

void addHybridCubeMesh(Topology& topology, int32_t node, const std::vector<int32_t>& ranks) {
  if (ranks.size() != 8) {
    throw std::invalid_argument("--gpu-fabric hybrid-cube-mesh wires 8 GPUs (DGX-1); node " + std::to_string(node) +
                                " has " + std::to_string(ranks.size()));
  }
  for (int i = 0; i < 8; ++i) {
    for (int j = i + 1; j < 8; ++j) {
      int32_t lanes = kDgx1NvlinkLanes[i][j];
      if (lanes == 0) continue;
      double lane = std::min(nvlinkLaneGBps(topology.gpus[ranks[i]].sm), nvlinkLaneGBps(topology.gpus[ranks[j]].sm));
      topology.links.push_back(
          Link{gpuRef(ranks[i]), gpuRef(ranks[j]), LinkKind::NVLink, kNvlinkAlphaUs, lanes * lane, lanes});
    }
  }
}

bool hasGpuFabric(const Topology& topology, const std::set<int32_t>& ranks) {
  for (const Link& link : topology.links) {
    if (!isGpuFabric(link.kind)) continue;
    for (DeviceRef end : {link.a, link.b}) {
      if (end.kind == DeviceKind::Gpu && ranks.contains(end.index)) return true;
    }
  }
  return false;
}

}  // namespace

std::string_view gpuFabricName(GpuFabric fabric) { return kNames[static_cast<size_t>(fabric)]; }

std::optional<GpuFabric> parseGpuFabric(std::string_view name) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] == name) return static_cast<GpuFabric>(i);
  }
  return std::nullopt;
}

std::vector<std::string> gpuFabricNames() { return {std::begin(kNames), std::end(kNames)}; }

Topology withGpuFabric(Topology topology, GpuFabric fabric) {
  topology = withoutGpuFabric(std::move(topology));
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    std::vector<int32_t> ranks = ranksOfNode(topology, node);
    if (ranks.empty()) continue;
    if (fabric == GpuFabric::NvSwitch) addNvSwitch(topology, node, ranks);
    if (fabric == GpuFabric::HybridCubeMesh) addHybridCubeMesh(topology, node, ranks);
  }
  return topology;
}

std::optional<std::string> missingNvlinkWarning(const Topology& topology) {
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    std::vector<int32_t> ranks = ranksOfNode(topology, node);
    if (ranks.size() != 8 && ranks.size() != 16) continue;
    std::set<int32_t> sms;
    bool nvlinkParts = true;
    for (int32_t rank : ranks) {
      const Gpu& gpu = topology.gpus[rank];
      nvlinkParts = nvlinkParts && gpu.arch.empty() && (gpu.sm == 0 || gpu.sm == 70 || gpu.sm == 80 || gpu.sm == 90);
      sms.insert(gpu.sm);
    }
    if (!nvlinkParts || hasGpuFabric(topology, {ranks.begin(), ranks.end()})) continue;
    std::string which;
    for (int32_t sm : sms) which += (which.empty() ? "" : "/") + (sm == 0 ? std::string("unknown") : std::to_string(sm));
    return "node " + std::to_string(node) + " has " + std::to_string(ranks.size()) + " GPUs (sm " + which +
           ") and no NVLink: 8- and 16-GPU servers of V100 (sm 70), A100 (sm 80) and H100 (sm 90) are "
           "normally NVLink machines (DGX/HGX, cloud VMs), whose vendor topology files leave NVLink out "
           "because NCCL finds it at run time; modelled as PCIe-only, paths and tuning will be wrong. "
           "State the fabric: --gpu-fabric nvswitch (A100, H100, 16×V100), hybrid-cube-mesh (8×V100) or "
           "pcie (really no NVLink; silences this warning)";
  }
  return std::nullopt;
}

}  // namespace tuccl
