// Conformance of libnccl-net-tuccl.so over loopback (IPv4 and IPv6): every exported version
// (v8 .. v12) through the harness of net_harness.h, receiver and sender in two forked processes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/net/net_harness.h"

namespace {

using namespace tuccl::nettest;

class NetConformance : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    setenv("TUCCL_SOCKET_IFNAME", "=lo", 1);
    unsetenv("NCCL_SOCKET_FAMILY");
  }
};

// Sizes 0 B .. 64 MiB (and 256 MiB on v12), one message each, in order, every byte checked.
TEST_P(NetConformance, SizesFromZeroUp) {
  std::vector<size_t> sizes = {0, 1, 127, 16384, 16385, 65536, 1 << 20, (5 << 20) + 3, 64 << 20};
  if (GetParam() == 12) sizes.push_back(size_t{256} << 20);
  sizesInOrder(GetParam(), sizes);
}

// 32 sends and 32 receives posted before any is tested.
TEST_P(NetConformance, ThirtyTwoRequestsInFlight) { thirtyTwoInFlight(GetParam()); }

// One grouped receive of 4 tagged buffers, sent in another order, each landing where its tag says.
TEST_P(NetConformance, GroupedReceiveMatchesTags) { groupedReceiveMatchesTags(GetParam()); }

// closeListen, closeSend and closeRecv in all six orders after a transfer, the two processes taking
// turns through the pipes.
TEST_P(NetConformance, EveryOrderOfCloseCalls) {
  const char orders[6][4] = {"LSR", "LRS", "SLR", "SRL", "RLS", "RSL"};
  for (const char* order : orders) {
    SCOPED_TRACE(order);
    runPair(
        GetParam(),
        [&](NetApi& api, Channel& channel) {
          auto [listen, comm] = acceptReceiver(api, channel);
          std::vector<unsigned char> buffer(1 << 20);
          void* data = buffer.data();
          size_t capacity = buffer.size();
          int tag = 1;
          std::vector<void*> requests(1, nullptr);
          CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[0]) == ncclSuccess && requests[0], "irecv");
          waitAll(api, requests);
          for (const char* step = order; *step; ++step) {
            char token = *step;
            if (token == 'L') CHECK_OR_EXIT(api.closeListen(listen) == ncclSuccess, "closeListen");
            if (token == 'R') CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess, "closeRecv");
            if (token == 'S') {
              channel.sendTo(channel.toSender[1], &token, 1);
              channel.recvFrom(channel.toReceiver[0], &token, 1);
            }
          }
        },
        [&](NetApi& api, Channel& channel) {
          void* comm = connectSender(api, channel);
          std::vector<unsigned char> data = pattern(1, 1 << 20);
          std::vector<void*> requests(1, nullptr);
          CHECK_OR_EXIT(api.isend(comm, data.data(), data.size(), 1, &requests[0]) == ncclSuccess && requests[0], "isend");
          waitAll(api, requests);
          char token = 0;
          channel.recvFrom(channel.toSender[0], &token, 1);
          CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
          channel.sendTo(channel.toReceiver[1], &token, 1);
        });
  }
}

// A sender SIGKILLed mid-message: the receiver's test errors within the deadline, no hang.
TEST_P(NetConformance, PeerKilledMidTransferFailsTest) { peerKilledMidTransfer(GetParam()); }

// A peer that connects to the listener and sends garbage (then one that sends a hello-sized
// block of garbage) is refused: its socket is closed, accept keeps waiting, and the real sender
// that follows connects and transfers.
TEST_P(NetConformance, GarbageHandshakeIsRefused) {
  runPair(
      GetParam(),
      [&](NetApi& api, Channel& channel) {
        auto [listen, comm] = acceptReceiver(api, channel);
        std::vector<unsigned char> buffer(100000);
        void* data = buffer.data();
        size_t capacity = buffer.size();
        int tag = 0;
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[0]) == ncclSuccess && requests[0], "irecv");
        std::vector<std::vector<int>> got(1);
        waitAll(api, requests, &got);
        CHECK_OR_EXIT(got[0][0] == 100000 && buffer == pattern(3, 100000), "the real transfer");
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess && api.closeListen(listen) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE];
        channel.recvFrom(channel.toSender[0], handle, sizeof handle);
        // TuCCL's handle: magic (8), token (8), address length (4), the listener's sockaddr.
        uint32_t length = 0;
        std::memcpy(&length, handle + 16, sizeof length);
        sockaddr_storage address{};
        std::memcpy(&address, handle + 20, length);
        for (size_t garbage : {size_t{5}, size_t{32}, size_t{4096}}) {
          const int fd = socket(address.ss_family, SOCK_STREAM, 0);
          CHECK_OR_EXIT(fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0, "raw connect");
          std::vector<unsigned char> bytes = pattern(garbage, garbage);
          CHECK_OR_EXIT(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(garbage), "send");
          if (garbage >= 32) {  // a full hello's worth: the listener judges it and closes the socket
            timeval timeout{30, 0};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
            char byte;
            CHECK_OR_EXIT(recv(fd, &byte, 1, 0) <= 0, "the listener kept a garbage connection");
          }
          close(fd);
        }
        void* comm = nullptr;
        const auto start = Clock::now();
        while (comm == nullptr) {
          CHECK_OR_EXIT(!pastDeadline(start), "connect never completed");
          CHECK_OR_EXIT(api.connect(handle, &comm) == ncclSuccess, "connect failed");
        }
        std::vector<unsigned char> data = pattern(3, 100000);
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.isend(comm, data.data(), data.size(), 0, &requests[0]) == ncclSuccess && requests[0], "isend");
        waitAll(api, requests);
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      });
}

INSTANTIATE_TEST_SUITE_P(Versions, NetConformance, ::testing::Values(8, 9, 10, 11, 12),
                         [](const ::testing::TestParamInfo<int>& param) { return "v" + std::to_string(param.param); });

/// Whether this machine's loopback has ::1 (containers may run without IPv6).
bool hasIpv6Loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return bound;
}

// IPv6 loopback (::1) and several sockets and threads per connection.
TEST(NetConformanceIpv6, ManySocketsOverIpv6) {
  if (!hasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  setenv("TUCCL_SOCKET_IFNAME", "=lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  setenv("NCCL_SOCKET_NTHREADS", "3", 1);
  setenv("TUCCL_NSOCKS_PERTHREAD", "2", 1);
  const size_t size = (24 << 20) + 11;
  runPair(
      12,
      [&](NetApi& api, Channel& channel) {
        char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE];
        auto [listen, comm] = acceptReceiver(api, channel, handle);
        sockaddr_storage address{};
        std::memcpy(&address, handle + 20, sizeof(sockaddr_in6));
        CHECK_OR_EXIT(address.ss_family == AF_INET6, "listening on family %d, not IPv6", address.ss_family);
        std::vector<unsigned char> buffer(size);
        void* data = buffer.data();
        size_t capacity = size;
        int tag = 0;
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[0]) == ncclSuccess && requests[0], "irecv");
        waitAll(api, requests);
        CHECK_OR_EXIT(buffer == pattern(9, size), "content");
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess && api.closeListen(listen) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel);
        std::vector<unsigned char> data = pattern(9, size);
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.isend(comm, data.data(), size, 0, &requests[0]) == ncclSuccess && requests[0], "isend");
        waitAll(api, requests);
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      });
  unsetenv("NCCL_SOCKET_FAMILY");
  unsetenv("NCCL_SOCKET_NTHREADS");
  unsetenv("TUCCL_NSOCKS_PERTHREAD");
}

}  // namespace
