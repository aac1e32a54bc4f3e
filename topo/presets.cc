#include "topo/presets.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "topo/defaults.h"

namespace tuccl {

namespace {

// ---- Numbers, each with its source ------------------------------------------------------------
using namespace topo_defaults;  // link numbers and their sources: defaults.h

// cost-model.md: "A100 NVSwitch: 300 GB/s per GPU per direction" (12 lanes × 25 GB/s).
constexpr int kA100NvlinkLanes = 12;
// cost-model.md: "H100/H200 8-GPU NVSwitch: NVLink line rate 450 GB/s per GPU" (18 lanes × 25 GB/s).
constexpr int kH100NvlinkLanes = 18;
// TuCCL Table I (papers/001): alpha 3 µs intra-server, remote alpha 26 µs.
constexpr double kTucclAlphaUs = 3.0;
constexpr double kTucclRemoteAlphaUs = 26.0;
// NIC line rates in GB/s (Gb/s ÷ 8): cost-model.md "NICs 200 Gb/s (25 GB/s) each"; 400 Gb/s DGX-H100
// NICs (ResCCL §1, papers/003: "DGX-H100 systems linked by 400Gb/s InfiniBand"); 100 Gb/s on NDv2
// (cost-model.md, TACCL) and on the TuCCL V100 servers (TuCCL §IV-A: "Mellanox CX5/CX6 adapters
// with 100 Gb/s").
constexpr double k100GbE = 12.5;
constexpr double k200GbE = 25.0;
constexpr double k400GbE = 50.0;

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name) {
    topology_.name = std::move(name);
    topology_.nodes.push_back(Node{""});
  }
  DeviceRef gpu(int32_t sm) {
    int32_t rank = topology_.nRanks();
    topology_.gpus.push_back(Gpu{rank, 0, "", sm});
    return gpuRef(rank);
  }
  DeviceRef nic(double bandwidthGBps, bool gdr = true) {
    int32_t index = static_cast<int32_t>(topology_.nics.size());
    topology_.nics.push_back(Nic{0, "mlx5_" + std::to_string(index), bandwidthGBps, "", gdr});
    return nicRef(index);
  }
  DeviceRef sw(SwitchKind kind) {
    topology_.switches.push_back(Switch{kind, 0, "", ""});
    return switchRef(static_cast<int32_t>(topology_.switches.size()) - 1);
  }
  void link(DeviceRef a, DeviceRef b, LinkKind kind, double alphaUs, double bandwidthGBps,
            int32_t lanes = 1) {
    topology_.links.push_back(Link{a, b, kind, alphaUs, bandwidthGBps, lanes});
  }
  Topology take() { return std::move(topology_); }

 private:
  Topology topology_;
};

// The host side of an 8-GPU server: two sockets, four PCIe switches (two per socket), each with
// GPUs {2s, 2s+1} and `nicsPerSwitch` NICs.
void addHostFabric(NodeBuilder& node, const std::vector<DeviceRef>& gpus, int nicsPerSwitch, double nicGBps,
                   double pcieGBps, double smpGBps) {
  int switches = static_cast<int>(gpus.size()) / 2;
  int sockets = switches >= 2 ? 2 : 1;
  std::vector<DeviceRef> cpus;
  for (int c = 0; c < sockets; ++c) cpus.push_back(node.sw(SwitchKind::RootComplex));
  if (sockets == 2) node.link(cpus[0], cpus[1], LinkKind::Smp, kPcieAlphaUs, smpGBps);
  for (int s = 0; s < switches; ++s) {
    DeviceRef pcieSwitch = node.sw(SwitchKind::PCIeSwitch);
    node.link(cpus[s * sockets / switches], pcieSwitch, LinkKind::PCIe, kPcieAlphaUs, pcieGBps);
    node.link(gpus[2 * s], pcieSwitch, LinkKind::PCIe, kPcieAlphaUs, pcieGBps);
    node.link(gpus[2 * s + 1], pcieSwitch, LinkKind::PCIe, kPcieAlphaUs, pcieGBps);
    for (int n = 0; n < nicsPerSwitch; ++n)
      node.link(node.nic(nicGBps), pcieSwitch, LinkKind::PCIe, kPcieAlphaUs, pcieGBps);
  }
}

