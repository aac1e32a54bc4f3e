// The GPU fabric of a node, as the user states it: for topology sources that cannot show it.
//
// In:  a Topology and a fabric: nvswitch, hybrid-cube-mesh or pcie.
// Out: the same Topology with the GPU fabric of every node replaced (NVLink/xGMI links and NVSwitches
//      removed, the stated fabric added), or a warning for a topology that probably lacks one.
//
// Vendor topology files of NVLink machines (cloud VM files for 8×V100/A100/H100) carry no <nvlink>:
// NCCL finds NVLink at run time. sysfs (discovery) shows none either. Imported as they are, such
// machines look PCIe-only; missingNvlinkWarning says so, and --gpu-fabric lets the user fix it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

enum class GpuFabric : uint8_t { NvSwitch, HybridCubeMesh, Pcie };

/// "nvswitch", "hybrid-cube-mesh", "pcie".
std::string_view gpuFabricName(GpuFabric fabric);
std::optional<GpuFabric> parseGpuFabric(std::string_view name);
std::vector<std::string> gpuFabricNames();

/// `topology` with the GPU fabric of every node replaced by `fabric`: nvswitch links every GPU to
/// one logical NVSwitch of its node (6 lanes for sm 70, 12 for sm 80, 18 for sm 90 and later, 12
/// when unknown); hybrid-cube-mesh wires 8 GPUs as the DGX-1 (SCCL's lane matrix); pcie leaves
/// PCIe only. Throws std::invalid_argument for hybrid-cube-mesh on a node without exactly 8 GPUs.
Topology withGpuFabric(Topology topology, GpuFabric fabric);

/// A warning when some node looks like an NVLink machine described without NVLink: 8 or 16 NVIDIA
/// GPUs (no AMD architecture) whose sm is 70, 80 or 90 (V100, A100, H100 — the parts sold in 8- and
/// 16-GPU NVLink servers) or unknown, and no NVLink/xGMI link on any of them. Nothing otherwise.
std::optional<std::string> missingNvlinkWarning(const Topology& topology);

}  // namespace tuccl
