// TCP sockets with bounded, abortable waits (socket.h).
#include "transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

namespace tuccl::transport {
namespace {

Status systemError(const std::string& what, int error) {
  return makeError(ErrorCode::SystemError, what + ": " + std::strerror(error));
}

Status timedOut() { return makeError(ErrorCode::Timeout, "timed out"); }
Status aborted() { return makeError(ErrorCode::Aborted, "aborted"); }

/// Milliseconds left until the deadline, rounded up, for poll(2).
int remainingMs(Deadline deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

bool isRaised(int abortFd) {
  if (abortFd < 0) return false;
  pollfd entry{abortFd, POLLIN, 0};
  return poll(&entry, 1, 0) > 0 && (entry.revents & POLLIN) != 0;
}

void setNoDelay(int fd) {
  const int on = 1;
  // Best effort: a socket without it is still correct, only slower for small messages.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

std::string peerName(const Socket& socket) {
  Expected<SocketAddress> peer = socket.peerAddress();
  return peer ? peer->toString() : std::string("a peer");
}

Status peerClosed(const Socket& socket) {
  return makeError(ErrorCode::RemoteError, "the connection with " + peerName(socket) + " was closed by the peer");
}

bool isPeerGone(int error) { return error == EPIPE || error == ECONNRESET || error == ENOTCONN; }

/// Sends what the socket takes now: the bytes sent (possibly 0).
Expected<size_t> sendAvailable(const Socket& socket, const char* data, size_t bytes) {
  while (true) {
    const ssize_t sent = ::send(socket.fd(), data, bytes, MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<size_t>(sent);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (isPeerGone(errno)) return peerClosed(socket);
    return systemError("send to " + peerName(socket), errno);
  }
}

/// Whether a failed connect is worth another try: nobody listens yet, or the network hiccupped.
bool isRetryableConnectError(int error) {
  return error == ECONNREFUSED || error == ECONNRESET || error == ETIMEDOUT || error == EHOSTUNREACH ||
         error == ENETUNREACH || error == EAGAIN;
}

/// One connection attempt: a connected socket, or the errno that stopped it (0 with a Status
/// for timeouts and aborts).
struct Attempt {
  Socket socket;
  int error = 0;
};

Expected<Attempt> tryConnect(const SocketAddress& address, const WaitLimits& limits) {
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError("cannot create a socket to connect to " + address.toString(), errno);
  Attempt attempt{Socket(fd), 0};
  if (::connect(fd, address.get(), address.length()) == 0) return attempt;
  if (errno != EINPROGRESS && errno != EINTR) {
    attempt.error = errno;
    return attempt;
  }
  Status ready = waitFor(fd, POLLOUT, limits);
  if (!ready.ok()) return ready;
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  attempt.error = error;
  return attempt;
}

/// Sleeps until `until` (or the deadline, if sooner); Aborted when the abort fd fires meanwhile.
Status pause(Deadline until, const WaitLimits& limits) {
  const WaitLimits nap{std::min(until, limits.deadline), -1};
  if (limits.abortFd < 0) {
    std::this_thread::sleep_until(nap.deadline);
    return Status();
  }
  Status woken = waitFor(limits.abortFd, POLLIN, nap);
  if (woken.code() == ErrorCode::Timeout) return Status();
  return woken.ok() ? aborted() : woken;
}

}  // namespace

Deadline deadlineAfter(double seconds) {
  if (!(seconds > 0)) return Clock::now();
  // A year is "forever" for a bootstrap wait and keeps the arithmetic far from overflow.
  const std::chrono::duration<double> span(std::min(seconds, 365.0 * 24 * 3600));
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(span);
}

// ---- AbortSignal ---------------------------------------------------------------------------------

AbortSignal::AbortSignal() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

AbortSignal::~AbortSignal() {
  if (fd_ >= 0) ::close(fd_);
}

void AbortSignal::raise() {
  const uint64_t one = 1;
  // The counter only needs to be non-zero; a full counter (EAGAIN) is already raised.
  if (fd_ >= 0) (void)!::write(fd_, &one, sizeof one);
}

bool AbortSignal::raised() const { return isRaised(fd_); }

// ---- Waiting -------------------------------------------------------------------------------------

Status pollWithLimits(std::vector<pollfd>& fds, const WaitLimits& limits) {
  const size_t count = fds.size();
  if (limits.abortFd >= 0) fds.push_back(pollfd{limits.abortFd, POLLIN, 0});
  Status result;
  while (true) {
    for (pollfd& entry : fds) entry.revents = 0;
    const int ready = ::poll(fds.data(), fds.size(), remainingMs(limits.deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      result = systemError("poll", errno);
      break;
    }
    if (limits.abortFd >= 0 && fds.back().revents != 0) {
      result = aborted();
      break;
    }
    if (ready > 0) break;
    if (Clock::now() >= limits.deadline) {
      result = timedOut();
      break;
    }
  }
  fds.resize(count);
  return result;
}

Status waitFor(int fd, short events, const WaitLimits& limits) {
  std::vector<pollfd> fds{pollfd{fd, events, 0}};
  return pollWithLimits(fds, limits);
}

// ---- Addresses -----------------------------------------------------------------------------------

SocketAddress SocketAddress::fromSockaddr(const sockaddr* address, socklen_t length) {
  SocketAddress result;
  if (address == nullptr) return result;
  const bool v4 = address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in));
  const bool v6 = address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6));
  if (!v4 && !v6) return result;
  result.length_ = v4 ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&result.storage_, address, result.length_);
  return result;
}

