// The files of TuCCL's on-disk caches (plans, host kernel libraries, CUBINs), safe when several
// processes share one cache directory and when a file was cut short or damaged:
//   - FileLock: an exclusive per-entry lock (flock), so concurrent processes build an entry once;
//   - writeFileAtomically: a temporary name in the same directory, then rename(2), so a reader
//     sees the old file or the whole new one, never half of one;
//   - sealCacheEntry / unsealCacheEntry: a first line carrying the checksum of the rest, so a
//     truncated or corrupted entry is recognised on load (and rebuilt by the caller).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "support/status.h"

namespace tuccl {

/// A cache directory only this user controls: created with mode 0700 (and its missing parents
/// likewise) when it does not exist; refused when it is a symbolic link or not a directory, when
/// another user owns it, or when its group or others may write in it — whatever lies there could be
/// another user's code. InvalidArgument naming the path and the reason.
Status ensurePrivateDirectory(const std::filesystem::path& dir);
/// Whether a cache entry (a file or a directory) may be trusted: not a symbolic link, owned by this
/// user, writable by no one else. InvalidArgument naming the path and the reason.
Status checkPrivateEntry(const std::filesystem::path& path);

/// An exclusive advisory lock on a lock file, held until destruction (or move-from).
class FileLock {
 public:
  /// Creates `path` if missing and blocks until the lock is ours; IoError when the file cannot be
  /// created or locked (an unwritable directory).
  static Expected<FileLock> acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// "fnv1a64 <16 hex digits> <bytes>": what identifies the content of a cached file.
std::string contentChecksum(std::string_view bytes);

/// Writes `bytes` to `path` through a unique temporary file beside it and a rename.
Status writeFileAtomically(const std::filesystem::path& path, std::string_view bytes);

/// The bytes of a file; NotFound when it does not exist, IoError when it cannot be read.
Expected<std::string> readWholeFile(const std::filesystem::path& path);

/// A cache entry's file content: "tuccl-cache-entry <contentChecksum(body)>\n" then the body.
std::string sealCacheEntry(std::string_view body);

/// The body of a sealed entry; nullopt when the first line is missing or malformed, or the body's
/// checksum differs from it (a truncated or damaged file).
std::optional<std::string_view> unsealCacheEntry(std::string_view bytes);

}  // namespace tuccl
