#include "topo/topology.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace tuccl {

namespace {

constexpr std::array<std::string_view, 5> kSwitchKindNames = {"nvswitch", "pcie-switch", "cpu", "tor",
                                                              "aggregation"};
constexpr std::array<std::string_view, 5> kSwitchShortNames = {"nvswitch", "pcisw", "cpu", "tor", "agg"};
constexpr std::array<std::string_view, 5> kLinkKindNames = {"nvlink", "pcie", "network", "smp", "xgmi"};

}  // namespace

std::string_view switchKindName(SwitchKind kind) { return kSwitchKindNames[static_cast<size_t>(kind)]; }

std::optional<SwitchKind> parseSwitchKind(std::string_view name) {
  for (size_t i = 0; i < kSwitchKindNames.size(); ++i) {
    if (kSwitchKindNames[i] == name) return static_cast<SwitchKind>(i);
  }
  return std::nullopt;
}

std::string_view linkKindName(LinkKind kind) { return kLinkKindNames[static_cast<size_t>(kind)]; }

std::optional<LinkKind> parseLinkKind(std::string_view name) {
  for (size_t i = 0; i < kLinkKindNames.size(); ++i) {
    if (kLinkKindNames[i] == name) return static_cast<LinkKind>(i);
  }
  return std::nullopt;
}

bool isGpuFabric(LinkKind kind) { return kind == LinkKind::NVLink || kind == LinkKind::Xgmi; }

bool isNetworkSwitch(SwitchKind kind) { return kind == SwitchKind::ToR || kind == SwitchKind::Aggregation; }

int32_t nodeOf(const Topology& topology, DeviceRef device) {
  switch (device.kind) {
    case DeviceKind::Gpu:
      return topology.gpus[device.index].node;
    case DeviceKind::Nic:
      return topology.nics[device.index].node;
    case DeviceKind::Switch:
      return topology.switches[device.index].node;
  }
  return -1;
}

int32_t localIndexOf(const Topology& topology, DeviceRef device) {
  int32_t count = 0;
  switch (device.kind) {
    case DeviceKind::Gpu:
      for (int32_t i = 0; i < device.index; ++i)
        count += topology.gpus[i].node == topology.gpus[device.index].node;
      return count;
    case DeviceKind::Nic:
      for (int32_t i = 0; i < device.index; ++i)
        count += topology.nics[i].node == topology.nics[device.index].node;
      return count;
    case DeviceKind::Switch: {
      const Switch& self = topology.switches[device.index];
      for (int32_t i = 0; i < device.index; ++i) {
        const Switch& other = topology.switches[i];
        count += other.kind == self.kind && other.node == self.node;
      }
      return count;
    }
  }
  return 0;
}

std::string deviceName(const Topology& topology, DeviceRef device) {
  std::string local = std::to_string(localIndexOf(topology, device));
  int32_t node = nodeOf(topology, device);
  std::string prefix = node >= 0 ? "n" + std::to_string(node) + "." : "";
  switch (device.kind) {
    case DeviceKind::Gpu:
      return prefix + "gpu" + local;
    case DeviceKind::Nic:
      return prefix + "nic" + local;
    case DeviceKind::Switch:
      return prefix +
             std::string(kSwitchShortNames[static_cast<size_t>(topology.switches[device.index].kind)]) +
             local;
  }
  return "?";
}

std::vector<int32_t> ranksOfNode(const Topology& topology, int32_t node) {
  std::vector<int32_t> ranks;
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.node == node) ranks.push_back(gpu.rank);
  }
  return ranks;
}

std::vector<int32_t> nicsOfNode(const Topology& topology, int32_t node) {
  std::vector<int32_t> nics;
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    if (topology.nics[i].node == node) nics.push_back(static_cast<int32_t>(i));
  }
  return nics;
}

int32_t maxGpusPerNode(const Topology& topology) {
  int32_t most = 0;
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    most = std::max(most, static_cast<int32_t>(ranksOfNode(topology, node).size()));
  }
  return most;
}

std::optional<std::string> validateTopology(const Topology& topology) {
  auto nodeInRange = [&](int32_t node) { return node >= 0 && node < topology.nNodes(); };
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    const Gpu& gpu = topology.gpus[i];
    if (gpu.rank != static_cast<int32_t>(i)) {
      return "gpu " + std::to_string(i) + " has rank " + std::to_string(gpu.rank) +
             "; ranks must be 0, 1, ... in order";
    }
    if (!nodeInRange(gpu.node))
      return "gpu " + std::to_string(i) + ": node " + std::to_string(gpu.node) + " out of range";
  }
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    const Nic& nic = topology.nics[i];
    if (!nodeInRange(nic.node))
      return "nic " + std::to_string(i) + ": node " + std::to_string(nic.node) + " out of range";
    if (!(nic.bandwidthGBps > 0) || !std::isfinite(nic.bandwidthGBps)) {
      return "nic " + std::to_string(i) + ": bandwidth must be positive";
    }
  }
  for (size_t i = 0; i < topology.switches.size(); ++i) {
    const Switch& sw = topology.switches[i];
    if (isNetworkSwitch(sw.kind) ? sw.node != -1 : !nodeInRange(sw.node)) {
      return "switch " + std::to_string(i) + " (" + std::string(switchKindName(sw.kind)) + "): node " +
             std::to_string(sw.node) +
             (isNetworkSwitch(sw.kind) ? " must be -1 for a network switch" : " out of range");
    }
  }
  auto exists = [&](DeviceRef device) {
    if (device.index < 0) return false;
    switch (device.kind) {
      case DeviceKind::Gpu:
        return device.index < static_cast<int32_t>(topology.gpus.size());
      case DeviceKind::Nic:
        return device.index < static_cast<int32_t>(topology.nics.size());
      case DeviceKind::Switch:
        return device.index < static_cast<int32_t>(topology.switches.size());
    }
    return false;
  };
  for (size_t i = 0; i < topology.links.size(); ++i) {
    const Link& link = topology.links[i];
    std::string where = "link " + std::to_string(i);
    if (!exists(link.a) || !exists(link.b)) return where + ": an end refers to a device that does not exist";
    if (link.a == link.b) return where + ": connects a device to itself";
    if (!(link.bandwidthGBps > 0) || !std::isfinite(link.bandwidthGBps))
      return where + ": bandwidth must be positive";
    if (!(link.alphaUs >= 0) || !std::isfinite(link.alphaUs))
      return where + ": alpha must be zero or positive";
    if (link.lanes < 1) return where + ": lanes must be at least 1";
  }
  return std::nullopt;
}

}  // namespace tuccl
