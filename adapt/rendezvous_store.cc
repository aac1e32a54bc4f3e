// The rendezvous stores: a shared directory, and the client of a TCP store (rendezvous_store.h).
#include "adapt/rendezvous_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

namespace tuccl {
namespace {

Status ioError(const std::string& what, const std::string& file, int error) {
  return makeError(ErrorCode::IoError, what + " " + file + ": " + std::strerror(error));
}

// ---- dir: ---------------------------------------------------------------------------------------

/// The whole content of `file`; NotFound when it does not exist.
Expected<std::string> readWhole(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return makeError(ErrorCode::NotFound, file + " does not exist");
    return ioError("cannot open", file, errno);
  }
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return ioError("cannot read", file, error);
    }
    bytes.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return bytes;
}

/// Writes `bytes` to a new file `file` (it must not exist).
Status writeNew(const std::string& file, const std::string& bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ioError("cannot create", file, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(file.c_str());
      return ioError("cannot write", file, error);
    }
    done += static_cast<size_t>(wrote);
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(file.c_str());
    return ioError("cannot write", file, error);
  }
  return {};
}

/// A temporary name in `directory` no other process (on any host) uses.
std::string temporaryName(const std::string& directory) {
  static std::atomic<uint64_t> counter{0};
  char host[64] = "host";
  ::gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  for (char* c = host; *c != '\0'; ++c) {
    if (*c == '/') *c = '_';
  }
  return directory + "/.tuccl-adapt-tmp-" + host + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

class DirectoryStore final : public RendezvousStore {
 public:
  explicit DirectoryStore(std::string directory) : directory_(std::move(directory)) {}

  /// A complete temporary copy linked to the name: the name appears with all its bytes or not at
  /// all, and link() fails when the name exists.
  Expected<bool> create(const std::string& name, const std::string& bytes) override {
    const std::string temporary = temporaryName(directory_);
    if (Status written = writeNew(temporary, bytes); !written) return written;
    const int linked = ::link(temporary.c_str(), path(name).c_str());
    const int error = errno;
    ::unlink(temporary.c_str());
    if (linked == 0) return true;
    if (error == EEXIST) return false;
    return ioError("cannot create", path(name), error);
  }
  Expected<std::string> read(const std::string& name) override { return readWhole(path(name)); }
  void remove(const std::string& name) override { ::unlink(path(name).c_str()); }
  void removePrefix(const std::string& prefix) override {
    std::error_code error;
    std::vector<std::string> names;
    for (std::filesystem::directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
      std::string name = it->path().filename().string();
      if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(std::move(name));
    }
    for (const std::string& name : names) remove(name);
  }
  std::string describe() const override { return "dir:" + directory_; }

 private:
  std::string path(const std::string& name) const { return directory_ + "/" + name; }
  std::string directory_;
};

Status checkDirectory(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) return ioError("cannot use", directory, errno);
  if (!S_ISDIR(info.st_mode)) return makeError(ErrorCode::InvalidArgument, directory + " is not a directory");
  if (::access(directory.c_str(), W_OK | X_OK) != 0) return ioError("cannot write in", directory, errno);
  return {};
}

// ---- tcp: ---------------------------------------------------------------------------------------

