#include "topo/presets.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "topo/binding.h"

namespace tuccl {
namespace {

int countLinks(const Topology& t, LinkKind kind) {
  int count = 0;
  for (const Link& link : t.links) count += link.kind == kind;
  return count;
}

// NVLink lanes of every GPU (direct and to switches).
std::vector<int> nvlinkLanesPerGpu(const Topology& t) {
  std::vector<int> lanes(t.gpus.size(), 0);
  for (const Link& link : t.links) {
    if (link.kind != LinkKind::NVLink) continue;
    if (link.a.kind == DeviceKind::Gpu) lanes[link.a.index] += link.lanes;
    if (link.b.kind == DeviceKind::Gpu) lanes[link.b.index] += link.lanes;
  }
  return lanes;
}

const Link* gpuPairLink(const Topology& t, int a, int b) {
  for (const Link& link : t.links) {
    if (link.kind == LinkKind::NVLink &&
        ((link.a == gpuRef(a) && link.b == gpuRef(b)) || (link.a == gpuRef(b) && link.b == gpuRef(a)))) {
      return &link;
    }
  }
  return nullptr;
}

std::map<int, int> gpusPerNic(const Topology& t) {
  std::map<int, int> count;
  for (int nic : bindGpusToNics(t)) ++count[nic];
  return count;
}

TEST(Presets, AllBuildValidTopologies) {
  for (const std::string& name : presetNames()) {
    for (int nodes : {1, 2, 4}) {
      Topology t = makePreset("preset:" + name + ":nodes=" + std::to_string(nodes));
      EXPECT_EQ(validateTopology(t), std::nullopt) << name;
      EXPECT_EQ(t.nNodes(), nodes) << name;
    }
  }
  EXPECT_EQ(presetNames().size(), 6u);
}

TEST(Presets, Dgx1HybridCubeMesh) {
  Topology t = makePreset("preset:dgx1-v100");
  ASSERT_EQ(t.nRanks(), 8);
  // SCCL's DGX-1: 6 NVLink2 lanes of 25 GB/s per GPU, 24 lanes in 16 GPU pairs.
  for (int lanes : nvlinkLanesPerGpu(t)) EXPECT_EQ(lanes, 6);
  EXPECT_EQ(countLinks(t, LinkKind::NVLink), 16);
  // Quads {0..3} and {4..7} are fully connected, and i <-> i+4; nothing else.
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      bool sameQuad = a / 4 == b / 4;
      bool across = b == a + 4;
      const Link* link = gpuPairLink(t, a, b);
      EXPECT_EQ(link != nullptr, sameQuad || across) << a << "-" << b;
      if (link) {
        EXPECT_DOUBLE_EQ(link->bandwidthGBps, 25.0 * link->lanes);
      }
    }
  }
  EXPECT_EQ(t.nics.size(), 4u);
  for (const auto& [nic, gpus] : gpusPerNic(t)) EXPECT_EQ(gpus, 2) << nic;
  EXPECT_DOUBLE_EQ(t.nics[0].bandwidthGBps, 12.5);
}

TEST(Presets, TucclV100) {
  Topology t = makePreset("preset:tuccl-v100:nodes=3");
  EXPECT_EQ(t.nRanks(), 12);
  // TuCCL §IV-A: 4 V100 per server, six NVLink2 bridges each (300 GB/s bidirectional).
  for (int lanes : nvlinkLanesPerGpu(t)) EXPECT_EQ(lanes, 6);
  const Link* link = gpuPairLink(t, 0, 3);
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->lanes, 2);
  EXPECT_DOUBLE_EQ(link->bandwidthGBps, 50.0);
  EXPECT_DOUBLE_EQ(link->alphaUs, 3.0);  // TuCCL Table I
  EXPECT_EQ(t.nics.size(), 6u);
  for (const Nic& nic : t.nics) EXPECT_DOUBLE_EQ(nic.bandwidthGBps, 12.5);  // 100 Gb/s
  // NICs behind PCIe switches: each NIC's only PCIe neighbour is a PCIe switch.
  for (const Link& l : t.links) {
    if (l.kind == LinkKind::PCIe && l.a.kind == DeviceKind::Nic) {
      EXPECT_EQ(t.switches[l.b.index].kind, SwitchKind::PCIeSwitch);
    }
  }
}

