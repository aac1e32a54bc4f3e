#include "topo/paths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "topo/presets.h"

namespace tuccl {
namespace {

std::vector<std::string> names(const Router& router, const Path& path) {
  std::vector<std::string> out;
  for (ResourceId id : path.resources) out.push_back(router.resources()[id].name);
  return out;
}

TEST(Paths, NvSwitchPath) {
  Router router(makePreset("preset:dgx-a100"));
  Path path = router.pathBetween(3, 5);
  EXPECT_EQ(path.kind, PathKind::NVSwitch);
  EXPECT_EQ(names(router, path),
            (std::vector<std::string>{"n0.gpu3->n0.nvswitch0", "n0.nvswitch0->n0.gpu5"}));
  EXPECT_DOUBLE_EQ(path.bandwidthGBps, 300.0);
  EXPECT_DOUBLE_EQ(path.alphaUs, 0.7);
  EXPECT_TRUE(router.pathBetween(4, 4).resources.empty());
}

TEST(Paths, Dgx1DirectAndThroughAnIntermediateGpu) {
  Router router(makePreset("preset:dgx1-v100"));
  Path direct = router.pathBetween(0, 1);
  EXPECT_EQ(direct.kind, PathKind::NVLink);
  EXPECT_EQ(names(router, direct), (std::vector<std::string>{"n0.gpu0->n0.gpu1"}));
  EXPECT_DOUBLE_EQ(direct.bandwidthGBps, 50.0);
  // 0 and 5 are not adjacent. Through GPU 1: 0-1 two lanes, 1-5 one; through GPU 4: two and two.
  Path relay = router.pathBetween(0, 5);
  EXPECT_EQ(relay.kind, PathKind::NVLinkViaGpu);
  EXPECT_EQ(names(router, relay), (std::vector<std::string>{"n0.gpu0->n0.gpu4", "n0.gpu4->n0.gpu5"}));
  EXPECT_DOUBLE_EQ(relay.bandwidthGBps, 50.0);
  EXPECT_DOUBLE_EQ(relay.alphaUs, 1.4);
  // Directions are distinct resources.
  Path back = router.pathBetween(1, 0);
  EXPECT_EQ(names(router, back), (std::vector<std::string>{"n0.gpu1->n0.gpu0"}));
  EXPECT_NE(back.resources[0], direct.resources[0]);
}

TEST(Paths, InterNodeThroughBoundNicsAndClos) {
  Router router(makePreset("preset:resccl-a100:nodes=2"));
  Path path = router.pathBetween(3, 13);
  EXPECT_EQ(path.kind, PathKind::Network);
  EXPECT_EQ(
      names(router, path),
      (std::vector<std::string>{"n0.gpu3->n0.pcisw1", "n0.pcisw1->n0.nic1", "n0.nic1.tx", "tor0->agg0",
                                "agg0->tor1", "n1.nic2.rx", "n1.nic2->n1.pcisw2", "n1.pcisw2->n1.gpu5"}));
  EXPECT_DOUBLE_EQ(path.bandwidthGBps, 25.0);
  EXPECT_NEAR(path.alphaUs, 4 * 0.5 + 2 * 0.85, 1e-12);
}

TEST(Paths, GpusSharingANicShareItsTxResource) {
  Router router(makePreset("preset:resccl-a100:nodes=2"));
  Path a = router.pathBetween(0, 8);
  Path b = router.pathBetween(1, 9);
  std::vector<ResourceId> shared;
  std::vector<ResourceId> sa = a.resources, sb = b.resources;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(shared));
  std::vector<std::string> sharedNames;
  for (ResourceId id : shared) sharedNames.push_back(router.resources()[id].name);
  EXPECT_NE(std::find(sharedNames.begin(), sharedNames.end(), "n0.nic0.tx"), sharedNames.end());
  EXPECT_NE(std::find(sharedNames.begin(), sharedNames.end(), "n1.nic0.rx"), sharedNames.end());
  // On a DGX-A100 (one NIC per GPU) ranks 0 and 1 do not share a NIC.
  Router dgx(makePreset("preset:dgx-a100:nodes=2"));
  Path c = dgx.pathBetween(0, 8);
  Path d = dgx.pathBetween(1, 9);
  for (ResourceId id : c.resources) {
    if (dgx.resources()[id].kind == LinkKind::Network) {
      EXPECT_EQ(std::find(d.resources.begin(), d.resources.end(), id), d.resources.end());
    }
  }
}

TEST(Paths, OversubscribedUplinkIsTheBottleneck) {
  Router router(makePreset("preset:resccl-a100:nodes=2,oversub=8"));
  Path path = router.pathBetween(0, 8);
  EXPECT_DOUBLE_EQ(path.bandwidthGBps, 100.0 / 8);  // 4 NICs × 25 GB/s ÷ 8
  Router oneSwitch(makePreset("preset:resccl-a100:nodes=2,fabric=switch"));
  EXPECT_EQ(names(oneSwitch, oneSwitch.pathBetween(0, 8))[3], "n1.nic0.rx");
}

TEST(Paths, NoGpuDirectBouncesThroughTheCpu) {
  Router router(makePreset("preset:ndv2:nodes=2"));
  Path path = router.pathBetween(6, 8);
  std::vector<std::string> n = names(router, path);
  // GPU 6 sits on socket 1: up to its CPU, across to CPU 0, down to the NIC.
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n[0], "n0.gpu6->n0.pcisw3");
  EXPECT_EQ(n[1], "n0.pcisw3->n0.cpu1");
  EXPECT_EQ(n[2], "n0.cpu1->n0.cpu0");
  EXPECT_EQ(n[3], "n0.cpu0->n0.nic0");
  EXPECT_EQ(n[4], "n0.nic0.tx");
}

