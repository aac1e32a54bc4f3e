// Interface selection with NCCL's NCCL_SOCKET_IFNAME syntax (interface_choice.h).
#include "net/interface_choice.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace tuccl::net {

InterfaceSpec parseInterfaceSpec(std::string_view text) {
  InterfaceSpec spec;
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
    const std::string_view item = text.substr(0, comma);
    if (!item.empty()) spec.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return spec;
}

bool interfaceSelected(const InterfaceSpec& spec, std::string_view name) {
  bool listed = false;
  for (const std::string& item : spec.names)
    if (spec.exact ? name == item : name.starts_with(item)) listed = true;
  return listed != spec.exclude;
}

namespace {

bool isLinkLocalV6(const transport::SocketAddress& address) {
  if (address.family() != AF_INET6) return false;
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address.get());
  return v6->sin6_addr.s6_addr[0] == 0xfe && (v6->sin6_addr.s6_addr[1] & 0xc0) == 0x80;
}

bool isFallbackName(std::string_view name) {
  return name == "lo" || name.starts_with("docker") || name.starts_with("virbr");
}

/// Whether `candidate` is a better address for its interface than `current` under `family`.
bool preferred(const transport::SocketAddress& candidate, const transport::SocketAddress& current, int family) {
  const int wanted = family == AF_INET6 ? AF_INET6 : AF_INET;
  return candidate.family() == wanted && current.family() != wanted;
}

std::vector<NetInterface> collect(const std::vector<std::pair<std::string, transport::SocketAddress>>& up,
                                  int family, size_t maxCount, bool (*accept)(const std::string&, const void*),
                                  const void* context) {
  std::vector<NetInterface> chosen;
  for (const auto& entry : up) {
    const std::string& name = entry.first;  // a plain reference: lambdas may capture it (C++20 bindings not in Clang 14)
    const transport::SocketAddress& address = entry.second;
    if (family != AF_UNSPEC && address.family() != family) continue;
    if (isLinkLocalV6(address) || !accept(name, context)) continue;
    auto existing = std::find_if(chosen.begin(), chosen.end(), [&](const NetInterface& i) { return i.name == name; });
    if (existing == chosen.end()) {
      if (chosen.size() < maxCount) chosen.push_back({name, address});
    } else if (preferred(address, existing->address, family)) {
      existing->address = address;
    }
  }
  for (NetInterface& chosenInterface : chosen) chosenInterface.address.setPort(0);
  return chosen;
}

}  // namespace

std::vector<NetInterface> chooseInterfaces(const std::vector<std::pair<std::string, transport::SocketAddress>>& up,
                                           const InterfaceSpec* spec, int family, size_t maxCount) {
  if (spec != nullptr)
    return collect(
        up, family, maxCount,
        [](const std::string& name, const void* s) { return interfaceSelected(*static_cast<const InterfaceSpec*>(s), name); },
        spec);
  std::vector<NetInterface> chosen = collect(
      up, family, maxCount, [](const std::string& name, const void*) { return !isFallbackName(name); }, nullptr);
  if (chosen.empty())
    chosen = collect(up, family, maxCount, [](const std::string& name, const void*) { return isFallbackName(name); },
                     nullptr);
  return chosen;
}

int parseSocketFamily(std::string_view text) {
  if (text == "AF_INET") return AF_INET;
  if (text == "AF_INET6") return AF_INET6;
  return AF_UNSPEC;
}

}  // namespace tuccl::net
