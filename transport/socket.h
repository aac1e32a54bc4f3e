// TCP sockets for the bootstrap and the network path: addresses ("host:port", "[v6]:port"),
// interface addresses, and listen / connect / accept / send / receive where every wait is bounded
// by a deadline and can be interrupted by an abort signal (an eventfd polled beside the socket).
//
// Sockets are non-blocking, close-on-exec, TCP_NODELAY, and never raise SIGPIPE. A wait that
// passes its deadline returns ErrorCode::Timeout, one interrupted by the abort signal
// ErrorCode::Aborted, a connection the peer closed ErrorCode::RemoteError, and anything the OS
// refuses ErrorCode::SystemError; messages name the address involved, and callers add who they
// were waiting for.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace tuccl::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// Now plus `seconds` (a negative or NaN value means now).
Deadline deadlineAfter(double seconds);

/// An eventfd that, once raised, stays readable: every wait given its fd returns
/// ErrorCode::Aborted from then on. raise() is async-signal-safe and callable from any thread.
class AbortSignal {
 public:
  AbortSignal();
  ~AbortSignal();
  AbortSignal(const AbortSignal&) = delete;
  AbortSignal& operator=(const AbortSignal&) = delete;

  /// False when no eventfd could be made (the process ran out of descriptors).
  bool valid() const { return fd_ >= 0; }
  void raise();
  bool raised() const;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

/// What a wait gives up on: the deadline, and an abort fd (-1: none).
struct WaitLimits {
  Deadline deadline;
  int abortFd = -1;
};

/// An IPv4 or IPv6 socket address (port included).
class SocketAddress {
 public:
  SocketAddress() = default;
  /// Copies `length` bytes of an AF_INET or AF_INET6 address; anything else gives an empty one.
  static SocketAddress fromSockaddr(const sockaddr* address, socklen_t length);
  /// 0.0.0.0 or :: with `port`.
  static SocketAddress wildcard(int family, uint16_t port);
  /// 127.0.0.1 or ::1 with `port`.
  static SocketAddress loopback(int family, uint16_t port);

  bool empty() const { return length_ == 0; }
  int family() const { return storage_.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  /// "10.0.0.3" or "fd00::2".
  std::string host() const;
  /// "10.0.0.3:5555" or "[fd00::2]:5555".
  std::string toString() const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

struct HostPort {
  std::string host;  ///< without the brackets of an IPv6 literal
  uint16_t port = 0;
};

/// Splits "host:port", "1.2.3.4:port" or "[v6]:port" (port 1..65535); InvalidArgument naming
/// the text when it does not parse.
Expected<HostPort> splitHostPort(std::string_view text);
/// "host:port" with brackets around an IPv6 host.
std::string joinHostPort(std::string_view host, uint16_t port);
/// splitHostPort, then the host resolved (numeric or by name; IPv4 preferred).
Expected<SocketAddress> resolveHostPort(std::string_view text);

/// The addresses of the up interfaces, as (name, address) pairs in the system's order (an
/// interface with several addresses appears once per address).
std::vector<std::pair<std::string, SocketAddress>> upInterfaceAddresses();
/// The address of the interface called `name` (else the first whose name starts with `name`):
/// its first IPv4 address, else its first IPv6 one. NotFound lists the interfaces there are.
Expected<SocketAddress> interfaceAddress(const std::string& name);
/// The first up, non-loopback interface's IPv4 address, if any.
std::optional<SocketAddress> firstNonLoopbackAddress();
/// The local address this host uses to reach `destination` (the routing table's choice; no
/// packet is sent). Port 0.
Expected<SocketAddress> localAddressToward(const SocketAddress& destination);

/// An owned socket descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  /// The bound address (a listener's port after binding port 0).
  Expected<SocketAddress> localAddress() const;
  /// The connected peer's address.
  Expected<SocketAddress> peerAddress() const;

 private:
  int fd_ = -1;
};

/// Binds `address` (port 0: any free port; SO_REUSEADDR) and listens.
Expected<Socket> listenOn(const SocketAddress& address, int backlog = 128);
/// Accepts one connection.
Expected<Socket> acceptOne(const Socket& listener, const WaitLimits& limits);
/// Connects to `address`, retrying while it is refused (the peer may not listen yet) until the
/// deadline.
Expected<Socket> connectTo(const SocketAddress& address, const WaitLimits& limits);

/// Sends all `bytes`.
Status sendAll(const Socket& socket, const void* data, size_t bytes, const WaitLimits& limits);
/// Receives exactly `bytes`; RemoteError when the peer closes first.
Status recvAll(const Socket& socket, void* data, size_t bytes, const WaitLimits& limits);
/// Sends `outBytes` on `to` while receiving `inBytes` from `from`, both progressing, so ranks
/// exchanging large messages around a ring never deadlock on full socket buffers.
Status sendRecvAll(const Socket& to, const void* out, size_t outBytes, const Socket& from, void* in,
                   size_t inBytes, const WaitLimits& limits);
/// Receives what is available now, up to `bytes`, without waiting: the count (0 when nothing is
/// there); RemoteError when the peer has closed.
Expected<size_t> recvAvailable(const Socket& socket, void* data, size_t bytes);
/// Non-blocking: whether the peer closed the connection (or it failed).
bool connectionClosed(const Socket& socket);
/// Whether a connected socket met itself: its local and peer addresses are one (TCP's
/// simultaneous open, when a connect to a local port nobody listens on is given that port as its
/// source). connectTo never returns such a socket.
bool connectedToItself(const Socket& socket);

/// Waits until `fd` has one of `events` (poll(2) flags); Timeout, Aborted, or ok.
Status waitFor(int fd, short events, const WaitLimits& limits);
/// Polls `fds` (with the abort fd beside them) until at least one has an event; their revents
/// are filled in. Timeout, Aborted, or ok.
Status pollWithLimits(std::vector<struct pollfd>& fds, const WaitLimits& limits);

}  // namespace tuccl::transport
