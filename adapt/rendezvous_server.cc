// The TCP store of the tuner's runtime phase (rendezvous_server.h).
#include "adapt/rendezvous_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "adapt/rendezvous_store.h"

namespace tuccl {
namespace {

/// Names a store holds at most: a job's rounds leave a few names per rank and key.
constexpr size_t kMaxNames = 1 << 22;
/// How often the serving loops look at the job; the longest a started request may take to arrive.
constexpr double kPollSeconds = 0.1;
constexpr double kRequestSeconds = 30;
/// Connections waiting to say hello at once, beyond which new ones are closed at once; peer hosts
/// whose refusals are reported.
constexpr int kMaxWaitingHellos = 64;
constexpr size_t kMaxReportedHosts = 64;

std::string replyOf(char status, const std::string& value = {}) {
  std::string reply(1, status);
  putUint32(reply, static_cast<uint32_t>(value.size()));
  return reply + value;
}

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds);
  return text;
}

/// Whether `given` is `expected`, in a time that depends on the lengths only, never on the bytes.
bool sameSecret(const std::string& expected, const std::string& given) {
  volatile unsigned char difference = expected.size() == given.size() ? 0 : 1;
  const size_t length = std::min(expected.size(), given.size());
  for (size_t i = 0; i < length; ++i) difference = difference | static_cast<unsigned char>(expected[i] ^ given[i]);
  return difference == 0;
}

}  // namespace

RendezvousServer::RendezvousServer(transport::Socket listener, uint16_t port, RendezvousServerOptions options)
    : listener_(std::move(listener)),
      port_(port),
      options_(std::move(options)),
      idleSince_(transport::Clock::now()) {}

Expected<std::unique_ptr<RendezvousServer>> RendezvousServer::listen(RendezvousServerOptions options) {
  if (options.secret.empty() || options.secret.size() > kStoreMaxSecret) {
    return makeError(ErrorCode::InvalidArgument, "the store's secret must be 1 to " +
                                                     std::to_string(kStoreMaxSecret) + " bytes long");
  }
  // The host is resolved with a placeholder port: port 0 is "any".
  Expected<transport::SocketAddress> address = transport::resolveHostPort(transport::joinHostPort(options.host, 1));
  if (!address) {
    return makeError(ErrorCode::InvalidArgument,
                     "cannot resolve " + options.host + ": " + address.status().message());
  }
  address->setPort(options.port);
  Expected<transport::Socket> listener = transport::listenOn(*address);
  if (!listener) return makeError(ErrorCode::SystemError, listener.status().message());
  Expected<transport::SocketAddress> bound = listener->localAddress();
  const uint16_t actual = bound ? bound->port() : options.port;
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(std::move(*listener), actual, std::move(options)));
  if (!server->abort_.valid()) return makeError(ErrorCode::SystemError, "cannot make an eventfd to stop the store");
  return server;
}

RendezvousServer::~RendezvousServer() {
  stop();
  listener_.close();
  for (Worker& worker : workers_) worker.thread.join();
}

void RendezvousServer::stop() {
  stopping_.store(true);
  abort_.raise();
}

ServeEnd RendezvousServer::serve() {
  for (;;) {
    reapWorkers();
    if (std::optional<ServeEnd> end = jobOver()) {
      stop();  // connections still saying hello end at once
      return *end;
    }
    const transport::WaitLimits limits{transport::deadlineAfter(kPollSeconds), abort_.fd()};
    Expected<transport::Socket> accepted = transport::acceptOne(listener_, limits);
    if (accepted) start(std::move(*accepted));  // else nothing within the poll interval, or a failed one
  }
}

std::optional<ServeEnd> RendezvousServer::jobOver() {
  if (stopping_.load()) return ServeEnd::Stopped;
  std::lock_guard lock(jobMutex_);
  if (open_ > 0) return std::nullopt;
  if (options_.ranks > 0 && admitted_ >= options_.ranks) return ServeEnd::RanksDone;
  if (options_.idleSeconds > 0 &&
      transport::Clock::now() - idleSince_ >= std::chrono::duration<double>(options_.idleSeconds)) {
    return ServeEnd::Idle;
  }
  return std::nullopt;
}

void RendezvousServer::start(transport::Socket socket) {
  if (waitingHellos_.load() >= kMaxWaitingHellos) {
    refuse(socket, "too many connections are waiting to say hello");
    return;
  }
  waitingHellos_.fetch_add(1);
  Worker& worker = workers_.emplace_back();
  worker.thread = std::thread([this, &worker, socket = std::move(socket)]() mutable {
    serveConnection(std::move(socket));
    worker.done.store(true);
  });
}

void RendezvousServer::reapWorkers() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (!it->done.load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = workers_.erase(it);
  }
}

