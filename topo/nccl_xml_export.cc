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
      visited_.insert(switchRef(static_cast<int32_t>(s)));
      writeChildren(cpu, switchRef(static_cast<int32_t>(s)));
    }
    std::ostringstream out;
    document.save(out, "  ");
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

  void writeChildren(pugi::xml_node parent, DeviceRef device) {
    for (int32_t linkIndex : pcie_[device]) {
      const Link& link = topology_.links[linkIndex];
      DeviceRef child = link.a == device ? link.b : link.a;
      if (visited_.contains(child)) continue;
      if (child.kind == DeviceKind::Switch && topology_.switches[child.index].kind != SwitchKind::PCIeSwitch)
        continue;
      visited_.insert(child);
      auto [speed, width] = pcieSpeedFor(link.bandwidthGBps);
      pugi::xml_node pci = parent.append_child("pci");
      pci.append_attribute("busid") = busIdOf(child).c_str();
      if (child.kind == DeviceKind::Switch) {
        pci.append_attribute("class") = "0x060400";
      } else if (child.kind == DeviceKind::Gpu) {
        pci.append_attribute("class") = "0x030200";
        pci.append_attribute("vendor") = "0x10de";
      } else {
        pci.append_attribute("class") = "0x020700";
        pci.append_attribute("vendor") = "0x15b3";
      }
      pci.append_attribute("link_speed") = speed.c_str();
      pci.append_attribute("link_width") = width;
      if (child.kind == DeviceKind::Switch) {
        writeChildren(pci, child);
      } else if (child.kind == DeviceKind::Gpu) {
        writeGpu(pci, child.index);
      } else {
        writeNic(pci, child.index);
      }
    }
  }

  void writeGpu(pugi::xml_node pci, int32_t rank) {
    const Gpu& gpu = topology_.gpus[rank];
    pugi::xml_node element = pci.append_child("gpu");
    std::vector<int32_t> ranks = ranksOfNode(topology_, node_);
    int32_t local = static_cast<int32_t>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
    element.append_attribute("dev") = local;
    element.append_attribute("sm") = gpu.sm;
    element.append_attribute("rank") = local;
    element.append_attribute("gdr") = 1;
    for (const Link& link : topology_.links) {
      if (link.kind != LinkKind::NVLink) continue;
      DeviceRef self = gpuRef(rank);
      if (link.a != self && link.b != self) continue;
      DeviceRef other = link.a == self ? link.b : link.a;
      pugi::xml_node nvlink = element.append_child("nvlink");
      nvlink.append_attribute("target") = busIdOf(other).c_str();
      nvlink.append_attribute("count") = link.lanes;
      bool toSwitch =
          other.kind == DeviceKind::Switch && topology_.switches[other.index].kind == SwitchKind::NVSwitch;
      nvlink.append_attribute("tclass") = toSwitch ? "0x068000" : "0x030200";
    }
  }

  void writeNic(pugi::xml_node pci, int32_t index) {
    const Nic& nic = topology_.nics[index];
    pugi::xml_node net = pci.append_child("nic").append_child("net");
    std::vector<int32_t> nics = nicsOfNode(topology_, node_);
    int32_t local = static_cast<int32_t>(std::find(nics.begin(), nics.end(), index) - nics.begin());
    net.append_attribute("name") = (nic.name.empty() ? "mlx5_" + std::to_string(local) : nic.name).c_str();
    net.append_attribute("dev") = local;
    net.append_attribute("speed") = static_cast<long long>(std::llround(nic.bandwidthGBps * 8000.0));
    net.append_attribute("port") = 1;
    net.append_attribute("gdr") = nic.gdr ? 1 : 0;
  }

  const Topology& topology_;
  int32_t node_;
  std::map<DeviceRef, std::vector<int32_t>> pcie_;
  std::set<DeviceRef> visited_;
  std::map<DeviceRef, std::string> madeUp_;
};

}  // namespace

std::string exportNcclXml(const Topology& topology, int32_t node) { return Exporter(topology, node).run(); }

}  // namespace tuccl