TEST(Presets, DgxA100) {
  Topology t = makePreset("preset:dgx-a100");
  ASSERT_EQ(t.nRanks(), 8);
  ASSERT_EQ(t.nics.size(), 8u);
  for (const Nic& nic : t.nics) EXPECT_DOUBLE_EQ(nic.bandwidthGBps, 25.0);  // 200 Gb/s
  std::vector<int> nics = bindGpusToNics(t);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(nics[r], r);  // one NIC per GPU
  int nvswitchLinks = 0;
  for (const Link& link : t.links) {
    if (link.kind == LinkKind::NVLink) {
      ++nvswitchLinks;
      EXPECT_EQ(t.switches[link.b.index].kind, SwitchKind::NVSwitch);
      EXPECT_DOUBLE_EQ(link.bandwidthGBps, 300.0);  // per GPU per direction
      EXPECT_EQ(link.lanes, 12);
    }
  }
  EXPECT_EQ(nvswitchLinks, 8);
}

TEST(Presets, ResCclA100SharesEachNicBetweenTwoGpus) {
  Topology t = makePreset("preset:resccl-a100:nodes=4");
  EXPECT_EQ(t.nRanks(), 32);
  EXPECT_EQ(t.nics.size(), 16u);
  std::vector<int> nics = bindGpusToNics(t);
  for (int r = 0; r < 32; ++r) EXPECT_EQ(nics[r], r / 2);
  for (const Nic& nic : t.nics) EXPECT_DOUBLE_EQ(nic.bandwidthGBps, 25.0);
  // Two-tier Clos: a ToR per server, one aggregation switch.
  int tors = 0;
  int aggs = 0;
  for (const Switch& sw : t.switches) {
    tors += sw.kind == SwitchKind::ToR;
    aggs += sw.kind == SwitchKind::Aggregation;
  }
  EXPECT_EQ(tors, 4);
  EXPECT_EQ(aggs, 1);
}

TEST(Presets, DgxH100) {
  Topology t = makePreset("preset:dgx-h100");
  for (const Nic& nic : t.nics) EXPECT_DOUBLE_EQ(nic.bandwidthGBps, 50.0);  // 400 Gb/s
  EXPECT_EQ(t.nics.size(), 8u);
  for (const Link& link : t.links) {
    if (link.kind == LinkKind::NVLink) {
      EXPECT_DOUBLE_EQ(link.bandwidthGBps, 450.0);
    }
  }
}

TEST(Presets, Ndv2OneNicWithoutGpuDirect) {
  Topology t = makePreset("preset:ndv2:nodes=2");
  EXPECT_EQ(t.nRanks(), 16);
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_DOUBLE_EQ(t.nics[0].bandwidthGBps, 12.5);
  EXPECT_FALSE(t.nics[0].gdr);
  for (int nic : bindGpusToNics(t)) EXPECT_GE(nic, 0);
  std::map<int, int> load = gpusPerNic(t);
  EXPECT_EQ(load[0], 8);
  EXPECT_EQ(load[1], 8);
  for (int lanes : nvlinkLanesPerGpu(t)) EXPECT_EQ(lanes, 6);
}

TEST(Presets, ClosOversubscriptionScalesUplinks) {
  Topology t = makePreset("preset:dgx-a100:nodes=4,fabric=clos,oversub=2,rack=2");
  int uplinks = 0;
  for (const Link& link : t.links) {
    if (link.kind == LinkKind::Network && link.a.kind == DeviceKind::Switch) {
      ++uplinks;
      // A rack: 2 nodes × 8 NICs × 25 GB/s = 400 GB/s down, half of it up.
      EXPECT_DOUBLE_EQ(link.bandwidthGBps, 200.0);
      EXPECT_EQ(link.lanes, 16);
    }
  }
  EXPECT_EQ(uplinks, 2);
}

