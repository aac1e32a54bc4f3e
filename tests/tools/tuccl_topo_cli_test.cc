#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/source_text.h"
#include "topo/presets.h"
#include "topo/topology_json.h"
#include "tests/tools/run_tool.h"

namespace {

using tuccl::tooltest::ToolRun;

ToolRun runTopo(const std::string& arguments) {
  return tuccl::tooltest::runCommand(std::string(TUCCL_TOPO) + " " + arguments);
}

std::string data(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/topo/" + name; }

TEST(TucclTopo, ShowsWhichGpusShareANic) {
  ToolRun r = runTopo("show preset:resccl-a100:nodes=2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("nodes 2, GPUs 16, NICs 8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("n1.nic1 mlx5_1  25 GB/s  ranks 10,11"), std::string::npos) << r.output;
}

TEST(TucclTopo, PathCrossesTheBoundNics) {
  ToolRun r = runTopo("path preset:resccl-a100:nodes=2 3 13");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("n0.nic1.tx"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("n1.nic2.rx"), std::string::npos) << r.output;
}

TEST(TucclTopo, PruneGroupsMatchingNics) {
  ToolRun r = runTopo("prune preset:resccl-a100:nodes=2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("group 1: n0.nic1[ranks 2 3] n1.nic1[ranks 10 11]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 11 -> 2 3"), std::string::npos) << r.output;
  ToolRun taccl = runTopo("prune preset:resccl-a100:nodes=2 --format taccl");
  ASSERT_EQ(taccl.status, 0) << taccl.output;
  nlohmann::json sketch = nlohmann::json::parse(taccl.output);
  EXPECT_EQ(sketch["nnodes"], 2);
  EXPECT_TRUE(sketch["internode_sketch"].contains("internode_conn"));
}

TEST(TucclTopo, ExportRoundTripsAndNeverOverwritesWithoutForce) {
  std::filesystem::path file = std::filesystem::path(testing::TempDir()) / "tuccl_topo_export.json";
  std::filesystem::remove(file);
  ASSERT_EQ(runTopo("export preset:dgx-h100:nodes=2 --format json -o " + file.string()).status, 0);
  tuccl::Topology loaded = tuccl::readTopologyJson(tuccl::readSourceFile(file.string()));
  EXPECT_EQ(loaded, tuccl::makePreset("preset:dgx-h100:nodes=2"));
  ToolRun again = runTopo("export preset:dgx-h100:nodes=2 --format json -o " + file.string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  EXPECT_EQ(runTopo("export preset:dgx-h100:nodes=2 --format json --force -o " + file.string()).status, 0);
  ToolRun shown = runTopo("show " + file.string());
  EXPECT_EQ(shown.status, 0) << shown.output;
  std::filesystem::remove(file);
}

TEST(TucclTopo, NcclXmlImportPairsGpusWithNics) {
  ToolRun r = runTopo("show " + data("nccl/v100-shared-nic.xml"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("GPUs"), std::string::npos) << r.output;
}

TEST(TucclTopo, BadInputsExitTwoWithLocation) {
  ToolRun broken = runTopo("show " + data("nccl/broken-unclosed.xml"));
  EXPECT_EQ(broken.status, 2);
  EXPECT_NE(broken.output.find("broken-unclosed.xml:6:5: error: malformed XML"), std::string::npos) << broken.output;
  EXPECT_EQ(runTopo("show preset:no-such-machine").status, 2);
  EXPECT_EQ(runTopo("show preset:dgx-a100:nodes=0").status, 2);
  EXPECT_EQ(runTopo("show /nonexistent.json").status, 2);
  EXPECT_EQ(runTopo("path preset:dgx-a100 0 99").status, 2);
  EXPECT_EQ(runTopo("frobnicate").status, 2);
  EXPECT_EQ(runTopo("").status, 2);
}

std::string writeTemp(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::path(testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

// Empty, blank, garbage and binary files and a directory named like topologies: exit 2 with the
// file and the format expected, never a JSON parser's message about an XML file.
TEST(TucclTopo, EmptyGarbageAndDirectoryInputsExitTwoNamingTheExpectedFormat) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "tuccl_topo_cli_dir.xml";
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {writeTemp("cli_empty.xml", ""), "cli_empty.xml: error: the topology file is empty: expected an NCCL topology XML document"},
      {writeTemp("cli_blank.json", "\n\n"), "cli_blank.json: error: the topology file is empty (only blanks): expected a TuCCL topology JSON object"},
      {writeTemp("cli_garbage.xml", "hello world\n"), "cli_garbage.xml:1:1: error: not a topology file: expected an NCCL topology XML document (starting with '<', e.g. <system version=\"1\">), found 'h'"},
      {writeTemp("cli_binary.xml", "\x7f\x45\x4c\x46"), "cli_binary.xml:1:1: error: not a topology file: expected an NCCL topology XML document (starting with '<', e.g. <system version=\"1\">), found byte 0x7f"},
      {writeTemp("cli_json.xml", "{}"), "found '{' (JSON: name the file .json)"},
      {writeTemp("cli_garbage", "garbage"), "or a TuCCL topology JSON object (starting with '{'), found 'g'"},
      {dir.string(), "tuccl_topo_cli_dir.xml: error: cannot read file: it is a directory, not a file"},
  };
  for (const auto& [path, message] : cases) {
    ToolRun r = runTopo("show " + path);
    EXPECT_EQ(r.status, 2) << path << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << path << "\n" << r.output;
    EXPECT_EQ(r.output.find("not valid JSON"), std::string::npos) << r.output;
  }
  std::filesystem::remove_all(dir);
}

TEST(TucclTopo, DeeplyNestedXmlIsShownNotACrash) {
  constexpr int kDepth = 50'000;
  std::string text = "<system version=\"1\"><cpu numaid=\"0\">\n";
  for (int i = 0; i < kDepth; ++i) text += "<pci busid=\"0000:01:00.0\" class=\"0x060400\">\n";
  text += "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\"/></pci>\n";
  for (int i = 0; i < kDepth; ++i) text += "</pci>\n";
  text += "</cpu></system>\n";
  ToolRun r = runTopo("show " + writeTemp("deep.xml", text));
  EXPECT_EQ(r.status, 0) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("GPUs 1"), std::string::npos) << r.output.substr(0, 2000);
}

TEST(TucclTopo, HostileNumberIsAnErrorWithLineAndRange) {
  std::string file = writeTemp("hostile.xml",
                               "<system version=\"1\">\n<cpu numaid=\"0\">\n"
                               "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\">\n"
                               "<nvlink target=\"0000:02:00.0\" count=\"99999999999\" tclass=\"0x030200\"/>\n"
                               "</gpu></pci></cpu></system>\n");
  ToolRun r = runTopo("show " + file);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("hostile.xml:4:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 to 64, got 99,999,999,999"), std::string::npos) << r.output;
}

TEST(TucclTopo, WarnsAboutMissingNvlinkAndTakesTheStatedFabric) {
  std::string text = "<system version=\"1\"><cpu numaid=\"0\">\n";
  for (int g = 0; g < 8; ++g) {
    text += "<pci busid=\"000" + std::to_string(g) + ":00:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" "
            "link_width=\"16\"><gpu sm=\"90\"/></pci>\n";
  }
  text += "<pci busid=\"0100:00:00.0\" class=\"0x020700\" link_speed=\"16 GT/s\" link_width=\"16\"/>\n";
  std::string file = writeTemp("h100-vm.xml", text + "</cpu></system>\n");
  ToolRun plain = runTopo("path " + file + " 0 1");
  EXPECT_EQ(plain.status, 0) << plain.output;
  EXPECT_NE(plain.output.find("8 GPUs (sm 90) and no NVLink"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("rank 0 -> rank 1: pcie"), std::string::npos) << plain.output;
  ToolRun stated = runTopo("path " + file + " 0 1 --gpu-fabric nvswitch");
  EXPECT_EQ(stated.status, 0) << stated.output;
  EXPECT_EQ(stated.output.find("no NVLink"), std::string::npos) << stated.output;
  EXPECT_NE(stated.output.find("rank 0 -> rank 1: nvswitch, alpha 0.7 us, bottleneck 450 GB/s"), std::string::npos)
      << stated.output;
  EXPECT_EQ(runTopo("show " + file + " --gpu-fabric nvlink").status, 2);
}

TEST(TucclTopo, VersionPresetsAndTheNodesHint) {
  ToolRun version = runTopo("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_NE(version.output.find("tuccl-topo "), std::string::npos) << version.output;
  ToolRun help = runTopo("--help");
  EXPECT_EQ(help.status, 0);
  for (const std::string& name : tuccl::presetNames()) EXPECT_NE(help.output.find(name), std::string::npos) << name;
  ToolRun one = runTopo("prune preset:dgx-a100");
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("--nodes N"), std::string::npos) << one.output;
  EXPECT_EQ(runTopo("prune preset:dgx-a100:nodes=2").output.find("--nodes N"), std::string::npos);
}

// The output is checked before the topology is read: an existing file is refused even when the
// input is bad, and a folder that cannot hold it is named with the reason.
TEST(TucclTopo, OutputsAreCheckedBeforeAnyWork) {
  const std::filesystem::path file = std::filesystem::path(testing::TempDir()) / "tuccl_topo_existing.json";
  std::ofstream(file) << "keep";
  ToolRun refused = runTopo("export /nonexistent/topo.xml -o " + file.string());
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.output.find("exists; pass --force to overwrite it"), std::string::npos) << refused.output;
  ToolRun inFile = runTopo("prune preset:dgx-a100:nodes=2 -o " + (file / "sketch.txt").string());
  EXPECT_EQ(inFile.status, 2);
  EXPECT_NE(inFile.output.find("is not a directory"), std::string::npos) << inFile.output;
  std::filesystem::remove(file);
}

}  // namespace
