// The choice between the verbs and the socket network (net/net_select.h): the pure decision,
// the combined table in-process, and the plugin refusing TUCCL_NET=IB without a device.
#include "net/net_select.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/net_log.h"
#include "net/socket_net.h"

namespace tuccl::net {
namespace {

TEST(NetSelect, ParsesTheTransportNames) {
  EXPECT_EQ(**parseNetChoice("IB", "TUCCL_NET", true), NetTransport::Ib);
  EXPECT_EQ(**parseNetChoice("ib", "TUCCL_NET", true), NetTransport::Ib);
  EXPECT_EQ(**parseNetChoice("SOCKET", "TUCCL_NET", true), NetTransport::Socket);
  EXPECT_EQ(**parseNetChoice("Socket", "NCCL_NET", false), NetTransport::Socket);
  const auto bad = parseNetChoice("Verbs", "TUCCL_NET", true);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("TUCCL_NET='Verbs'"), std::string::npos) << bad.status().message();
  const auto plugin = parseNetChoice("TuCCL", "NCCL_NET", false);
  ASSERT_TRUE(plugin) << "NCCL_NET may name a plugin";
  EXPECT_FALSE(plugin->has_value());
  EXPECT_FALSE(parseNetChoice("IBX", "TUCCL_NET", true));
}

TEST(NetSelect, DecidesAsNcclDoes) {
  EXPECT_EQ(*chooseNet(std::nullopt, "TUCCL_NET", 2, ""), NetTransport::Ib);
  EXPECT_EQ(*chooseNet(std::nullopt, "TUCCL_NET", 0, "none"), NetTransport::Socket);
  EXPECT_EQ(*chooseNet(NetTransport::Socket, "TUCCL_NET", 2, ""), NetTransport::Socket);
  EXPECT_EQ(*chooseNet(NetTransport::Ib, "NCCL_NET", 1, ""), NetTransport::Ib);
  const auto refused = chooseNet(NetTransport::Ib, "NCCL_NET", 0, "no libibverbs");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(refused.status().message().find("NCCL_NET=IB"), std::string::npos);
  EXPECT_NE(refused.status().message().find("no libibverbs"), std::string::npos);
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

bool logged(const std::string& needle) {
  for (const std::string& line : logLines())
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

// Each test runs in its own process: the decision (once per process) is made here first.
TEST(NetSelect, IbForcedWithoutADeviceIsAClearErrorFromInitAndDevices) {
  setenv("TUCCL_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  setenv("TUCCL_NET", "IB", 1);
  const tucclNcclNet_v12_t& net = selectedNetV12();
  EXPECT_STREQ(net.name, "TuCCL");
  void* ctx = nullptr;
  EXPECT_EQ(net.init(&ctx, 1, nullptr, captureLog, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(logged("TUCCL_NET=IB, but the IB network has no device: cannot load")) << logLines().front();
  int n = -1;
  EXPECT_EQ(net.devices(&n), ncclInvalidUsage);
  void* listen = nullptr;
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  EXPECT_EQ(net.listen(nullptr, 0, handle, &listen), ncclInternalError);
  EXPECT_FALSE(selectedNet());
  setNetLogger(nullptr);
  unsetenv("TUCCL_NET");
  unsetenv("TUCCL_IBVERBS_LIBRARY");
}

TEST(NetSelect, AnUnknownTucclNetIsRefused) {
  setenv("TUCCL_NET", "rdma", 1);
  EXPECT_EQ(selectedNetV12().init(nullptr, 1, nullptr, captureLog, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(logged("TUCCL_NET='rdma' names no network"));
  setNetLogger(nullptr);
  unsetenv("TUCCL_NET");
}

TEST(NetSelect, WithoutRdmaTheDefaultIsSockets) {
  setenv("TUCCL_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  unsetenv("TUCCL_NET");
  setenv("NCCL_NET", "TuCCL", 1);  // a plugin name: the choice stays automatic
  setNetLogger(captureLog);
  Expected<const tucclNcclNet_v12_t*> chosen = selectedNet();
  ASSERT_TRUE(chosen) << chosen.status().message();
  EXPECT_EQ(*chosen, &socketNetV12());
  void* ctx = nullptr;
  ASSERT_EQ(selectedNetV12().init(&ctx, 1, nullptr, captureLog, nullptr), ncclSuccess);
  EXPECT_TRUE(logged("using Socket (IB: cannot load"));
  int n = 0;
  ASSERT_EQ(selectedNetV12().devices(&n), ncclSuccess);
  EXPECT_GE(n, 1);
  tucclNcclNetProperties_v12_t props{};
  ASSERT_EQ(selectedNetV12().getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, TUCCL_NCCL_PTR_HOST);
  EXPECT_EQ(selectedNetV12().finalize(ctx), ncclSuccess);
  setNetLogger(nullptr);
  unsetenv("NCCL_NET");
  unsetenv("TUCCL_IBVERBS_LIBRARY");
}

TEST(NetSelect, SocketForcedNeverLoadsVerbs) {
  setenv("TUCCL_NET", "socket", 1);
  setenv("TUCCL_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  Expected<const tucclNcclNet_v12_t*> chosen = selectedNet();
  ASSERT_TRUE(chosen);
  EXPECT_EQ(*chosen, &socketNetV12());
  unsetenv("TUCCL_NET");
  unsetenv("TUCCL_IBVERBS_LIBRARY");
}

TEST(NetSelect, ThePluginRefusesIbWithoutADeviceInEveryVersion) {
  setenv("TUCCL_IBVERBS_LIBRARY", "/nonexistent/libibverbs.so.1", 1);
  setenv("TUCCL_NET", "IB", 1);
  void* library = dlopen(TUCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  auto* v12 = static_cast<tucclNcclNet_v12_t*>(dlsym(library, "ncclNetPlugin_v12"));
  auto* v8 = static_cast<tucclNcclNet_v8_t*>(dlsym(library, "ncclNetPlugin_v8"));
  ASSERT_NE(v12, nullptr);
  ASSERT_NE(v8, nullptr);
  EXPECT_STREQ(v12->name, "TuCCL");
  void* ctx = nullptr;
  EXPECT_EQ(v12->init(&ctx, 1, nullptr, captureLog, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(logged("TUCCL_NET=IB, but the IB network has no device"));
  EXPECT_EQ(v8->init(captureLog), ncclInvalidUsage);
  int n = -1;
  EXPECT_EQ(v8->devices(&n), ncclInvalidUsage);
  dlclose(library);
  unsetenv("TUCCL_NET");
  unsetenv("TUCCL_IBVERBS_LIBRARY");
}

}  // namespace
}  // namespace tuccl::net