void addHybridCubeMesh(NodeBuilder& node, const std::vector<DeviceRef>& gpus) {
  for (int i = 0; i < 8; ++i) {
    for (int j = i + 1; j < 8; ++j) {
      if (kDgx1NvlinkLanes[i][j] == 0) continue;
      node.link(gpus[i], gpus[j], LinkKind::NVLink, kNvlinkAlphaUs, kDgx1NvlinkLanes[i][j] * kNvlinkLaneGBps,
                kDgx1NvlinkLanes[i][j]);
    }
  }
}

void addNvSwitch(NodeBuilder& node, const std::vector<DeviceRef>& gpus, int lanes) {
  // The six (A100) or four (H100) NVSwitch chips are one logical switch, as in NCCL's topology:
  // every GPU stripes its lanes over all of them. Half of TACCL's NVLink alpha per hop.
  DeviceRef nvswitch = node.sw(SwitchKind::NVSwitch);
  for (DeviceRef gpu : gpus) {
    node.link(gpu, nvswitch, LinkKind::NVLink, kNvswitchHopAlphaUs, lanes * kNvlinkLaneGBps, lanes);
  }
}

std::vector<DeviceRef> addGpus(NodeBuilder& node, int count, int32_t sm) {
  std::vector<DeviceRef> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back(node.gpu(sm));
  return gpus;
}

Topology buildDgx1V100() {
  NodeBuilder node("dgx1-v100");
  auto gpus = addGpus(node, 8, 70);
  addHybridCubeMesh(node, gpus);
  // NVIDIA DGX-1 (V100) system architecture whitepaper: four 100 Gb/s EDR InfiniBand NICs, one on
  // each PCIe switch with two GPUs; two Xeon sockets; PCIe Gen3.
  addHostFabric(node, gpus, 1, k100GbE, kPcieGen3x16GBps, kIntelSmpGBps);
  return node.take();
}

Topology buildTucclV100() {
  NodeBuilder node("tuccl-v100");
  auto gpus = addGpus(node, 4, 70);
  // TuCCL §IV-A: one SXM2 module, four V100 "interconnected via six second-generation NVLink
  // bridges" (300 GB/s bidirectional per GPU): every pair joined by 2 lanes, 3 peers × 2 = 6.
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j)
      node.link(gpus[i], gpus[j], LinkKind::NVLink, kTucclAlphaUs, 2 * kNvlinkLaneGBps, 2);
  }
  // TuCCL §IV-A: 100 Gb/s CX5/CX6 NICs "connected to the SXM2 modules through PCIe switches". The
  // paper gives no NIC count; we assume two, each on a Gen3 switch with two GPUs (Table I binds
  // Rank0 → NIC0).
  addHostFabric(node, gpus, 1, k100GbE, kPcieGen3x16GBps, kIntelSmpGBps);
  return node.take();
}

Topology buildDgxA100() {
  NodeBuilder node("dgx-a100");
  auto gpus = addGpus(node, 8, 80);
  addNvSwitch(node, gpus, kA100NvlinkLanes);
  // DGX-A100: eight 200 Gb/s compute NICs (issue 3; cost-model.md 25 GB/s each), two per Gen4 PCIe
  // switch with two GPUs; two AMD sockets.
  addHostFabric(node, gpus, 2, k200GbE, kPcieGen4x16GBps, kAmdSmpGBps);
  return node.take();
}

Topology buildResCclA100() {
  NodeBuilder node("resccl-a100");
  auto gpus = addGpus(node, 8, 80);
  addNvSwitch(node, gpus, kA100NvlinkLanes);
  // ResCCL §5.1 (papers/003): "four NICs, each offering 200 Gbps ... every two GPUs on the host
  // sharing the same NIC".
  addHostFabric(node, gpus, 1, k200GbE, kPcieGen4x16GBps, kAmdSmpGBps);
  return node.take();
}

