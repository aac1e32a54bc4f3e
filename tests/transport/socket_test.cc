// TCP sockets with bounded, abortable waits (transport/socket.h), on loopback.
#include "transport/socket.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

using namespace tuccl;
using namespace tuccl::transport;

WaitLimits within(double seconds, int abortFd = -1) { return {deadlineAfter(seconds), abortFd}; }

std::string randomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

/// A connected pair over a loopback listener of `family`.
struct Connection {
  Socket client;
  Socket server;
};

Connection connectPair(int family = AF_INET) {
  Expected<Socket> listener = listenOn(SocketAddress::loopback(family, 0));
  EXPECT_TRUE(listener.ok()) << listener.status().message();
  Expected<SocketAddress> address = listener->localAddress();
  Expected<Socket> client = connectTo(*address, within(10));
  EXPECT_TRUE(client.ok()) << client.status().message();
  Expected<Socket> server = acceptOne(*listener, within(10));
  EXPECT_TRUE(server.ok()) << server.status().message();
  return {std::move(client).value(), std::move(server).value()};
}

// A socket bound to a loopback port and connected to that same port meets itself (TCP's
// simultaneous open): what a connect to a port nobody listens on can become when the kernel picks
// that port as the source. connectTo takes it for a refusal, never for the peer.
TEST(Connect, ASocketThatMetItselfIsNoPeer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  Socket self(fd);
  const SocketAddress any = SocketAddress::loopback(AF_INET, 0);
  ASSERT_EQ(::bind(fd, any.get(), any.length()), 0);
  Expected<SocketAddress> bound = self.localAddress();
  ASSERT_TRUE(bound.ok());
  ASSERT_EQ(::connect(fd, bound->get(), bound->length()), 0) << "no simultaneous open on this kernel";
  EXPECT_TRUE(connectedToItself(self));

  Expected<Socket> listener = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(listener.ok());
  Expected<Socket> client = connectTo(*listener->localAddress(), {deadlineAfter(5), -1});
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_FALSE(connectedToItself(*client));
}

TEST(HostPort, SplitsIpv4NamesAndBracketedIpv6) {
  Expected<HostPort> v4 = splitHostPort("10.1.2.3:5555");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "10.1.2.3");
  EXPECT_EQ(v4->port, 5555);
  Expected<HostPort> name = splitHostPort("node-01:29501");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->host, "node-01");
  Expected<HostPort> v6 = splitHostPort("[::1]:65535");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 65535);
  EXPECT_EQ(joinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(joinHostPort("10.0.0.1", 80), "10.0.0.1:80");
}

TEST(HostPort, RejectsMalformedTextNamingIt) {
  for (const char* text : {"10.1.2.3", "10.1.2.3:", ":5555", "host:0", "host:65536", "host:12x", "::1:5555",
                           "[::1]5555", "[::1", "host:-1"}) {
    Expected<HostPort> parsed = splitHostPort(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(parsed.status().message().find(text), std::string::npos) << parsed.status().message();
  }
}

TEST(HostPort, ResolvesNumericAddresses) {
  Expected<SocketAddress> v4 = resolveHostPort("127.0.0.1:4242");
  ASSERT_TRUE(v4.ok()) << v4.status().message();
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->port(), 4242);
  EXPECT_TRUE(v4->isLoopback());
  EXPECT_EQ(v4->toString(), "127.0.0.1:4242");
  Expected<SocketAddress> v6 = resolveHostPort("[::1]:4242");
  ASSERT_TRUE(v6.ok()) << v6.status().message();
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->toString(), "[::1]:4242");
  EXPECT_TRUE(v6->isLoopback());
}

TEST(Interfaces, FindsLoopbackAndNamesTheKnownOnes) {
  Expected<SocketAddress> lo = interfaceAddress("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().message();
  EXPECT_TRUE(lo->isLoopback());
  Expected<SocketAddress> missing = interfaceAddress("nonexistent-if9");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::NotFound);
  EXPECT_NE(missing.status().message().find("lo"), std::string::npos) << missing.status().message();
  Expected<SocketAddress> toward = localAddressToward(SocketAddress::loopback(AF_INET, 1234));
  ASSERT_TRUE(toward.ok()) << toward.status().message();
  EXPECT_TRUE(toward->isLoopback());
}

TEST(Socket, MovesLargeMessagesBothWaysAtOnce) {
  // Both sides send 4 MB before reading: with sendRecvAll neither blocks on a full buffer.
  Connection pair = connectPair();
  const std::string a = randomBytes(4 << 20, 1);
  const std::string b = randomBytes(4 << 20, 2);
  std::string gotA(a.size(), '\0');
  std::string gotB(b.size(), '\0');
  std::thread other([&] {
    Status status = sendRecvAll(pair.server, b.data(), b.size(), pair.server, gotA.data(), gotA.size(), within(30));
    EXPECT_TRUE(status.ok()) << status.message();
  });
  Status status = sendRecvAll(pair.client, a.data(), a.size(), pair.client, gotB.data(), gotB.size(), within(30));
  other.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(gotA, a);
  EXPECT_EQ(gotB, b);
}

