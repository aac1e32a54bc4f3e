// The rendezvous stores: a shared directory, and the client of a TCP store (rendezvous_store.h).
#include "adapt/rendezvous_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "transport/socket.h"

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

// ---- the secret of a tcp: store ----------------------------------------------------------------

/// Whether the file `info` describes may hold a secret: a regular file only its owner can use.
Status secretFileUsable(const struct stat& info, const std::string& file) {
  if (!S_ISREG(info.st_mode)) return makeError(ErrorCode::InvalidArgument, "the secret file " + file + " is not a regular file");
  if ((info.st_mode & 077) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
  return makeError(ErrorCode::InvalidArgument, "the secret file " + file + " is open to other users (mode " + mode +
                                                   "): a secret must be its owner's alone (chmod 600 " + file + ")");
}

/// Appends what `fd` holds to `bytes`, stopping once more than `limit` bytes are there; false on
/// a read error (errno says which).
bool readUpTo(int fd, size_t limit, std::string& bytes) {
  char buffer[4096];
  while (bytes.size() <= limit) {
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got == 0) return true;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return false;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return true;
}

// ---- tcp: ---------------------------------------------------------------------------------------

class TcpStore final : public RendezvousStore {
 public:
  TcpStore(transport::Socket socket, std::string address, std::chrono::milliseconds timeout)
      : socket_(std::move(socket)), address_(std::move(address)), timeout_(timeout) {}

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
    // Every request waits at most the timeout, its send and its reply together.
    const transport::WaitLimits limits{transport::deadlineAfter(std::chrono::duration<double>(timeout_).count())};
    if (Status sent = transport::sendAll(socket_, message.data(), message.size(), limits); !sent) {
      return broken("cannot send (" + sent.message() + ")");
    }
    unsigned char head[5];
    if (Status got = transport::recvAll(socket_, head, sizeof(head), limits); !got) {
      return broken("no reply (" + got.message() + ")");
    }
    Reply reply;
    reply.status = static_cast<char>(head[0]);
    const uint32_t length = getUint32(head + 1);
    if (length > kStoreMaxValue) return broken("a reply of " + std::to_string(length) + " bytes");
    reply.value.resize(length);
    if (length > 0 && !transport::recvAll(socket_, reply.value.data(), length, limits)) return broken("a reply cut short");
    return reply;
  }

  transport::Socket socket_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  bool dead_ = false;  ///< after a failed request the stream is out of step: no more requests
};

/// Says hello with `secret` on a new connection to the store at `address`: ok once admitted.
Status sayHello(const transport::Socket& socket, const std::string& address, const std::string& secret,
                const transport::WaitLimits& limits) {
  std::string hello(kStoreHelloMagic, sizeof(kStoreHelloMagic));
  putUint32(hello, static_cast<uint32_t>(secret.size()));
  hello += secret;
  unsigned char reply[5];
  Status said = transport::sendAll(socket, hello.data(), hello.size(), limits);
  if (said) said = transport::recvAll(socket, reply, sizeof(reply), limits);
  if (!said) {
    return makeError(ErrorCode::IoError,
                     "the rendezvous store at " + address + " did not admit this rank (" + said.message() + ")");
  }
  if (reply[0] == 'H' && getUint32(reply + 1) == 0) return {};
  if (reply[0] == 'X') {
    return makeError(ErrorCode::IoError, "the rendezvous store at " + address +
                                             " refused this rank's secret (not the file the store was given)");
  }
  return makeError(ErrorCode::IoError, "the rendezvous store at " + address + " answered the hello unexpectedly");
}

/// A connection to the TCP store at `address` ("host:port"), admitted with the secret in `secretFile`.
Expected<std::unique_ptr<RendezvousStore>> openTcpStore(const std::string& address, std::chrono::milliseconds timeout,
                                                        const std::string& secretFile) {
  Expected<transport::SocketAddress> resolved = transport::resolveHostPort(address);
  if (!resolved) return makeError(ErrorCode::NotFound, "cannot resolve " + address + ": " + resolved.status().message());
  if (secretFile.empty()) {
    return makeError(ErrorCode::InvalidArgument,
                     "a tuccl-adapt-store admits only ranks that hold its secret, and no secret file was given "
                     "(TUCCL_ADAPT_SECRET_FILE)");
  }
  Expected<std::string> secret = readRendezvousSecret(secretFile);
  if (!secret) return makeError(secret.status().code(), secret.status().message() + " (TUCCL_ADAPT_SECRET_FILE)");
  // The connection and the hello together wait at most the timeout.
  const transport::WaitLimits limits{transport::deadlineAfter(std::chrono::duration<double>(timeout).count())};
  Expected<transport::Socket> socket = transport::connectTo(*resolved, limits);
  if (!socket) return makeError(ErrorCode::IoError, socket.status().message());
  if (Status admitted = sayHello(*socket, address, *secret, limits); !admitted) return admitted;
  return std::unique_ptr<RendezvousStore>(std::make_unique<TcpStore>(std::move(*socket), address, timeout));
}

}  // namespace

void putUint32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t getUint32(const unsigned char* in) {
  return static_cast<uint32_t>(in[0]) | static_cast<uint32_t>(in[1]) << 8 | static_cast<uint32_t>(in[2]) << 16 |
         static_cast<uint32_t>(in[3]) << 24;
}

Expected<std::string> readRendezvousSecret(const std::string& file) {
  const std::string what = "the secret file " + file;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ioError("cannot read", what, errno);
  struct stat info {};
  Status usable = ::fstat(fd, &info) == 0 ? secretFileUsable(info, file) : ioError("cannot read", what, errno);
  std::string bytes;
  // Whitespace may follow the longest secret, but not more than a page of it.
  if (usable && !readUpTo(fd, kStoreMaxSecret + 4096, bytes)) usable = ioError("cannot read", what, errno);
  ::close(fd);
  if (!usable) return usable;
  bytes.erase(bytes.find_last_not_of(" \t\r\n") + 1);  // all whitespace: npos + 1 == 0
  if (bytes.empty()) return makeError(ErrorCode::InvalidArgument, what + " is empty");
  if (bytes.size() > kStoreMaxSecret) {
    return makeError(ErrorCode::InvalidArgument,
                     what + " holds more than " + std::to_string(kStoreMaxSecret) + " bytes, the longest secret");
  }
  return bytes;
}

Expected<std::unique_ptr<RendezvousStore>> openRendezvousStore(const std::string& spec,
                                                                std::chrono::milliseconds timeout,
                                                                const std::string& secretFile) {
  if (spec.rfind("dir:", 0) == 0 && spec.size() > 4) {
    const std::string directory = spec.substr(4);
    if (Status usable = checkDirectory(directory); !usable) return usable;
    return std::unique_ptr<RendezvousStore>(std::make_unique<DirectoryStore>(directory));
  }
  const size_t colon = spec.rfind(':');
  if (spec.rfind("tcp:", 0) == 0 && colon > 4 && colon + 1 < spec.size()) {
    return openTcpStore(spec.substr(4), timeout, secretFile);
  }
  return makeError(ErrorCode::InvalidArgument,
                   "expected dir:<path of a directory every rank can write> or tcp:<host>:<port> of a "
                   "tuccl-adapt-store");
}

}  // namespace tuccl
