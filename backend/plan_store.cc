#include "backend/plan_store.h"

#include <unistd.h>

namespace tuccl::backend {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDirectories[] = {"plans", "cubins", "locks", "host"};

// Whether a file can be created in `dir`: what "writable" means for a cache.
Status probeWritable(const fs::path& dir) {
  const fs::path probe = dir / ("write-probe." + std::to_string(getpid()));
  if (Status status = writeFileAtomically(probe, "probe"); !status) return status;
  std::error_code ec;
  fs::remove(probe, ec);
  return {};
}

}  // namespace

PlanStore PlanStore::open(const std::string& dir, std::string& problem) {
  PlanStore store;
  if (dir.empty()) return store;
  const fs::path root = fs::absolute(dir);
  // Host libraries and CUBINs are loaded from here: the directories are this user's alone.
  if (Status made = ensurePrivateDirectory(root); !made) {
    problem = made.message();
    return store;
  }
  for (const char* sub : kDirectories) {
    if (Status made = ensurePrivateDirectory(root / sub); !made) {
      problem = made.message();
      return store;
    }
  }
  if (Status status = probeWritable(root / "locks"); !status) {
    problem = status.message();
    return store;
  }
  store.root_ = root;
  return store;
}

std::string PlanStore::hostDirectory() const { return enabled() ? (root_ / "host").string() : std::string(); }

Expected<FileLock> PlanStore::lock(std::string_view key) const {
  return FileLock::acquire(root_ / "locks" / (std::string(key) + ".lock"));
}

PlanStore::Lookup PlanStore::read(std::string_view name, std::string_view identity) const {
  const fs::path path = root_ / name;
  Expected<std::string> bytes = readWholeFile(path);
  if (!bytes) return {};
  const std::optional<std::string_view> body = unsealCacheEntry(*bytes);
  if (!body) {
    std::error_code ec;
    fs::remove(path, ec);
    return {State::Damaged, {}};
  }
  const size_t newline = body->find('\n');
  if (newline == std::string_view::npos || body->substr(0, newline) != identity) return {};
  return {State::Found, std::string(body->substr(newline + 1))};
}

Status PlanStore::write(std::string_view name, std::string_view identity, std::string_view payload) const {
  std::string body(identity);
  body += '\n';
  body += payload;
  return writeFileAtomically(root_ / name, sealCacheEntry(body));
}

}  // namespace tuccl::backend
