// The topology side of the simulator (no scheduler headers here: see sim/network.h).
#include "sim/network_topology.h"

#include <gtest/gtest.h>


namespace tuccl {
namespace {

TEST(Network, FourGpuPresetVariant) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  EXPECT_EQ(network.nRanks(), 8);
  EXPECT_EQ(network.nNodes(), 2);
  EXPECT_EQ(network.maxGpusPerNode(), 4);
  EXPECT_TRUE(network.path(0, 4).network);
  EXPECT_EQ(loadNetwork("preset:resccl-a100:gpus=9").status().code(), ErrorCode::InvalidArgument);
}

TEST(Network, PathsAndBoundInputs) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2").value();
  EXPECT_EQ(network.nRanks(), 16);
  EXPECT_EQ(network.nNodes(), 2);
  const NetworkPath& local = network.path(0, 1);
  EXPECT_FALSE(local.network);
  EXPECT_EQ(local.hop, HopClass::NVLink);
  const NetworkPath& remote = network.path(0, 8);
  EXPECT_TRUE(remote.network);
  EXPECT_EQ(remote.hop, HopClass::Network);
  EXPECT_TRUE(std::is_sorted(remote.resources.begin(), remote.resources.end()));
  EXPECT_DOUBLE_EQ(network.nicRxGBps(0), 4 * 25.0);  // four 200 Gb/s NICs
  EXPECT_NEAR(network.ingressGBps(0), 300.0 + 31.5, 0.1);  // NVSwitch port + PCIe Gen4
  EXPECT_GT(network.minNetworkAlphaUs(), network.minAlphaIntoUs(0));
  EXPECT_GT(network.bisectionGBps(), 0);
}

}  // namespace
}  // namespace tuccl
