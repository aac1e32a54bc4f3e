// The host build takes its compiler from $TUCCL_HOST_CXX, else $CXX (a command line, split into
// words), and builds from the embedded device headers, which it leaves beside the generated
// sources in the cache directory. Processes sharing a cache build a library once, and a damaged
// library is rebuilt.
#include "kernelgen/host_build.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "kernelgen/device_headers.h"
#include "support/cache_files.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets, for nullopt) an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A fresh cache per test, so every test really runs the compiler.
fs::path freshCache(const std::string& test) {
  const fs::path dir = fs::path(TUCCL_BINARY_DIR) / "host_build_test" / (test + "." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// One rank whose kernel compiles only when the compiler got -DTUCCL_TEST_MARK=<mark>.
std::vector<GeneratedKernel> markedKernel(int mark) {
  GeneratedKernel kernel;
  kernel.fileName = "rank0.cu";
  kernel.kernelName = "tuccl_rank0";
  kernel.source = "#include \"primitives.h\"\n#if TUCCL_TEST_MARK != " + std::to_string(mark) +
                  "\n#error \"the compiler's own words were not passed\"\n#endif\n"
                  "TUCCL_KERNEL tuccl_rank0(tuccl::dev::KernelArgs) {}\n";
  return {kernel};
}

TEST(HostBuild, UsesTucclHostCxxFirstAndKeepsTheDeviceHeadersInTheCache) {
  const fs::path cache = freshCache("host_cxx");
  ScopedEnv cacheEnv("TUCCL_KERNELGEN_CACHE", cache.string());
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=1");
  ScopedEnv cxx("CXX", "/nonexistent/compiler");
  auto built = buildHostKernels(markedKernel(1));
  ASSERT_TRUE(built.ok()) << built.status().message();
  const auto& kernels = *built;
  EXPECT_FALSE(kernels->fromCache);
  ASSERT_EQ(kernels->ranks.size(), 1u);
  const fs::path dir = fs::path(kernels->libraryPath).parent_path();
  EXPECT_EQ(dir.parent_path(), cache);
  for (const EmbeddedFile& header : deviceHeaders()) EXPECT_TRUE(fs::exists(dir / "device" / header.name)) << header.name;
  fs::remove_all(cache);
}

TEST(HostBuild, FallsBackToCxxSplitIntoWords) {
  const fs::path cache = freshCache("cxx");
  ScopedEnv cacheEnv("TUCCL_KERNELGEN_CACHE", cache.string());
  ScopedEnv hostCxx("TUCCL_HOST_CXX", std::nullopt);
  ScopedEnv cxx("CXX", "  c++   -DTUCCL_TEST_MARK=2 ");
  auto built = buildHostKernels(markedKernel(2));
  EXPECT_TRUE(built.ok()) << built.status().message();
  fs::remove_all(cache);
}

TEST(HostBuild, NamesTheCompilerThatFailed) {
  const fs::path cache = freshCache("missing");
  ScopedEnv cacheEnv("TUCCL_KERNELGEN_CACHE", cache.string());
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "/nonexistent/tuccl-test-c++");
  auto built = buildHostKernels(markedKernel(3));
  EXPECT_FALSE(built.ok());
  const std::string error = built.status().message();
  EXPECT_NE(error.find("/nonexistent/tuccl-test-c++"), std::string::npos) << error;
  fs::remove_all(cache);
}

// Runs `body` in a child process; its exit status (-1 when it did not exit normally).
template <typename Body>
pid_t spawn(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int exitStatus(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// In a child: 10 when the library was found in the cache, 11 when the child compiled it, 1 on error.
int buildInChild(int mark, const fs::path& cache) {
  auto kernels = buildHostKernels(markedKernel(mark), cache.string());
  if (!kernels || (*kernels)->ranks.size() != 1) return 1;
  return (*kernels)->fromCache ? 10 : 11;
}

TEST(HostBuild, TakesTheCacheDirectoryOfTheCaller) {
  const fs::path cache = freshCache("caller_dir");
  ScopedEnv cacheEnv("TUCCL_KERNELGEN_CACHE", "/nonexistent/tuccl-kernel-cache");
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=4");
  auto built = buildHostKernels(markedKernel(4), cache.string());
  ASSERT_TRUE(built.ok()) << built.status().message();
  const auto& kernels = *built;
  EXPECT_EQ(fs::path(kernels->libraryPath).parent_path().parent_path(), cache);
  // The same kernels again in this process: loaded already, nothing compiled.
  auto builtAgain = buildHostKernels(markedKernel(4), cache.string());
  ASSERT_TRUE(builtAgain.ok()) << builtAgain.status().message();
  const auto& again = *builtAgain;
  EXPECT_TRUE(again->fromCache);
  EXPECT_EQ(again->ranks, kernels->ranks);
  fs::remove_all(cache);
}

TEST(HostBuild, ConcurrentProcessesBuildALibraryOnce) {
  const fs::path cache = freshCache("concurrent");
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=5");
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) children.push_back(spawn([&] { return buildInChild(5, cache); }));
  int compiled = 0;
  for (pid_t child : children) {
    const int status = exitStatus(child);
    EXPECT_TRUE(status == 10 || status == 11) << status;
    compiled += status == 11 ? 1 : 0;
  }
  EXPECT_EQ(compiled, 1);
  fs::remove_all(cache);
}

TEST(HostBuild, RebuildsATruncatedLibrary) {
  const fs::path cache = freshCache("truncated");
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=6");
  // Built by another process, so this one has not loaded it.
  ASSERT_EQ(exitStatus(spawn([&] { return buildInChild(6, cache); })), 11);
  fs::path library;
  for (const auto& entry : fs::recursive_directory_iterator(cache)) {
    if (entry.path().filename() == "libtuccl_kernels.so") library = entry.path();
  }
  ASSERT_FALSE(library.empty());
  fs::resize_file(library, fs::file_size(library) / 2);
  auto built = buildHostKernels(markedKernel(6), cache.string());
  ASSERT_TRUE(built.ok()) << built.status().message();
  const auto& kernels = *built;
  EXPECT_FALSE(kernels->fromCache);  // rebuilt
  EXPECT_EQ(kernels->libraryPath, library.string());
  EXPECT_GT(fs::file_size(library), 0u);
  // A later process finds the rebuilt library intact.
  EXPECT_EQ(exitStatus(spawn([&] { return buildInChild(6, cache); })), 10);
  fs::remove_all(cache);
}

TEST(HostBuild, RebuildsALibraryThatDoesNotLoad) {
  const fs::path cache = freshCache("unloadable");
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=7");
  ASSERT_EQ(exitStatus(spawn([&] { return buildInChild(7, cache); })), 11);
  fs::path library;
  for (const auto& entry : fs::recursive_directory_iterator(cache)) {
    if (entry.path().filename() == "libtuccl_kernels.so") library = entry.path();
  }
  ASSERT_FALSE(library.empty());
  // Not a shared object, with a checksum that matches it: only dlopen can tell.
  const std::string garbage = "not an ELF file";
  std::ofstream(library, std::ios::binary | std::ios::trunc) << garbage;
  std::ofstream(library.string() + ".checksum", std::ios::binary | std::ios::trunc) << contentChecksum(garbage) << "\n";
  auto built = buildHostKernels(markedKernel(7), cache.string());
  ASSERT_TRUE(built.ok()) << built.status().message();
  const auto& kernels = *built;
  EXPECT_FALSE(kernels->fromCache);
  EXPECT_GT(fs::file_size(library), garbage.size());
  fs::remove_all(cache);
}

// A cache others can write could hold their code: nothing is built or loaded there.
TEST(HostBuild, RefusesACacheOthersCanWrite) {
  const fs::path cache = freshCache("shared_cache");
  fs::permissions(cache, fs::perms::all);  // 0777
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=8");
  auto built = buildHostKernels(markedKernel(8), cache.string());
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(built.status().message().find(cache.string() + ": others may write to it"), std::string::npos)
      << built.status().message();
  EXPECT_TRUE(fs::is_empty(cache));
  fs::remove_all(cache);
}

// An entry someone else could have replaced is refused, not loaded (and not silently rebuilt).
TEST(HostBuild, RefusesToLoadALibraryOthersCanWrite) {
  const fs::path cache = freshCache("shared_entry");
  ScopedEnv hostCxx("TUCCL_HOST_CXX", "c++ -DTUCCL_TEST_MARK=9");
  ASSERT_EQ(exitStatus(spawn([&] { return buildInChild(9, cache); })), 11);
  fs::path library;
  for (const auto& entry : fs::recursive_directory_iterator(cache)) {
    if (entry.path().filename() == "libtuccl_kernels.so") library = entry.path();
  }
  ASSERT_FALSE(library.empty());
  EXPECT_EQ(fs::status(library).permissions() & (fs::perms::group_write | fs::perms::others_write), fs::perms::none);
  fs::permissions(library, fs::perms::others_write, fs::perm_options::add);
  auto built = buildHostKernels(markedKernel(9), cache.string());
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find(library.string() + ": others may write to it"), std::string::npos)
      << built.status().message();
  fs::remove_all(cache);
}

}  // namespace
}  // namespace tuccl
