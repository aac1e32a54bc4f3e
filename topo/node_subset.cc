// A node reduced to its first K GPUs: the preset option gpus=K (presets.h).
#include <stdexcept>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

Topology reduceNodeGpus(const Topology& node, int32_t gpus) {
  if (node.nNodes() != 1) throw std::invalid_argument("gpus=K applies to a one-node topology");
  if (gpus < 1 || gpus > node.nRanks())
    throw std::invalid_argument("gpus=" + std::to_string(gpus) + " is outside 1.." +
                                std::to_string(node.nRanks()));
  std::vector<char> keepGpu(node.gpus.size(), 0), keepNic(node.nics.size(), 0),
      keepSwitch(node.switches.size(), 0);
  for (int32_t g = 0; g < gpus; ++g) keepGpu[g] = 1;
  auto kept = [&](DeviceRef d) {
    switch (d.kind) {
      case DeviceKind::Gpu:
        return keepGpu[d.index] != 0;
      case DeviceKind::Nic:
        return keepNic[d.index] != 0;
      case DeviceKind::Switch:
        return keepSwitch[d.index] != 0;
    }
    return false;
  };
  // 1. switches a kept GPU hangs from; 2. root complexes above kept PCIe switches; 3. NICs on kept
  // PCIe switches and root complexes (a node whose one NIC sits on the CPU's root complex, as
  // NDv2's, keeps it).
  for (const Link& link : node.links) {
    for (auto [gpu, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (gpu.kind == DeviceKind::Gpu && keepGpu[gpu.index] && other.kind == DeviceKind::Switch)
        keepSwitch[other.index] = 1;
    }
  }
  for (const Link& link : node.links) {
    for (auto [sw, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (sw.kind == DeviceKind::Switch && keepSwitch[sw.index] &&
          node.switches[sw.index].kind == SwitchKind::PCIeSwitch && other.kind == DeviceKind::Switch &&
          node.switches[other.index].kind == SwitchKind::RootComplex)
        keepSwitch[other.index] = 2;
    }
  }
  for (const Link& link : node.links) {
    for (auto [sw, other] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      if (sw.kind == DeviceKind::Switch && keepSwitch[sw.index] != 0 &&
          (node.switches[sw.index].kind == SwitchKind::PCIeSwitch ||
           node.switches[sw.index].kind == SwitchKind::RootComplex) &&
          other.kind == DeviceKind::Nic)
        keepNic[other.index] = 1;
    }
  }
  Topology reduced;
  reduced.name = node.name + ":gpus=" + std::to_string(gpus);
  reduced.nodes = node.nodes;
  std::vector<int32_t> gpuIndex(node.gpus.size(), -1), nicIndex(node.nics.size(), -1),
      switchIndex(node.switches.size(), -1);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!keepGpu[i]) continue;
    gpuIndex[i] = static_cast<int32_t>(reduced.gpus.size());
    reduced.gpus.push_back(node.gpus[i]);
    reduced.gpus.back().rank = gpuIndex[i];
  }
  for (size_t i = 0; i < node.nics.size(); ++i) {
    if (!keepNic[i]) continue;
    nicIndex[i] = static_cast<int32_t>(reduced.nics.size());
    reduced.nics.push_back(node.nics[i]);
  }
  for (size_t i = 0; i < node.switches.size(); ++i) {
    if (!keepSwitch[i]) continue;
    switchIndex[i] = static_cast<int32_t>(reduced.switches.size());
    reduced.switches.push_back(node.switches[i]);
  }
  auto remap = [&](DeviceRef d) {
    switch (d.kind) {
      case DeviceKind::Gpu:
        return DeviceRef{d.kind, gpuIndex[d.index]};
      case DeviceKind::Nic:
        return DeviceRef{d.kind, nicIndex[d.index]};
      case DeviceKind::Switch:
        return DeviceRef{d.kind, switchIndex[d.index]};
    }
    return d;
  };
  for (const Link& link : node.links) {
    if (!kept(link.a) || !kept(link.b)) continue;
    Link copy = link;
    copy.a = remap(link.a);
    copy.b = remap(link.b);
    reduced.links.push_back(copy);
  }
  if (auto problem = validateTopology(reduced)) throw std::invalid_argument("gpus=K: " + *problem);
  return reduced;
}

}  // namespace tuccl
