#include "topo/nccl_xml.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "topo/binding.h"
#include "topo/load.h"
#include "topo/paths.h"
#include "topo/presets.h"
#include "topo/topology_json.h"

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
      run("<system><cpu><pci busid=\"1:0.0\" class=\"0x030200\"><gpu><nvlink target=\"x\" count=\"3\"/>"
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

// A chain of `depth` PCIe bridges with one GPU at the bottom: deeper than any call stack holds
// when walked recursively.
std::string deepPciFile(int depth) {
  std::string text = "<system version=\"1\">\n<cpu numaid=\"0\" vendor=\"GenuineIntel\">\n";
  text.reserve(static_cast<size_t>(depth) * 110);
  for (int i = 0; i < depth; ++i) {
    text += "<pci busid=\"0000:" + std::to_string(i % 100) + ":00.0\" class=\"0x060400\" link_speed=\"16 GT/s\" "
            "link_width=\"16\">\n";
  }
  text += "<pci busid=\"0000:ff:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" link_width=\"16\"><gpu dev=\"0\" "
          "sm=\"80\"/></pci>\n";
  for (int i = 0; i < depth; ++i) text += "</pci>\n";
  return text + "</cpu>\n</system>\n";
}

TEST(NcclXml, DeeplyNestedPciTreeIsReadAndWrittenWithoutRecursion) {
  constexpr int kDepth = 50'000;
  NcclXmlImport imported = importNcclXml(SourceText("deep.xml", deepPciFile(kDepth)));
  const Topology& t = imported.topology;
  ASSERT_EQ(t.nRanks(), 1);
  EXPECT_EQ(t.switches.size(), static_cast<size_t>(kDepth) + 1);  // the CPU and every bridge
  EXPECT_EQ(t.gpus[0].pciBusId, "0000:ff:00.0");
  // The exporter walks the same depth; the round trip keeps the signature.
  NcclXmlImport back = importNcclXml(SourceText("deep-export.xml", exportNcclXml(t)));
  EXPECT_EQ(topologySignature(back.topology), topologySignature(t));
}

// One attribute of a small valid file replaced by a hostile value: the error names the file, the
// line of the element, the attribute and the allowed range in plain numbers.
TEST(NcclXml, HostileNumbersAreErrorsThatSayTheRange) {
  auto file = [](const std::string& pciAttributes, const std::string& gpuAttributes, const std::string& nvlink,
                 const std::string& net) {
    return "<system version=\"1\">\n"
           "<cpu numaid=\"0\">\n"
           "<pci busid=\"0000:01:00.0\" class=\"0x030200\" " + pciAttributes + ">\n"
           "<gpu dev=\"0\" " + gpuAttributes + ">\n"
           "<nvlink target=\"0000:02:00.0\" tclass=\"0x030200\" " + nvlink + "/>\n"
           "</gpu>\n</pci>\n"
           "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"80\"/></pci>\n"
           "<nic><net name=\"ib0\" " + net + "/></nic>\n"
           "</cpu>\n</system>\n";
  };
  const std::string pciOk = "link_speed=\"16 GT/s\" link_width=\"16\"";
  EXPECT_NO_THROW(importNcclXml(SourceText("ok.xml", file(pciOk, "sm=\"80\"", "count=\"12\"", "speed=\"200000\""))));
  struct Case {
    std::string text;
    uint32_t line;
    std::string expected;
  };
  const Case cases[] = {
      {file(pciOk, "sm=\"80\"", "count=\"99999999999\"", ""), 5,
       "<nvlink count=\"99999999999\">: GPU fabric lanes (NVLink/xGMI count) between two devices must be a whole "
       "number 1 to 64, got 99,999,999,999"},
      {file(pciOk, "sm=\"80\"", "count=\"0\"", ""), 5, "1 to 64, got 0"},
      {file(pciOk, "sm=\"80\"", "count=\"-3\"", ""), 5, "got -3"},
      {file(pciOk, "sm=\"80\"", "count=\"nan\"", ""), 5, "got nan"},
      {file(pciOk, "sm=\"80\"", "count=\"2.5\"", ""), 5, "whole number"},
      {file(pciOk, "sm=\"80\"", "count=\"lots\"", ""), 5, "<nvlink count=\"lots\">: not a number"},
      {file("link_speed=\"16 GT/s\" link_width=\"1000000\"", "sm=\"80\"", "", ""), 3,
       "PCIe link width must be a whole number 0 to 32 lanes, got 1,000,000"},
      {file("link_speed=\"16 GT/s\" link_width=\"-16\"", "sm=\"80\"", "", ""), 3, "got -16"},
      {file("link_speed=\"-8 GT/s\" link_width=\"16\"", "sm=\"80\"", "", ""), 3,
       "PCIe link speed must be above 0 up to 256 GT/s, got -8"},
      {file("link_speed=\"nan GT/s\" link_width=\"16\"", "sm=\"80\"", "", ""), 3, "got nan"},
      {file("link_speed=\"1e400 GT/s\" link_width=\"16\"", "sm=\"80\"", "", ""), 3, "got inf"},
      {file(pciOk, "sm=\"-70\"", "", ""), 4, "sm, × 10) must be a whole number 0 to 1,000, got -70"},
      {file(pciOk, "sm=\"80\"", "", "speed=\"1e15\""), 9,
       "<net speed=\"1e15\">: NIC speed must be at most 10,000,000 Mb/s (10 Tb/s), or 10,000,000,000 read as kb/s, "
       "got 1e15"},
      {file(pciOk, "sm=\"80\"", "", "speed=\"inf\""), 9, "got inf"},
  };
  for (const Case& c : cases) {
    try {
      importNcclXml(SourceText("hostile.xml", c.text));
      ADD_FAILURE() << "accepted: " << c.expected;
    } catch (const DiagnosticError& error) {
      EXPECT_EQ(error.diagnostic().file, "hostile.xml");
      EXPECT_EQ(error.diagnostic().loc.line, c.line) << error.diagnostic().message;
      EXPECT_NE(error.diagnostic().message.find(c.expected), std::string::npos) << error.diagnostic().message;
    }
  }
  // "unknown" spellings of NCCL's own dumps stay defaults (with a warning), not errors.
  NcclXmlImport unknown = importNcclXml(
      SourceText("dump.xml", file("link_speed=\"Unknown\" link_width=\"0\"", "sm=\"80\"", "", "speed=\"0\"")));
  EXPECT_FALSE(unknown.warnings.empty());
  // NCCL reads a speed of 0 or less as unknown ("some NICs define speed = -1"): the default.
  NcclXmlImport negative = importNcclXml(SourceText("dump.xml", file(pciOk, "sm=\"80\"", "", "speed=\"-1\"")));
  ASSERT_EQ(negative.topology.nics.size(), 1u);
  EXPECT_DOUBLE_EQ(negative.topology.nics[0].bandwidthGBps, 12.5);
  // A vendor file's kb/s (RCCL's MI300X with a Slingshot NIC writes 200000000): 200 Tb/s in Mb/s,
  // more than any NIC, so it is read as kb/s, 200 Gb/s, with one warning saying so.
  NcclXmlImport kb = importNcclXml(SourceText("cxi.xml", file(pciOk, "sm=\"80\"", "", "speed=\"200000000\"")));
  ASSERT_EQ(kb.topology.nics.size(), 1u);
  EXPECT_DOUBLE_EQ(kb.topology.nics[0].bandwidthGBps, 25);
  size_t said = 0;
  for (const Diagnostic& warning : kb.warnings) {
    if (warning.message.find("read as kb/s: 200 Gb/s (25 GB/s)") == std::string::npos) continue;
    ++said;
    EXPECT_EQ(warning.loc.line, 9u);
    EXPECT_NE(warning.message.find("<net speed=\"200000000\"> would be 200 Tb/s in Mb/s"), std::string::npos)
        << warning.message;
  }
  EXPECT_EQ(said, 1u);
}

// An RCCL dump of an 8-GPU MI300X node in the shape rocm-smi shows: every GPU joined to every other
// by one xGMI link, GPUs under their own PCIe switches.
std::string mi300xFile(const std::string& gcn) {
  std::ostringstream text;
  text << "<system version=\"1\">\n";
  for (int socket = 0; socket < 2; ++socket) {
    text << "<cpu numaid=\"" << socket << "\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"17\">\n";
    for (int g = socket * 4; g < socket * 4 + 4; ++g) {
      text << "<pci busid=\"0000:" << std::hex << (0x10 + 0x10 * g) << ":00.0\" class=\"0x060400\" "
           << "link_speed=\"32 GT/s PCIe\" link_width=\"16\">\n";
      text << "<pci busid=\"0000:" << (0x11 + 0x10 * g) << ":00.0\" class=\"0x038000\" vendor=\"0x1002\" "
           << "link_speed=\"16 GT/s\" link_width=\"16\">\n";
      text << std::dec << "<gpu dev=\"" << g << "\" sm=\"94\" gcn=\"" << gcn << "\" arch=\"169983\" rank=\"" << g
           << "\" gdr=\"1\">\n";
      for (int peer = 0; peer < 8; ++peer) {
        if (peer == g) continue;
        text << "<xgmi target=\"0000:" << std::hex << (0x11 + 0x10 * peer) << std::dec
             << ":00.0\" count=\"1\" tclass=\"0x038000\"/>\n";
      }
      text << "</gpu>\n</pci>\n</pci>\n";
    }
    text << "</cpu>\n";
  }
  text << "</system>\n";
  return text.str();
}

TEST(NcclXml, RcclXgmiLinksAreTheGpuFabric) {
  for (const std::string gcn : {"gfx942", "gfx942:sramecc+:xnack-", "942"}) {
    NcclXmlImport imported = importNcclXml(SourceText("mi300x.xml", mi300xFile(gcn)));
    const Topology& t = imported.topology;
    EXPECT_TRUE(imported.warnings.empty()) << imported.warnings.front().message;
    ASSERT_EQ(t.nRanks(), 8) << gcn;
    EXPECT_EQ(t.gpus[0].arch, "gfx942");
    int xgmi = 0;
    for (const Link& link : t.links) xgmi += link.kind == LinkKind::Xgmi;
    EXPECT_EQ(xgmi, 28);  // 8 choose 2, each listed by both ends
    Router router(t);
    for (int s = 0; s < 8; ++s) {
      for (int d = 0; d < 8; ++d) {
        if (s == d) continue;
        Path path = router.pathBetween(s, d);
        EXPECT_EQ(path.kind, PathKind::Xgmi) << s << "->" << d;
        EXPECT_EQ(path.resources.size(), 1u);
        EXPECT_DOUBLE_EQ(path.bandwidthGBps, 64.0);  // MI300X: 128 GB/s per link, both directions
      }
    }
  }
  // An MI250X-style file with numeric gcn 910 (gfx90a) and a ring instead of all-to-all: non-adjacent
  // GPUs relay through a neighbour over xGMI, not over PCIe.
  std::string ring = mi300xFile("910");
  NcclXmlImport imported = importNcclXml(SourceText("mi250.xml", ring));
  EXPECT_EQ(imported.topology.gpus[3].arch, "gfx90a");
  EXPECT_DOUBLE_EQ(Router(imported.topology).pathBetween(0, 1).bandwidthGBps, 50.0);
}

// NCCL's socket transport lists container and bridge interfaces as <nic> under the CPU: they are
// no NICs of the machine, and GPUs must not be bound to them.
TEST(NcclXml, VirtualInterfacesAreNotNics) {
  std::string text =
      "<system version=\"1\">\n<cpu numaid=\"0\">\n"
      "<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\"/></pci>\n"
      "<nic><net name=\"docker0\" dev=\"0\" speed=\"10000\"/><net name=\"veth1a2b3c\" dev=\"1\" speed=\"10000\"/>"
      "<net name=\"br-5f2e\" dev=\"2\" speed=\"10000\"/><net name=\"eth0\" dev=\"3\" speed=\"25000\"/></nic>\n"
      "</cpu>\n</system>\n";
  NcclXmlImport imported = importNcclXml(SourceText("docker.xml", text));
  ASSERT_EQ(imported.topology.nics.size(), 1u);
  EXPECT_EQ(imported.topology.nics[0].name, "eth0");
  EXPECT_EQ(boundNics(imported.topology), std::vector<std::string>{"eth0"});
  ASSERT_FALSE(imported.warnings.empty());
  const Diagnostic& skipped = imported.warnings.back();
  EXPECT_NE(skipped.message.find("skipped"), std::string::npos) << skipped.message;
  EXPECT_NE(skipped.message.find("docker0, veth1a2b3c, br-5f2e"), std::string::npos) << skipped.message;
  EXPECT_EQ(skipped.loc.line, 4u);
}

// import → export → import gives the same topology (hence the same signature), for every preset
// (through a first export) and every NCCL file of the test data.
TEST(NcclXml, ExportRoundTripsAreExact) {
  auto roundTrip = [](const Topology& first, const std::string& what) {
    NcclXmlImport back = importNcclXml(SourceText("again.xml", exportNcclXml(first)));
    Topology second = back.topology;
    second.name = first.name;
    EXPECT_EQ(signatureHex(topologySignature(second)), signatureHex(topologySignature(first))) << what;
    // Only what the first topology did not know is made up by the export (NIC names, bus ids).
    ASSERT_EQ(second.nics.size(), first.nics.size()) << what;
    for (size_t n = 0; n < first.nics.size(); ++n) {
      if (first.nics[n].name.empty()) second.nics[n].name.clear();
      if (first.nics[n].pciBusId.empty()) second.nics[n].pciBusId.clear();
    }
    for (size_t s = 0; s < first.switches.size() && s < second.switches.size(); ++s) {
      if (first.switches[s].pciBusId.empty()) second.switches[s].pciBusId.clear();
    }
    EXPECT_TRUE(second == first) << what;
  };
  for (const std::string& name : presetNames()) {
    Topology preset = makePreset("preset:" + name);
    roundTrip(importNcclXml(SourceText("first.xml", exportNcclXml(preset))).topology, name);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dataPath(""))) {
    if (entry.path().filename().string().starts_with("broken-")) continue;
    roundTrip(importNcclXml(readSourceFile(entry.path().string())).topology, entry.path().string());
  }
  roundTrip(importNcclXml(SourceText("mi300x.xml", mi300xFile("gfx942"))).topology, "mi300x");
  roundTrip(importNcclXml(SourceText("mi250.xml", mi300xFile("910"))).topology, "mi250");
}

}  // namespace
}  // namespace tuccl
