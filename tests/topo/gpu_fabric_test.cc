#include "topo/gpu_fabric.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "topo/load.h"
#include "topo/nccl_xml.h"
#include "topo/paths.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

// A cloud VM's vendor topology file for 8 GPUs (the shape of Azure's ND A100 v4 file): the PCI tree
// with class codes only, no <gpu>, no <nvlink>. `gpuElement` adds <gpu sm> when given.
std::string vendorFile(int gpus, const std::string& gpuElement = "") {
  std::ostringstream text;
  text << "<system version=\"1\">\n";
  for (int socket = 0; socket < 2; ++socket) {
    text << "<cpu numaid=\"" << socket << "\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n";
    for (int g = socket * gpus / 2; g < (socket + 1) * gpus / 2; ++g) {
      text << "<pci busid=\"ffff:ff:0" << g << ".0\" class=\"0x060400\" link_speed=\"16 GT/s\" link_width=\"16\">\n"
           << "<pci busid=\"000" << g << ":00:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" link_width=\"16\">"
           << gpuElement << "</pci>\n"
           << "<pci busid=\"010" << g << ":00:00.0\" class=\"0x020700\" link_speed=\"16 GT/s\" link_width=\"16\"/>\n"
           << "</pci>\n";
    }
    text << "</cpu>\n";
  }
  return text.str() + "</system>\n";
}

std::string writeTemp(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::path(testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

bool warnsAboutNvlink(const LoadedTopology& loaded) {
  for (const Diagnostic& warning : loaded.warnings) {
    if (warning.message.find("no NVLink") != std::string::npos &&
        warning.message.find("--gpu-fabric") != std::string::npos)
      return true;
  }
  return false;
}

TEST(GpuFabric, NvlinkShapedVendorFileWithoutNvlinkWarns) {
  std::string file = writeTemp("vm8.xml", vendorFile(8));
  LoadedTopology loaded = loadTopology(file).value();
  EXPECT_TRUE(warnsAboutNvlink(loaded));
  EXPECT_EQ(pathBetween(loaded.topology, 0, 1).kind, PathKind::Pcie);
  // With the sm given, the warning names it.
  LoadedTopology a100 = loadTopology(writeTemp("vm8-sm80.xml", vendorFile(8, "<gpu sm=\"80\"/>"))).value();
  ASSERT_TRUE(warnsAboutNvlink(a100));
  EXPECT_NE(a100.warnings.back().message.find("8 GPUs (sm 80)"), std::string::npos) << a100.warnings.back().message;
  // Not for parts without NVLink servers (sm 86, 89), other shapes, or a stated fabric.
  EXPECT_FALSE(warnsAboutNvlink(loadTopology(writeTemp("vm8-sm86.xml", vendorFile(8, "<gpu sm=\"86\"/>"))).value()));
  EXPECT_FALSE(warnsAboutNvlink(loadTopology(writeTemp("vm6.xml", vendorFile(6))).value()));
  LoadOptions pcie;
  pcie.gpuFabric = GpuFabric::Pcie;
  LoadedTopology stated = loadTopology(file, pcie).value();
  EXPECT_FALSE(warnsAboutNvlink(stated));
  EXPECT_EQ(pathBetween(stated.topology, 0, 1).kind, PathKind::Pcie);
  // The presets have their NVLink.
  EXPECT_FALSE(warnsAboutNvlink(loadTopology("preset:dgx-a100").value()));
  EXPECT_FALSE(warnsAboutNvlink(loadTopology("preset:ndv2").value()));
}

TEST(GpuFabric, StatedFabricGivesTheRightPaths) {
  std::string file = writeTemp("vm8-sm80.xml", vendorFile(8, "<gpu sm=\"80\"/>"));
  LoadOptions options;
  options.gpuFabric = GpuFabric::NvSwitch;
  LoadedTopology nvswitch = loadTopology(file, options).value();
  Router router(nvswitch.topology);
  for (int d = 1; d < 8; ++d) {
    EXPECT_EQ(router.pathBetween(0, d).kind, PathKind::NVSwitch);
    EXPECT_DOUBLE_EQ(router.pathBetween(0, d).bandwidthGBps, 300.0);  // A100: 12 lanes
  }
  // The same as the DGX-A100 preset's GPU fabric.
  Router dgx(makePreset("preset:dgx-a100"));
  EXPECT_DOUBLE_EQ(dgx.pathBetween(0, 5).bandwidthGBps, router.pathBetween(0, 5).bandwidthGBps);
  EXPECT_DOUBLE_EQ(dgx.pathBetween(0, 5).alphaUs, router.pathBetween(0, 5).alphaUs);

  options.gpuFabric = GpuFabric::HybridCubeMesh;
  LoadedTopology mesh = loadTopology(writeTemp("vm8-sm70.xml", vendorFile(8, "<gpu sm=\"70\"/>")), options).value();
  Router meshRouter(mesh.topology);
  Router dgx1(makePreset("preset:dgx1-v100"));
  for (int s = 0; s < 8; ++s) {
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(meshRouter.pathBetween(s, d).kind, dgx1.pathBetween(s, d).kind) << s << "->" << d;
      EXPECT_DOUBLE_EQ(meshRouter.pathBetween(s, d).bandwidthGBps, dgx1.pathBetween(s, d).bandwidthGBps);
    }
  }
  // Composed clusters get the fabric on every node.
  options.gpuFabric = GpuFabric::NvSwitch;
  options.cluster.nodes = 2;
  LoadedTopology two = loadTopology(file, options).value();
  EXPECT_EQ(Router(two.topology).pathBetween(9, 14).kind, PathKind::NVSwitch);
  EXPECT_EQ(Router(two.topology).pathBetween(1, 14).kind, PathKind::Network);
}

TEST(GpuFabric, ReplacesAPresetsFabricAndRefusesImpossibleOnes) {
  Topology pcieOnly = withGpuFabric(makePreset("preset:dgx-a100"), GpuFabric::Pcie);
  for (const Link& link : pcieOnly.links) EXPECT_FALSE(isGpuFabric(link.kind));
  for (const Switch& sw : pcieOnly.switches) EXPECT_NE(sw.kind, SwitchKind::NVSwitch);
  EXPECT_FALSE(validateTopology(pcieOnly).has_value());
  EXPECT_EQ(pathBetween(pcieOnly, 0, 7).kind, PathKind::Pcie);
  // nvswitch twice is the same as once.
  Topology once = withGpuFabric(makePreset("preset:dgx-h100"), GpuFabric::NvSwitch);
  EXPECT_EQ(withGpuFabric(once, GpuFabric::NvSwitch), once);
  EXPECT_DOUBLE_EQ(pathBetween(once, 0, 1).bandwidthGBps, 450.0);

  LoadOptions mesh;
  mesh.gpuFabric = GpuFabric::HybridCubeMesh;
  Expected<LoadedTopology> six = loadTopology(writeTemp("vm6.xml", vendorFile(6)), mesh);
  ASSERT_FALSE(six.ok());
  EXPECT_EQ(six.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(six.diagnostic().message.find("hybrid-cube-mesh wires 8 GPUs"), std::string::npos);
  EXPECT_EQ(parseGpuFabric("nvswitch"), GpuFabric::NvSwitch);
  EXPECT_EQ(parseGpuFabric("nvlink"), std::nullopt);
  for (const std::string& name : gpuFabricNames()) EXPECT_EQ(gpuFabricName(*parseGpuFabric(name)), name);
}

}  // namespace
}  // namespace tuccl
