// Which network interfaces the socket transport uses: NCCL's NCCL_SOCKET_IFNAME syntax (a
// comma-separated list of name prefixes; a leading '^' excludes the listed ones; a leading '='
// (after any '^') makes the names exact), the address family, and NCCL's default order.
//
// In: the up interfaces' addresses (transport/socket.h), the specification text, a family.
// Out: one address per chosen interface, at most `maxCount`, in the system's order.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport/socket.h"

namespace tuccl::net {

struct InterfaceSpec {
  bool exclude = false;  ///< '^': every interface except the listed ones
  bool exact = false;    ///< '=': names match exactly, not as prefixes
  std::vector<std::string> names;
};

/// Parses "eth,ib", "^docker,lo", "=eth0", "^=eth0". Empty items are ignored.
InterfaceSpec parseInterfaceSpec(std::string_view text);
/// Whether interface `name` passes `spec`.
bool interfaceSelected(const InterfaceSpec& spec, std::string_view name);

struct NetInterface {
  std::string name;
  transport::SocketAddress address;  ///< port 0
};

/// The interfaces to use. With a spec: those it selects. Without: every interface except
/// loopback, docker* and virbr*; if there is none, those. One address per interface: IPv4 first
/// unless `family` is AF_INET6 (AF_INET or AF_INET6 restrict it; AF_UNSPEC takes either);
/// IPv6 link-local addresses are skipped.
std::vector<NetInterface> chooseInterfaces(const std::vector<std::pair<std::string, transport::SocketAddress>>& up,
                                           const InterfaceSpec* spec, int family, size_t maxCount);

/// The family NCCL_SOCKET_FAMILY names ("AF_INET", "AF_INET6"); AF_UNSPEC when unset or other.
int parseSocketFamily(std::string_view text);

}  // namespace tuccl::net
