// Link numbers shared by presets, the NCCL XML importer and discovery, each with its source. Where a
// file or the machine does not say, these are the documented defaults (docs/topology-format.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace tuccl::topo_defaults {

// NVLink 2.0–4.0 lane: 25 GB/s per direction. cost-model.md ("6 NVLink2 links of 25 GB/s per GPU",
// A100 300 GB/s = 12 lanes, H100 450 GB/s = 18 lanes); SCCL (papers/002).
inline constexpr double kNvlinkLaneGBps = 25.0;
// P100 NVLink 1.0 lane: 20 GB/s per direction (NVIDIA Tesla P100 whitepaper).
inline constexpr double kNvlink1LaneGBps = 20.0;
// TACCL (papers/004, cost-model.md): NVLink alpha 0.7 µs, InfiniBand alpha 1.7 µs (end to end).
inline constexpr double kNvlinkAlphaUs = 0.7;
inline constexpr double kNvswitchHopAlphaUs = kNvlinkAlphaUs / 2;  // GPU→NVSwitch→GPU sums to 0.7
inline constexpr double kNetworkAlphaUs = 1.7;
inline constexpr double kNicLinkAlphaUs = kNetworkAlphaUs / 2;  // tx and rx links
// NCCL tuning.cc per-hop PCIe latency (LL) 1 µs (cost-model.md), split over the two links of a
// device → switch → device hop.
inline constexpr double kPcieAlphaUs = 0.5;
// PCIe x16 per direction, 128b/130b encoding (PCIe base specification).
inline constexpr double kPcieGen3x16GBps = 16 * 8.0 * 128.0 / 130.0 / 8.0;   // 15.75
inline constexpr double kPcieGen4x16GBps = 16 * 16.0 * 128.0 / 130.0 / 8.0;  // 31.5
inline constexpr double kPcieGen5x16GBps = 16 * 32.0 * 128.0 / 130.0 / 8.0;  // 63.0
// CPU interconnect per direction, NCCL topo.h: SKL_QPI_BW 10 GB/s (Intel), AMD_BW 16 GB/s (AMD).
inline constexpr double kIntelSmpGBps = 10.0;
inline constexpr double kAmdSmpGBps = 16.0;
// A NIC whose speed a file does not give: 100 Gb/s (12.5 GB/s), the slowest NIC of the presets.
inline constexpr double kDefaultNicGBps = 12.5;

// SCCL's DGX-1 (papers/002, "hybrid cube mesh"): two fully connected quads {0,1,2,3} {4,5,6,7} plus
// GPU i ↔ i+4; lanes per pair so that each V100 uses its 6 NVLinks (SCCL's dgx1() link matrix).
inline constexpr int kDgx1NvlinkLanes[8][8] = {
    {0, 2, 1, 1, 2, 0, 0, 0}, {2, 0, 1, 2, 0, 1, 0, 0}, {1, 1, 0, 2, 0, 0, 2, 0}, {1, 2, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 2, 1, 1}, {0, 1, 0, 0, 2, 0, 1, 2}, {0, 0, 2, 0, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 2, 2, 0}};
// NVLinks from one GPU to the NVSwitches: V100 in DGX-2 6, A100 12, H100 18 (cost-model.md:
// A100 300 GB/s and H100 450 GB/s per GPU at 25 GB/s per lane; DGX-2: six NVLinks per V100).
inline constexpr int kV100NvswitchLanes = 6;
inline constexpr int kA100NvswitchLanes = 12;
inline constexpr int kH100NvswitchLanes = 18;

/// Per-direction GB/s of one PCIe lane at `gigaTransfers` GT/s (2.5 and 5 use 8b/10b, 8–32
/// 128b/130b, 64 FLIT 242/256); 0 for a rate it does not know.
inline double pcieLaneGBps(double gigaTransfers) {
  if (gigaTransfers == 2.5) return 0.25;
  if (gigaTransfers == 5.0) return 0.5;
  if (gigaTransfers == 8.0 || gigaTransfers == 16.0 || gigaTransfers == 32.0)
    return gigaTransfers * 128.0 / 130.0 / 8.0;
  if (gigaTransfers == 64.0) return 64.0 * 242.0 / 256.0 / 8.0;
  return 0.0;
}

// AMD Instinct data sheets, peak Infinity Fabric (xGMI) bandwidth of one GPU-to-GPU link, both
// directions together: MI300X/MI325X (gfx942) 128 GB/s, MI250X (gfx90a) 100 GB/s, MI100 (gfx908)
// and MI50/MI60 (gfx906) 92 GB/s. Per direction: half.
inline constexpr double kXgmiGfx94LinkGBps = 64.0;
inline constexpr double kXgmiGfx90aLinkGBps = 50.0;
inline constexpr double kXgmiGfx90xLinkGBps = 46.0;
// No published xGMI hop latency; taken equal to TACCL's NVLink alpha.
inline constexpr double kXgmiAlphaUs = kNvlinkAlphaUs;

/// xGMI link bandwidth per direction for an AMD architecture ("gfx942"); the oldest (46 GB/s) when
/// unknown.
inline double xgmiLinkGBps(std::string_view arch) {
  if (arch.starts_with("gfx94") || arch.starts_with("gfx95")) return kXgmiGfx94LinkGBps;
  if (arch.starts_with("gfx90a")) return kXgmiGfx90aLinkGBps;
  return kXgmiGfx90xLinkGBps;
}

/// NVLink lane bandwidth for a GPU of compute capability `sm` (×10); 0 when unknown → 25 GB/s.
inline double nvlinkLaneGBps(int32_t sm) { return sm >= 60 && sm < 70 ? kNvlink1LaneGBps : kNvlinkLaneGBps; }

}  // namespace tuccl::topo_defaults
