// The disk half of the plan cache (plan_cache.h): entries named by content hashes in the cache
// directory, so processes and later runs share compiled plans.
//
// In:  a cache directory, and entries to read or write: a key (the hash of everything the entry
//      was built from), the identity text that hash was taken of, and the bytes.
// Out: the bytes of an intact entry; Missing or Damaged otherwise.
//
// Layout: <dir>/plans/<key>.plan (plan JSON), <dir>/cubins/<key>-<arch>.cubins (one CUBIN per
// rank), <dir>/locks/<key>.lock, <dir>/host/ (buildHostKernels' cache). Every entry is a sealed
// cache file (support/cache_files.h: checksum, atomic rename) whose body starts with its identity
// line, so a damaged file is detected and removed, and a hash collision is never mistaken for a
// hit. A directory that cannot be written leaves the store disabled: memory only.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "support/cache_files.h"
#include "support/status.h"

namespace tuccl::backend {

class PlanStore {
 public:
  /// Disabled.
  PlanStore() = default;
  /// Opens (creating) the store under `dir`; disabled when `dir` is empty or cannot be written,
  /// with the reason in `problem`.
  static PlanStore open(const std::string& dir, std::string& problem);

  bool enabled() const { return !root_.empty(); }
  /// The host build's cache directory (buildHostKernels); empty when disabled.
  std::string hostDirectory() const;

  /// The entry lock of `key`, held while the entry is looked up and built, so that concurrent
  /// processes build it once.
  Expected<FileLock> lock(std::string_view key) const;

  enum class State { Missing, Found, Damaged };
  struct Lookup {
    State state = State::Missing;
    std::string payload;
  };
  /// Reads `name` ("plans/<key>.plan"): Found with the payload when the seal and the identity
  /// match; Damaged (the file is removed) when the checksum fails; Missing otherwise.
  Lookup read(std::string_view name, std::string_view identity) const;
  /// Writes `name` atomically: the identity line, then the payload, sealed.
  Status write(std::string_view name, std::string_view identity, std::string_view payload) const;

 private:
  std::filesystem::path root_;
};

}  // namespace tuccl::backend
