#include "topo/nccl_xml.h"

#include <gtest/gtest.h>

#include "topo/binding.h"
#include "topo/load.h"
#include "topo/paths.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

std::string dataPath(const std::string& name) {
  return std::string(TUCCL_SOURCE_DIR) + "/tests/data/topo/nccl/" + name;
}

NcclXmlImport importFile(const std::string& name) { return importNcclXml(readSourceFile(dataPath(name))); }

// For each rank, the name (or bus id) of its bound NIC.
std::vector<std::string> boundNics(const Topology& t) {
  std::vector<std::string> out;
  for (int nic : bindGpusToNics(t))
    out.push_back(nic < 0 ? "-" : (t.nics[nic].name.empty() ? t.nics[nic].pciBusId : t.nics[nic].name));
  return out;
}

TEST(NcclXml, FullNvSwitchDump) {
  NcclXmlImport imported = importFile("a100-nvswitch-full.xml");
  const Topology& t = imported.topology;
  EXPECT_TRUE(imported.warnings.empty()) << imported.warnings.size();
  ASSERT_EQ(t.nRanks(), 8);
  ASSERT_EQ(t.nics.size(), 9u);
  EXPECT_EQ(boundNics(t), (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4",
                                                    "mlx5_5", "mlx5_6", "mlx5_7"}));
  EXPECT_DOUBLE_EQ(t.nics[0].bandwidthGBps, 25.0);
  EXPECT_FALSE(t.nics[8].gdr);  // the storage NIC under the CPU
  EXPECT_EQ(t.gpus[0].pciBusId, "0000:12:00.0");
  EXPECT_EQ(t.gpus[0].sm, 80);
  // Six NVSwitch targets × 2 lanes, mixed-case bus ids: one logical switch, 12 lanes, 300 GB/s.
  Router router(t);
  Path path = router.pathBetween(0, 7);
  EXPECT_EQ(path.kind, PathKind::NVSwitch);
  EXPECT_DOUBLE_EQ(path.bandwidthGBps, 300.0);
  EXPECT_DOUBLE_EQ(router.pathBetween(0, 1).alphaUs, 0.7);
}

TEST(NcclXml, SharedNicsRanksAndDefaults) {
  NcclXmlImport imported = importFile("v100-shared-nic.xml");
  const Topology& t = imported.topology;
  ASSERT_EQ(t.nRanks(), 4);
  // Ranks follow <gpu rank>, not document order.
  EXPECT_EQ(t.gpus[0].pciBusId, "0000:19:00.0");
  EXPECT_EQ(t.gpus[1].pciBusId, "0000:18:00.0");
  // Two GPUs share mlx5_0; the two ports of one NIC pair off with GPUs 2 and 3; mlx5_3 is spare.
  EXPECT_EQ(boundNics(t), (std::vector<std::string>{"mlx5_0", "mlx5_0", "mlx5_1", "mlx5_2"}));
  ASSERT_EQ(t.nics.size(), 4u);
  EXPECT_DOUBLE_EQ(t.nics[0].bandwidthGBps, 12.5);  // default, warned
  // Both ends list each NVLink: one link per pair, 2 lanes of 25 GB/s.
  int nvlinks = 0;
  for (const Link& link : t.links) {
    if (link.kind != LinkKind::NVLink) continue;
    ++nvlinks;
    EXPECT_EQ(link.lanes, 2);
    EXPECT_DOUBLE_EQ(link.bandwidthGBps, 50.0);
  }
  EXPECT_EQ(nvlinks, 6);
  ASSERT_EQ(imported.warnings.size(), 2u);
  EXPECT_NE(imported.warnings[0].message.find("mlx5_0 gives no speed"), std::string::npos);
  EXPECT_EQ(imported.warnings[0].loc.line, 24u);
  EXPECT_NE(imported.warnings[1].message.find("1 PCI link(s)"), std::string::npos);
  EXPECT_EQ(imported.warnings[1].loc.line, 30u);
}

