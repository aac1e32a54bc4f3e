// Verbs device discovery (ib_devices.h).
#include "net/ib_devices.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "net/ib_verbs.h"
#include "net/net_env.h"
#include "net/net_log.h"
#include "tuccl/nccl_net.h"

namespace tuccl::net::ib {
namespace {

// NCCL src/transport/net_ib.cc (ibvWidths, ibvSpeeds, firstBitSet, ncclIbWidth, ncclIbSpeed):
// active_width bits 1x, 4x, 8x, 12x, 2x; active_speed bits SDR 2.5, DDR 5, QDR 10, FDR10 10,
// FDR 14, EDR 25, HDR 50, NDR 100, XDR 200 Gbps per lane (encodings: verbs.h / IBTA spec,
// PortInfo.LinkWidthActive and LinkSpeedActive/LinkSpeedExtActive). As NCCL does, a value with no
// known bit set maps to the table's last entry.
constexpr int kLaneCounts[] = {1, 4, 8, 12, 2};
constexpr int kLaneSpeeds[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};

template <size_t N>
int firstBitSetIndex(unsigned value) {
  size_t i = 0;
  while (i < N - 1 && (value & (1u << i)) == 0) ++i;
  return static_cast<int>(i);
}

std::string readFirstLine(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::string realPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string();
}

bool gidIsZero(const ibv_gid& gid) {
  for (uint8_t byte : gid.raw)
    if (byte != 0) return false;
  return true;
}

bool gidIsIpv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

bool gidIsLinkLocal(const ibv_gid& gid) { return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80; }

/// The RoCE GID index of `port` (NCCL_IB_GID_INDEX / TUCCL_IB_GID_INDEX, else chooseRoceGidIndex
/// over the GID table, its types read from sysfs).
int roceGidIndex(const VerbsApi& api, ibv_context* context, const std::string& name, int port, int tableLength) {
  const int forced = envInt("TUCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX", -1);
  if (forced >= 0) return forced;
  std::vector<GidEntry> entries;
  for (int index = 0; index < tableLength && index < 256; ++index) {
    GidEntry entry;
    entry.index = index;
    if (api.queryGid(context, static_cast<uint8_t>(port), index, &entry.gid) != 0) continue;
    const std::string type = readFirstLine("/sys/class/infiniband/" + name + "/ports/" + std::to_string(port) +
                                           "/gid_attrs/types/" + std::to_string(index));
    if (type.empty()) continue;  // an unpopulated entry
    entry.rocev2 = type.find("v2") != std::string::npos;
    entries.push_back(entry);
  }
  return chooseRoceGidIndex(entries);
}

/// Whether the kernel accepts dma-buf registrations on `context` (NCCL's probe: a registration
/// of fd -1 fails with EOPNOTSUPP / EPROTONOSUPPORT only when dma-buf is unsupported).
bool dmabufSupported(const VerbsApi& api, ibv_context* context) {
  if (api.regDmabufMr == nullptr) return false;
  ibv_pd* pd = api.allocPd(context);
  if (pd == nullptr) return false;
  errno = 0;
  ibv_mr* mr = api.regDmabufMr(pd, 0, 0, 0, -1, 0);
  const int error = errno;
  if (mr != nullptr) (void)api.deregMr(mr);
  (void)api.deallocPd(pd);
  return mr != nullptr || (error != EOPNOTSUPP && error != EPROTONOSUPPORT);
}

/// Adds the selected active ports of one opened device; whether any was added.
bool addPorts(const VerbsApi& api, ibv_context* context, const std::string& name, const HcaSpec* spec,
              bool peerMemory, std::vector<IbDevice>& out) {
  ibv_device_attr attr{};
  if (api.queryDevice(context, &attr) != 0) {
    TUCCL_NET_WARN("TuCCL net: IB: cannot query device %s: %s", name.c_str(), std::strerror(errno));
    return false;
  }
  bool added = false;
  const bool dmabuf = dmabufSupported(api, context);
  for (int port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr portAttr{};
    if (queryPort(api, context, static_cast<uint8_t>(port), &portAttr) != 0) {
      TUCCL_NET_WARN("TuCCL net: IB: cannot query port %d of %s", port, name.c_str());
      continue;
    }
    if (portAttr.state != IBV_PORT_ACTIVE) continue;
    if (portAttr.link_layer != IBV_LINK_LAYER_INFINIBAND && portAttr.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
    if (spec != nullptr && !hcaSelected(*spec, name, port)) continue;
    IbDevice device;
    device.name = name;
    device.displayName = name + ":" + std::to_string(port);
    device.port = port;
    device.context = context;
    device.guid = attr.sys_image_guid;
    device.speed = portSpeedMbps(portAttr.active_speed, portAttr.active_width);
    device.pciPath = realPath("/sys/class/infiniband/" + name + "/device");
    device.ptrSupport = TUCCL_NCCL_PTR_HOST | (peerMemory ? TUCCL_NCCL_PTR_CUDA : 0) | (dmabuf ? TUCCL_NCCL_PTR_DMABUF : 0);
    device.linkLayer = portAttr.link_layer;
    device.lid = portAttr.lid;
    device.mtu = portAttr.active_mtu;
    device.gidIndex = portAttr.link_layer == IBV_LINK_LAYER_ETHERNET
                          ? roceGidIndex(api, context, name, port, portAttr.gid_tbl_len)
                          : std::max(0, envInt("TUCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX", 0));
    if (api.queryGid(context, static_cast<uint8_t>(port), device.gidIndex, &device.gid) != 0) device.gid = ibv_gid{};
    device.maxQp = attr.max_qp;
    device.maxQpWr = attr.max_qp_wr;
    device.maxCqe = attr.max_cqe;
    device.maxMessageBytes = portAttr.max_msg_sz;
    TUCCL_NET_INFO("TuCCL net: IB device %zu is %s (%s, %d Mbps, GID index %d%s%s)", out.size(),
                   device.displayName.c_str(), portAttr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                   device.speed, device.gidIndex, peerMemory ? ", GPUDirect" : "", dmabuf ? ", dma-buf" : "");
    out.push_back(std::move(device));
    added = true;
  }
  return added;
}

IbDeviceList discover() {
  IbDeviceList list;
  Expected<const VerbsApi*> loaded = loadVerbs();
  if (!loaded) {
    list.reason = loaded.status().message();
    return list;
  }
  const VerbsApi& api = **loaded;
  int count = 0;
  errno = 0;
  ibv_device** all = api.getDeviceList(&count);
  if (all == nullptr || count == 0) {
    const int error = errno;
    list.reason = "libibverbs lists no RDMA device";
    if (access("/sys/class/infiniband", F_OK) != 0)
      list.reason += " (/sys/class/infiniband does not exist: no RDMA hardware or driver here)";
    else if (all == nullptr && error != 0)
      list.reason += std::string(" (") + std::strerror(error) + ")";
    if (all != nullptr) api.freeDeviceList(all);
    return list;
  }
  const std::optional<std::string> specText = envFirst("TUCCL_IB_HCA", "NCCL_IB_HCA");
  const HcaSpec spec = parseHcaSpec(specText.value_or(""));
  const bool peerMemory = peerMemoryLoaded();
  for (int i = 0; i < count; ++i) {
    const std::string name = api.getDeviceName(all[i]);
    ibv_context* context = api.openDevice(all[i]);
    if (context == nullptr) {
      TUCCL_NET_WARN("TuCCL net: IB: cannot open device %s: %s", name.c_str(), std::strerror(errno));
      continue;
    }
    if (!addPorts(api, context, name, specText ? &spec : nullptr, peerMemory, list.devices))
      (void)api.closeDevice(context);
  }
  api.freeDeviceList(all);
  if (list.devices.empty())
    list.reason = std::to_string(count) + " RDMA device(s), but no active InfiniBand/RoCE port" +
                  (specText ? " selected by the HCA list '" + *specText + "'" : std::string());
  return list;
}

}  // namespace

int laneSpeedMbps(uint8_t activeSpeed) { return kLaneSpeeds[firstBitSetIndex<std::size(kLaneSpeeds)>(activeSpeed)]; }

int laneCount(uint8_t activeWidth) { return kLaneCounts[firstBitSetIndex<std::size(kLaneCounts)>(activeWidth)]; }

int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth) { return laneSpeedMbps(activeSpeed) * laneCount(activeWidth); }

HcaSpec parseHcaSpec(std::string_view text) {
  HcaSpec spec;
  if (!text.empty() && text.front() == '^') {
    spec.exclude = true;
    text.remove_prefix(1);
  }
  if (!text.empty() && text.front() == '=') {
    spec.exact = true;
    text.remove_prefix(1);
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) {
      HcaSpec::Item parsed;
      const size_t colon = item.find(':');
      parsed.device = std::string(item.substr(0, colon));
      if (colon != std::string_view::npos) {
        const std::string port(item.substr(colon + 1));
        char* end = nullptr;
        const long value = std::strtol(port.c_str(), &end, 10);
        parsed.port = end != port.c_str() && *end == '\0' && value > 0 && value < 256 ? static_cast<int>(value) : 0;
      }
      spec.items.push_back(std::move(parsed));  // port 0 (unparsable) matches no port
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return spec;
}

bool hcaSelected(const HcaSpec& spec, std::string_view device, int port) {
  if (spec.items.empty()) return true;
  bool listed = false;
  for (const HcaSpec::Item& item : spec.items) {
    const bool nameMatches = spec.exact ? device == item.device : device.starts_with(item.device);
    if (nameMatches && (item.port < 0 || item.port == port)) listed = true;
  }
  return listed != spec.exclude;
}

int chooseRoceGidIndex(std::span<const GidEntry> entries) {
  for (const GidEntry& entry : entries)
    if (entry.rocev2 && !gidIsZero(entry.gid) && gidIsIpv4Mapped(entry.gid)) return entry.index;
  for (const GidEntry& entry : entries)
    if (entry.rocev2 && !gidIsZero(entry.gid) && !gidIsLinkLocal(entry.gid)) return entry.index;
  for (const GidEntry& entry : entries)
    if (!gidIsZero(entry.gid)) return entry.index;
  return 0;
}

bool peerMemoryLoaded() {
  return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
         access("/sys/kernel/mm/memory_peers/nv_mem_nc/version", F_OK) == 0 ||
         access("/sys/module/nvidia_peermem", F_OK) == 0;
}

const IbDeviceList& ibDevices() {
  static std::once_flag once;
  static IbDeviceList list;
  std::call_once(once, [] {
    list = discover();
    if (list.devices.empty()) TUCCL_NET_INFO("TuCCL net: IB: no device: %s", list.reason.c_str());
  });
  return list;
}

}  // namespace tuccl::net::ib
