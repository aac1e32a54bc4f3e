#include "topo/sketch.h"

#include <gtest/gtest.h>

#include "topo/presets.h"

namespace tuccl {
namespace {

TEST(Sketch, ResCclTwoNodesPairsCounterpartNics) {
  Topology t = makePreset("preset:resccl-a100:nodes=2");
  Sketch sketch = buildSketch(t, SketchVariant::Pruned);
  ASSERT_EQ(sketch.groups.size(), 4u);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(sketch.groups[g], (std::vector<int32_t>{g, 4 + g}));
  // GPU 2r and 2r+1 are bound to NIC r; their peers are the GPUs of the grouped NIC.
  for (int r = 0; r < 16; ++r) {
    int node = r / 8;
    int nicLocal = (r % 8) / 2;
    int other = 1 - node;
    std::vector<int32_t> expected{other * 8 + 2 * nicLocal, other * 8 + 2 * nicLocal + 1};
    EXPECT_EQ(sketch.interNodePeersOf(r), expected) << r;
  }
  EXPECT_EQ(sketch.interNodePairs.size(), 32u);
  // Intra-node: NVSwitch joins every pair.
  EXPECT_EQ(sketch.intraNodeLinks.size(), 2u * 8 * 7);
}

TEST(Sketch, ResCclFourNodes) {
  Topology t = makePreset("preset:resccl-a100:nodes=4");
  Sketch sketch = buildSketch(t, SketchVariant::Pruned);
  ASSERT_EQ(sketch.groups.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(sketch.groups[g], (std::vector<int32_t>{g, 4 + g, 8 + g, 12 + g}));
    std::set<int32_t> nodes;
    for (int32_t nic : sketch.groups[g]) nodes.insert(t.nics[nic].node);
    EXPECT_EQ(nodes.size(), 4u);  // never two NICs of one node
  }
  // Rank 11 (node 1, NIC 1): peers are GPUs 2,3 of nodes 0, 2 and 3.
  EXPECT_EQ(sketch.interNodePeersOf(11), (std::vector<int32_t>{2, 3, 18, 19, 26, 27}));
  EXPECT_EQ(sketch.interNodePairs.size(), 32u * 6);
}

TEST(Sketch, GroupingMatchesBandwidths) {
  // Node 1's NICs are listed slow first; the grouping still pairs like with like.
  Topology node = presetNode("dgx-a100");
  node.nics.resize(2);
  node.links.erase(std::remove_if(node.links.begin(), node.links.end(),
                                  [](const Link& l) {
                                    return (l.a.kind == DeviceKind::Nic && l.a.index >= 2) ||
                                           (l.b.kind == DeviceKind::Nic && l.b.index >= 2);
                                  }),
                   node.links.end());
  node.nics[0].bandwidthGBps = 50;
  node.nics[1].bandwidthGBps = 12.5;
  ClusterOptions two;
  two.nodes = 2;
  Topology cluster = composeCluster(node, two);
  std::swap(cluster.nics[2].bandwidthGBps, cluster.nics[3].bandwidthGBps);  // node 1: slow, fast
  std::vector<std::vector<int32_t>> groups = groupNics(cluster);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(groups[1], (std::vector<int32_t>{1, 2}));
}

// The rail of a NIC is its group's index: counterpart NICs of two nodes share a rail, and the
// rails of one node alone are the same as in the cluster.
TEST(Sketch, RailOfNicsIsTheGroupIndex) {
  Topology cluster = makePreset("preset:resccl-a100:nodes=2");
  const std::vector<std::vector<int32_t>> groups = groupNics(cluster);
  const std::vector<int32_t> rails = railOfNics(cluster);
  ASSERT_EQ(rails.size(), cluster.nics.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int32_t nic : groups[g]) EXPECT_EQ(rails[static_cast<size_t>(nic)], static_cast<int32_t>(g));
  const std::vector<int32_t> oneNode = railOfNics(makePreset("preset:resccl-a100"));
  ASSERT_EQ(oneNode.size() * 2, rails.size());
  for (size_t nic = 0; nic < oneNode.size(); ++nic) {
    EXPECT_EQ(oneNode[nic], rails[nic]);
    EXPECT_EQ(rails[nic], rails[nic + oneNode.size()]) << "NIC " << nic << " and its counterpart";
  }
}

TEST(Sketch, VariantsDifferInConnectionCount) {
  Topology t = makePreset("preset:resccl-a100:nodes=2");
  Sketch full = buildSketch(t, SketchVariant::FullMesh);
  Sketch pruned = buildSketch(t, SketchVariant::Pruned);
  Sketch relay = buildSketch(t, SketchVariant::Relay);
  EXPECT_EQ(full.interNodePairs.size(), 2u * 8 * 8);
  EXPECT_EQ(pruned.interNodePairs.size(), 32u);
  // Relay: per NIC one sender (the second GPU) to one receiver (the first GPU) of its counterpart.
  EXPECT_EQ(relay.interNodePairs.size(), 8u);
  EXPECT_EQ(relay.interNodePeersOf(1), (std::vector<int32_t>{8}));
  EXPECT_TRUE(relay.interNodePeersOf(0).empty());
  EXPECT_EQ(relay.forwardedBy[1], (std::vector<int32_t>{0, 1}));
}

TEST(Sketch, TacclJsonHasTheFieldsTacclReads) {
  Topology t = makePreset("preset:resccl-a100:nodes=2");
  nlohmann::json j = tacclSketchJson(t, buildSketch(t, SketchVariant::Pruned), {2, "uc-min"});
  EXPECT_EQ(j["nnodes"], 2);
  EXPECT_EQ(j["intranode_sketch"]["strategy"], "switch");
  EXPECT_EQ(j["intranode_sketch"]["switches"], nlohmann::json::parse("[[0,1,2,3,4,5,6,7]]"));
  EXPECT_EQ(j["intranode_sketch"]["switch_hyperedge_strategy"], nlohmann::json::parse(R"(["uc-min"])"));
  EXPECT_EQ(j["internode_sketch"]["strategy"], "relay");
  EXPECT_EQ(j["internode_sketch"]["internode_conn"]["0"], nlohmann::json::parse("[0,1]"));
  EXPECT_EQ(j["internode_sketch"]["internode_conn"]["7"], nlohmann::json::parse("[6,7]"));
  EXPECT_EQ(j["internode_sketch"]["gpus_to_sender_rev_map"]["5"], nlohmann::json::parse("[5]"));
  EXPECT_EQ(j["internode_sketch"]["enforce_ordering"], true);
  EXPECT_EQ(j["symmetry_offsets"], nlohmann::json::parse("[[2,8],[8,16]]"));
  EXPECT_EQ(j["hyperparameters"]["input_chunkup"], 2);

  nlohmann::json relay = tacclSketchJson(t, buildSketch(t, SketchVariant::Relay));
  EXPECT_EQ(relay["internode_sketch"]["internode_conn"],
            nlohmann::json::parse(R"({"1":[0],"3":[2],"5":[4],"7":[6]})"));
  EXPECT_EQ(relay["internode_sketch"]["gpus_to_sender_rev_map"]["3"], nlohmann::json::parse("[2,3]"));
}

TEST(Sketch, TacclJsonForAMeshNode) {
  Topology t = makePreset("preset:dgx1-v100:nodes=2");
  nlohmann::json j = tacclSketchJson(t, buildSketch(t, SketchVariant::Pruned));
  EXPECT_EQ(j["intranode_sketch"]["strategy"], "none");
  EXPECT_TRUE(j["intranode_sketch"]["switches"].empty());
  // The hybrid cube mesh maps onto itself under i -> i+4 (and NIC pairs {0,1},{2,3},... too).
  EXPECT_EQ(j["symmetry_offsets"], nlohmann::json::parse("[[4,8],[8,16]]"));
}

}  // namespace
}  // namespace tuccl
