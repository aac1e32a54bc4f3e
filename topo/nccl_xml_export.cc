// NCCL topology XML export: one node of a Topology as an NCCL_TOPO_FILE.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "topo/defaults.h"
#include "topo/nccl_xml.h"

namespace tuccl {

namespace {

using namespace topo_defaults;

// "8 GT/s" / width 16 closest to a per-direction bandwidth.
std::pair<std::string, int> pcieSpeedFor(double bandwidthGBps) {
  static const double kRates[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  static const int kWidths[] = {16, 8, 4, 2, 1};
  std::pair<std::string, int> best{"8 GT/s PCIe", 16};
  double bestError = 1e300;
  for (int width : kWidths) {
    for (double rate : kRates) {
      double error = std::abs(pcieLaneGBps(rate) * width - bandwidthGBps);
      if (error < bestError - 1e-9) {
        bestError = error;
        char text[32];
        std::snprintf(text, sizeof text, "%g GT/s PCIe", rate);
        best = {text, width};
      }
    }
  }
  return best;
}

class Exporter {
 public:
  Exporter(const Topology& topology, int32_t node) : topology_(topology), node_(node) {
    for (size_t i = 0; i < topology.links.size(); ++i) {
      const Link& link = topology.links[i];
      if (link.kind == LinkKind::PCIe) {
        pcie_[link.a].push_back(static_cast<int32_t>(i));
        pcie_[link.b].push_back(static_cast<int32_t>(i));
      }
    }
  }

  std::string run() {
    pugi::xml_document document;
    pugi::xml_node system = document.append_child("system");
    system.append_attribute("version") = "1";
    int32_t numa = 0;
    for (size_t s = 0; s < topology_.switches.size(); ++s) {
      const Switch& sw = topology_.switches[s];
      if (sw.kind != SwitchKind::RootComplex || sw.node != node_) continue;
      pugi::xml_node cpu = system.append_child("cpu");
      cpu.append_attribute("numaid") = numa++;
      cpu.append_attribute("arch") = "x86_64";
      cpu.append_attribute("vendor") = cpuVendor(switchRef(static_cast<int32_t>(s)));
      visited_.insert(switchRef(static_cast<int32_t>(s)));
      writeChildren(cpu, switchRef(static_cast<int32_t>(s)));
    }
    std::ostringstream out;
    // Indentation grows with depth; a pathological tree is written one element per line unindented
    // rather than as gigabytes of spaces.
    unsigned flags = maxDepth_ <= kMaxIndentedDepth ? pugi::format_default : pugi::format_raw;
    document.save(out, "  ", flags);
    if (flags == pugi::format_raw) out << "\n";
    return out.str();
  }

 private:
  std::string busIdOf(DeviceRef device) {
    std::string given;
    if (device.kind == DeviceKind::Gpu) given = topology_.gpus[device.index].pciBusId;
    if (device.kind == DeviceKind::Nic) given = topology_.nics[device.index].pciBusId;
    if (device.kind == DeviceKind::Switch) given = topology_.switches[device.index].pciBusId;
    if (!given.empty()) return given;
    auto it = madeUp_.find(device);
    if (it != madeUp_.end()) return it->second;
    char text[16];
    std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x10 + static_cast<int>(madeUp_.size()) % 0xe0);
    return madeUp_[device] = text;
  }

  // The importer reads the CPU link bandwidth from the vendor (NCCL topo.h: AMD_BW, SKL_QPI_BW);
  // the vendor follows from the bandwidth of the CPU's links, so a round trip keeps it.
  const char* cpuVendor(DeviceRef cpu) const {
    for (const Link& link : topology_.links) {
      if (link.kind == LinkKind::Smp && (link.a == cpu || link.b == cpu) && link.bandwidthGBps == kAmdSmpGBps)
        return "AuthenticAMD";
    }
    return "GenuineIntel";
  }

  // The PCIe tree under `root`, depth first in link order (as a recursive walk would write it,
  // made-up bus ids included), with an explicit stack: a tree may be deep.
  void writeChildren(pugi::xml_node parent, DeviceRef root) {
    struct Pending {
      pugi::xml_node parent;
      DeviceRef device;
      int32_t link;
      int32_t depth;
    };
    std::vector<Pending> stack;
    auto pushChildren = [&](pugi::xml_node element, DeviceRef device, int32_t depth) {
      maxDepth_ = std::max(maxDepth_, depth);
      std::vector<Pending> children;
      for (int32_t linkIndex : pcie_[device]) {
        const Link& link = topology_.links[linkIndex];
        DeviceRef child = link.a == device ? link.b : link.a;
        if (visited_.contains(child)) continue;
        if (child.kind == DeviceKind::Switch && topology_.switches[child.index].kind != SwitchKind::PCIeSwitch)
          continue;
        visited_.insert(child);
        children.push_back(Pending{element, child, linkIndex, depth + 1});
      }
      stack.insert(stack.end(), children.rbegin(), children.rend());
    };
    pushChildren(parent, root, 0);
    while (!stack.empty()) {
      Pending next = stack.back();
      stack.pop_back();
      pugi::xml_node pci = writePci(next.parent, next.device, topology_.links[next.link]);
      if (next.device.kind == DeviceKind::Switch) pushChildren(pci, next.device, next.depth);
    }
  }

  pugi::xml_node writePci(pugi::xml_node parent, DeviceRef child, const Link& link) {
    auto [speed, width] = pcieSpeedFor(link.bandwidthGBps);
    pugi::xml_node pci = parent.append_child("pci");
    pci.append_attribute("busid") = busIdOf(child).c_str();
    if (child.kind == DeviceKind::Switch) {
      pci.append_attribute("class") = "0x060400";
    } else if (child.kind == DeviceKind::Gpu && !topology_.gpus[child.index].arch.empty()) {
      pci.append_attribute("class") = "0x038000";  // AMD Instinct
      pci.append_attribute("vendor") = "0x1002";
    } else if (child.kind == DeviceKind::Gpu) {
      pci.append_attribute("class") = "0x030200";
      pci.append_attribute("vendor") = "0x10de";
    } else {
      pci.append_attribute("class") = "0x020700";
      pci.append_attribute("vendor") = "0x15b3";
    }
    pci.append_attribute("link_speed") = speed.c_str();
    pci.append_attribute("link_width") = width;
    if (child.kind == DeviceKind::Gpu) writeGpu(pci, child.index);
    if (child.kind == DeviceKind::Nic) writeNic(pci, child.index);
    return pci;
  }

  void writeGpu(pugi::xml_node pci, int32_t rank) {
    const Gpu& gpu = topology_.gpus[rank];
    pugi::xml_node element = pci.append_child("gpu");
    std::vector<int32_t> ranks = ranksOfNode(topology_, node_);
    int32_t local = static_cast<int32_t>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
    element.append_attribute("dev") = local;
    if (gpu.sm != 0) element.append_attribute("sm") = gpu.sm;  // unknown stays unknown
    if (gpu.arch.starts_with("gfx")) element.append_attribute("gcn") = gpu.arch.c_str();
    element.append_attribute("rank") = local;
    element.append_attribute("gdr") = 1;
    for (const Link& link : topology_.links) {
      if (!isGpuFabric(link.kind)) continue;
      DeviceRef self = gpuRef(rank);
      if (link.a != self && link.b != self) continue;
      DeviceRef other = link.a == self ? link.b : link.a;
      bool xgmi = link.kind == LinkKind::Xgmi;
      pugi::xml_node nvlink = element.append_child(xgmi ? "xgmi" : "nvlink");
      nvlink.append_attribute("target") = busIdOf(other).c_str();
      nvlink.append_attribute("count") = link.lanes;
      bool toSwitch =
          other.kind == DeviceKind::Switch && topology_.switches[other.index].kind == SwitchKind::NVSwitch;
      nvlink.append_attribute("tclass") = toSwitch ? "0x068000" : xgmi ? "0x038000" : "0x030200";
    }
  }

  void writeNic(pugi::xml_node pci, int32_t index) {
    const Nic& nic = topology_.nics[index];
    pugi::xml_node net = pci.append_child("nic").append_child("net");
    std::vector<int32_t> nics = nicsOfNode(topology_, node_);
    int32_t local = static_cast<int32_t>(std::find(nics.begin(), nics.end(), index) - nics.begin());
    net.append_attribute("name") = (nic.name.empty() ? "mlx5_" + std::to_string(local) : nic.name).c_str();
    net.append_attribute("dev") = local;
    // Mb/s; NCCL's own dumps hold whole numbers, other speeds keep their fraction.
    double mbps = nic.bandwidthGBps * 8000.0;
    char speed[32];
    std::snprintf(speed, sizeof speed, "%.17g", std::abs(mbps - std::round(mbps)) < 1e-6 ? std::round(mbps) : mbps);
    net.append_attribute("speed") = speed;
    net.append_attribute("port") = 1;
    net.append_attribute("gdr") = nic.gdr ? 1 : 0;
  }

  const Topology& topology_;
  int32_t node_;
  std::map<DeviceRef, std::vector<int32_t>> pcie_;
  std::set<DeviceRef> visited_;
  std::map<DeviceRef, std::string> madeUp_;
  int32_t maxDepth_ = 0;
  static constexpr int32_t kMaxIndentedDepth = 64;
};

}  // namespace

std::string exportNcclXml(const Topology& topology, int32_t node) { return Exporter(topology, node).run(); }

}  // namespace tuccl
