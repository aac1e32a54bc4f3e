// The directory rendezvous of the tuner plugin's runtime phase (rendezvous.h).
#include "plugin/rendezvous.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace tuccl {
namespace {

constexpr const char* kOutcomeMagic = "tuccl-adapt-outcome 1\n";

std::string hex16(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

Status ioError(const std::string& what, const std::string& file, int error) {
  return makeError(ErrorCode::IoError, what + " " + file + ": " + std::strerror(error));
}

/// The whole content of `file`; nullopt-like NotFound when it does not exist.
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

/// Links a complete temporary copy of `bytes` to `file`: the name appears with all its bytes or
/// not at all. Whether this call created it (false: `file` existed already).
Expected<bool> linkComplete(const std::string& directory, const std::string& file, const std::string& bytes) {
  const std::string temporary = temporaryName(directory);
  if (Status written = writeNew(temporary, bytes); !written) return written;
  const int linked = ::link(temporary.c_str(), file.c_str());
  const int error = errno;
  ::unlink(temporary.c_str());
  if (linked == 0) return true;
  if (error == EEXIST) return false;
  return ioError("cannot create", file, error);
}

}  // namespace

std::string encodeOutcome(const RoundOutcome& outcome) {
  std::string bytes = kOutcomeMagic;
  if (!outcome.agreed) return bytes + "abandoned\n";
  bytes += "agreed " + std::to_string(outcome.summaries.size()) + "\n";
  for (const std::string& summary : outcome.summaries) {
    bytes += std::to_string(summary.size()) + "\n";
    bytes += summary;
  }
  return bytes;
}

RoundOutcome decodeOutcome(const std::string& bytes, int32_t nRanks) {
  const std::string magic = kOutcomeMagic;
  const std::string head = "agreed " + std::to_string(nRanks) + "\n";
  if (bytes.compare(0, magic.size(), magic) != 0 || bytes.compare(magic.size(), head.size(), head) != 0) return {};
  RoundOutcome outcome;
  size_t at = magic.size() + head.size();
  for (int32_t r = 0; r < nRanks; ++r) {
    const size_t newline = bytes.find('\n', at);
    if (newline == std::string::npos || newline == at || newline - at > 9) return {};
    size_t length = 0;
    for (size_t i = at; i < newline; ++i) {
      if (bytes[i] < '0' || bytes[i] > '9') return {};
      length = length * 10 + static_cast<size_t>(bytes[i] - '0');
    }
    if (bytes.size() - (newline + 1) < length) return {};
    outcome.summaries.push_back(bytes.substr(newline + 1, length));
    at = newline + 1 + length;
  }
  if (at != bytes.size()) return {};
  outcome.agreed = true;
  return outcome;
}

Status checkRendezvousDirectory(const std::string& directory) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) return ioError("cannot use", directory, errno);
  if (!S_ISDIR(info.st_mode)) return makeError(ErrorCode::InvalidArgument, directory + " is not a directory");
  if (::access(directory.c_str(), W_OK | X_OK) != 0) return ioError("cannot write in", directory, errno);
  return {};
}

DirectoryRendezvous::DirectoryRendezvous(std::string directory, uint64_t commId, int32_t nRanks,
                                         std::chrono::milliseconds timeout)
    : directory_(std::move(directory)), prefix_("tuccl-adapt-" + hex16(commId)), nRanks_(nRanks), timeout_(timeout) {}

std::string DirectoryRendezvous::path(const std::string& name) const { return directory_ + "/" + name; }

std::string DirectoryRendezvous::roundName(const std::string& key, uint64_t round) const {
  return prefix_ + "-" + key + "-r" + std::to_string(round);
}

bool DirectoryRendezvous::publish(const std::string& name, const std::string& bytes) const {
  // A name that exists already was published by a communicator with the same id (v2..v4 ids,
  // tuner_adapt.h): not ours to remove, and the round's outcome still decides alike for every reader.
  Expected<bool> created = linkComplete(directory_, path(name), bytes);
  return created && *created;
}

Expected<std::string> DirectoryRendezvous::createOrRead(const std::string& name, const std::string& bytes) const {
  Expected<bool> created = linkComplete(directory_, path(name), bytes);
  if (!created) return created.status();
  return readWhole(path(name));
}

Expected<RoundOutcome> DirectoryRendezvous::agree(const std::string& key, uint64_t round, int32_t rank,
                                                  const std::string& summary) {
  const std::string base = roundName(key, round);
  const std::string outcomeName = base + "-outcome";
  if (rank >= 0 && rank < nRanks_) {
    const std::string mine = base + "-rank" + std::to_string(rank);
    if (publish(mine, summary)) published_.push_back(mine);
  }
  auto decide = [&](const std::string& bytes) -> Expected<RoundOutcome> {
    for (const std::string& name : published_) ::unlink(path(name).c_str());
    published_.clear();
    return decodeOutcome(bytes, nRanks_);
  };
  std::vector<std::string> summaries(static_cast<size_t>(nRanks_));
  std::vector<bool> have(static_cast<size_t>(nRanks_), false);
  int32_t missing = nRanks_;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    Expected<std::string> outcome = readWhole(path(outcomeName));
    if (outcome) return decide(*outcome);
    if (outcome.status().code() != ErrorCode::NotFound) return outcome.status();
    for (int32_t r = 0; r < nRanks_ && missing > 0; ++r) {
      if (have[static_cast<size_t>(r)]) continue;
      Expected<std::string> bytes = readWhole(path(base + "-rank" + std::to_string(r)));
      if (!bytes) continue;
      summaries[static_cast<size_t>(r)] = std::move(*bytes);
      have[static_cast<size_t>(r)] = true;
      --missing;
    }
    if (missing == 0) {
      Expected<std::string> decided = createOrRead(outcomeName, encodeOutcome({true, summaries}));
      return decided ? decide(*decided) : Expected<RoundOutcome>(decided.status());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      Expected<std::string> decided = createOrRead(outcomeName, encodeOutcome({}));
      return decided ? decide(*decided) : Expected<RoundOutcome>(decided.status());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

void DirectoryRendezvous::finish(int32_t rank) {
  for (const std::string& name : published_) ::unlink(path(name).c_str());
  published_.clear();
  if (rank < 0 || rank >= nRanks_) return;
  publish(prefix_ + "-done-rank" + std::to_string(rank), "done\n");
  for (int32_t r = 0; r < nRanks_; ++r) {
    struct stat info {};
    if (::stat(path(prefix_ + "-done-rank" + std::to_string(r)).c_str(), &info) != 0) return;
  }
  // Every rank is done: nobody reads this communicator's files any more.
  std::error_code error;
  std::vector<std::string> ours;
  for (std::filesystem::directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix_.size() + 1, prefix_ + "-") == 0) ours.push_back(name);
  }
  for (const std::string& name : ours) ::unlink(path(name).c_str());
}

}  // namespace tuccl
