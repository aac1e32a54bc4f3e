// The TCP store of the tuner's runtime phase (rendezvous_server.h).
#include "adapt/rendezvous_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "adapt/rendezvous_store.h"

namespace tuccl {
namespace {

/// Names a store holds at most: a job's rounds leave a few names per rank and key.
constexpr size_t kMaxNames = 1 << 22;

std::string replyOf(char status, const std::string& value = {}) {
  std::string reply(1, status);
  putUint32(reply, static_cast<uint32_t>(value.size()));
  return reply + value;
}

}  // namespace

Expected<std::unique_ptr<RendezvousServer>> RendezvousServer::listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      error != 0) {
    return makeError(ErrorCode::InvalidArgument, "cannot resolve " + host + ": " + ::gai_strerror(error));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* address = found; address != nullptr && fd < 0; address = address->ai_next) {
    fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, address->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, address->ai_addr, address->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return makeError(ErrorCode::SystemError, "cannot listen at " + host + ":" + service + ": " + why);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const uint16_t actual = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(fd, actual));
}

RendezvousServer::~RendezvousServer() {
  stop();
  ::close(listenFd_);
  std::lock_guard lock(threadsMutex_);
  for (std::thread& thread : threads_) thread.join();
}

void RendezvousServer::serve() {
  while (!stopping_.load()) {
    pollfd waiting{listenFd_, POLLIN, 0};
    if (::poll(&waiting, 1, 100) != 1) continue;
    const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(threadsMutex_);
    threads_.emplace_back([this, fd] { serveConnection(fd); });
  }
}

void RendezvousServer::serveConnection(int fd) {
  while (!stopping_.load()) {
    pollfd waiting{fd, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, 100);
    if (ready == 0) continue;
    if (ready < 0 && errno == EINTR) continue;
    unsigned char head[9];
    if (ready < 0 || !receiveAll(fd, head, sizeof(head))) break;
    const uint32_t nameLength = getUint32(head + 1), valueLength = getUint32(head + 5);
    if (nameLength > kStoreMaxName || valueLength > kStoreMaxValue) break;  // not a client of ours
    std::string name(nameLength, '\0'), value(valueLength, '\0');
    if (!receiveAll(fd, name.data(), nameLength) || !receiveAll(fd, value.data(), valueLength)) break;
    const std::string reply = apply(static_cast<char>(head[0]), name, value);
    if (reply.empty() || !sendAll(fd, reply.data(), reply.size())) break;
  }
  ::close(fd);
}

std::string RendezvousServer::apply(char op, const std::string& name, const std::string& value) {
  std::lock_guard lock(mutex_);
  switch (op) {
    case 'C': {
      if (names_.count(name) != 0) return replyOf('N');
      if (names_.size() >= kMaxNames) return {};
      names_.emplace(name, value);
      return replyOf('Y');
    }
    case 'R': {
      auto it = names_.find(name);
      return it == names_.end() ? replyOf('F') : replyOf('V', it->second);
    }
    case 'D':
      names_.erase(name);
      return replyOf('K');
    case 'P': {
      for (auto it = names_.lower_bound(name); it != names_.end() && it->first.compare(0, name.size(), name) == 0;)
        it = names_.erase(it);
      return replyOf('K');
    }
    default:
      return {};  // not a client of ours: the connection ends
  }
}

size_t RendezvousServer::size() const {
  std::lock_guard lock(mutex_);
  return names_.size();
}

}  // namespace tuccl
