// The v12 properties of the plugin's real devices on this machine: rail ids are the sketch's NIC
// groups (net/rails.h) of the PCI paths and speeds the same properties report; a device without
// a PCI path has none.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "net/rails.h"
#include "tuccl/nccl_net.h"

namespace {

TEST(NetProperties, RailIdsComeFromTheSketchsNicGroups) {
  unsetenv("TUCCL_SOCKET_IFNAME");
  unsetenv("NCCL_SOCKET_IFNAME");
  void* library = dlopen(TUCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  const auto* net = static_cast<const tucclNcclNet_v12_t*>(dlsym(library, "ncclNetPlugin_v12"));
  ASSERT_NE(net, nullptr);
  void* ctx = nullptr;
  if (net->init(&ctx, 1, nullptr, nullptr, nullptr) != ncclSuccess) GTEST_SKIP() << "no usable network interface";
  int n = 0;
  ASSERT_EQ(net->devices(&n), ncclSuccess);
  std::vector<tuccl::net::DeviceLocation> locations;
  std::vector<int> reported;
  for (int dev = 0; dev < n; ++dev) {
    tucclNcclNetProperties_v12_t props{};
    ASSERT_EQ(net->getProperties(dev, &props), ncclSuccess);
    locations.push_back({props.pciPath != nullptr ? props.pciPath : "", props.speed});
    reported.push_back(props.railId);
    if (props.pciPath == nullptr) EXPECT_EQ(props.railId, -1) << props.name;
    else EXPECT_GE(props.railId, 0) << props.name << " at " << props.pciPath;
    EXPECT_EQ(props.planeId, -1);
  }
  EXPECT_EQ(reported, tuccl::net::railsOfDevices(locations));
  EXPECT_EQ(net->finalize(ctx), ncclSuccess);
}

}  // namespace
