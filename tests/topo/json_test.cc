#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// A topology file's format comes from its name (.xml, .json) or else its first character; an empty,
// blank or garbage file, a directory, or content its name contradicts is an InvalidInput error
// naming the file and what was expected, never read as the other format.
TEST(LoadTopology, EmptyGarbageAndDirectoryInputsAreClearErrors) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("tuccl_topo_inputs_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "dir.xml");
  auto write = [&dir](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  const std::string xml = "an NCCL topology XML document (starting with '<', e.g. <system version=\"1\">)";
  const std::string json = "a TuCCL topology JSON object (starting with '{')";
  struct Case {
    std::string path;
    SourceLoc loc;
    std::string message;
  };
  const std::vector<Case> cases = {
      {write("empty.xml", ""), {}, "the topology file is empty: expected " + xml},
      {write("blank.json", "\n  \n"), {}, "the topology file is empty (only blanks): expected " + json},
      {write("garbage.xml", "\n  hello world\n"), {2, 3}, "not a topology file: expected " + xml + ", found 'h'"},
      {write("binary.xml", "\x01\x02"), {1, 1}, "not a topology file: expected " + xml + ", found byte 0x01"},
      {write("garbage.topo", "garbage"), {1, 1},
       "not a topology file: expected " + xml + " or " + json + ", found 'g'"},
      {write("json.xml", "{\"nodes\": 1}"), {1, 1},
       "not a topology file: expected " + xml + ", found '{' (JSON: name the file .json)"},
      {write("xml.JSON", "<system version=\"1\"/>"), {1, 1},
       "not a topology file: expected " + json + ", found '<' (XML: name the file .xml)"},
      {(dir / "dir.xml").string(), {}, "cannot read file: it is a directory, not a file"},
  };
  for (const Case& c : cases) {
    Expected<LoadedTopology> loaded = loadTopology(c.path);
    ASSERT_FALSE(loaded.ok()) << c.path;
    EXPECT_EQ(loaded.status().code(), ErrorCode::InvalidInput) << c.path;
    EXPECT_EQ(loaded.diagnostic().file, c.path);
    EXPECT_EQ(loaded.diagnostic().loc.line, c.loc.line) << c.path;
    EXPECT_EQ(loaded.diagnostic().loc.column, c.loc.column) << c.path;
    EXPECT_EQ(loaded.diagnostic().message, c.message) << c.path;
  }
  // Without a telling name, the content decides.
  const std::string preset = writeTopologyJson(makePreset("preset:dgx-a100"));
  Expected<LoadedTopology> fromJson = loadTopology(write("machine.topo", "\n" + preset));
  ASSERT_TRUE(fromJson.ok()) << fromJson.status().toString();
  EXPECT_EQ(fromJson->topology, makePreset("preset:dgx-a100"));
  std::filesystem::remove_all(dir);
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
