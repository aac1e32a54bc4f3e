#include "topo/discovery.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "topo/binding.h"
#include "topo/load.h"
#include "topo/paths.h"

namespace tuccl {
namespace {

std::string fakeRoot(const std::string& name) {
  return std::string(TUCCL_SOURCE_DIR) + "/tests/data/topo/" + name;
}

bool anyNoteContains(const std::vector<std::string>& notes, const std::string& text) {
  for (const std::string& note : notes) {
    if (note.find(text) != std::string::npos) return true;
  }
  return false;
}

// Docker's veth*/docker0/br-* interfaces live under devices/virtual/net with no PCI device: they
// never become NICs, so no GPU is bound to them.
TEST(Discovery, VirtualInterfacesAreNotNics) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(testing::TempDir()) / "sysfs-docker";
  fs::remove_all(root);
  fs::copy(fakeRoot("sysfs-2gpu"), root, fs::copy_options::recursive);
  for (const char* name : {"docker0", "veth1a2b3c", "br-5f2e1d"}) {
    fs::create_directories(root / "devices" / "virtual" / "net" / name);
    std::ofstream(root / "devices" / "virtual" / "net" / name / "speed") << "10000\n";
    fs::create_directories(root / "class" / "net");
    fs::create_directory_symlink(fs::path("../../devices/virtual/net") / name, root / "class" / "net" / name);
  }
  DiscoveryResult result = discoverLocalTopology({root.string(), false});
  ASSERT_EQ(result.topology.nics.size(), 2u);
  EXPECT_EQ(result.topology.nics[0].name, "mlx5_0");
  EXPECT_EQ(result.topology.nics[1].name, "mlx5_1");
  EXPECT_EQ(bindGpusToNics(result.topology), (std::vector<int32_t>{0, 1}));
  fs::remove_all(root);
}

TEST(Discovery, FakeSysfsTree) {
  DiscoveryResult result = discoverLocalTopology({fakeRoot("sysfs-2gpu"), false});
  const Topology& t = result.topology;
  ASSERT_EQ(t.nRanks(), 2);
  EXPECT_EQ(t.gpus[0].pciBusId, "0000:03:00.0");
  EXPECT_EQ(t.gpus[1].pciBusId, "0000:83:00.0");
  // The on-board Ethernet port and the BMC's VGA device are not part of the topology.
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(t.nics[0].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(t.nics[0].bandwidthGBps, 25.0);  // 200 Gb/sec (4X HDR)
  EXPECT_EQ(t.nics[1].name, "mlx5_1");
  EXPECT_DOUBLE_EQ(t.nics[1].bandwidthGBps, 12.5);  // 100 Gb/sec (4X EDR)
  EXPECT_EQ(bindGpusToNics(t), (std::vector<int32_t>{0, 1}));
  int cpus = 0;
  for (const Switch& sw : t.switches) cpus += sw.kind == SwitchKind::RootComplex;
  EXPECT_EQ(cpus, 2);
  // GPU to GPU crosses both sockets; the Gen4 x16 links show their speed.
  Router router(t);
  Path path = router.pathBetween(0, 1);
  EXPECT_EQ(path.kind, PathKind::Pcie);
  EXPECT_NEAR(router.resources()[path.resources[0]].bandwidthGBps, 31.5, 0.01);  // Gen4 x16
  EXPECT_TRUE(anyNoteContains(result.notes, "NVLink"));
  EXPECT_EQ(validateTopology(t), std::nullopt);
}

TEST(Discovery, NoGpuMeansEmptyWithAReason) {
  DiscoveryResult result = discoverLocalTopology({fakeRoot("sysfs-nogpu"), false});
  EXPECT_TRUE(result.topology.empty());
  EXPECT_EQ(result.topology.nNodes(), 0);
  EXPECT_TRUE(anyNoteContains(result.notes, "no NVIDIA GPU"));
}

TEST(Discovery, MissingSysfsRootIsExplained) {
  DiscoveryResult result = discoverLocalTopology({fakeRoot("does-not-exist"), false});
  EXPECT_TRUE(result.topology.empty());
  EXPECT_TRUE(anyNoteContains(result.notes, "cannot read"));
}

TEST(Discovery, LocalSpecComposesNodes) {
  LoadOptions options;
  options.sysfsRoot = fakeRoot("sysfs-2gpu");
  options.cluster.nodes = 3;
  LoadedTopology loaded = loadTopology("local", options).value();
  EXPECT_EQ(loaded.topology.nRanks(), 6);
  EXPECT_EQ(Router(loaded.topology).pathBetween(0, 5).kind, PathKind::Network);
  options.sysfsRoot = fakeRoot("sysfs-nogpu");
  EXPECT_TRUE(loadTopology("local", options)->topology.empty());
}

// The machine this runs on: whatever it has, discovery must not crash and must not invent GPUs.
TEST(Discovery, RealMachineIsHonest) {
  DiscoveryResult result = discoverLocalTopology();
  EXPECT_FALSE(result.notes.empty());
  if (result.topology.empty()) {
    EXPECT_TRUE(anyNoteContains(result.notes, "no NVIDIA GPU"));
  }
  EXPECT_EQ(validateTopology(result.topology), std::nullopt);
}

}  // namespace
}  // namespace tuccl
