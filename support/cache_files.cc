#include "support/cache_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "support/hash.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSealTag = "tuccl-cache-entry ";

std::string systemError(const std::string& what, const fs::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

// A name no other thread or process writes to: <name>.tmp.<pid>.<counter>.
fs::path temporaryNameFor(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  return path.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

}  // namespace

Expected<FileLock> FileLock::acquire(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return makeError(ErrorCode::IoError, systemError("cannot create the lock file", path));
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string message = systemError("cannot lock", path);
    ::close(fd);
    return makeError(ErrorCode::IoError, message);
  }
  return FileLock(fd);
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

std::string contentChecksum(std::string_view bytes) {
  return "fnv1a64 " + hashFileName(fnv1a64(bytes)) + " " + std::to_string(bytes.size());
}

Status writeFileAtomically(const fs::path& path, std::string_view bytes) {
  const fs::path temporary = temporaryNameFor(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return makeError(ErrorCode::IoError, "cannot write " + temporary.string());
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return makeError(ErrorCode::IoError, "cannot rename " + temporary.string() + " to " + path.string() + ": " +
                                             ec.message());
  }
  return {};
}

Expected<std::string> readWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    std::error_code ec;
    const bool exists = fs::exists(path, ec);
    return makeError(exists ? ErrorCode::IoError : ErrorCode::NotFound, "cannot open " + path.string());
  }
  const std::streamoff size = in.tellg();
  if (size < 0) return makeError(ErrorCode::IoError, "cannot read " + path.string());
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) return makeError(ErrorCode::IoError, "cannot read " + path.string());
  return bytes;
}

std::string sealCacheEntry(std::string_view body) {
  std::string sealed(kSealTag);
  sealed += contentChecksum(body);
  sealed += '\n';
  sealed += body;
  return sealed;
}

std::optional<std::string_view> unsealCacheEntry(std::string_view bytes) {
  if (bytes.substr(0, kSealTag.size()) != kSealTag) return std::nullopt;
  const size_t newline = bytes.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  const std::string_view checksum = bytes.substr(kSealTag.size(), newline - kSealTag.size());
  const std::string_view body = bytes.substr(newline + 1);
  if (checksum != contentChecksum(body)) return std::nullopt;
  return body;
}

}  // namespace tuccl
