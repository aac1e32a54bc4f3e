#include "topo/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <pugixml.hpp>

#include "support/log.h"
#include "support/text_values.h"
#include "topo/defaults.h"
#include "topo/limits.h"

namespace tuccl {

namespace {

using namespace topo_defaults;

constexpr uint32_t kClassBridge = 0x0604;
constexpr uint32_t kClassVga = 0x0300;
constexpr uint32_t kClass3d = 0x0302;
constexpr uint32_t kClassEthernet = 0x0200;
constexpr uint32_t kClassInfiniband = 0x0207;
constexpr uint32_t kClassNvswitch = 0x0680;  // "other bridge": NVSwitch in NCCL's tclass 0x068000

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// "0000:19:00.0" in lower case; a bus id without a domain gets "0000:".
std::string normalizeBusId(std::string busId) {
  busId = lower(std::move(busId));
  if (std::count(busId.begin(), busId.end(), ':') == 1) busId = "0000:" + busId;
  return busId;
}

std::optional<uint64_t> parseHex(std::string_view text) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> parseInteger(std::string_view text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A GPU-to-GPU fabric link as a <gpu> lists it: <nvlink> or RCCL's <xgmi>.
struct FabricDecl {
  int32_t gpu;  // document-order GPU index
  LinkKind kind;
  std::string target;
  int32_t count;
  uint32_t tclass;
  SourceLoc loc;
};

constexpr uint32_t kClassDisplayOther = 0x0380;  // AMD Instinct GPUs (RCCL's tclass 0x038000)
constexpr uint64_t kVendorAmd = 0x1002;

bool isGpuClass(uint32_t base) { return base == kClass3d || base == kClassVga || base == kClassDisplayOther; }

// RCCL's gcn attribute: "gfx942", "gfx942:sramecc+:xnack-", or HIP's old numeric gcnArch ("906",
// "908", "910" for gfx90a, "942"). Empty when it names nothing.
std::string amdArchOf(std::string_view gcn) {
  gcn = gcn.substr(0, gcn.find(':'));
  std::string text = lower(std::string(gcn));
  if (text.starts_with("gfx") && text.size() > 3) return text;
  if (std::optional<int64_t> number = parseInteger(text); number && *number > 0 && *number < 10000) {
    if (*number == 910) return "gfx90a";
    return "gfx" + std::to_string(*number);
  }
  return "";
}

// Container and virtual network interfaces (Docker, libvirt, CNI plugins, tunnels): NCCL's socket
// transport lists them, under the CPU since they have no PCI device, but no GPU traffic leaves the
// node through them.
bool isVirtualInterfaceName(std::string_view name) {
  static constexpr std::string_view kPrefixes[] = {"veth", "docker", "br-", "virbr", "cni", "flannel", "cali",
                                                   "vxlan", "tun", "tap", "weave", "kube-", "lo", "dummy"};
  for (std::string_view prefix : kPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

class Importer {
 public:
  explicit Importer(const SourceText& source) : source_(source) {
    result_.topology.name = source.name();
    result_.topology.nodes.push_back(Node{""});
  }

  NcclXmlImport run() {
    pugi::xml_document document;
    pugi::xml_parse_result parsed = document.load_buffer(source_.text().data(), source_.text().size(),
                                                         pugi::parse_default, pugi::encoding_utf8);
    if (!parsed) {
      size_t offset = parsed.offset < 0 ? 0 : static_cast<size_t>(parsed.offset);
      throw DiagnosticError(Diagnostic{Severity::Error, source_.name(), source_.locationOf(offset),
                                       std::string("malformed XML: ") + parsed.description()});
    }
    pugi::xml_node system = document.child("system");
    if (!system) {
      pugi::xml_node first = document.first_child();
      while (first && first.type() != pugi::node_element) first = first.next_sibling();
      throw DiagnosticError(Diagnostic{
          Severity::Error, source_.name(), locOf(first),
          first ? "expected <system> as the root element, found <" + std::string(first.name()) + ">"
                : "expected a <system> element; the file has none"});
    }
    for (pugi::xml_node child : system.children()) {
      if (child.type() != pugi::node_element) continue;
      std::string_view name = child.name();
      if (name == "cpu") {
        readCpu(child);
      } else if (name == "pci" || name == "nic" || name == "gpu") {
        // Devices outside any <cpu>: give them an implicit root complex.
        walkElement(child, implicitCpu(child));
      }
    }
    connectCpus();
    if (gpusBeforeRanks_.empty()) warn(locOf(system), "the file describes no GPU");
    resolveNvlinks();
    if (pcieDefaulted_ > 0) {
      warn(firstPcieDefault_,
           std::to_string(pcieDefaulted_) +
               " PCI link(s) give no usable link_speed/link_width; assumed PCIe Gen3 x16 (15.75 GB/s)");
    }
    if (!virtualSkipped_.empty()) {
      warn(firstVirtual_, "virtual network interface(s) skipped (container or bridge, no PCI device): " +
                              virtualSkipped_);
    }
    orderRanks();
    if (auto problem = validateTopology(result_.topology)) {
      throw DiagnosticError(
          Diagnostic{Severity::Error, source_.name(), {}, "inconsistent topology: " + *problem});
    }
    return std::move(result_);
  }

 private:
  SourceLoc locOf(pugi::xml_node node) const {
    if (!node) return {};
    ptrdiff_t offset = node.offset_debug();
    return offset < 0 ? SourceLoc{} : source_.locationOf(static_cast<size_t>(offset));
  }

  void warn(SourceLoc loc, std::string message) {
    Diagnostic diagnostic{Severity::Warning, source_.name(), loc, std::move(message)};
    logLine(LogLevel::Warn, kLogGraph, -1,
            "topo: " + diagnostic.file + ":" + std::to_string(diagnostic.loc.line) + ":" +
                std::to_string(diagnostic.loc.column) + ": " + diagnostic.message);
    result_.warnings.push_back(std::move(diagnostic));
  }

  Topology& topo() { return result_.topology; }

  DeviceRef addSwitch(SwitchKind kind, std::string name, std::string busId) {
    topo().switches.push_back(Switch{kind, 0, std::move(name), std::move(busId)});
    return switchRef(static_cast<int32_t>(topo().switches.size()) - 1);
  }

  DeviceRef implicitCpu(pugi::xml_node at) {
    if (implicitCpu_) return *implicitCpu_;
    warn(locOf(at),
         "<" + std::string(at.name()) + "> outside any <cpu>; attached to an implicit root complex");
    implicitCpu_ = addSwitch(SwitchKind::RootComplex, "cpu", "");
    return *implicitCpu_;
  }

  void readCpu(pugi::xml_node cpu) {
    std::string numa = cpu.attribute("numaid").as_string();
    DeviceRef ref = addSwitch(SwitchKind::RootComplex, numa.empty() ? "cpu" : "cpu" + numa, "");
    cpuVendors_.push_back(cpu.attribute("vendor").as_string());
    cpus_.push_back(ref);
    walkChildren(cpu, ref);
  }

  void connectCpus() {
    // NCCL links every pair of CPUs; the bandwidth depends on the vendor (defaults.h).
    for (size_t i = 0; i < cpus_.size(); ++i) {
      for (size_t j = i + 1; j < cpus_.size(); ++j) {
        bool amd = cpuVendors_[i] == "AuthenticAMD" && cpuVendors_[j] == "AuthenticAMD";
        topo().links.push_back(
            Link{cpus_[i], cpus_[j], LinkKind::Smp, kPcieAlphaUs, amd ? kAmdSmpGBps : kIntelSmpGBps, 1});
      }
    }
    if (implicitCpu_ && !cpus_.empty()) {
      topo().links.push_back(Link{cpus_[0], *implicitCpu_, LinkKind::Smp, kPcieAlphaUs, kIntelSmpGBps, 1});
    }
  }

  // The number in attribute `name` of `element`, checked against `range`: nothing when the attribute
  // is absent or empty (or, with `leadingOnly`, does not start with a number: "Unknown", "");
  // a DiagnosticError at the element that quotes the attribute and says the allowed range otherwise.
  std::optional<double> boundedNumber(pugi::xml_node element, const char* name, const NumberRange& range,
                                      bool leadingOnly = false) {
    pugi::xml_attribute attribute = element.attribute(name);
    std::string_view text = attribute.as_string();
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    if (text.empty()) return std::nullopt;
    std::string_view number = text.starts_with('+') ? text.substr(1) : text;
    double value = 0;
    auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    bool parsed = end != number.data() && (error == std::errc() || error == std::errc::result_out_of_range);
    if (error == std::errc::result_out_of_range) value = number.starts_with('-') ? -HUGE_VAL : HUGE_VAL;
    std::string quoted = "<" + std::string(element.name()) + " " + name + "=\"" + std::string(text) + "\">";
    if (!parsed || (!leadingOnly && end != number.data() + number.size())) {
      if (leadingOnly && !parsed) return std::nullopt;
      fail(element, quoted + ": not a number; " + std::string(range.what) + " is a number");
    }
    if (std::optional<std::string> problem = rangeProblem(value, range)) fail(element, quoted + ": " + *problem);
    return value;
  }

  [[noreturn]] void fail(pugi::xml_node at, std::string message) const {
    throw DiagnosticError(Diagnostic{Severity::Error, source_.name(), locOf(at), std::move(message)});
  }

  // The bandwidth of the PCIe link above a <pci> element, from its link_speed and link_width.
  double pcieBandwidth(pugi::xml_node pci) {
    std::optional<double> speed = boundedNumber(pci, "link_speed", topo_limits::kPcieSpeed, true);
    std::optional<double> width = boundedNumber(pci, "link_width", topo_limits::kPcieWidth);
    double lane = speed ? pcieLaneGBps(*speed) : 0.0;
    if (lane > 0 && width && *width > 0) return lane * *width;
    if (pcieDefaulted_++ == 0) firstPcieDefault_ = locOf(pci);
    return kPcieGen3x16GBps;
  }

  void linkPcie(DeviceRef child, DeviceRef parent, double bandwidth) {
    topo().links.push_back(Link{child, parent, LinkKind::PCIe, kPcieAlphaUs, bandwidth, 1});
  }

  // The subtree under `container`, depth first in document order, with an explicit stack: files
  // nest <pci> as deep as they like without exhausting the call stack.
  void walkChildren(pugi::xml_node container, DeviceRef parent) {
    std::vector<std::pair<pugi::xml_node, DeviceRef>> stack;
    pushChildren(stack, container, parent);
    while (!stack.empty()) {
      auto [element, at] = stack.back();
      stack.pop_back();
      visit(element, at, stack);
    }
  }

  void walkElement(pugi::xml_node element, DeviceRef parent) {
    std::vector<std::pair<pugi::xml_node, DeviceRef>> stack{{element, parent}};
    while (!stack.empty()) {
      auto [next, at] = stack.back();
      stack.pop_back();
      visit(next, at, stack);
    }
  }

  static void pushChildren(std::vector<std::pair<pugi::xml_node, DeviceRef>>& stack, pugi::xml_node element,
                           DeviceRef parent) {
    for (pugi::xml_node child = element.last_child(); child; child = child.previous_sibling()) {
      if (child.type() == pugi::node_element) stack.emplace_back(child, parent);
    }
  }

  void visit(pugi::xml_node element, DeviceRef parent, std::vector<std::pair<pugi::xml_node, DeviceRef>>& stack) {
    std::string_view name = element.name();
    if (name == "pci") {
      readPci(element, parent, stack);
    } else if (name == "nic") {
      readNic(element, parent, kPcieGen3x16GBps, "");
    } else if (name == "gpu") {
      readGpu(element, parent, kPcieGen3x16GBps, "");
    }
    // Other elements (<nvlink> at odd places, vendor extensions) carry nothing we use.
  }

  void readPci(pugi::xml_node pci, DeviceRef parent, std::vector<std::pair<pugi::xml_node, DeviceRef>>& stack) {
    std::string busId = normalizeBusId(pci.attribute("busid").as_string());
    std::optional<uint64_t> classCode;
    if (pugi::xml_attribute attribute = pci.attribute("class")) {
      classCode = parseHex(attribute.as_string());
      if (!classCode) {
        warn(locOf(pci),
             "cannot read class '" + std::string(attribute.as_string()) + "' of PCI device " + busId);
      }
    }
    uint32_t base = classCode ? static_cast<uint32_t>(*classCode >> 8) : 0;
    bool hasGpu = static_cast<bool>(pci.child("gpu"));
    bool hasNic = static_cast<bool>(pci.child("nic"));
    if (hasGpu || isGpuClass(base)) {
      readGpu(pci.child("gpu"), parent, pcieBandwidth(pci), busId, pci);
    } else if (hasNic || base == kClassInfiniband || base == kClassEthernet) {
      readNic(pci.child("nic"), parent, pcieBandwidth(pci), busId, pci);
    } else if (base == kClassBridge || (!classCode && pci.child("pci"))) {
      DeviceRef bridge = addSwitch(SwitchKind::PCIeSwitch, "", busId);
      linkPcie(bridge, parent, pcieBandwidth(pci));
      pushChildren(stack, pci, bridge);
    } else {
      // NVSwitch PCI functions (0x0680), NVMe and the like: not part of the model; their children
      // (rare) hang off the same parent.
      pushChildren(stack, pci, parent);
    }
  }

  void readGpu(pugi::xml_node gpu, DeviceRef parent, double bandwidth, const std::string& busId,
               pugi::xml_node pci = {}) {
    int32_t index = static_cast<int32_t>(topo().gpus.size());
    Gpu model;
    model.rank = index;
    model.node = 0;
    model.pciBusId = busId;
    if (gpu) model.sm = static_cast<int32_t>(boundedNumber(gpu, "sm", topo_limits::kGpuSm).value_or(0));
    if (gpu) model.arch = amdArchOf(gpu.attribute("gcn").as_string());
    if (gpu && model.arch.empty()) model.arch = amdArchOf(gpu.attribute("arch").as_string());
    if (model.arch.empty() && pci && parseHex(pci.attribute("vendor").as_string()) == kVendorAmd) model.arch = "amd";
    if (model.arch.empty() && gpu && gpu.child("xgmi")) model.arch = "amd";
    topo().gpus.push_back(model);
    GpuAttributes attributes;
    attributes.loc = locOf(gpu ? gpu : pci);
    if (gpu && gpu.attribute("rank")) attributes.rank = gpu.attribute("rank").as_llong(-1);
    if (gpu && gpu.attribute("dev")) attributes.dev = gpu.attribute("dev").as_llong(-1);
    gpusBeforeRanks_.push_back(attributes);
    linkPcie(gpuRef(index), parent, bandwidth);
    if (!busId.empty()) gpuByBusId_[busId] = index;
    if (!gpu) return;
    for (pugi::xml_node link : gpu.children()) {
      std::string_view name = link.name();
      if (link.type() != pugi::node_element || (name != "nvlink" && name != "xgmi")) continue;
      FabricDecl decl;
      decl.gpu = index;
      decl.kind = name == "xgmi" ? LinkKind::Xgmi : LinkKind::NVLink;
      decl.target = normalizeBusId(link.attribute("target").as_string());
      decl.count = static_cast<int32_t>(boundedNumber(link, "count", topo_limits::kFabricLanes).value_or(1));
      decl.tclass = static_cast<uint32_t>(parseHex(link.attribute("tclass").as_string()).value_or(0) >> 8);
      decl.loc = locOf(link);
      fabricLinks_.push_back(decl);
    }
  }

  void readNic(pugi::xml_node nic, DeviceRef parent, double bandwidth, const std::string& busId,
               pugi::xml_node pci = {}) {
    std::vector<pugi::xml_node> nets;
    if (nic) {
      for (pugi::xml_node net : nic.children("net")) nets.push_back(net);
    }
    if (nets.empty()) nets.push_back(pugi::xml_node());
    for (pugi::xml_node net : nets) {
      std::string name = net ? net.attribute("name").as_string() : "";
      if (!pci && busId.empty() && isVirtualInterfaceName(name)) {
        skipVirtual(net, name);
        continue;
      }
      Nic model;
      model.node = 0;
      model.pciBusId = busId;
      model.name = net ? net.attribute("name").as_string() : "";
      double speedMbps = net ? nicSpeedMbps(net) : 0.0;
      if (speedMbps > 0) {
        model.bandwidthGBps = speedMbps / 8000.0;  // NCCL writes speed in Mb/s
      } else {
        model.bandwidthGBps = kDefaultNicGBps;
        std::string what = !model.name.empty() ? "NIC " + model.name
                           : !busId.empty()    ? "NIC " + busId
                                               : "a NIC";
        warn(locOf(net ? net : (nic ? nic : pci)),
             what + " gives no speed (none, or 0 or less, which NCCL reads as unknown); assumed 100 Gb/s (12.5 GB/s)");
      }
      model.gdr = net ? net.attribute("gdr").as_int(1) != 0 : true;
      int32_t index = static_cast<int32_t>(topo().nics.size());
      topo().nics.push_back(model);
      linkPcie(nicRef(index), parent, bandwidth);
    }
  }

  // A <net speed> in Mb/s, as NCCL reads it (graph/topo.cc: bw = speed / 8000 GB/s), 0 when the
  // file gives none. NCCL takes speed <= 0 as unknown ("some NICs define speed = -1") and writes
  // speed="0" for a port whose speed it could not read: defaults, not errors. Some vendor files
  // write kb/s — speed="200000000" is 200 Tb/s in Mb/s, more than any NIC, and 200 Gb/s in kb/s —
  // so a value above the largest NIC in Mb/s but within it in kb/s is read as kb/s, once with a
  // warning; anything larger is an error.
  double nicSpeedMbps(pugi::xml_node net) {
    NumberRange anyUnit = topo_limits::kNicSpeedMbps;
    anyUnit.min = -std::numeric_limits<double>::max();
    anyUnit.max = topo_limits::kNicSpeedMbps.max * 1000;
    anyUnit.minExclusive = false;
    const std::string text = net.attribute("speed").as_string();
    std::optional<double> speed;
    try {
      speed = boundedNumber(net, "speed", anyUnit);
    } catch (const DiagnosticError& error) {
      if (error.diagnostic().message.find("not a number") != std::string::npos) throw;
      fail(net, "<net speed=\"" + text + "\">: NIC speed must be at most " +
                    formatNumberForPeople(topo_limits::kNicSpeedMbps.max) + " Mb/s (10 Tb/s), or " +
                    formatNumberForPeople(anyUnit.max) + " read as kb/s, got " + text);
    }
    if (!speed || *speed <= 0) return 0;
    if (*speed <= topo_limits::kNicSpeedMbps.max) return *speed;
    const double mbps = *speed / 1000;
    if (!nicSpeedInKbWarned_) {
      nicSpeedInKbWarned_ = true;
      char gbps[64];
      std::snprintf(gbps, sizeof gbps, "%g Gb/s (%g GB/s)", mbps / 1000, mbps / 8000);
      warn(locOf(net), "<net speed=\"" + text + "\"> would be " + formatNumberForPeople(*speed / 1e6) +
                           " Tb/s in Mb/s (as NCCL reads it), more than any NIC; read as kb/s: " + gbps +
                           " (said once per file)");
    }
    return mbps;
  }

  void skipVirtual(pugi::xml_node net, const std::string& name) {
    if (virtualSkipped_.empty()) firstVirtual_ = locOf(net);
    virtualSkipped_ += (virtualSkipped_.empty() ? "" : ", ") + name;
  }

  void resolveNvlinks() {
    std::map<std::tuple<LinkKind, int32_t, int32_t>, int32_t> gpuPairs;  // (kind, low, high) → lanes
    std::map<int32_t, int32_t> switchLanes;                              // gpu → NVLink lanes to the NVSwitch
    for (const FabricDecl& decl : fabricLinks_) {
      auto target = gpuByBusId_.find(decl.target);
      bool gpuClass = isGpuClass(decl.tclass) || decl.tclass == 0;
      if (decl.kind == LinkKind::NVLink && decl.tclass == kClassNvswitch) {
        switchLanes[decl.gpu] += decl.count;
      } else if (target != gpuByBusId_.end() && gpuClass) {
        if (target->second == decl.gpu) {
          warn(decl.loc, std::string(linkKindName(decl.kind)) + " link from a GPU to itself ignored");
          continue;
        }
        auto key = std::minmax(decl.gpu, target->second);
        int32_t& lanes = gpuPairs[{decl.kind, key.first, key.second}];
        lanes = std::max(lanes, decl.count);  // both ends list the same link
      } else if (gpuClass && decl.tclass != 0) {
        warn(decl.loc, "link target " + decl.target + " is not a GPU of this file; ignored");
      } else {
        warn(decl.loc, std::string(linkKindName(decl.kind)) + " link to " + decl.target +
                           " (a CPU or unknown device) ignored");
      }
    }
    auto laneBandwidth = [&](int32_t gpu) {
      int32_t sm = topo().gpus[gpu].sm;
      if (sm == 0 && !smWarned_) {
        smWarned_ = true;
        warn(gpusBeforeRanks_[gpu].loc, "GPU without an 'sm' attribute; NVLink lanes assumed 25 GB/s");
      }
      return nvlinkLaneGBps(sm);
    };
    auto xgmiBandwidth = [&](int32_t gpu) {
      const std::string& arch = topo().gpus[gpu].arch;
      if (!arch.starts_with("gfx") && !archWarned_) {
        archWarned_ = true;
        warn(gpusBeforeRanks_[gpu].loc, "AMD GPU without a 'gcn' architecture; xGMI links assumed 46 GB/s");
      }
      return xgmiLinkGBps(arch);
    };
    for (const auto& [pair, lanes] : gpuPairs) {
      auto [kind, a, b] = pair;
      bool xgmi = kind == LinkKind::Xgmi;
      double lane = xgmi ? std::min(xgmiBandwidth(a), xgmiBandwidth(b)) : std::min(laneBandwidth(a), laneBandwidth(b));
      topo().links.push_back(
          Link{gpuRef(a), gpuRef(b), kind, xgmi ? kXgmiAlphaUs : kNvlinkAlphaUs, lane * lanes, lanes});
    }
    if (!switchLanes.empty()) {
      DeviceRef nvswitch = addSwitch(SwitchKind::NVSwitch, "nvswitch", "");
      for (const auto& [gpu, lanes] : switchLanes) {
        topo().links.push_back(Link{gpuRef(gpu), nvswitch, LinkKind::NVLink, kNvswitchHopAlphaUs,
                                    laneBandwidth(gpu) * lanes, lanes});
      }
    }
  }

  // Ranks follow the <gpu rank> attributes when they are present and distinct, else <gpu dev>,
  // else document order; then GPUs are renumbered so that gpus[r].rank == r.
  void orderRanks() {
    size_t n = gpusBeforeRanks_.size();
    auto distinctKeys = [&](auto member) {
      std::vector<int64_t> keys;
      for (const GpuAttributes& a : gpusBeforeRanks_) {
        if (a.*member < 0) return std::vector<int64_t>{};
        keys.push_back(a.*member);
      }
      std::vector<int64_t> sorted = keys;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return std::vector<int64_t>{};
      return keys;
    };
    std::vector<int64_t> keys = distinctKeys(&GpuAttributes::rank);
    if (keys.empty()) keys = distinctKeys(&GpuAttributes::dev);
    if (keys.empty()) {
      keys.resize(n);
      std::iota(keys.begin(), keys.end(), 0);
    }
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
    std::vector<int32_t> rankOf(n);
    for (size_t r = 0; r < n; ++r) rankOf[order[r]] = static_cast<int32_t>(r);
    std::vector<Gpu> gpus(n);
    for (size_t i = 0; i < n; ++i) {
      gpus[rankOf[i]] = topo().gpus[i];
      gpus[rankOf[i]].rank = rankOf[i];
    }
    topo().gpus = std::move(gpus);
    for (Link& link : topo().links) {
      if (link.a.kind == DeviceKind::Gpu) link.a.index = rankOf[link.a.index];
      if (link.b.kind == DeviceKind::Gpu) link.b.index = rankOf[link.b.index];
    }
  }

  struct GpuAttributes {
    int64_t rank = -1;
    int64_t dev = -1;
    SourceLoc loc;
  };

  const SourceText& source_;
  NcclXmlImport result_;
  std::vector<DeviceRef> cpus_;
  std::vector<std::string> cpuVendors_;
  std::optional<DeviceRef> implicitCpu_;
  std::vector<GpuAttributes> gpusBeforeRanks_;
  std::map<std::string, int32_t> gpuByBusId_;
  std::vector<FabricDecl> fabricLinks_;
  std::string virtualSkipped_;
  SourceLoc firstVirtual_;
  bool archWarned_ = false;
  bool nicSpeedInKbWarned_ = false;
  int32_t pcieDefaulted_ = 0;
  SourceLoc firstPcieDefault_;
  bool smWarned_ = false;
};

}  // namespace

NcclXmlImport importNcclXml(const SourceText& source) { return Importer(source).run(); }

}  // namespace tuccl
