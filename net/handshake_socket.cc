#include "net/handshake_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace tuccl::net {
namespace {

void setNoDelay(int fd) {
  const int on = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

}  // namespace

uint64_t randomWord() {
  static thread_local std::mt19937_64 engine{std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32)};
  return engine();
}

Status systemError(const std::string& what) {
  return makeError(ErrorCode::SystemError, what + ": " + std::strerror(errno));
}

Expected<transport::Socket> startConnecting(const transport::SocketAddress& peer) {
  transport::Socket socket(::socket(peer.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return systemError("cannot create a socket");
  setNoDelay(socket.fd());
  if (::connect(socket.fd(), peer.get(), peer.length()) != 0 && errno != EINPROGRESS)
    return systemError("cannot connect to " + peer.toString());
  return socket;
}

Expected<bool> connectCompleted(const transport::Socket& socket, const transport::SocketAddress& peer) {
  pollfd fd{socket.fd(), POLLOUT, 0};
  if (::poll(&fd, 1, 0) <= 0) return false;
  int error = 0;
  socklen_t length = sizeof error;
  (void)getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0)
    return makeError(ErrorCode::SystemError, "cannot connect to " + peer.toString() + ": " + std::strerror(error));
  return true;
}

Status acceptWaiting(const transport::Socket& listener, const std::function<void(transport::Socket)>& take) {
  for (;;) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return Status();
      return systemError("accept failed");
    }
    setNoDelay(fd);
    take(transport::Socket(fd));
  }
}

std::string peerName(const transport::Socket& socket) {
  Expected<transport::SocketAddress> peer = socket.peerAddress();
  return peer ? peer->toString() : std::string("an unknown peer");
}

}  // namespace tuccl::net