SocketAddress SocketAddress::wildcard(int family, uint16_t port) {
  if (family == AF_INET6) {
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    any.sin6_port = htons(port);
    return fromSockaddr(reinterpret_cast<const sockaddr*>(&any), sizeof any);
  }
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(port);
  return fromSockaddr(reinterpret_cast<const sockaddr*>(&any), sizeof any);
}

SocketAddress SocketAddress::loopback(int family, uint16_t port) {
  if (family == AF_INET6) {
    sockaddr_in6 local{};
    local.sin6_family = AF_INET6;
    local.sin6_addr = in6addr_loopback;
    local.sin6_port = htons(port);
    return fromSockaddr(reinterpret_cast<const sockaddr*>(&local), sizeof local);
  }
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  local.sin_port = htons(port);
  return fromSockaddr(reinterpret_cast<const sockaddr*>(&local), sizeof local);
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) {
    const in6_addr& address = reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&address)) return true;
    return IN6_IS_ADDR_V4MAPPED(&address) && address.s6_addr[12] == 127;
  }
  return false;
}

std::string SocketAddress::host() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, text, sizeof text);
  else if (family() == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, text, sizeof text);
  else
    return "(no address)";
  return text;
}

std::string SocketAddress::toString() const {
  if (empty()) return "(no address)";
  return joinHostPort(host(), port());
}

std::string joinHostPort(std::string_view host, uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

Expected<HostPort> splitHostPort(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  HostPort result;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return makeError(ErrorCode::InvalidArgument, quoted + " is not host:port (an IPv6 host is written [addr]:port)");
    result.host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos)
      return makeError(ErrorCode::InvalidArgument, quoted + " is not host:port (the port is missing)");
    if (text.find(':') != colon)
      return makeError(ErrorCode::InvalidArgument, quoted + " is not host:port (write an IPv6 host as [addr]:port)");
    result.host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  if (result.host.empty()) return makeError(ErrorCode::InvalidArgument, quoted + " is not host:port (the host is empty)");
  const bool digits = !portText.empty() && portText.size() <= 5 &&
                      std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long port = digits ? std::stol(std::string(portText)) : 0;
  if (port < 1 || port > 65535)
    return makeError(ErrorCode::InvalidArgument,
                     quoted + " is not host:port (the port '" + std::string(portText) + "' is not in 1..65535)");
  result.port = static_cast<uint16_t>(port);
  return result;
}

Expected<SocketAddress> resolveHostPort(std::string_view text) {
  Expected<HostPort> parts = splitHostPort(text);
  if (!parts) return parts.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(parts->host.c_str(), nullptr, &hints, &found);
  if (error != 0)
    return makeError(ErrorCode::InvalidArgument,
                     "cannot resolve the host of '" + std::string(text) + "': " + gai_strerror(error));
  SocketAddress first;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    SocketAddress candidate = SocketAddress::fromSockaddr(entry->ai_addr, entry->ai_addrlen);
    if (candidate.empty()) continue;
    if (first.empty() || (candidate.family() == AF_INET && first.family() != AF_INET)) first = candidate;
  }
  freeaddrinfo(found);
  if (first.empty())
    return makeError(ErrorCode::InvalidArgument, "'" + std::string(text) + "' has no IPv4 or IPv6 address");
  first.setPort(parts->port);
  return first;
}

