// The TCP store of the tuner's runtime phase (rendezvous_server.h).
#include "adapt/rendezvous_server.h"

#include <poll.h>
#include <sys/socket.h>

#include "adapt/rendezvous_store.h"

namespace tuccl {
namespace {

/// Names a store holds at most: a job's rounds leave a few names per rank and key.
constexpr size_t kMaxNames = 1 << 22;
/// How often the serving loops look at stop(); the longest a started request may take to arrive.
constexpr double kPollSeconds = 0.1;
constexpr double kRequestSeconds = 30;

transport::WaitLimits pollLimits() { return transport::WaitLimits{transport::deadlineAfter(kPollSeconds)}; }

std::string replyOf(char status, const std::string& value = {}) {
  std::string reply(1, status);
  putUint32(reply, static_cast<uint32_t>(value.size()));
  return reply + value;
}

}  // namespace

Expected<std::unique_ptr<RendezvousServer>> RendezvousServer::listen(const std::string& host, uint16_t port) {
  // No host: every interface. (A host is resolved with a placeholder port: port 0 is "any".)
  Expected<transport::SocketAddress> address =
      host.empty() ? Expected<transport::SocketAddress>(transport::SocketAddress::wildcard(AF_INET, port))
                   : transport::resolveHostPort(transport::joinHostPort(host, 1));
  if (!address) {
    return makeError(ErrorCode::InvalidArgument, "cannot resolve " + host + ": " + address.status().message());
  }
  address->setPort(port);
  Expected<transport::Socket> listener = transport::listenOn(*address);
  if (!listener) return makeError(ErrorCode::SystemError, listener.status().message());
  Expected<transport::SocketAddress> bound = listener->localAddress();
  const uint16_t actual = bound ? bound->port() : port;
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(std::move(*listener), actual));
}

RendezvousServer::~RendezvousServer() {
  stop();
  listener_.close();
  std::lock_guard lock(threadsMutex_);
  for (std::thread& thread : threads_) thread.join();
}

void RendezvousServer::serve() {
  while (!stopping_.load()) {
    Expected<transport::Socket> accepted = transport::acceptOne(listener_, pollLimits());
    if (!accepted) continue;  // nothing within the poll interval, or a connection that failed
    std::lock_guard lock(threadsMutex_);
    threads_.emplace_back([this, socket = std::move(*accepted)]() mutable { serveConnection(std::move(socket)); });
  }
}

void RendezvousServer::serveConnection(transport::Socket socket) {
  while (!stopping_.load()) {
    Status ready = transport::waitFor(socket.fd(), POLLIN, pollLimits());
    if (!ready && ready.code() == ErrorCode::Timeout) continue;
    // A request that began arrives whole within kRequestSeconds, or the client is not one of ours.
    const transport::WaitLimits limits{transport::deadlineAfter(kRequestSeconds)};
    unsigned char head[9];
    if (!ready || !transport::recvAll(socket, head, sizeof(head), limits)) break;
    const uint32_t nameLength = getUint32(head + 1), valueLength = getUint32(head + 5);
    if (nameLength > kStoreMaxName || valueLength > kStoreMaxValue) break;  // not a client of ours
    std::string name(nameLength, '\0'), value(valueLength, '\0');
    if (!transport::recvAll(socket, name.data(), nameLength, limits) ||
        !transport::recvAll(socket, value.data(), valueLength, limits)) {
      break;
    }
    const std::string reply = apply(static_cast<char>(head[0]), name, value);
    if (reply.empty() || !transport::sendAll(socket, reply.data(), reply.size(), limits)) break;
  }
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