TEST(Presets, FourGpuVariantOfTheResCclNode) {
  const Topology node = reduceNodeGpus(presetNode("resccl-a100"), 4);
  EXPECT_EQ(node.nRanks(), 4);
  EXPECT_EQ(node.nics.size(), 2u);  // still two GPUs per NIC
  EXPECT_FALSE(validateTopology(node).has_value());
  const Topology cluster = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  EXPECT_EQ(cluster.nRanks(), 8);
  EXPECT_EQ(cluster.nNodes(), 2);
  EXPECT_EQ(maxGpusPerNode(cluster), 4);
  EXPECT_EQ(cluster.name, "resccl-a100:nodes=2,gpus=4");
  EXPECT_THROW(reduceNodeGpus(presetNode("resccl-a100"), 9), std::invalid_argument);
  EXPECT_THROW(reduceNodeGpus(cluster, 2), std::invalid_argument) << "one node only";
}

TEST(Presets, FewerGpusKeepTheNicOnTheCpuRootComplex) {
  // NDv2's one NIC hangs off the first socket, not a PCIe switch: its GPUs still reach the network.
  const Topology node = reduceNodeGpus(presetNode("ndv2"), 4);
  ASSERT_EQ(node.nics.size(), 1u);
  EXPECT_FALSE(validateTopology(node).has_value());
  const Topology cluster = makePreset("preset:ndv2:nodes=2,gpus=4");
  EXPECT_EQ(cluster.nics.size(), 2u);
  for (int32_t n = 0; n < cluster.nNodes(); ++n) EXPECT_EQ(nicsOfNode(cluster, n).size(), 1u);
}

TEST(Presets, SpecsParseIntoTheirOptions) {
  Expected<PresetSpec> spec =
      parsePresetSpec("preset:dgx-a100:nodes=4,gpus=2,fabric=clos,oversub=2.5,rack=2");
  ASSERT_TRUE(spec) << spec.status().message();
  EXPECT_EQ(spec->name, "dgx-a100");
  EXPECT_EQ(spec->gpus, 2);
  EXPECT_EQ(spec->cluster.nodes, 4);
  EXPECT_EQ(spec->cluster.fabric, Fabric::Clos);
  EXPECT_DOUBLE_EQ(spec->cluster.oversubscription, 2.5);
  EXPECT_EQ(spec->cluster.nodesPerTor, 2);
  // The preset's own options when the spec says nothing.
  Expected<PresetSpec> plain = parsePresetSpec("preset:resccl-a100");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->gpus, 0);
  EXPECT_EQ(plain->cluster.fabric, presetClusterOptions("resccl-a100").fabric);
  EXPECT_DOUBLE_EQ(plain->cluster.networkAlphaUs, presetClusterOptions("resccl-a100").networkAlphaUs);
  // gpus=K and the fabric options together: the reduced node in the cluster the options describe.
  const Topology reduced = makePreset("preset:dgx-a100:nodes=4,gpus=2,fabric=clos,oversub=2,rack=2");
  ClusterOptions cluster = presetClusterOptions("dgx-a100");
  cluster.nodes = 4;
  cluster.fabric = Fabric::Clos;
  cluster.oversubscription = 2;
  cluster.nodesPerTor = 2;
  const Topology expected = composeCluster(reduceNodeGpus(presetNode("dgx-a100"), 2), cluster);
  EXPECT_EQ(topologySignature(reduced), topologySignature(expected));
}

