// The topology model: what a GPU cluster is, as the rest of the pipeline sees it.
//
// In:  nothing (built by presets, the JSON reader, the NCCL XML importer, discovery).
// Out: a Topology value, read by paths.h (resource paths), sketch.h (pruning) and the simulator.
//
// A Topology is a plain graph. Vertices are devices: GPUs (one per rank), NICs and switches
// (NVSwitch, PCIe switch, CPU root complex, top-of-rack, aggregation). Edges are full-duplex
// links with a latency alpha (µs) and a bandwidth (GB/s, per direction, all lanes together).
// Devices other than network switches belong to one node (server). Invariant: gpus[r].rank == r.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl {

enum class SwitchKind : uint8_t { NVSwitch, PCIeSwitch, RootComplex, ToR, Aggregation };
enum class LinkKind : uint8_t { NVLink, PCIe, Network, Smp, Xgmi };
enum class DeviceKind : uint8_t { Gpu, Nic, Switch };

/// "nvswitch", "pcie-switch", "cpu", "tor", "aggregation".
std::string_view switchKindName(SwitchKind kind);
std::optional<SwitchKind> parseSwitchKind(std::string_view name);
/// "nvlink", "pcie", "network", "smp" (the CPU-to-CPU interconnect: UPI/QPI, Infinity Fabric),
/// "xgmi" (AMD's GPU-to-GPU Infinity Fabric links).
std::string_view linkKindName(LinkKind kind);
std::optional<LinkKind> parseLinkKind(std::string_view name);
/// Whether links of this kind are a GPU fabric: direct GPU↔GPU (or GPU↔NVSwitch) links that carry
/// intra-node traffic instead of PCIe (NVLink, xGMI).
bool isGpuFabric(LinkKind kind);
/// Whether switches of this kind sit in the network (belong to no node).
bool isNetworkSwitch(SwitchKind kind);

/// One end of a link.
struct DeviceRef {
  DeviceKind kind = DeviceKind::Gpu;
  int32_t index = 0;  ///< into Topology::gpus, nics or switches

  friend bool operator==(const DeviceRef&, const DeviceRef&) = default;
  friend auto operator<=>(const DeviceRef&, const DeviceRef&) = default;
};

inline DeviceRef gpuRef(int32_t index) { return {DeviceKind::Gpu, index}; }
inline DeviceRef nicRef(int32_t index) { return {DeviceKind::Nic, index}; }
inline DeviceRef switchRef(int32_t index) { return {DeviceKind::Switch, index}; }

struct Node {
  std::string name;  ///< host name or label; not part of the signature

  friend bool operator==(const Node&, const Node&) = default;
};

struct Gpu {
  int32_t rank = 0;
  int32_t node = 0;
  std::string pciBusId;  ///< "0000:19:00.0", lower case; may be empty
  int32_t sm = 0;        ///< compute capability × 10 (70 V100, 80 A100, 90 H100); 0 unknown
  /// AMD GPUs: the architecture ("gfx942" MI300X, "gfx90a" MI250X), "amd" when a file says AMD
  /// (PCI vendor 0x1002) but not which; empty for NVIDIA GPUs and unknown ones.
  std::string arch;

  friend bool operator==(const Gpu&, const Gpu&) = default;
};

struct Nic {
  int32_t node = 0;
  std::string name;  ///< "mlx5_0"; may be empty
  double bandwidthGBps = 0;
  std::string pciBusId;
  bool gdr = true;  ///< GPUDirect RDMA: GPUs reach the NIC without a bounce through host memory

  friend bool operator==(const Nic&, const Nic&) = default;
};

struct Switch {
  SwitchKind kind = SwitchKind::PCIeSwitch;
  int32_t node = -1;  ///< -1 for network switches (ToR, aggregation)
  std::string name;   ///< label; may be empty
  std::string pciBusId;

  friend bool operator==(const Switch&, const Switch&) = default;
};

struct Link {
  DeviceRef a;
  DeviceRef b;
  LinkKind kind = LinkKind::PCIe;
  double alphaUs = 0;        ///< latency of one traversal
  double bandwidthGBps = 0;  ///< per direction, all lanes together
  int32_t lanes = 1;         ///< physical links bundled (NVLinks between a GPU pair, NIC ports, ...)

