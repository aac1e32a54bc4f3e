// The verbs transport's device rules (net/ib_devices.h): NCCL's speed tables, the NCCL_IB_HCA
// syntax, the RoCE GID choice, and what the network reports on a host without RDMA.
#include "net/ib_devices.h"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/ib_net.h"
#include "net/net_log.h"

namespace tuccl::net::ib {
namespace {

TEST(IbDevices, SpeedIsLaneSpeedTimesLanes) {
  EXPECT_EQ(portSpeedMbps(1, 1), 2500);        // SDR 1x
  EXPECT_EQ(portSpeedMbps(4, 2), 40000);       // QDR 4x
  EXPECT_EQ(portSpeedMbps(16, 2), 56000);      // FDR 4x
  EXPECT_EQ(portSpeedMbps(32, 2), 100000);     // EDR 4x
  EXPECT_EQ(portSpeedMbps(64, 2), 200000);     // HDR 4x
  EXPECT_EQ(portSpeedMbps(128, 2), 400000);    // NDR 4x
  EXPECT_EQ(portSpeedMbps(128, 16), 200000);   // NDR 2x
  EXPECT_EQ(portSpeedMbps(64, 8), 600000);     // HDR 12x
  EXPECT_EQ(laneSpeedMbps(8), 10000);          // FDR10
  EXPECT_EQ(laneCount(4), 8);
  // As NCCL's firstBitSet: no known bit → the table's last entry.
  EXPECT_EQ(laneCount(0), 2);
  EXPECT_EQ(laneSpeedMbps(0), 200000);
}

TEST(IbDevices, HcaListSyntax) {
  const HcaSpec spec = parseHcaSpec("mlx5_0:1,,mlx5_2");
  EXPECT_FALSE(spec.exclude);
  EXPECT_FALSE(spec.exact);
  ASSERT_EQ(spec.items.size(), 2u);
  EXPECT_EQ(spec.items[0].device, "mlx5_0");
  EXPECT_EQ(spec.items[0].port, 1);
  EXPECT_EQ(spec.items[1].port, -1);
  EXPECT_TRUE(hcaSelected(spec, "mlx5_0", 1));
  EXPECT_FALSE(hcaSelected(spec, "mlx5_0", 2));
  EXPECT_TRUE(hcaSelected(spec, "mlx5_2", 2));
  EXPECT_FALSE(hcaSelected(spec, "mlx5_1", 1));
  EXPECT_TRUE(hcaSelected(parseHcaSpec("mlx5"), "mlx5_11", 1)) << "prefixes by default";
  EXPECT_FALSE(hcaSelected(parseHcaSpec("=mlx5_1"), "mlx5_11", 1)) << "'=' is exact";
  EXPECT_TRUE(hcaSelected(parseHcaSpec("=mlx5_1"), "mlx5_1", 1));
  const HcaSpec excluded = parseHcaSpec("^=mlx5_0:2");
  EXPECT_TRUE(excluded.exclude);
  EXPECT_TRUE(excluded.exact);
  EXPECT_TRUE(hcaSelected(excluded, "mlx5_0", 1));
  EXPECT_FALSE(hcaSelected(excluded, "mlx5_0", 2));
  EXPECT_TRUE(hcaSelected(parseHcaSpec(""), "anything", 3));
  EXPECT_FALSE(hcaSelected(parseHcaSpec("mlx5_0:x"), "mlx5_0", 1)) << "a port that is not a number matches none";
}

ibv_gid gidOf(std::initializer_list<int> bytes) {
  ibv_gid gid{};
  int i = 0;
  for (int byte : bytes) gid.raw[i++] = static_cast<uint8_t>(byte);
  return gid;
}

TEST(IbDevices, RoceGidPrefersV2Ipv4Mapped) {
  const ibv_gid linkLocal = gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  const ibv_gid mapped = gidOf({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1});
  const ibv_gid global = gidOf({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
  const std::vector<GidEntry> table = {{0, linkLocal, false}, {1, linkLocal, true}, {2, mapped, false},
                                       {3, global, true},     {4, mapped, true}};
  EXPECT_EQ(chooseRoceGidIndex(table), 4);
  EXPECT_EQ(chooseRoceGidIndex(std::span(table).first(4)), 3) << "v2, not link-local";
  EXPECT_EQ(chooseRoceGidIndex(std::span(table).first(2)), 0) << "the first non-zero one";
  EXPECT_EQ(chooseRoceGidIndex({}), 0);
}

std::vector<std::string>& logLines() {
  static std::vector<std::string> lines;
  return lines;
}

void captureLog(ncclDebugLogLevel, unsigned long, const char*, int, const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  logLines().push_back(text);
}

int linesContaining(const std::string& needle) {
  int count = 0;
  for (const std::string& line : logLines()) count += line.find(needle) != std::string::npos ? 1 : 0;
  return count;
}

TEST(IbNet, NoDeviceMeansZeroDevicesAFailedInitAndTheReasonLoggedOnce) {
  // Each test runs in its own process, so the library and device list are found here first.
  setNetLogger(captureLog);
  const tucclNcclNet_v12_t& net = ibNetV12();
  EXPECT_STREQ(net.name, "TuCCL-IB");
  int n = -1;
  ASSERT_EQ(net.devices(&n), ncclSuccess);
  if (n > 0) GTEST_SKIP() << "this host has " << n << " RDMA port(s)";
  EXPECT_EQ(n, 0);
  const std::string reason = ibUnavailableReason();
  EXPECT_FALSE(reason.empty());
  ASSERT_EQ(net.devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
  void* ctx = nullptr;
  EXPECT_EQ(net.init(&ctx, 1, nullptr, captureLog, nullptr), ncclSystemError);
  EXPECT_EQ(ctx, nullptr);
  tucclNcclNetProperties_v12_t props{};
  EXPECT_EQ(net.getProperties(0, &props), ncclInvalidArgument);
  EXPECT_EQ(linesContaining(reason), 1) << "the reason is logged once, not per call";
  setNetLogger(nullptr);
}

TEST(IbNet, AMissingLibraryIsTheReason) {
  setenv("TUCCL_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  setNetLogger(captureLog);
  int n = -1;
  ASSERT_EQ(ibNetV12().devices(&n), ncclSuccess);
  EXPECT_EQ(n, 0);
  EXPECT_NE(ibUnavailableReason().find("cannot load /nonexistent/libibverbs.so.1"), std::string::npos)
      << ibUnavailableReason();
  EXPECT_EQ(linesContaining("/nonexistent/libibverbs.so.1"), 1);
  void* listen = nullptr;
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  EXPECT_EQ(ibNetV12().listen(nullptr, 0, handle, &listen), ncclInvalidArgument) << "no device 0";
  EXPECT_EQ(listen, nullptr);
  setNetLogger(nullptr);
  unsetenv("TUCCL_IBVERBS_LIBRARY");
}

}  // namespace
}  // namespace tuccl::net::ib
