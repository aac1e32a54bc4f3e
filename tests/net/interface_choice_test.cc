// NCCL_SOCKET_IFNAME syntax and the default interface order (net/interface_choice.h).
#include "net/interface_choice.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

namespace tuccl::net {
namespace {

using transport::SocketAddress;

std::vector<std::pair<std::string, SocketAddress>> sampleInterfaces() {
  return {{"lo", SocketAddress::loopback(AF_INET, 0)},   {"lo", SocketAddress::loopback(AF_INET6, 0)},
          {"eth0", SocketAddress::wildcard(AF_INET6, 0)}, {"eth0", SocketAddress::loopback(AF_INET, 0)},
          {"eth10", SocketAddress::loopback(AF_INET, 0)}, {"docker0", SocketAddress::loopback(AF_INET, 0)},
          {"ib0", SocketAddress::loopback(AF_INET, 0)}};
}

std::vector<std::string> names(const std::vector<NetInterface>& chosen) {
  std::vector<std::string> result;
  for (const NetInterface& i : chosen) result.push_back(i.name);
  return result;
}

TEST(InterfaceChoice, ParsesPrefixExcludeAndExact) {
  InterfaceSpec spec = parseInterfaceSpec("^=eth0,,lo");
  EXPECT_TRUE(spec.exclude);
  EXPECT_TRUE(spec.exact);
  EXPECT_EQ(spec.names, (std::vector<std::string>{"eth0", "lo"}));
  EXPECT_TRUE(interfaceSelected(spec, "eth10"));
  EXPECT_FALSE(interfaceSelected(spec, "eth0"));
  EXPECT_TRUE(interfaceSelected(parseInterfaceSpec("eth"), "eth10"));
  EXPECT_FALSE(interfaceSelected(parseInterfaceSpec("=eth"), "eth10"));
  EXPECT_FALSE(interfaceSelected(parseInterfaceSpec("^eth,ib"), "ib0"));
}

TEST(InterfaceChoice, SpecFamilyAndDefaults) {
  const auto up = sampleInterfaces();
  const InterfaceSpec prefix = parseInterfaceSpec("eth");
  EXPECT_EQ(names(chooseInterfaces(up, &prefix, AF_UNSPEC, 16)), (std::vector<std::string>{"eth0", "eth10"}));
  const auto eth0 = chooseInterfaces(up, &prefix, AF_UNSPEC, 16).front();
  EXPECT_EQ(eth0.address.family(), AF_INET) << "IPv4 preferred";
  const InterfaceSpec exact = parseInterfaceSpec("=lo");
  const auto v6 = chooseInterfaces(up, &exact, AF_INET6, 16);
  ASSERT_EQ(v6.size(), 1u);
  EXPECT_EQ(v6[0].address.family(), AF_INET6);
  const InterfaceSpec excluded = parseInterfaceSpec("^eth,lo");
  EXPECT_EQ(names(chooseInterfaces(up, &excluded, AF_UNSPEC, 16)), (std::vector<std::string>{"docker0", "ib0"}));
  EXPECT_EQ(names(chooseInterfaces(up, nullptr, AF_UNSPEC, 2)), (std::vector<std::string>{"eth0", "eth10"}));
  const std::vector<std::pair<std::string, SocketAddress>> onlyFallbacks = {up[0], up[5]};
  EXPECT_EQ(names(chooseInterfaces(onlyFallbacks, nullptr, AF_UNSPEC, 16)), (std::vector<std::string>{"lo", "docker0"}));
  EXPECT_EQ(parseSocketFamily("AF_INET6"), AF_INET6);
  EXPECT_EQ(parseSocketFamily("bogus"), AF_UNSPEC);
}

}  // namespace
}  // namespace tuccl::net
