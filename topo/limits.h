// The numbers a topology source may give, and the one check every reader applies to them.
//
// In:  a number read from a file (NCCL topology XML, TuCCL JSON, a preset spec).
// Out: nothing when it lies in the allowed range, else a message that names the quantity and the
//      range in plain numbers ("NVLink lanes between two devices: 1 to 64, got 99,999,999,999").
//
// The ranges are generous bounds on real hardware, there to stop hostile or mistyped values from
// becoming absurd models (2^31 lanes, negative bandwidth, NaN), not to judge plausible machines.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tuccl {

struct NumberRange {
  std::string_view what;  ///< "NVLink lanes between two devices"
  double min = 0;
  double max = 0;
  std::string_view unit;  ///< "" or "GB/s", "Mb/s", "µs" ...
  bool integer = false;   ///< whole numbers only
  bool minExclusive = false;
};

namespace topo_limits {
// NVSwitch-era GPUs have 18 NVLinks (H100), xGMI GPUs 7; 64 leaves room for any bundle.
inline constexpr NumberRange kFabricLanes{"GPU fabric lanes (NVLink/xGMI count) between two devices", 1, 64, "", true};
// PCIe link widths are x1 .. x32; 0 is how NCCL dumps write "unknown".
inline constexpr NumberRange kPcieWidth{"PCIe link width", 0, 32, "lanes", true};
// PCIe 1.0 .. 6.0 run 2.5 .. 64 GT/s; 256 leaves room for the next generations.
inline constexpr NumberRange kPcieSpeed{"PCIe link speed", 0, 256, "GT/s", false, true};
// A NIC port: up to 10 Tb/s (today's fastest ports are 800 Gb/s).
inline constexpr NumberRange kNicSpeedMbps{"NIC speed", 0, 10'000'000, "Mb/s", false, true};
inline constexpr NumberRange kNicBandwidthGBps{"NIC bandwidth", 0, 1'250, "GB/s", false, true};
// Compute capability × 10 (70 V100 .. 120 and beyond); 0 means unknown.
inline constexpr NumberRange kGpuSm{"GPU compute capability (sm, × 10)", 0, 1'000, "", true};
// Any one link: up to 100 TB/s per direction and 1 s of latency.
inline constexpr NumberRange kLinkBandwidthGBps{"link bandwidth", 0, 100'000, "GB/s", false, true};
inline constexpr NumberRange kLinkAlphaUs{"link latency (alpha)", 0, 1'000'000, "µs"};
inline constexpr NumberRange kLinkLanes{"lanes of one link", 1, 1'024, "", true};
// Composed clusters: up to 4,096 nodes (32,768 ranks of 8-GPU nodes).
inline constexpr NumberRange kNodes{"number of nodes", 1, 4'096, "", true};
inline constexpr NumberRange kGpusPerNode{"GPUs of one node", 0, 1'024, "", true};
}  // namespace topo_limits

/// Nothing when `value` lies in `range`; else "<what> must be <min> to <max> <unit>, got <value>"
/// (or "above <min> up to <max>" for an exclusive minimum, "a whole number" when it is not one).
std::optional<std::string> rangeProblem(double value, const NumberRange& range);

}  // namespace tuccl