Topology buildDgxH100() {
  NodeBuilder node("dgx-h100");
  auto gpus = addGpus(node, 8, 90);
  addNvSwitch(node, gpus, kH100NvlinkLanes);
  // DGX-H100: eight 400 Gb/s NICs (issue 3; ResCCL §1), two per Gen5 PCIe switch; two Intel sockets.
  addHostFabric(node, gpus, 2, k400GbE, kPcieGen5x16GBps, kIntelSmpGBps);
  return node.take();
}

Topology buildNdv2() {
  NodeBuilder node("ndv2");
  auto gpus = addGpus(node, 8, 70);
  addHybridCubeMesh(node, gpus);
  addHostFabric(node, gpus, 0, 0, kPcieGen3x16GBps, kIntelSmpGBps);
  // cost-model.md / TACCL: "NDv2 has one 100 Gb/s NIC per node, no GPUDirect RDMA": the NIC hangs
  // off the first socket and every GPU's traffic bounces through host memory.
  DeviceRef nic = node.nic(k100GbE, /*gdr=*/false);
  node.link(nic, switchRef(0), LinkKind::PCIe, kPcieAlphaUs, kPcieGen3x16GBps);
  return node.take();
}

struct PresetEntry {
  std::string_view name;
  Topology (*build)();
  Fabric fabric;
  double nicAlphaUs;  // per NIC↔ToR link; a path crosses two
};

// ResCCL §5.1: "The cluster employs a two-tier Clos network topology. Each server connects to a
// ToR switch via four links"; the others default to one switch.
constexpr PresetEntry kPresets[] = {
    {"dgx1-v100", buildDgx1V100, Fabric::Switch, kNicLinkAlphaUs},
    {"tuccl-v100", buildTucclV100, Fabric::Switch, kTucclRemoteAlphaUs / 2},
    {"dgx-a100", buildDgxA100, Fabric::Switch, kNicLinkAlphaUs},
    {"resccl-a100", buildResCclA100, Fabric::Clos, kNicLinkAlphaUs},
    {"dgx-h100", buildDgxH100, Fabric::Switch, kNicLinkAlphaUs},
    {"ndv2", buildNdv2, Fabric::Switch, kNicLinkAlphaUs},
};