TEST(Presets, BadOptionsNameTheOption) {
  auto message = [](std::string_view spec) {
    Expected<PresetSpec> parsed = parsePresetSpec(spec);
    EXPECT_FALSE(parsed) << spec;
    EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidArgument);
    return parsed.status().message();
  };
  EXPECT_EQ(message("preset:resccl-a100:gpus=4,oversub=abc"), "preset option oversub=abc is not a number");
  EXPECT_EQ(message("preset:resccl-a100:gpus=4,rack=2x"), "preset option rack=2x is not a number");
  EXPECT_EQ(message("preset:resccl-a100:gpus=x"), "preset option gpus=x is not a number");
  EXPECT_EQ(message("preset:resccl-a100:gpus=0"), "preset option gpus must be at least 1");
  EXPECT_EQ(message("preset:resccl-a100:gpus=9"),
            "preset option gpus=9 is more than the 8 GPUs of a resccl-a100 node");
  EXPECT_EQ(message("preset:resccl-a100:oversub=0.5"), "preset option oversub must be at least 1");
  EXPECT_EQ(message("preset:resccl-a100:oversub=nan"), "preset option oversub=nan is not a number");
  EXPECT_EQ(message("preset:resccl-a100:nodes="), "preset option nodes= is not a number");
  EXPECT_EQ(message("preset:resccl-a100:gpus"), "preset option 'gpus' is not KEY=VALUE");
  EXPECT_NE(message("preset:resccl-a100:colour=blue").find("known: nodes, gpus, fabric, oversub, rack"),
            std::string::npos);
  EXPECT_NE(message("dgx-a100").find("starts with 'preset:'"), std::string::npos);
}

TEST(Presets, BadSpecsAreReadableErrors) {
  EXPECT_THROW(makePreset("preset:dgx-z100"), std::invalid_argument);
  EXPECT_THROW(makePreset("preset:dgx-a100:nodes=0"), std::invalid_argument);
  EXPECT_THROW(makePreset("preset:dgx-a100:nodes=two"), std::invalid_argument);
  EXPECT_THROW(makePreset("preset:dgx-a100:fabric=torus"), std::invalid_argument);
  EXPECT_THROW(makePreset("preset:dgx-a100:colour=blue"), std::invalid_argument);
  EXPECT_THROW(makePreset("preset:dgx-a100:gpus=9"), std::invalid_argument);
  try {
    makePreset("preset:nope");
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("resccl-a100"), std::string::npos);
  }
}

TEST(Signature, StableAndDiscriminating) {
  Topology a = makePreset("preset:dgx-a100:nodes=2");
  Topology b = makePreset("preset:dgx-a100:nodes=2");
  b.name = "renamed";
  b.nodes[0].name = "host-x";
  b.gpus[0].pciBusId = "0000:07:00.0";
  EXPECT_EQ(topologySignature(a), topologySignature(b));
  EXPECT_EQ(signatureHex(topologySignature(a)).size(), 16u);
  EXPECT_NE(topologySignature(a), topologySignature(makePreset("preset:dgx-a100:nodes=4")));
  EXPECT_NE(topologySignature(a), topologySignature(makePreset("preset:resccl-a100:nodes=2")));
  Topology c = a;
  c.nics[3].bandwidthGBps = 12.5;
  EXPECT_NE(topologySignature(a), topologySignature(c));
  // A pinned value: the signature must not drift between builds and releases.
  EXPECT_EQ(signatureHex(topologySignature(makePreset("preset:resccl-a100:nodes=2"))), "7313b6c4b0fa9b0b");
}

TEST(Topology, ValidationFindsBrokenInvariants) {
  Topology t = makePreset("preset:dgx-a100");
  t.gpus[2].rank = 5;
  EXPECT_NE(validateTopology(t), std::nullopt);
  t = makePreset("preset:dgx-a100");
  t.links[0].b = gpuRef(99);
  EXPECT_NE(validateTopology(t), std::nullopt);
  t = makePreset("preset:dgx-a100");
  t.links[0].bandwidthGBps = 0;
  EXPECT_NE(validateTopology(t), std::nullopt);
}

TEST(Topology, DeviceNames) {
  Topology t = makePreset("preset:resccl-a100:nodes=2");
  EXPECT_EQ(deviceName(t, gpuRef(11)), "n1.gpu3");
  EXPECT_EQ(deviceName(t, nicRef(5)), "n1.nic1");
}

}  // namespace
}  // namespace tuccl
