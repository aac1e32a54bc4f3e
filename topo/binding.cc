#include "topo/binding.h"

#include <deque>
#include <limits>

namespace tuccl {

namespace {

int32_t flatIndex(const Topology& topology, DeviceRef device) {
  switch (device.kind) {
    case DeviceKind::Gpu:
      return device.index;
    case DeviceKind::Nic:
      return static_cast<int32_t>(topology.gpus.size()) + device.index;
    case DeviceKind::Switch:
      return static_cast<int32_t>(topology.gpus.size() + topology.nics.size()) + device.index;
  }
  return -1;
}

bool isHostTransit(const Topology& topology, DeviceRef device) {
  if (device.kind != DeviceKind::Switch) return false;
  SwitchKind kind = topology.switches[device.index].kind;
  return kind == SwitchKind::PCIeSwitch || kind == SwitchKind::RootComplex;
}

}  // namespace

std::vector<int32_t> hostFabricDistances(const Topology& topology, DeviceRef from) {
  size_t vertices = topology.gpus.size() + topology.nics.size() + topology.switches.size();
  std::vector<std::vector<DeviceRef>> neighbours(vertices);
  for (const Link& link : topology.links) {
    if (link.kind != LinkKind::PCIe && link.kind != LinkKind::Smp) continue;
    neighbours[flatIndex(topology, link.a)].push_back(link.b);
    neighbours[flatIndex(topology, link.b)].push_back(link.a);
  }
  std::vector<int32_t> distance(vertices, -1);
  std::deque<DeviceRef> queue{from};
  distance[flatIndex(topology, from)] = 0;
  while (!queue.empty()) {
    DeviceRef here = queue.front();
    queue.pop_front();
    if (here != from && !isHostTransit(topology, here)) continue;
    for (DeviceRef next : neighbours[flatIndex(topology, here)]) {
      int32_t& d = distance[flatIndex(topology, next)];
      if (d >= 0) continue;
      d = distance[flatIndex(topology, here)] + 1;
      queue.push_back(next);
    }
  }
  return distance;
}

std::vector<int32_t> bindGpusToNics(const Topology& topology) {
  std::vector<int32_t> nicOf(topology.gpus.size(), -1);
  std::vector<int32_t> load(topology.nics.size(), 0);
  for (const Gpu& gpu : topology.gpus) {
    std::vector<int32_t> distance = hostFabricDistances(topology, gpuRef(gpu.rank));
    int32_t best = -1;
    int64_t bestKey = std::numeric_limits<int64_t>::max();
    for (int32_t nic : nicsOfNode(topology, gpu.node)) {
      int32_t d = distance[topology.gpus.size() + nic];
      int64_t hops = d < 0 ? std::numeric_limits<int32_t>::max() : d;
      // Distance first, then load; the scan order makes the lowest index win ties.
      int64_t key = hops * (int64_t{1} << 31) + load[nic];
      if (key < bestKey) {
        bestKey = key;
        best = nic;
      }
    }
    nicOf[gpu.rank] = best;
    if (best >= 0) ++load[best];
  }
  return nicOf;
}

}  // namespace tuccl