/// The preset called `name`, or InvalidArgument listing the known names.
Expected<const PresetEntry*> lookupPreset(std::string_view name) {
  for (const PresetEntry& entry : kPresets) {
    if (entry.name == name) return &entry;
  }
  std::string known;
  for (const PresetEntry& entry : kPresets) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  return makeError(ErrorCode::InvalidArgument,
                   "unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

const PresetEntry& findPreset(std::string_view name) {
  Expected<const PresetEntry*> entry = lookupPreset(name);
  if (!entry) throw std::invalid_argument(entry.status().message());
  return **entry;
}

/// The number in `text`, or InvalidArgument naming the option.
template <typename T>
Expected<T> parseNumber(std::string_view key, std::string_view text) {
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      (std::is_floating_point_v<T> && !std::isfinite(static_cast<double>(value)))) {
    return makeError(ErrorCode::InvalidArgument,
                     "preset option " + std::string(key) + "=" + std::string(text) + " is not a number");
  }
  return value;
}

/// Applies one KEY=VALUE option to `spec`.
Status applyPresetOption(std::string_view item, PresetSpec& spec) {
  const size_t equals = item.find('=');
  if (equals == std::string_view::npos)
    return makeError(ErrorCode::InvalidArgument,
                     "preset option '" + std::string(item) + "' is not KEY=VALUE");
  const std::string_view key = item.substr(0, equals);
  const std::string_view value = item.substr(equals + 1);
  auto atLeast = [&](auto number, auto minimum, auto& out) -> Status {
    if (!number) return number.status();
    if (!(*number >= minimum)) {
      return makeError(ErrorCode::InvalidArgument,
                       "preset option " + std::string(key) + " must be at least " + std::to_string(minimum));
    }
    out = *number;
    return Status();
  };
  if (key == "nodes") return atLeast(parseNumber<int32_t>(key, value), 1, spec.cluster.nodes);
  if (key == "rack") return atLeast(parseNumber<int32_t>(key, value), 1, spec.cluster.nodesPerTor);
  if (key == "gpus") return atLeast(parseNumber<int32_t>(key, value), 1, spec.gpus);
  if (key == "oversub") {
    Expected<double> ratio = parseNumber<double>(key, value);
    if (!ratio) return ratio.status();
    if (!(*ratio >= 1.0))
      return makeError(ErrorCode::InvalidArgument, "preset option oversub must be at least 1");
    spec.cluster.oversubscription = *ratio;
    return Status();
  }
  if (key == "fabric") {
    if (value == "switch") {
      spec.cluster.fabric = Fabric::Switch;
    } else if (value == "clos") {
      spec.cluster.fabric = Fabric::Clos;
    } else {
      return makeError(ErrorCode::InvalidArgument,
                       "preset option fabric must be 'switch' or 'clos' (got '" + std::string(value) + "')");
    }
    return Status();
  }
  return makeError(ErrorCode::InvalidArgument, "unknown preset option '" + std::string(key) +
                                                   "' (known: nodes, gpus, fabric, oversub, rack)");
}

}  // namespace

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const PresetEntry& entry : kPresets) names.emplace_back(entry.name);
  return names;
}

Topology presetNode(std::string_view name) { return findPreset(name).build(); }

ClusterOptions presetClusterOptions(std::string_view name) {
  const PresetEntry& entry = findPreset(name);
  ClusterOptions options;
  options.fabric = entry.fabric;
  options.networkAlphaUs = entry.nicAlphaUs;
  return options;
}

bool isPresetSpec(std::string_view spec) { return spec.starts_with("preset:"); }

Expected<PresetSpec> parsePresetSpec(std::string_view spec) {
  if (!isPresetSpec(spec)) {
    return makeError(ErrorCode::InvalidArgument,
                     "a preset spec starts with 'preset:' (got '" + std::string(spec) + "')");
  }
  const std::string_view rest = spec.substr(7);
  const size_t colon = rest.find(':');
  PresetSpec parsed;
  parsed.name = std::string(rest.substr(0, colon));
  Expected<const PresetEntry*> entry = lookupPreset(parsed.name);
  if (!entry) return entry.status();
  parsed.cluster.fabric = (*entry)->fabric;
  parsed.cluster.networkAlphaUs = (*entry)->nicAlphaUs;
  std::string_view options = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  while (!options.empty()) {
    const size_t comma = options.find(',');
    const std::string_view item = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view() : options.substr(comma + 1);
    if (Status status = applyPresetOption(item, parsed); !status) return status;
  }
  if (parsed.gpus > 0) {
    const int32_t perNode = (*entry)->build().nRanks();
    if (parsed.gpus > perNode) {
      return makeError(ErrorCode::InvalidArgument, "preset option gpus=" + std::to_string(parsed.gpus) +
                                                       " is more than the " + std::to_string(perNode) +
                                                       " GPUs of a " + parsed.name + " node");
    }
  }
  return parsed;
}

Topology makePreset(std::string_view spec) {
  Expected<PresetSpec> parsed = parsePresetSpec(spec);
  if (!parsed) throw std::invalid_argument(parsed.status().message());
  Topology node = presetNode(parsed->name);
  if (parsed->gpus > 0) node = reduceNodeGpus(node, parsed->gpus);
  Topology topology = composeCluster(node, parsed->cluster);
  topology.name = std::string(spec.substr(7));
  return topology;
}

}  // namespace tuccl
