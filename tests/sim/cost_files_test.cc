// The engine's constants per hardware class (sim/cost/*.json), the cost model a topology names,
// and the memory-hierarchy regime of the cost model.
#include "sim/cost_files.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "topo/presets.h"
#include "topo/topology_json.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

TEST(CostFiles, EveryClassLoadsWithItsSources) {
  ASSERT_EQ(hardwareClasses(), (std::vector<std::string>{"volta", "ampere", "hopper", "blackwell"}));
  for (const std::string& name : hardwareClasses()) {
    CostModel model = costModelForClass(name).value();
    EXPECT_EQ(model.hardwareClass, name);
    for (const char* key : {"perThreadGBps", "protocols.LL128.tbCapGBps", "networkTbGBps", "syncOverheadUs",
                            "contentionGamma", "protocols.*.baseLatencyUs", "protocols.*.hopLatencyUs"})
      EXPECT_FALSE(model.sources[key].empty()) << name << ": no source for " << key;
  }
  // NCCL's per-channel caps by architecture (tuning.cc): Tree one node over 512 threads, LL128.
  EXPECT_DOUBLE_EQ(costModelForClass("volta")->perThreadGBps * 512, 26.5);
  EXPECT_DOUBLE_EQ(costModelForClass("hopper")->perThreadGBps * 512, 38.7);
  EXPECT_DOUBLE_EQ(costModelForClass("hopper")->protocol(Protocol::LL128).tbCapGBps, 36.7);
  EXPECT_DOUBLE_EQ(costModelForClass("blackwell")->protocol(Protocol::LL128).tbCapGBps, 40.0);
  Expected<CostModel> unknown = costModelForClass("kepler");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("classes: volta, ampere, hopper, blackwell"), std::string::npos);
}

// The built-in defaults are ampere's file, number for number.
TEST(CostFiles, TheDefaultsAreAmperesFile) {
  CostModel ampere = costModelForClass("ampere").value();
  ampere.hardwareClass.clear();
  ampere.sources.clear();
  EXPECT_EQ(costModelToJson(ampere), costModelToJson(defaultCostModel()));
}

TEST(CostFiles, TheClassComesFromTheGpusComputeCapability) {
  EXPECT_EQ(hardwareClassOf(makePreset("preset:dgx1-v100")), "volta");
  EXPECT_EQ(hardwareClassOf(makePreset("preset:dgx-a100:nodes=2")), "ampere");
  EXPECT_EQ(hardwareClassOf(makePreset("preset:dgx-h100")), "hopper");
  Topology probed = makePreset("preset:dgx-a100");
  for (Gpu& gpu : probed.gpus) gpu.sm = 0;  // what tuccl-topo probe writes for CPU ranks
  EXPECT_EQ(hardwareClassOf(probed), "");
  EXPECT_EQ(costModelToJson(costModelForTopology(probed, "probed.json").value()), costModelToJson(defaultCostModel()));
  EXPECT_EQ(costModelForTopology(makePreset("preset:dgx-h100"), "preset:dgx-h100")->hardwareClass, "hopper");
}

TEST(CostFiles, ATopologyNamesItsCalibratedFileRelativeToItself) {
  const fs::path dir = fs::temp_directory_path() / ("tuccl-cost-files-" + std::to_string(::getpid()));
  fs::create_directories(dir / "machine");
  CostModel measured = defaultCostModel();
  measured.perThreadGBps = 0.01;
  measured.hardwareClass = "measured";
  measured.sources["perThreadGBps"] = "fitted";
  std::ofstream(dir / "machine" / "cost.json") << writeCostModelJson(measured);
  Topology topology = makePreset("preset:dgx-h100");
  topology.costModel = "cost.json";
  const std::string topologyPath = (dir / "machine" / "topo.json").string();
  std::ofstream(topologyPath) << writeTopologyJson(topology);
  const Topology read = readTopologyJson(readSourceFile(topologyPath));
  EXPECT_EQ(read.costModel, "cost.json");
  EXPECT_EQ(topologySignature(read), topologySignature(makePreset("preset:dgx-h100")));  // not the machine's shape
  const CostModel model = costModelForTopology(read, topologyPath).value();
  EXPECT_DOUBLE_EQ(model.perThreadGBps, 0.01);
  EXPECT_EQ(model.hardwareClass, "measured");
  EXPECT_EQ(model.sources.at("perThreadGBps"), "fitted");
  topology.costModel = "missing.json";
  Expected<CostModel> missing = costModelForTopology(topology, topologyPath);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.json"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("topo.json"), std::string::npos) << missing.status().message();
  fs::remove_all(dir);
}

TEST(CostModelForMessage, TheCacheRegimeSpeedsTheTbsOfSmallCallsOnly) {
  CostModel model = defaultCostModel();
  model.localGBps = 10;
  EXPECT_EQ(costModelToJson(costModelForMessage(model, 1 << 20)), costModelToJson(model));  // no regime
  model.cacheBytes = 16 << 20;
  model.cacheSpeedup = 3;
  const CostModel at = costModelForMessage(model, 16 << 20);  // at cacheBytes: half the speed-up
  EXPECT_DOUBLE_EQ(at.perThreadGBps, model.perThreadGBps * 2);
  EXPECT_DOUBLE_EQ(at.localGBps, 20);
  EXPECT_NEAR(costModelForMessage(model, 1024).perThreadGBps, model.perThreadGBps * 3, 1e-9);
  EXPECT_NEAR(costModelForMessage(model, int64_t{1} << 40).perThreadGBps, model.perThreadGBps, 1e-9);
  EXPECT_DOUBLE_EQ(costModelForMessage(model, 1 << 20).networkTbGBps, model.networkTbGBps);  // the NIC is not cached
  // The file keeps the regime; a speed-up below 1 is refused.
  const CostModel back = costModelFromJson(costModelToJson(model));
  EXPECT_DOUBLE_EQ(back.cacheBytes, model.cacheBytes);
  EXPECT_DOUBLE_EQ(back.cacheSpeedup, 3);
  nlohmann::json bad = costModelToJson(model);
  bad["cacheSpeedup"] = 0.5;
  EXPECT_THROW(costModelFromJson(bad), std::invalid_argument);
  bad = costModelToJson(model);
  bad["sources"] = {{"perThreadGBps", 1}};
  EXPECT_THROW(costModelFromJson(bad), std::invalid_argument);
  // Integers beyond what the reader converts are refused, not converted (the fuzzer found it).
  bad = costModelToJson(model);
  bad["stagingBufferBytes"] = 4.19e306;
  EXPECT_THROW(costModelFromJson(bad), std::invalid_argument);
  bad = costModelToJson(model);
  bad["maxStagingSlots"] = 1e10;
  EXPECT_THROW(costModelFromJson(bad), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