void RendezvousServer::serveConnection(transport::Socket socket) {
  const bool admitted = admit(socket);
  waitingHellos_.fetch_sub(1);
  if (!admitted) return;
  while (!stopping_.load()) {
    Status ready = transport::waitFor(socket.fd(), POLLIN, {transport::deadlineAfter(kPollSeconds), abort_.fd()});
    if (!ready && ready.code() == ErrorCode::Timeout) continue;
    // A request that began arrives whole within kRequestSeconds, or the client is not one of ours.
    const transport::WaitLimits limits{transport::deadlineAfter(kRequestSeconds), abort_.fd()};
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
  closed();
}

bool RendezvousServer::admit(const transport::Socket& socket) {
  const transport::WaitLimits limits{transport::deadlineAfter(options_.helloSeconds), abort_.fd()};
  unsigned char head[sizeof(kStoreHelloMagic) + 4];
  if (Status got = transport::recvAll(socket, head, sizeof(head), limits); !got) {
    if (got.code() == ErrorCode::Aborted) return false;  // the store is stopping
    refuse(socket, got.code() == ErrorCode::Timeout ? "no hello within " + secondsText(options_.helloSeconds)
                                                    : "it closed before its hello was complete");
    return false;
  }
  const uint32_t length = getUint32(head + sizeof(kStoreHelloMagic));
  if (std::memcmp(head, kStoreHelloMagic, sizeof(kStoreHelloMagic)) != 0 || length > kStoreMaxSecret) {
    refuse(socket, "its first bytes are no tuccl-adapt-store hello");
    return false;
  }
  std::string secret(length, '\0');
  if (Status got = transport::recvAll(socket, secret.data(), length, limits); !got) {
    if (got.code() != ErrorCode::Aborted) refuse(socket, "its hello was cut short");
    return false;
  }
  if (!sameSecret(options_.secret, secret)) {
    refuse(socket, "a wrong secret");  // counted before the client hears of it
    const std::string wrong = replyOf('X');
    (void)transport::sendAll(socket, wrong.data(), wrong.size(), limits);
    return false;
  }
  {
    std::lock_guard lock(jobMutex_);
    ++admitted_;
    ++open_;
  }
  const std::string welcome = replyOf('H');
  if (transport::sendAll(socket, welcome.data(), welcome.size(), limits)) return true;
  closed();
  return false;
}

void RendezvousServer::refuse(const transport::Socket& socket, const std::string& reason) {
  refused_.fetch_add(1);
  if (!options_.report) return;
  Expected<transport::SocketAddress> peer = socket.peerAddress();
  const std::string host = peer ? peer->host() : std::string("an unknown peer");
  std::lock_guard lock(jobMutex_);
  if (reportedHosts_.size() >= kMaxReportedHosts || !reportedHosts_.insert(host).second) return;
  std::string line = "refused a connection from " + (peer ? peer->toString() : host) + ": " + reason +
                     " (later refusals of " + host + " are only counted)";
  if (reportedHosts_.size() == kMaxReportedHosts) line += "; no further hosts are named";
  options_.report(line);
}

void RendezvousServer::closed() {
  std::lock_guard lock(jobMutex_);
  if (--open_ == 0) idleSince_ = transport::Clock::now();
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

Expected<std::string> makeRendezvousSecret() {
  unsigned char bytes[32];
  for (size_t have = 0; have < sizeof(bytes);) {
    const ssize_t got = ::getrandom(bytes + have, sizeof(bytes) - have, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return makeError(ErrorCode::SystemError, std::string("getrandom: ") + std::strerror(errno));
    have += static_cast<size_t>(got);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string secret;
  for (unsigned char byte : bytes) {
    secret += kDigits[byte >> 4];
    secret += kDigits[byte & 0xf];
  }
  return secret;
}

Status writeRendezvousSecret(const std::string& file, const std::string& secret) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == EEXIST) {
    return makeError(ErrorCode::InvalidArgument,
                     "the secret file " + file + " exists already: a new secret never replaces a file");
  }
  if (fd < 0) return makeError(ErrorCode::IoError, "cannot create the secret file " + file + ": " + std::strerror(errno));
  const std::string bytes = secret + "\n";
  bool written = ::fchmod(fd, 0600) == 0;  // 0600 whatever the umask took away: the owner reads it
  for (size_t done = 0; written && done < bytes.size();) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote > 0) done += static_cast<size_t>(wrote);
    else written = wrote < 0 && errno == EINTR;
  }
  int error = errno;
  if (::close(fd) != 0 && written) {
    written = false;
    error = errno;
  }
  if (written) return {};
  ::unlink(file.c_str());
  return makeError(ErrorCode::IoError, "cannot write the secret file " + file + ": " + std::strerror(error));
}

}  // namespace tuccl
