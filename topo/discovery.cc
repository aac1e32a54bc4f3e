#include "topo/discovery.h"

#include <hwloc.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>

#include "topo/defaults.h"

namespace tuccl {

namespace {

namespace fs = std::filesystem;
using namespace topo_defaults;

struct PciDevice {
  std::string busId;
  std::string parent;  // bus id of the parent device; empty under a host bridge
  std::string hostBridge;
  uint32_t classCode = 0;  // upper 16 bits: 0x0302, 0x0207, ...
  uint32_t vendor = 0;
  int32_t numa = -1;
  std::string linkSpeed;
  std::string linkWidth;
  std::string rdmaName;  // infiniband/<name>
  std::string netName;   // net/<name>
  fs::path path;
};

std::string readFirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

uint32_t readHex(const fs::path& path) {
  std::string text = readFirstLine(path);
  std::string_view view = text;
  if (view.starts_with("0x")) view.remove_prefix(2);
  uint32_t value = 0;
  std::from_chars(view.data(), view.data() + view.size(), value, 16);
  return value;
}

std::optional<double> leadingNumber(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  return value;
}

std::string firstEntry(const fs::path& directory) {
  std::error_code error;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory, error))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names.empty() ? "" : names.front();
}

// "dddd:bb:dd.f" in lower-case hex, the name of a PCI device directory.
bool isBusId(const std::string& name) {
  static constexpr std::string_view kShape = "hhhh:hh:hh.f";
  if (name.size() != kShape.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (kShape[i] == 'h' && !hex) return false;
    if (kShape[i] == 'f' && (c < '0' || c > '7')) return false;
    if ((kShape[i] == ':' || kShape[i] == '.') && c != kShape[i]) return false;
  }
  return true;
}

void walkPci(const fs::path& directory, const std::string& parent, const std::string& hostBridge,
             std::vector<PciDevice>& devices) {
  std::error_code error;
  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    // Real sysfs is full of symlinks (driver, subsystem, ...); only real BDF directories are children.
    if (entry.is_symlink(error) || !entry.is_directory(error)) continue;
    if (isBusId(entry.path().filename().string())) children.push_back(entry.path());
  }
  std::sort(children.begin(), children.end());
  for (const fs::path& path : children) {
    PciDevice device;
    device.busId = path.filename().string();
    device.parent = parent;
    device.hostBridge = hostBridge;
    device.classCode = readHex(path / "class") >> 8;
    device.vendor = readHex(path / "vendor");
    std::string numa = readFirstLine(path / "numa_node");
    device.numa = numa.empty() ? -1 : static_cast<int32_t>(leadingNumber(numa).value_or(-1));
    device.linkSpeed = readFirstLine(path / "current_link_speed");
    device.linkWidth = readFirstLine(path / "current_link_width");
    device.rdmaName = firstEntry(path / "infiniband");
    device.netName = firstEntry(path / "net");
    device.path = path;
    devices.push_back(device);
    walkPci(path, device.busId, hostBridge, devices);
  }
}

double nicSpeedGBps(const PciDevice& nic, std::vector<std::string>& notes) {
  if (!nic.rdmaName.empty()) {
    // "200 Gb/sec (4X HDR)"
    std::string rate = readFirstLine(nic.path / "infiniband" / nic.rdmaName / "ports" / "1" / "rate");
    if (auto gbits = leadingNumber(rate); gbits && *gbits > 0) return *gbits / 8.0;
  }
  if (!nic.netName.empty()) {
    std::string speed = readFirstLine(nic.path / "net" / nic.netName / "speed");  // Mb/s, -1 when down
    if (auto mbits = leadingNumber(speed); mbits && *mbits > 0) return *mbits / 8000.0;
  }
  notes.push_back("NIC " + nic.busId + ": no port rate or link speed; assumed 100 Gb/s (12.5 GB/s)");
  return kDefaultNicGBps;
}

// hwloc's view of the machine, as a cross-check of the sysfs walk.
void addHwlocNotes(std::vector<std::string>& notes, int32_t sysfsGpus) {
  hwloc_topology_t topology;
  if (hwloc_topology_init(&topology) != 0) return;
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Linux's own sysfs backend finds PCI devices; the libpciaccess, OpenCL and GL plugins add nothing
  // here and leak at exit (seen under LeakSanitizer).
  for (const char* component : {"pci", "opencl", "gl"}) {
    hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }
  if (hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    notes.push_back("hwloc could not load the machine topology");
    return;
  }
  int32_t gpus = 0;
  int32_t nics = 0;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    uint32_t base = pci->attr->pcidev.class_id;
    if (pci->attr->pcidev.vendor_id == 0x10de && (base == 0x0302 || base == 0x0300)) ++gpus;
    if (base == 0x0207 || base == 0x0200) ++nics;
  }
  int numa = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  notes.push_back("hwloc: " + std::to_string(numa) + " NUMA node(s), " + std::to_string(gpus) +
                  " NVIDIA GPU(s), " + std::to_string(nics) + " network PCI device(s)");
  if (gpus != sysfsGpus) {
    notes.push_back("hwloc and sysfs disagree on the GPU count (" + std::to_string(gpus) + " vs " +
                    std::to_string(sysfsGpus) + "); the topology follows sysfs");
  }
  hwloc_topology_destroy(topology);
}

}  // namespace

