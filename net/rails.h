// Rail ids of the socket network's devices, from TuCCL's sketch: the devices' NICs form a one-node
// topology (NIC = PCI function, bandwidth = the link speed) and the rail of a NIC is the index of
// its stage-2 group (topo/sketch.h, railOfNics), so GPU–NIC binding on NCCL's side follows the
// same grouping the sketch gives synthesis. On one node every NIC is its own group, numbered
// fastest first, in PCI bus order among equals (the order discovery lists them in).
//
// In:  per device, the canonical sysfs path of its PCI function (may be empty) and its speed.
// Out: per device, its rail; -1 for a device that is not a PCI function (loopback, veth, bridge),
//      which the sketch does not see. Interfaces on one PCI function share its rail.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl::net {

struct DeviceLocation {
  std::string pciPath;  ///< realpath of /sys/class/net/<if>/device; empty when there is none
  int speedMbps = 0;
};

/// The PCI bus id ("0000:3b:00.0") in a sysfs device path: its last component of that form
/// (a virtio NIC's path ends in "virtio2" below its PCI function); "" when there is none.
std::string pciBusIdOfPath(std::string_view path);

std::vector<int> railsOfDevices(std::span<const DeviceLocation> devices);

}  // namespace tuccl::net