std::vector<std::pair<std::string, SocketAddress>> upInterfaceAddresses() {
  std::vector<std::pair<std::string, SocketAddress>> result;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return result;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    const socklen_t length = entry->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    SocketAddress address = SocketAddress::fromSockaddr(entry->ifa_addr, length);
    if (!address.empty()) result.emplace_back(entry->ifa_name, address);
  }
  freeifaddrs(list);
  return result;
}

namespace {

/// The IPv4 address among `candidates` named `name`, else its IPv6 one.
std::optional<SocketAddress> addressNamed(const std::vector<std::pair<std::string, SocketAddress>>& candidates,
                                          const std::string& name, bool prefix) {
  std::optional<SocketAddress> v6;
  for (const auto& [ifname, address] : candidates) {
    const bool matches = prefix ? ifname.rfind(name, 0) == 0 : ifname == name;
    if (!matches) continue;
    if (address.family() == AF_INET) return address;
    if (!v6) v6 = address;
  }
  return v6;
}

}  // namespace

Expected<SocketAddress> interfaceAddress(const std::string& name) {
  const auto candidates = upInterfaceAddresses();
  std::optional<SocketAddress> found = addressNamed(candidates, name, false);
  if (!found) found = addressNamed(candidates, name, true);
  if (found) return *found;
  std::string known;
  for (const auto& [ifname, address] : candidates)
    if (known.find(" " + ifname + ",") == std::string::npos) known += " " + ifname + ",";
  if (!known.empty()) known.pop_back();
  return makeError(ErrorCode::NotFound, "no up interface named '" + name + "' with an IPv4 or IPv6 address (there are:" +
                                            (known.empty() ? std::string(" none") : known) + ")");
}

std::optional<SocketAddress> firstNonLoopbackAddress() {
  for (const auto& [ifname, address] : upInterfaceAddresses())
    if (address.family() == AF_INET && !address.isLoopback()) return address;
  return std::nullopt;
}

Expected<SocketAddress> localAddressToward(const SocketAddress& destination) {
  if (destination.empty()) return makeError(ErrorCode::InvalidArgument, "no destination address");
  SocketAddress target = destination;
  if (target.port() == 0) target.setPort(9);  // connect() of a datagram socket wants a port; nothing is sent
  Socket probe(::socket(target.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return systemError("cannot create a socket", errno);
  if (::connect(probe.fd(), target.get(), target.length()) != 0)
    return systemError("no route to " + destination.toString(), errno);
  Expected<SocketAddress> local = probe.localAddress();
  if (local) local->setPort(0);
  return local;
}

// ---- Socket --------------------------------------------------------------------------------------

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Expected<SocketAddress> Socket::localAddress() const {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return systemError("getsockname", errno);
  return SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&storage), length);
}

Expected<SocketAddress> Socket::peerAddress() const {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return systemError("getpeername", errno);
  return SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&storage), length);
}

// ---- Connections ---------------------------------------------------------------------------------

Expected<Socket> listenOn(const SocketAddress& address, int backlog) {
  if (address.empty()) return makeError(ErrorCode::InvalidArgument, "no address to listen on");
  Socket listener(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return systemError("cannot create a socket to listen on " + address.toString(), errno);
  const int on = 1;
  (void)setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::bind(listener.fd(), address.get(), address.length()) != 0)
    return systemError("cannot listen on " + address.toString(), errno);
  if (::listen(listener.fd(), backlog) != 0) return systemError("cannot listen on " + address.toString(), errno);
  return listener;
}

Expected<Socket> acceptOne(const Socket& listener, const WaitLimits& limits) {
  while (true) {
    const int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return systemError("accept", errno);
    Status ready = waitFor(listener.fd(), POLLIN, limits);
    if (!ready.ok()) return ready;
  }
}