  friend bool operator==(const Link&, const Link&) = default;
};

struct Topology {
  std::string name;
  /// The cost-model file (sim/cost_model.h) calibrated on this machine (tuccl-calibrate), as the
  /// topology file names it: relative to the topology file's directory unless absolute; empty:
  /// none. Not part of the signature: it describes the engine, not the machine's shape.
  std::string costModel;
  std::vector<Node> nodes;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<Switch> switches;
  std::vector<Link> links;

  int32_t nRanks() const { return static_cast<int32_t>(gpus.size()); }
  int32_t nNodes() const { return static_cast<int32_t>(nodes.size()); }
  bool empty() const { return gpus.empty(); }

  friend bool operator==(const Topology&, const Topology&) = default;
};

/// The node a device belongs to; -1 for network switches.
int32_t nodeOf(const Topology& topology, DeviceRef device);
/// Position of a GPU, NIC or switch among the devices of its kind in its node (switches count per
/// kind); for network switches, among network switches of that kind.
int32_t localIndexOf(const Topology& topology, DeviceRef device);
/// Stable readable name: "n0.gpu3", "n1.nic0", "n0.nvswitch0", "n0.pcisw2", "n0.cpu1", "tor0", "agg0".
std::string deviceName(const Topology& topology, DeviceRef device);
/// Ranks of one node, ascending.
std::vector<int32_t> ranksOfNode(const Topology& topology, int32_t node);
/// NICs of one node, ascending.
std::vector<int32_t> nicsOfNode(const Topology& topology, int32_t node);
/// Largest number of GPUs on one node.
int32_t maxGpusPerNode(const Topology& topology);

/// Checks the invariants (ranks in order, indices in range, link ends exist, positive bandwidths,
/// no self links); returns the first violation, or nothing when the topology is valid.
std::optional<std::string> validateTopology(const Topology& topology);

/// Stable 64-bit FNV-1a hash over a canonical description of the topology: device counts, kinds,
/// nodes, link ends, kinds, lanes, alpha and bandwidth (rounded to 1e-6). Names, host names and PCI
/// bus ids are left out, so identical machines with different addresses share a signature.
uint64_t topologySignature(const Topology& topology);
/// The signature as 16 lower-case hex digits.
std::string signatureHex(uint64_t signature);

/// How N copies of one node are wired together (cluster.cc).
enum class Fabric : uint8_t { Switch, Clos };

struct ClusterOptions {
  int32_t nodes = 1;
  Fabric fabric = Fabric::Switch;
  /// Clos only: nodes per top-of-rack switch (a rack), and the ratio of a ToR's downlink to uplink
  /// capacity (1 = non-blocking, 2 = half the uplink).
  int32_t nodesPerTor = 1;
  double oversubscription = 1.0;
  /// Latency of one NIC↔ToR traversal; a path crosses two (tx and rx).
  double networkAlphaUs = 0.85;  // TACCL: InfiniBand alpha 1.7 µs end to end (cost-model.md)
  double uplinkAlphaUs = 0.0;    // switch forwarding is folded into the NIC alphas
};

/// N copies of `node` (a topology with exactly one node and no network switches), with every NIC
/// linked to a ToR switch: one ToR for all (Fabric::Switch) or a ToR per `nodesPerTor` nodes with
/// one uplink each to a single logical aggregation switch, of capacity (sum of the rack's NIC
/// bandwidth) / oversubscription (Fabric::Clos). Ranks are node-major.
Topology composeCluster(const Topology& node, const ClusterOptions& options);

/// The first `gpus` GPUs of a one-node topology with what serves them: the switches they hang
/// from (NVSwitch, their PCIe switches and those switches' root complexes), the NICs on those PCIe
/// switches, and the links among kept devices (node_subset.cc). resccl-a100 with gpus=4 keeps
/// socket 0: GPUs 0-3, two PCIe switches, two NICs (still two GPUs per NIC). Throws
/// std::invalid_argument for a multi-node topology or gpus outside 1..nRanks.
Topology reduceNodeGpus(const Topology& node, int32_t gpus);

}  // namespace tuccl