DiscoveryResult discoverLocalTopology(const DiscoveryOptions& options) {
  DiscoveryResult result;
  fs::path root = fs::path(options.sysfsRoot) / "devices";
  std::error_code error;
  std::vector<PciDevice> devices;
  std::vector<fs::path> hostBridges;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("pci") && entry.is_directory(error)) hostBridges.push_back(entry.path());
  }
  if (error && hostBridges.empty()) {
    result.notes.push_back("cannot read " + root.string() + ": " + error.message());
  }
  std::sort(hostBridges.begin(), hostBridges.end());
  for (const fs::path& bridge : hostBridges) walkPci(bridge, "", bridge.filename().string(), devices);

  auto isGpu = [](const PciDevice& d) {
    return d.vendor == 0x10de && (d.classCode == 0x0302 || d.classCode == 0x0300);
  };
  auto isNic = [](const PciDevice& d) { return d.classCode == 0x0207 || d.classCode == 0x0200; };
  bool anyRdma = std::any_of(devices.begin(), devices.end(),
                             [&](const PciDevice& d) { return isNic(d) && !d.rdmaName.empty(); });
  auto keepNic = [&](const PciDevice& d) { return isNic(d) && (!anyRdma || !d.rdmaName.empty()); };

  int32_t gpuCount = static_cast<int32_t>(std::count_if(devices.begin(), devices.end(), isGpu));
  if (options.useHwloc && options.sysfsRoot == "/sys") addHwlocNotes(result.notes, gpuCount);
  result.topology.name = "local";
  if (gpuCount == 0) {
    result.notes.push_back("no NVIDIA GPU (vendor 0x10de, class 0x0300/0x0302) under " + root.string() +
                           " (the tree of " + options.sysfsRoot + "/bus/pci/devices); the topology is empty");
    return result;
  }

  // Keep GPUs, the chosen NICs and the bridges above them.
  std::map<std::string, size_t> byBusId;
  for (size_t i = 0; i < devices.size(); ++i) byBusId[devices[i].busId] = i;
  std::vector<bool> keep(devices.size(), false);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!isGpu(devices[i]) && !keepNic(devices[i])) continue;
    for (std::string at = devices[i].busId; !at.empty(); at = devices[byBusId[at]].parent)
      keep[byBusId[at]] = true;
  }

  Topology& topology = result.topology;
  topology.name = "local";
  topology.nodes.push_back(Node{readFirstLine("/proc/sys/kernel/hostname")});
  if (options.sysfsRoot != "/sys") topology.nodes[0].name = "";
  // Root complexes: one per NUMA node of the host bridges (NCCL's <cpu numaid>).
  std::map<int32_t, int32_t> cpuOfNuma;
  std::map<std::string, int32_t> numaOfHostBridge;
  for (const PciDevice& device : devices) {
    if (device.numa >= 0 && !numaOfHostBridge.contains(device.hostBridge))
      numaOfHostBridge[device.hostBridge] = device.numa;
  }
  auto cpuFor = [&](const std::string& hostBridge) {
    int32_t numa = numaOfHostBridge.contains(hostBridge) ? numaOfHostBridge[hostBridge] : 0;
    auto it = cpuOfNuma.find(numa);
    if (it != cpuOfNuma.end()) return it->second;
    topology.switches.push_back(Switch{SwitchKind::RootComplex, 0, "cpu" + std::to_string(numa), ""});
    return cpuOfNuma[numa] = static_cast<int32_t>(topology.switches.size()) - 1;
  };
  std::map<std::string, DeviceRef> refOf;
  int32_t defaulted = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!keep[i]) continue;
    const PciDevice& device = devices[i];
    DeviceRef ref;
    if (isGpu(device)) {
      ref = gpuRef(topology.nRanks());
      topology.gpus.push_back(Gpu{topology.nRanks(), 0, device.busId, 0});
    } else if (keepNic(device)) {
      ref = nicRef(static_cast<int32_t>(topology.nics.size()));
      topology.nics.push_back(Nic{0, device.rdmaName.empty() ? device.netName : device.rdmaName,
                                  nicSpeedGBps(device, result.notes), device.busId,
                                  !device.rdmaName.empty()});
    } else {
      ref = switchRef(static_cast<int32_t>(topology.switches.size()));
      topology.switches.push_back(Switch{SwitchKind::PCIeSwitch, 0, "", device.busId});
    }
    refOf[device.busId] = ref;
    DeviceRef parent = device.parent.empty() ? switchRef(cpuFor(device.hostBridge)) : refOf.at(device.parent);
    double lane = pcieLaneGBps(leadingNumber(device.linkSpeed).value_or(0));
    double width = leadingNumber(device.linkWidth).value_or(0);
    double bandwidth = lane > 0 && width > 0 ? lane * width : kPcieGen3x16GBps;
    defaulted += !(lane > 0 && width > 0);
    topology.links.push_back(Link{ref, parent, LinkKind::PCIe, kPcieAlphaUs, bandwidth, 1});
  }
  std::vector<int32_t> cpus;
  for (const auto& [numa, cpu] : cpuOfNuma) cpus.push_back(cpu);
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      topology.links.push_back(
          Link{switchRef(cpus[i]), switchRef(cpus[j]), LinkKind::Smp, kPcieAlphaUs, kIntelSmpGBps, 1});
    }
  }
  result.notes.push_back("found " + std::to_string(topology.nRanks()) + " NVIDIA GPU(s) and " +
                         std::to_string(topology.nics.size()) + " NIC(s) in the PCI tree");
  if (defaulted > 0) {
    result.notes.push_back(std::to_string(defaulted) +
                           " PCI link(s) without current_link_speed/width; assumed Gen3 x16");
  }
  result.notes.push_back(
      "sysfs shows neither NVLink nor the GPU architecture: GPUs are joined by PCIe only here; "
      "load an NCCL topology dump (NCCL_TOPO_DUMP_FILE) for NVLink");
  return result;
}

}  // namespace tuccl