Expected<Socket> connectTo(const SocketAddress& address, const WaitLimits& limits) {
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    Expected<Attempt> attempt = tryConnect(address, limits);
    if (!attempt) {
      if (attempt.status().code() != ErrorCode::Timeout) return attempt.status();
      return makeError(ErrorCode::Timeout, "cannot connect to " + address.toString() + ": no answer");
    }
    // A connect to a local port nobody listens on yet can meet itself (the kernel may pick that
    // port as the source): that is no peer, so it counts as refused and is tried again.
    if (attempt->error == 0 && connectedToItself(attempt->socket)) attempt->error = ECONNREFUSED;
    if (attempt->error == 0) {
      setNoDelay(attempt->socket.fd());
      return std::move(attempt->socket);
    }
    if (!isRetryableConnectError(attempt->error))
      return systemError("cannot connect to " + address.toString(), attempt->error);
    if (Clock::now() >= limits.deadline)
      return makeError(ErrorCode::Timeout,
                       "cannot connect to " + address.toString() + ": " + std::strerror(attempt->error));
    Status slept = pause(Clock::now() + backoff, limits);
    if (!slept.ok()) return slept;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

bool connectedToItself(const Socket& socket) {
  Expected<SocketAddress> local = socket.localAddress();
  Expected<SocketAddress> peer = socket.peerAddress();
  return local && peer && local->toString() == peer->toString();
}

Status sendAll(const Socket& socket, const void* data, size_t bytes, const WaitLimits& limits) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    Expected<size_t> sent = sendAvailable(socket, next, bytes);
    if (!sent) return sent.status();
    next += *sent;
    bytes -= *sent;
    if (bytes == 0) break;
    if (*sent == 0) {
      Status ready = waitFor(socket.fd(), POLLOUT, limits);
      if (!ready.ok()) return ready;
    }
  }
  return Status();
}

Expected<size_t> recvAvailable(const Socket& socket, void* data, size_t bytes) {
  if (bytes == 0) return size_t{0};
  while (true) {
    const ssize_t got = ::recv(socket.fd(), data, bytes, 0);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) return peerClosed(socket);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (isPeerGone(errno)) return peerClosed(socket);
    return systemError("recv from " + peerName(socket), errno);
  }
}

Status recvAll(const Socket& socket, void* data, size_t bytes, const WaitLimits& limits) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    Expected<size_t> got = recvAvailable(socket, next, bytes);
    if (!got) return got.status();
    next += *got;
    bytes -= *got;
    if (bytes == 0) break;
    if (*got == 0) {
      Status ready = waitFor(socket.fd(), POLLIN, limits);
      if (!ready.ok()) return ready;
    }
  }
  return Status();
}

Status sendRecvAll(const Socket& to, const void* out, size_t outBytes, const Socket& from, void* in,
                   size_t inBytes, const WaitLimits& limits) {
  const char* nextOut = static_cast<const char*>(out);
  char* nextIn = static_cast<char*>(in);
  while (outBytes > 0 || inBytes > 0) {
    if (outBytes > 0) {
      Expected<size_t> sent = sendAvailable(to, nextOut, outBytes);
      if (!sent) return sent.status();
      nextOut += *sent;
      outBytes -= *sent;
    }
    if (inBytes > 0) {
      Expected<size_t> got = recvAvailable(from, nextIn, inBytes);
      if (!got) return got.status();
      nextIn += *got;
      inBytes -= *got;
    }
    if (outBytes == 0 && inBytes == 0) break;
    std::vector<pollfd> fds;
    if (outBytes > 0) fds.push_back(pollfd{to.fd(), POLLOUT, 0});
    if (inBytes > 0) {
      if (!fds.empty() && fds.front().fd == from.fd())
        fds.front().events |= POLLIN;
      else
        fds.push_back(pollfd{from.fd(), POLLIN, 0});
    }
    Status ready = pollWithLimits(fds, limits);
    if (!ready.ok()) return ready;
  }
  return Status();
}

bool connectionClosed(const Socket& socket) {
  if (!socket.valid()) return true;
  pollfd entry{socket.fd(), POLLRDHUP, 0};
  if (::poll(&entry, 1, 0) <= 0) return false;
  return (entry.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tuccl::transport
