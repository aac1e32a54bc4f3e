// The net plugins libtuccl's inter-node proxy drives (backend/net_plugin.h): each ABI version of
// the built libnccl-net-tuccl.so behind its adapter moves random bytes over loopback in this
// process; the environment picks the built-in network, a plugin by path, or none.
#include "backend/net_plugin.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

namespace tuccl::backend {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// Loopback only, for every test of this program (the plugin reads it at its first init).
const ScopedEnv kLoopback("TUCCL_SOCKET_IFNAME", "lo");

/// Sends `bytes` random bytes through `net` from a send comm to a receive comm of this process.
void exchange(NetApi& net, size_t bytes) {
  Expected<int> devices = net.devices();
  ASSERT_TRUE(devices) << devices.status().toString();
  ASSERT_GE(*devices, 1);
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  Expected<void*> listening = net.listen(0, handle);
  ASSERT_TRUE(listening) << listening.status().toString();
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (sendComm == nullptr || recvComm == nullptr) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "connect/accept did not finish";
    if (sendComm == nullptr) {
      Expected<void*> comm = net.connect(0, handle);
      ASSERT_TRUE(comm) << comm.status().toString();
      sendComm = *comm;
    }
    if (recvComm == nullptr) {
      Expected<void*> comm = net.accept(*listening);
      ASSERT_TRUE(comm) << comm.status().toString();
      recvComm = *comm;
    }
  }
  std::vector<char> sent(bytes + 1), received(bytes + 1, 0);
  std::mt19937 random(static_cast<uint32_t>(bytes));
  for (char& c : sent) c = static_cast<char>(random());
  Expected<void*> sendMr = net.regMr(sendComm, sent.data(), sent.size());
  Expected<void*> recvMr = net.regMr(recvComm, received.data(), received.size());
  ASSERT_TRUE(sendMr && recvMr);
  Expected<void*> recvRequest = net.irecv(recvComm, received.data(), bytes + 1, 0, *recvMr);
  Expected<void*> sendRequest = net.isend(sendComm, sent.data(), bytes, 0, *sendMr);
  ASSERT_TRUE(recvRequest && sendRequest);
  ASSERT_NE(*recvRequest, nullptr);
  ASSERT_NE(*sendRequest, nullptr);
  bool sendDone = false, recvDone = false;
  size_t receivedBytes = 0;
  while (!sendDone || !recvDone) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the transfer did not finish";
    if (!sendDone) {
      Expected<bool> done = net.test(*sendRequest, nullptr);
      ASSERT_TRUE(done) << done.status().toString();
      sendDone = *done;
    }
    if (!recvDone) {
      Expected<bool> done = net.test(*recvRequest, &receivedBytes);
      ASSERT_TRUE(done) << done.status().toString();
      recvDone = *done;
    }
  }
  EXPECT_EQ(receivedBytes, bytes);
  EXPECT_EQ(std::vector<char>(sent.begin(), sent.begin() + static_cast<std::ptrdiff_t>(bytes)),
            std::vector<char>(received.begin(), received.begin() + static_cast<std::ptrdiff_t>(bytes)));
  EXPECT_EQ(received[bytes], 0) << "the receive wrote past the message";
  EXPECT_TRUE(net.deregMr(sendComm, *sendMr));
  EXPECT_TRUE(net.deregMr(recvComm, *recvMr));
  EXPECT_TRUE(net.closeSend(sendComm));
  EXPECT_TRUE(net.closeRecv(recvComm));
  EXPECT_TRUE(net.closeListen(*listening));
}

TEST(NetPlugin, EveryAbiVersionOfTheBuiltPluginMovesBytes) {
  void* library = dlopen(TUCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  for (int version = 8; version <= 12; ++version) {
    SCOPED_TRACE("v" + std::to_string(version));
    const void* table = dlsym(library, ("ncclNetPlugin_v" + std::to_string(version)).c_str());
    ASSERT_NE(table, nullptr);
    Expected<std::unique_ptr<NetApi>> net = adaptNetTable(table, version, "test", nullptr, 7);
    ASSERT_TRUE(net) << net.status().toString();
    EXPECT_EQ((*net)->name(), "TuCCL");
    Expected<NetDeviceInfo> info = (*net)->properties(0);
    ASSERT_TRUE(info) << info.status().toString();
    EXPECT_EQ(info->name, "lo");
    EXPECT_GT(info->speedMbps, 0);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{100000}, size_t{3} << 20}) exchange(**net, bytes);
  }
  dlclose(library);
}

TEST(NetPlugin, AnUnknownVersionIsRefused) {
  Expected<std::unique_ptr<NetApi>> net = adaptNetTable(nullptr, 7, "test", nullptr, 0);
  ASSERT_FALSE(net);
  EXPECT_NE(net.status().message().find("v7"), std::string::npos);
}

TEST(NetPlugin, TheEnvironmentChoosesThePlugin) {
  {
    ScopedEnv tuccl("TUCCL_NET_PLUGIN", nullptr);
    ScopedEnv nccl("NCCL_NET_PLUGIN", nullptr);
    Expected<std::unique_ptr<NetApi>> net = loadNetPlugin(1);
    ASSERT_TRUE(net) << net.status().toString();
    EXPECT_EQ((*net)->origin(), "built into libtuccl, sockets");
    exchange(**net, 5000);
  }
  {
    ScopedEnv nccl("NCCL_NET_PLUGIN", TUCCL_NET_PLUGIN_PATH);
    Expected<std::unique_ptr<NetApi>> net = loadNetPlugin(2);
    ASSERT_TRUE(net) << net.status().toString();
    EXPECT_EQ((*net)->origin(), std::string(TUCCL_NET_PLUGIN_PATH) + ", ncclNetPlugin_v12");
    exchange(**net, 70000);
  }
  {
    ScopedEnv nccl("NCCL_NET_PLUGIN", TUCCL_NET_PLUGIN_PATH);
    ScopedEnv tuccl("TUCCL_NET_PLUGIN", "none");  // TuCCL's variable wins
    Expected<std::unique_ptr<NetApi>> net = loadNetPlugin(3);
    ASSERT_FALSE(net);
    EXPECT_EQ(net.status().code(), ErrorCode::Unsupported);
    EXPECT_NE(net.status().message().find("TUCCL_NET_PLUGIN=none"), std::string::npos);
  }
  {
    ScopedEnv tuccl("TUCCL_NET_PLUGIN", "/nonexistent/libnccl-net-x.so");
    Expected<std::unique_ptr<NetApi>> net = loadNetPlugin(4);
    ASSERT_FALSE(net);
    EXPECT_EQ(net.status().code(), ErrorCode::NotFound);
    EXPECT_NE(net.status().message().find("/nonexistent/libnccl-net-x.so"), std::string::npos);
  }
  {
    // A library that is not a net plugin: found, but without the symbols.
    ScopedEnv tuccl("TUCCL_NET_PLUGIN", "libc.so.6");
    Expected<std::unique_ptr<NetApi>> net = loadNetPlugin(5);
    ASSERT_FALSE(net);
    EXPECT_NE(net.status().message().find("exports none of ncclNetPlugin_v12"), std::string::npos)
        << net.status().message();
  }
}

}  // namespace
}  // namespace tuccl::backend
