#include <gtest/gtest.h>

#include "topo/load.h"
#include "topo/presets.h"
#include "topo/topology_json.h"

namespace tuccl {
namespace {

Topology parse(const std::string& text) { return readTopologyJson(SourceText("t.json", text)); }

TEST(TopologyJson, RoundTripsEveryPreset) {
  for (const std::string& name : presetNames()) {
    Topology original = makePreset("preset:" + name + ":nodes=2");
    original.gpus[0].pciBusId = "0000:07:00.0";
    Topology back = parse(writeTopologyJson(original));
    EXPECT_EQ(back, original) << name;
    EXPECT_EQ(topologySignature(back), topologySignature(original));
  }
}

TEST(TopologyJson, MinimalHandWrittenFile) {
  Topology t = parse(R"({
    "nodes": 1,
    "gpus": [{"node": 0}, {"node": 0}],
    "switches": [{"kind": "nvswitch", "node": 0}],
    "links": [{"a": "gpu:0", "b": "switch:0", "kind": "nvlink", "bandwidth_gbps": 300},
              {"a": "gpu:1", "b": "switch:0", "kind": "nvlink", "bandwidth_gbps": 300, "alpha_us": 0.35}]
  })");
  EXPECT_EQ(t.nRanks(), 2);
  EXPECT_EQ(t.gpus[1].rank, 1);
  EXPECT_EQ(t.links[0].lanes, 1);
  EXPECT_DOUBLE_EQ(t.links[1].alphaUs, 0.35);
}

TEST(TopologyJson, ExamplesLoad) {
  for (const char* file : {"/examples/topologies/two-node-a100.json", "/examples/topologies/pcie-box.json"}) {
    Expected<LoadedTopology> loaded = loadTopology(std::string(TUCCL_SOURCE_DIR) + file);
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    EXPECT_GT(loaded->topology.nRanks(), 0) << file;
  }
}

TEST(TopologyJson, SyntaxErrorHasLineAndColumn) {
  try {
    parse("{\n  \"nodes\": 1,\n  \"gpus\": [}\n");
    FAIL();
  } catch (const DiagnosticError& error) {
    EXPECT_EQ(error.diagnostic().file, "t.json");
    EXPECT_EQ(error.diagnostic().loc.line, 3u);
    EXPECT_EQ(error.diagnostic().loc.column, 12u);
  }
}

TEST(TopologyJson, SemanticErrorsNameTheField) {
  auto messageOf = [](const std::string& text) {
    try {
      parse(text);
    } catch (const DiagnosticError& error) {
      return error.diagnostic().message;
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      messageOf(
          R"({"nodes": 1, "links": [{"a": "gpu:0", "b": "gpu:1", "kind": "nvlnk", "bandwidth_gbps": 1}]})"),
      "links[0].kind: unknown link kind 'nvlnk' (nvlink, xgmi, pcie, network, smp)");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "gpus": [{"node": 0, "colour": 1}]})"),
            "gpus[0]: unknown field 'colour'");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "nics": [{"node": 0}]})"),
            "nics[0]: missing required field 'bandwidth_gbps'");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "gpus": [{"node": 3}]})"), "gpu 0: node 3 out of range");
  EXPECT_EQ(
      messageOf(
          R"({"nodes": 1, "links": [{"a": "gpu0", "b": "gpu:1", "kind": "pcie", "bandwidth_gbps": 1}]})"),
      "links[0].a: expected 'gpu:N', 'nic:N' or 'switch:N' (got 'gpu0')");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "version": 7})"), "version: unsupported version 7 (expected 1)");
}

TEST(TopologyJson, HostileNumbersAreErrorsThatSayTheRange) {
  auto messageOf = [](const std::string& text) {
    try {
      parse(text);
    } catch (const DiagnosticError& error) {
      return error.diagnostic().message;
    }
    return std::string("no error");
  };
  auto link = [](const std::string& fields) {
    return R"({"nodes": 1, "gpus": [{"node": 0}, {"node": 0}], "links": [{"a": "gpu:0", "b": "gpu:1", "kind": "nvlink", )" +
           fields + "}]}";
  };
  EXPECT_EQ(messageOf(link(R"("bandwidth_gbps": 25, "lanes": 99999999999)")),
            "links[0].lanes: lanes of one link must be a whole number 1 to 1,024, got 99,999,999,999");
  EXPECT_EQ(messageOf(link(R"("bandwidth_gbps": -25)")),
            "links[0].bandwidth_gbps: link bandwidth must be above 0 up to 100,000 GB/s, got -25");
  EXPECT_EQ(messageOf(link(R"("bandwidth_gbps": 1e300)")),
            "links[0].bandwidth_gbps: link bandwidth must be above 0 up to 100,000 GB/s, got 1e+300");
  EXPECT_EQ(messageOf(link(R"("bandwidth_gbps": 25, "alpha_us": -0.5)")),
            "links[0].alpha_us: link latency (alpha) must be 0 to 1,000,000 µs, got -0.5");
  EXPECT_EQ(messageOf(R"({"nodes": 2000000000})"),
            "nodes: number of nodes must be a whole number 1 to 4,096, got 2,000,000,000");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "gpus": [{"node": 0, "sm": -80}]})"),
            "gpus[0].sm: GPU compute capability (sm, × 10) must be a whole number 0 to 1,000, got -80");
  EXPECT_EQ(messageOf(R"({"nodes": 1, "nics": [{"node": 0, "bandwidth_gbps": 0}]})"),
            "nics[0].bandwidth_gbps: NIC bandwidth must be above 0 up to 1,250 GB/s, got 0");
}

}  // namespace
}  // namespace tuccl

namespace tuccl {
namespace {

TEST(LoadTopology, ErrorsComeBackAsStatus) {
  Expected<LoadedTopology> missing = loadTopology("/nonexistent/topology.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.diagnostic().message.find("cannot"), std::string::npos) << missing.status().toString();

  Expected<LoadedTopology> badPreset = loadTopology("preset:no-such-machine");
  ASSERT_FALSE(badPreset.ok());
  EXPECT_EQ(badPreset.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(badPreset.diagnostic().message.find("no-such-machine"), std::string::npos)
      << badPreset.status().toString();
}

TEST(LoadTopology, AbsurdNodeCountsAreRefusedWithTheRange) {
  for (const char* spec : {"preset:dgx-a100:nodes=100000", "preset:dgx-a100:nodes=2000000000"}) {
    Expected<LoadedTopology> huge = loadTopology(spec);
    ASSERT_FALSE(huge.ok()) << spec;
    EXPECT_EQ(huge.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(huge.diagnostic().message.find("number of nodes must be a whole number 1 to 4,096"), std::string::npos)
        << huge.status().toString();
  }
  LoadOptions options;
  options.cluster.nodes = 5000;
  EXPECT_FALSE(loadTopology(std::string(TUCCL_SOURCE_DIR) + "/tests/data/topo/nccl/a100-nvswitch-full.xml", options).ok());
}

}  // namespace
}  // namespace tuccl
