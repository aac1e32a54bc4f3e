// The verbs transport's devices: one per active port of an RDMA device (InfiniBand or RoCE), as
// NCCL's IB transport counts them.
//
// In: libibverbs (ib_verbs.h), sysfs, NCCL_IB_HCA / TUCCL_IB_HCA, NCCL_IB_GID_INDEX.
// Out: the device list (found once per process) or, when it is empty, the reason — logged once.
// The pure parts (speed tables, the HCA list syntax, the GID choice) are exposed for tests.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl::net::ib {

/// Mbps of one lane at `activeSpeed` (ibv_port_attr::active_speed, one bit set).
int laneSpeedMbps(uint8_t activeSpeed);
/// Lanes of `activeWidth` (ibv_port_attr::active_width, one bit set).
int laneCount(uint8_t activeWidth);
/// The port's speed as NCCL reports it: lane speed × lanes, in Mbps.
int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth);

/// NCCL_IB_HCA: "mlx5_0:1,mlx5_1" (device name prefixes, each with an optional port), a leading
/// '^' excludes the listed ones, a leading '=' (after any '^') makes names exact.
struct HcaSpec {
  struct Item {
    std::string device;
    int port = -1;  ///< -1: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;
};
HcaSpec parseHcaSpec(std::string_view text);
/// Whether port `port` of device `device` passes `spec` (an empty list selects everything).
bool hcaSelected(const HcaSpec& spec, std::string_view device, int port);

/// One GID table entry as the RoCE GID choice sees it.
struct GidEntry {
  int index = 0;
  ibv_gid gid{};
  bool rocev2 = false;  ///< sysfs gid_attrs/types says "RoCE v2"
};
/// The GID index to use on an Ethernet (RoCE) port: the first RoCE v2 IPv4-mapped GID, else the
/// first RoCE v2 one that is not link-local, else the first non-zero one, else 0.
int chooseRoceGidIndex(std::span<const GidEntry> entries);

struct IbDevice {
  std::string name;  ///< "mlx5_0"
  std::string displayName;  ///< "mlx5_0:1", what getProperties reports
  int port = 1;
  ibv_context* context = nullptr;  ///< shared by the ports of one device, open for the process's life
  uint64_t guid = 0;
  int speed = 0;  ///< Mbps
  std::string pciPath;
  int ptrSupport = 0;  ///< TUCCL_NCCL_PTR_* bits
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  int gidIndex = 0;
  ibv_gid gid{};
  int maxQp = 0;
  int maxQpWr = 0;
  int maxCqe = 0;
  uint32_t maxMessageBytes = 0;
};

struct IbDeviceList {
  std::vector<IbDevice> devices;
  std::string reason;  ///< why there are none (empty when there are some)
};

/// The devices, found on the first call (thread-safe); when there are none the reason is logged
/// once (INFO: the socket transport takes over).
const IbDeviceList& ibDevices();

/// Whether a GPU peer-memory module is loaded (GPUDirect RDMA through ibv_reg_mr):
/// /sys/kernel/mm/memory_peers/nv_mem/version, .../nv_mem_nc/version or /sys/module/nvidia_peermem.
bool peerMemoryLoaded();

}  // namespace tuccl::net::ib