TEST(NcclXml, PartialPciOnlyVendorFile) {
  NcclXmlImport imported = importFile("pci-only-vendor.xml");
  const Topology& t = imported.topology;
  ASSERT_EQ(t.nRanks(), 6);
  ASSERT_EQ(t.nics.size(), 5u);
  EXPECT_EQ(boundNics(t), (std::vector<std::string>{"0101:00:00.0", "0102:00:00.0", "0103:00:00.0",
                                                    "0104:00:00.0", "0105:00:00.0", "0105:00:00.0"}));
  EXPECT_FALSE(imported.warnings.empty());  // no NIC speeds, some link speeds missing
  // No NVLink in the file: GPUs talk over PCIe.
  EXPECT_EQ(Router(t).pathBetween(0, 1).kind, PathKind::Pcie);
  EXPECT_EQ(Router(t).pathBetween(0, 5).kind, PathKind::Pcie);
}

TEST(NcclXml, ComposesNodesWithTheFileAsEachNode) {
  LoadOptions options;
  options.cluster.nodes = 2;
  LoadedTopology loaded = loadTopology(dataPath("a100-nvswitch-full.xml"), options).value();
  EXPECT_EQ(loaded.topology.nRanks(), 16);
  EXPECT_EQ(loaded.topology.name, "a100-nvswitch-full:nodes=2");
  EXPECT_EQ(Router(loaded.topology).pathBetween(3, 11).kind, PathKind::Network);
}

TEST(NcclXml, BrokenFilesReportLines) {
  struct Case {
    const char* file;
    uint32_t line;
    const char* text;
  };
  for (const Case& c :
       {Case{"broken-unclosed.xml", 6, "malformed XML"}, Case{"broken-root.xml", 2, "<system>"},
        Case{"broken-attribute.xml", 3, "malformed XML"}}) {
    try {
      importFile(c.file);
      ADD_FAILURE() << c.file;
    } catch (const DiagnosticError& error) {
      EXPECT_EQ(error.diagnostic().loc.line, c.line) << c.file;
      EXPECT_GT(error.diagnostic().loc.column, 0u) << c.file;
      EXPECT_NE(error.diagnostic().message.find(c.text), std::string::npos) << error.diagnostic().message;
      EXPECT_EQ(error.diagnostic().file, dataPath(c.file));
    }
  }
}

TEST(NcclXml, NoCrashOnOddInputs) {
  auto run = [](const std::string& text) { return importNcclXml(SourceText("x.xml", text)); };
  EXPECT_EQ(run("<system/>").topology.nRanks(), 0);
  EXPECT_EQ(run("<system><pci class=\"zz\"/><nic/><gpu/></system>").topology.nRanks(), 1);
  EXPECT_NO_THROW(
      run("<system><cpu><pci busid=\"1:0.0\" class=\"0x030200\"><gpu><nvlink target=\"x\" count=\"-3\"/>"
          "</gpu></pci></cpu></system>"));
  EXPECT_THROW(run(""), DiagnosticError);
}

TEST(NcclXml, ExportThenImportKeepsPairingAndLinks) {
  for (const char* preset : {"preset:dgx1-v100", "preset:resccl-a100", "preset:dgx-a100", "preset:ndv2"}) {
    Topology original = makePreset(preset);
    NcclXmlImport back = importNcclXml(SourceText("export.xml", exportNcclXml(original)));
    EXPECT_TRUE(back.warnings.empty()) << preset;
    EXPECT_EQ(back.topology.nRanks(), original.nRanks());
    EXPECT_EQ(bindGpusToNics(back.topology), bindGpusToNics(original)) << preset;
    Router a(original);
    Router b(back.topology);
    for (int s = 0; s < original.nRanks(); ++s) {
      for (int d = 0; d < original.nRanks(); ++d) {
        EXPECT_EQ(a.pathBetween(s, d).kind, b.pathBetween(s, d).kind) << preset << " " << s << "->" << d;
        EXPECT_DOUBLE_EQ(a.pathBetween(s, d).bandwidthGBps, b.pathBetween(s, d).bandwidthGBps) << preset;
      }
    }
    for (size_t n = 0; n < original.nics.size(); ++n) {
      EXPECT_DOUBLE_EQ(back.topology.nics[n].bandwidthGBps, original.nics[n].bandwidthGBps);
      EXPECT_EQ(back.topology.nics[n].gdr, original.nics[n].gdr);
    }
  }
}

}  // namespace
}  // namespace tuccl