TEST(Socket, SendAllAndRecvAllCarryEveryByte) {
  Connection pair = connectPair();
  const std::string message = randomBytes(300000, 3);
  std::thread sender([&] { EXPECT_TRUE(sendAll(pair.client, message.data(), message.size(), within(30)).ok()); });
  std::string got(message.size(), '\0');
  Status status = recvAll(pair.server, got.data(), got.size(), within(30));
  sender.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(got, message);
}

TEST(Socket, WorksOverIpv6Loopback) {
  if (!listenOn(SocketAddress::loopback(AF_INET6, 0)).ok()) GTEST_SKIP() << "no IPv6 loopback here";
  Connection pair = connectPair(AF_INET6);
  const std::string message = randomBytes(1000, 4);
  ASSERT_TRUE(sendAll(pair.client, message.data(), message.size(), within(10)).ok());
  std::string got(message.size(), '\0');
  ASSERT_TRUE(recvAll(pair.server, got.data(), got.size(), within(10)).ok());
  EXPECT_EQ(got, message);
}

TEST(Socket, WaitsEndAtTheDeadline) {
  Connection pair = connectPair();
  char byte = 0;
  Status status = recvAll(pair.server, &byte, 1, within(0.2));
  EXPECT_EQ(status.code(), ErrorCode::Timeout) << status.message();
  Expected<Socket> listener = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(listener.ok());
  Expected<Socket> accepted = acceptOne(*listener, within(0.2));
  EXPECT_EQ(accepted.status().code(), ErrorCode::Timeout);
}

TEST(Socket, ConnectToNobodyTimesOutNamingTheAddress) {
  Expected<Socket> listener = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(listener.ok());
  const SocketAddress address = *listener->localAddress();
  listener->close();
  Expected<Socket> client = connectTo(address, within(0.3));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), ErrorCode::Timeout);
  EXPECT_NE(client.status().message().find(address.toString()), std::string::npos) << client.status().message();
}

TEST(Socket, ConnectRetriesUntilTheListenerAppears) {
  Expected<Socket> probe = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(probe.ok());
  const SocketAddress address = *probe->localAddress();
  probe->close();
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Expected<Socket> listener = listenOn(address);
    ASSERT_TRUE(listener.ok()) << listener.status().message();
    Expected<Socket> accepted = acceptOne(*listener, within(10));
    EXPECT_TRUE(accepted.ok()) << accepted.status().message();
  });
  Expected<Socket> client = connectTo(address, within(10));
  late.join();
  EXPECT_TRUE(client.ok()) << client.status().message();
}

TEST(Socket, AbortUnblocksCurrentAndLaterWaits) {
  Connection pair = connectPair();
  AbortSignal abort;
  ASSERT_TRUE(abort.valid());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort.raise();
  });
  char byte = 0;
  Status status = recvAll(pair.server, &byte, 1, within(60, abort.fd()));
  aborter.join();
  EXPECT_EQ(status.code(), ErrorCode::Aborted) << status.message();
  EXPECT_TRUE(abort.raised());
  Status later = recvAll(pair.server, &byte, 1, within(60, abort.fd()));
  EXPECT_EQ(later.code(), ErrorCode::Aborted);
  Expected<Socket> listener = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(listener.ok());
  EXPECT_EQ(acceptOne(*listener, within(60, abort.fd())).status().code(), ErrorCode::Aborted);
}

TEST(Socket, PeerCloseIsARemoteErrorAndVisibleWithoutWaiting) {
  Connection pair = connectPair();
  EXPECT_FALSE(connectionClosed(pair.server));
  pair.client.close();
  char byte = 0;
  Status status = recvAll(pair.server, &byte, 1, within(10));
  EXPECT_EQ(status.code(), ErrorCode::RemoteError) << status.message();
  EXPECT_TRUE(connectionClosed(pair.server));
}

TEST(Socket, ListenOnATakenPortFailsNamingIt) {
  Expected<Socket> first = listenOn(SocketAddress::loopback(AF_INET, 0));
  ASSERT_TRUE(first.ok());
  const SocketAddress address = *first->localAddress();
  Expected<Socket> second = listenOn(address);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::SystemError);
  EXPECT_NE(second.status().message().find(address.toString()), std::string::npos) << second.status().message();
}

}  // namespace
