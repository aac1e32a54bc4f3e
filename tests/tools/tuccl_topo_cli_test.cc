#include <filesystem>
#include <fstream>
#include <string>

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
