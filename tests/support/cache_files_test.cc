// The files of on-disk caches: sealed entries detect truncation and damage, atomic writes replace
// whole files, a FileLock excludes other processes; and the content hash they use.
#include "support/cache_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "support/hash.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

fs::path freshDirectory(const std::string& name) {
  const fs::path dir = fs::path(TUCCL_BINARY_DIR) / "cache_files_test" / (name + "." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Hash, Fnv1a64ContinuesAcrossParts) {
  EXPECT_EQ(fnv1a64(""), kFnv1a64OffsetBasis);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("world", fnv1a64("hello ")), fnv1a64("hello world"));
  EXPECT_EQ(formatHash(0xaf63dc4c8601ec8cull), "0xaf63dc4c8601ec8c");
  EXPECT_EQ(hashFileName(0x1f), "000000000000001f");
}

TEST(CacheFiles, SealedEntriesDetectTruncationAndDamage) {
  const std::string body = "identity line\n{\"plan\": 1}\n";
  const std::string sealed = sealCacheEntry(body);
  ASSERT_EQ(unsealCacheEntry(sealed), std::optional<std::string_view>(body));
  EXPECT_EQ(unsealCacheEntry(sealCacheEntry("")), std::optional<std::string_view>(""));
  for (size_t cut = 0; cut < sealed.size(); ++cut) {
    EXPECT_FALSE(unsealCacheEntry(std::string_view(sealed).substr(0, cut))) << cut;
  }
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string damaged = sealed;
    damaged[i] ^= 0x01;
    EXPECT_FALSE(unsealCacheEntry(damaged)) << i;
  }
  EXPECT_FALSE(unsealCacheEntry(body));
}

TEST(CacheFiles, AtomicWritesReplaceWholeFilesAndLeaveNoTemporaries) {
  const fs::path dir = freshDirectory("atomic");
  ASSERT_TRUE(writeFileAtomically(dir / "entry", "first version"));
  ASSERT_TRUE(writeFileAtomically(dir / "entry", "second"));
  Expected<std::string> read = readWholeFile(dir / "entry");
  ASSERT_TRUE(read);
  EXPECT_EQ(*read, "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  EXPECT_EQ(readWholeFile(dir / "missing").status().code(), ErrorCode::NotFound);
  Status unwritable = writeFileAtomically(dir / "entry" / "below-a-file", "x");
  EXPECT_EQ(unwritable.code(), ErrorCode::IoError);
  fs::remove_all(dir);
}

TEST(CacheFiles, AFileLockExcludesOtherProcessesUntilReleased) {
  const fs::path dir = freshDirectory("lock");
  const fs::path path = dir / "entry.lock";
  // In a child: 0 when the lock is free, 1 when another holder has it.
  auto probe = [&path] {
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = ::open(path.c_str(), O_RDWR);
      _exit(fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  {
    Expected<FileLock> lock = FileLock::acquire(path);
    ASSERT_TRUE(lock) << lock.status().toString();
    EXPECT_EQ(probe(), 1);
    FileLock moved = std::move(*lock);
    EXPECT_EQ(probe(), 1);
  }
  EXPECT_EQ(probe(), 0);
  EXPECT_FALSE(FileLock::acquire(dir / "missing-dir" / "entry.lock"));
  fs::remove_all(dir);
}

TEST(CacheFiles, PrivateDirectoriesAreThisUsersAloneAndOthersAreRefused) {
  const fs::path base = freshDirectory("private");
  const fs::path made = base / "a" / "b";
  ASSERT_TRUE(ensurePrivateDirectory(made).ok());
  EXPECT_EQ(fs::status(made).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(base / "a").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_TRUE(ensurePrivateDirectory(made).ok());  // there already, and ours
  auto refusal = [](const fs::path& path) {
    const Status status = ensurePrivateDirectory(path);
    EXPECT_EQ(status.code(), ErrorCode::InvalidArgument) << path;
    return status.message();
  };
  fs::permissions(made, fs::perms::group_write, fs::perm_options::add);
  EXPECT_NE(refusal(made).find(made.string() + ": others may write to it"), std::string::npos);
  fs::create_directory_symlink(base / "a", base / "link");
  EXPECT_NE(refusal(base / "link").find("is a symbolic link"), std::string::npos);
  std::ofstream(base / "file") << "x";
  EXPECT_NE(refusal(base / "file").find("is not a directory"), std::string::npos);
  fs::permissions(base / "file", fs::perms::others_write, fs::perm_options::add);
  EXPECT_NE(checkPrivateEntry(base / "file").message().find("others may write to it"), std::string::npos);
  fs::permissions(base / "file", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  EXPECT_TRUE(checkPrivateEntry(base / "file").ok());
  if (geteuid() == 0) {  // another user's directory: only root can make one here
    const fs::path theirs = base / "theirs";
    ASSERT_TRUE(ensurePrivateDirectory(theirs).ok());
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_NE(refusal(theirs).find("belongs to user 65534"), std::string::npos);
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace tuccl