TEST(Paths, ResourceListCoversBothDirections) {
  Topology t = makePreset("preset:dgx-a100");
  std::vector<Resource> resources = resourcesOf(t);
  ASSERT_EQ(resources.size(), 2 * t.links.size());
  for (size_t i = 0; i < resources.size(); ++i) {
    EXPECT_EQ(resources[i].link, static_cast<int32_t>(i / 2));
    EXPECT_EQ(resources[i].reverse, i % 2 == 1);
    EXPECT_GT(resources[i].bandwidthGBps, 0);
  }
}

TEST(Paths, MissingNicIsAClearError) {
  Topology t = makePreset("preset:dgx-a100:nodes=2");
  t.links.erase(std::remove_if(t.links.begin(), t.links.end(),
                               [](const Link& l) { return l.kind == LinkKind::Network; }),
                t.links.end());
  Router router(t);
  EXPECT_THROW(router.pathBetween(0, 8), std::runtime_error);
  EXPECT_NO_THROW(router.pathBetween(0, 7));
}

}  // namespace
}  // namespace tuccl

namespace tuccl {
namespace {

// A rank outside the topology is named with the topology's ranks, not the function that noticed.
TEST(Router, ARankOutsideTheTopologySaysWhichRanksExist) {
  const Router router(makePreset("preset:dgx-a100"));
  try {
    (void)router.pathBetween(0, 99);
    FAIL() << "expected an error";
  } catch (const std::out_of_range& error) {
    EXPECT_EQ(std::string(error.what()), "no path from rank 0 to rank 99: the topology has ranks 0 to 7");
  }
}

// forEachPathAlpha gives every ordered pair's pathBetween alpha, bitwise, and whether it crosses
// the network, on every preset shape (switch and Clos fabrics, racks, NICs without GPUDirect).
TEST(Paths, EveryPairsAlphaMatchesPathBetween) {
  std::vector<std::string> specs = {"preset:resccl-a100:nodes=3",
                                    "preset:resccl-a100:nodes=4,rack=2,oversub=2",
                                    "preset:resccl-a100:nodes=2,fabric=switch,gpus=4",
                                    "preset:dgx1-v100",
                                    "preset:dgx-a100"};
  for (const std::string& name : presetNames()) specs.push_back("preset:" + name + ":nodes=2");
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    Router router(makePreset(spec));
    const int32_t n = router.topology().nRanks();
    std::vector<int> seen(static_cast<size_t>(n) * n, 0);
    router.forEachPathAlpha([&](int32_t src, int32_t dst, double alphaUs, bool network) {
      ASSERT_NE(src, dst);
      ++seen[static_cast<size_t>(src) * n + dst];
      const Path path = router.pathBetween(src, dst);
      EXPECT_EQ(alphaUs, path.alphaUs) << src << " -> " << dst;
      EXPECT_EQ(network, path.kind == PathKind::Network) << src << " -> " << dst;
    });
    for (int32_t src = 0; src < n; ++src) {
      for (int32_t dst = 0; dst < n; ++dst) EXPECT_EQ(seen[static_cast<size_t>(src) * n + dst], src == dst ? 0 : 1);
    }
  }
}

}  // namespace
}  // namespace tuccl
