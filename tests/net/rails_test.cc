// Rail ids of the socket network's devices from the sketch's NIC groups (net/rails.h).
#include "net/rails.h"

#include <gtest/gtest.h>

#include <vector>

namespace tuccl::net {
namespace {

TEST(PciBusIdOfPath, TakesTheLastPciComponent) {
  EXPECT_EQ(pciBusIdOfPath("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(pciBusIdOfPath("/sys/devices/pci0000:00/0000:00:03.0/virtio2"), "0000:00:03.0");
  EXPECT_EQ(pciBusIdOfPath("/sys/devices/pci0000:AF/0000:AF:00.0"), "0000:af:00.0");
  EXPECT_EQ(pciBusIdOfPath("/sys/devices/virtual/net/lo"), "");
  EXPECT_EQ(pciBusIdOfPath(""), "");
}

// Rails are numbered fastest first whatever order the interfaces come in.
TEST(RailsOfDevices, FasterNicTakesTheFirstRail) {
  const std::vector<DeviceLocation> devices = {
      {"/sys/devices/pci0000:00/0000:00:02.0/0000:17:00.0", 100000},  // 100 Gb/s
      {"/sys/devices/pci0000:80/0000:80:02.0/0000:af:00.0", 400000},  // 400 Gb/s
  };
  EXPECT_EQ(railsOfDevices(devices), (std::vector<int>{1, 0}));
}

// Equal NICs are numbered in PCI bus order, the order discovery lists them in, not in the
// order the interfaces were enumerated.
TEST(RailsOfDevices, IdenticalNicsFollowPciBusOrder) {
  const std::vector<DeviceLocation> devices = {
      {"/sys/devices/pci0000:80/0000:80:02.0/0000:af:00.0", 200000},
      {"/sys/devices/pci0000:00/0000:00:02.0/0000:17:00.0", 200000},
      {"/sys/devices/pci0000:00/0000:00:03.0/0000:31:00.0", 200000},
  };
  EXPECT_EQ(railsOfDevices(devices), (std::vector<int>{2, 0, 1}));
}

// A device with no PCI function (loopback, veth) is outside the sketch: rail -1, and the others
// are numbered as if it were not there; two interfaces of one PCI function share its rail.
TEST(RailsOfDevices, UnknownPciPathHasNoRail) {
  const std::vector<DeviceLocation> devices = {
      {"", 10000},
      {"/sys/devices/pci0000:00/0000:00:02.0/0000:17:00.0", 25000},
      {"/sys/devices/virtual/net/veth0", 10000},
      {"/sys/devices/pci0000:00/0000:00:02.0/0000:18:00.0", 100000},
      {"/sys/devices/pci0000:00/0000:00:02.0/0000:17:00.0", 25000},
  };
  EXPECT_EQ(railsOfDevices(devices), (std::vector<int>{-1, 1, -1, 0, 1}));
  EXPECT_TRUE(railsOfDevices({}).empty());
}

}  // namespace
}  // namespace tuccl::net
