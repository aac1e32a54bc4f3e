// One listener of the socket network, several connectors at once: their sockets arrive
// interleaved, and every connection is assembled from its own sockets (net/socket_net.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "net/socket_net.h"

namespace tuccl::net {
namespace {

constexpr int kConnectors = 5;

TEST(SocketListener, AcceptsSeveralConnectorsWhoseSocketsInterleave) {
  setenv("TUCCL_SOCKET_IFNAME", "lo", 1);
  setenv("TUCCL_SOCKET_NTHREADS", "2", 1);
  setenv("TUCCL_NSOCKS_PERTHREAD", "2", 1);  // 5 sockets per connection, 25 in flight at once
  const tucclNcclNet_v12_t& net = socketNetV12();
  void* context = nullptr;
  ASSERT_EQ(net.init(&context, 1, nullptr, nullptr, nullptr), ncclSuccess);
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(net.listen(context, 0, handle, &listenComm), ncclSuccess);

  // Every connector has its own copy of the handle (connect keeps its progress there).
  std::vector<std::vector<char>> handles(kConnectors, std::vector<char>(handle, handle + sizeof handle));
  std::vector<void*> sendComms(kConnectors, nullptr);
  std::vector<void*> recvComms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (recvComms.size() < kConnectors ||
         std::count(sendComms.begin(), sendComms.end(), nullptr) > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << recvComms.size() << " accepted";
    for (int c = 0; c < kConnectors; ++c) {
      if (sendComms[c] != nullptr) continue;
      tucclNcclNetDeviceHandle_t* device = nullptr;
      ASSERT_EQ(net.connect(context, 0, handles[c].data(), &sendComms[c], &device), ncclSuccess);
    }
    void* accepted = nullptr;
    tucclNcclNetDeviceHandle_t* device = nullptr;
    ASSERT_EQ(net.accept(listenComm, &accepted, &device), ncclSuccess);
    if (accepted != nullptr) recvComms.push_back(accepted);
  }

  // Each connection carries its connector's number; every number arrives exactly once, and a
  // large message (split over the data sockets) arrives whole: no socket went to another
  // connection.
  constexpr size_t kBytes = 3 << 20;
  std::vector<std::vector<int>> sent(kConnectors, std::vector<int>(kBytes / sizeof(int)));
  std::vector<std::vector<int>> received(kConnectors, std::vector<int>(kBytes / sizeof(int), -1));
  std::vector<void*> requests;
  for (int c = 0; c < kConnectors; ++c) {
    for (size_t i = 0; i < sent[c].size(); ++i) sent[c][i] = c * 1000003 + static_cast<int>(i);
    void* request = nullptr;
    ASSERT_EQ(net.isend(sendComms[c], sent[c].data(), kBytes, 0, nullptr, nullptr, &request), ncclSuccess);
    requests.push_back(request);
  }
  for (int c = 0; c < kConnectors; ++c) {
    void* data = received[c].data();
    size_t size = kBytes;
    int tag = 0;
    void* mhandle = nullptr;
    void* phandle = nullptr;
    void* request = nullptr;
    ASSERT_EQ(net.irecv(recvComms[c], 1, &data, &size, &tag, &mhandle, &phandle, &request), ncclSuccess);
    requests.push_back(request);
  }
  std::vector<bool> done(requests.size(), false);
  while (std::count(done.begin(), done.end(), false) > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the transfers did not finish";
    for (size_t r = 0; r < requests.size(); ++r) {
      if (done[r]) continue;
      int finished = 0;
      int sizes[1] = {0};
      ASSERT_EQ(net.test(requests[r], &finished, sizes), ncclSuccess);
      done[r] = finished != 0;
    }
  }
  std::set<int> senders;
  for (int c = 0; c < kConnectors; ++c) {
    const int sender = received[c][0] / 1000003;
    ASSERT_GE(sender, 0);
    ASSERT_LT(sender, kConnectors);
    senders.insert(sender);
    EXPECT_EQ(received[c], sent[sender]) << "connection " << c << " mixed another connection's data";
  }
  EXPECT_EQ(senders.size(), static_cast<size_t>(kConnectors));
  for (int c = 0; c < kConnectors; ++c) {
    EXPECT_EQ(net.closeSend(sendComms[c]), ncclSuccess);
    EXPECT_EQ(net.closeRecv(recvComms[c]), ncclSuccess);
  }
  EXPECT_EQ(net.closeListen(listenComm), ncclSuccess);
  EXPECT_EQ(net.finalize(context), ncclSuccess);
}

}  // namespace
}  // namespace tuccl::net