/// A connected socket to host:port within `timeout`, with `timeout` on every send and receive.
Expected<int> connectWithin(const std::string& host, const std::string& port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return makeError(ErrorCode::NotFound, "cannot resolve " + host + ": " + ::gai_strerror(error));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* address = found; address != nullptr && fd < 0; address = address->ai_next) {
    fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, address->ai_protocol);
    if (fd < 0) continue;
    int connected = ::connect(fd, address->ai_addr, address->ai_addrlen);
    if (connected != 0 && errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      if (::poll(&waiting, 1, static_cast<int>(timeout.count())) == 1 &&
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0) {
        errno = error;
        connected = error == 0 ? 0 : -1;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (connected != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return makeError(ErrorCode::IoError, "cannot connect to " + host + ":" + port + ": " + why);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval limit{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  return fd;
}

class TcpStore final : public RendezvousStore {
 public:
  TcpStore(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  ~TcpStore() override { ::close(fd_); }

  Expected<bool> create(const std::string& name, const std::string& bytes) override {
    Expected<Reply> reply = request('C', name, bytes);
    if (!reply) return reply.status();
    if (reply->status != 'Y' && reply->status != 'N') return broken("an unexpected reply");
    return reply->status == 'Y';
  }
  Expected<std::string> read(const std::string& name) override {
    Expected<Reply> reply = request('R', name, "");
    if (!reply) return reply.status();
    if (reply->status == 'F') return makeError(ErrorCode::NotFound, name + " is not in the store");
    if (reply->status != 'V') return broken("an unexpected reply");
    return std::move(reply->value);
  }
  void remove(const std::string& name) override { (void)request('D', name, ""); }
  void removePrefix(const std::string& prefix) override { (void)request('P', prefix, ""); }
  std::string describe() const override { return "tcp:" + address_; }

 private:
  struct Reply {
    char status = 0;
    std::string value;
  };
  Status broken(const std::string& what) {
    dead_ = true;
    return makeError(ErrorCode::IoError, "the rendezvous store at " + address_ + ": " + what);
  }
  Expected<Reply> request(char op, const std::string& name, const std::string& value) {
    std::lock_guard lock(mutex_);
    if (dead_) return broken("the connection was lost earlier");
    std::string message(1, op);
    putUint32(message, static_cast<uint32_t>(name.size()));
    putUint32(message, static_cast<uint32_t>(value.size()));
    message += name;
    message += value;
    if (!sendAll(fd_, message.data(), message.size())) return broken("cannot send (" + std::string(std::strerror(errno)) + ")");
    unsigned char head[5];
    if (!receiveAll(fd_, head, sizeof(head))) return broken("no reply (" + std::string(std::strerror(errno)) + ")");
    Reply reply;
    reply.status = static_cast<char>(head[0]);
    const uint32_t length = getUint32(head + 1);
    if (length > kStoreMaxValue) return broken("a reply of " + std::to_string(length) + " bytes");
    reply.value.resize(length);
    if (length > 0 && !receiveAll(fd_, reply.value.data(), length)) return broken("a reply cut short");
    return reply;
  }

  int fd_;
  std::string address_;
  std::mutex mutex_;
  bool dead_ = false;  ///< after a failed request the stream is out of step: no more requests
};

}  // namespace

bool sendAll(int fd, const void* bytes, size_t size) {
  const auto* at = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t sent = ::send(fd, at, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    at += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool receiveAll(int fd, void* bytes, size_t size) {
  auto* at = static_cast<char*>(bytes);
  while (size > 0) {
    const ssize_t got = ::recv(fd, at, size, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    at += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

void putUint32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t getUint32(const unsigned char* in) {
  return static_cast<uint32_t>(in[0]) | static_cast<uint32_t>(in[1]) << 8 | static_cast<uint32_t>(in[2]) << 16 |
         static_cast<uint32_t>(in[3]) << 24;
}

Expected<std::unique_ptr<RendezvousStore>> openRendezvousStore(const std::string& spec,
                                                                std::chrono::milliseconds timeout) {
  if (spec.rfind("dir:", 0) == 0 && spec.size() > 4) {
    const std::string directory = spec.substr(4);
    if (Status usable = checkDirectory(directory); !usable) return usable;
    return std::unique_ptr<RendezvousStore>(std::make_unique<DirectoryStore>(directory));
  }
  const size_t colon = spec.rfind(':');
  if (spec.rfind("tcp:", 0) == 0 && colon > 4 && colon + 1 < spec.size()) {
    std::string host = spec.substr(4, colon - 4);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port = spec.substr(colon + 1);
    Expected<int> fd = connectWithin(host, port, timeout);
    if (!fd) return fd.status();
    return std::unique_ptr<RendezvousStore>(std::make_unique<TcpStore>(*fd, spec.substr(4)));
  }
  return makeError(ErrorCode::InvalidArgument,
                   "expected dir:<path of a directory every rank can write> or tcp:<host>:<port> of a "
                   "tuccl-adapt-store");
}

}  // namespace tuccl
