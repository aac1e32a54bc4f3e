// Discovery of the local machine (TuCCL §III-B: "parsing ... '/sys/bus/pci/devices'").
//
// In:  a sysfs root ("/sys", or a fake tree in tests) and, for the real machine, hwloc.
// Out: a one-node Topology of what was seen, and notes on what could not be seen.
//
// The PCI tree is read from <root>/devices/pci*/…: the hierarchy that /sys/bus/pci/devices links
// into, so parents are directory parents. GPUs: vendor 0x10de, class 0x0302 or 0x0300. NICs:
// class 0x0207 or 0x0200; when any has an RDMA device (an infiniband/ directory) only those count,
// so management Ethernet ports do not take part. Bridges (0x0604) above them become PCIe switches;
// host bridges are grouped by NUMA node into root complexes. Ranks follow PCI bus order (CUDA's
// PCI_BUS_ID order). Link speeds come from current_link_speed/width, NIC speeds from the port
// rate or the net device speed. sysfs shows neither NVLink nor the GPU architecture: the notes say
// so, and an NCCL topology dump (NCCL_TOPO_DUMP_FILE) gives both. Without GPUs the topology is
// empty and a note says why; discovery never invents devices.
#pragma once

#include <string>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

struct DiscoveryOptions {
  std::string sysfsRoot = "/sys";
  /// Cross-check with hwloc (PCI devices, NUMA nodes); only meaningful for the real /sys.
  bool useHwloc = true;
};

struct DiscoveryResult {
  Topology topology;               ///< empty (no nodes, no GPUs) when no GPU was found
  std::vector<std::string> notes;  ///< what was found, what is missing, and why
};

DiscoveryResult discoverLocalTopology(const DiscoveryOptions& options = {});

}  // namespace tuccl
