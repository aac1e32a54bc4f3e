// Rail ids from the sketch's NIC groups (rails.h).
#include "net/rails.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "topo/sketch.h"
#include "topo/topology.h"

namespace tuccl::net {
namespace {

/// "dddd:bb:dd.f" in lower- or upper-case hex.
bool isPciBusId(std::string_view text) {
  static constexpr std::string_view kShape = "xxxx:xx:xx.x";
  if (text.size() != kShape.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool hex = std::isxdigit(static_cast<unsigned char>(text[i])) != 0;
    if (kShape[i] == 'x' ? !hex : text[i] != kShape[i]) return false;
  }
  return true;
}

}  // namespace

std::string pciBusIdOfPath(std::string_view path) {
  std::string found;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view component = path.substr(start, end - start);
    if (isPciBusId(component)) found = component;
    start = end + 1;
  }
  std::transform(found.begin(), found.end(), found.begin(), [](unsigned char c) { return std::tolower(c); });
  return found;
}

std::vector<int> railsOfDevices(std::span<const DeviceLocation> devices) {
  // One NIC per PCI function, in bus order (std::map), at the speed of its first interface.
  std::map<std::string, int> speedOfBus;
  std::vector<std::string> busOfDevice;
  for (const DeviceLocation& device : devices) {
    busOfDevice.push_back(pciBusIdOfPath(device.pciPath));
    if (!busOfDevice.back().empty()) speedOfBus.emplace(busOfDevice.back(), device.speedMbps);
  }
  Topology topology;
  topology.name = "net devices";
  topology.nodes.push_back(Node{});
  std::map<std::string, size_t> nicOfBus;
  for (const auto& [bus, speed] : speedOfBus) {
    nicOfBus[bus] = topology.nics.size();
    topology.nics.push_back(Nic{0, bus, std::max(speed, 0) / 8000.0, bus, false});  // Mbps -> GB/s
  }
  const std::vector<int32_t> rail = railOfNics(topology);
  std::vector<int> rails;
  for (const std::string& bus : busOfDevice) rails.push_back(bus.empty() ? -1 : rail[nicOfBus.at(bus)]);
  return rails;
}

}  // namespace tuccl::net
