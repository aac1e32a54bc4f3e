#include "support/cache_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "support/hash.h"

namespace tuccl {

namespace {

Status untrusted(const std::filesystem::path& path, const std::string& why) {
  return makeError(ErrorCode::InvalidArgument, path.string() + ": " + why + "; TuCCL loads code from its caches "
                                                "only where no other user can write (set TUCCL_CACHE_DIR or "
                                                "TUCCL_KERNELGEN_CACHE to a directory of your own)");
}

}  // namespace

Status checkPrivateEntry(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    return makeError(ErrorCode::IoError, "cannot inspect " + path.string() + ": " + std::strerror(errno));
  }
  if (S_ISLNK(info.st_mode)) return untrusted(path, "is a symbolic link");
  if (info.st_uid != ::geteuid()) return untrusted(path, "belongs to user " + std::to_string(info.st_uid));
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return untrusted(path, "others may write to it");
  return {};
}

Status ensurePrivateDirectory(const std::filesystem::path& dir) {
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0) {
    if (errno != ENOENT) return makeError(ErrorCode::IoError, "cannot inspect " + dir.string() + ": " + std::strerror(errno));
    if (dir.has_parent_path() && dir.parent_path() != dir) {
      std::error_code ec;
      if (!std::filesystem::exists(dir.parent_path(), ec)) {
        if (Status parent = ensurePrivateDirectory(dir.parent_path()); !parent) return parent;
      }
    }
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return makeError(ErrorCode::IoError, "cannot create " + dir.string() + ": " + std::strerror(errno));
    }
    if (::lstat(dir.c_str(), &info) != 0) {
      return makeError(ErrorCode::IoError, "cannot inspect " + dir.string() + ": " + std::strerror(errno));
    }
  }
  if (!S_ISLNK(info.st_mode) && !S_ISDIR(info.st_mode)) return untrusted(dir, "is not a directory");
  return checkPrivateEntry(dir);
}
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
