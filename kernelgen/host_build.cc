// Host build and load of generated kernels (host_build.h).
#include "kernelgen/host_build.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "kernelgen/device_headers.h"
#include "support/cache_files.h"
#include "support/hash.h"
#include "support/log.h"
#include "support/environment.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibraryName = "libtuccl_kernels.so";
constexpr const char* kChecksumName = "libtuccl_kernels.so.checksum";
// Part of every library's hash: a change of the cache directory's layout starts new entries
// instead of misreading old ones.
constexpr std::string_view kCacheLayout = "host-build 2: library, checksum, lock";

std::string quote(const std::string& s) {
  std::string quoted = "'";
  for (char c : s) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

// A compiler given in the environment is a command line ("ccache g++", "clang++ -stdlib=libc++"):
// its words, each quoted for the shell.
std::string commandFromWords(std::string_view text) {
  std::string command;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t end = i;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    if (end > i) {
      if (!command.empty()) command += ' ';
      command += quote(std::string(text.substr(i, end - i)));
    }
    i = end;
  }
  return command;
}

// The host C++ compiler, as a shell command: $TUCCL_HOST_CXX, else $CXX, else the compiler TuCCL
// was built with when it is still there, else `c++` from PATH.
std::string hostCompiler() {
  for (const char* variable : {"TUCCL_HOST_CXX", "CXX"}) {
    const std::optional<std::string> value = env::text(variable);
    if (!value) continue;
    if (std::string command = commandFromWords(*value); !command.empty()) return command;
  }
  std::error_code ec;
  if (fs::exists(TUCCL_KERNELGEN_HOST_CXX, ec)) return quote(TUCCL_KERNELGEN_HOST_CXX);
  return "c++";
}


// Runs a shell command; returns its exit status and captures stdout+stderr.
int runCommand(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  return pclose(pipe);
}

bool writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out.flush());
}

// The device headers are written into the build directory's `device/` (relative: the compiler
// runs there), so the library's directory holds everything it was built from.
constexpr const char* kFlags = "-std=c++20 -O1 -fPIC -shared -Wall -Wextra -Werror -I device";

// Everything the library is built from: the sources, the device headers, the compile command.
uint64_t libraryHash(const std::string& unit, const std::vector<GeneratedKernel>& kernels) {
  uint64_t hash = fnv1a64(unit);
  hash = fnv1a64(hostCompiler() + " " + kFlags, hash);
  hash = fnv1a64(kCacheLayout, hash);
  for (const GeneratedKernel& kernel : kernels) hash = fnv1a64(kernel.source, fnv1a64(kernel.fileName, hash));
  for (const EmbeddedFile& header : deviceHeaders()) hash = fnv1a64(header.text, fnv1a64(header.name, hash));
  return hash;
}

// Whether `dir` holds a library whose bytes match the checksum written beside it when it was built.
bool libraryIntact(const fs::path& dir) {
  Expected<std::string> checksum = readWholeFile(dir / kChecksumName);
  if (!checksum) return false;
  Expected<std::string> library = readWholeFile(dir / kLibraryName);
  return library && *checksum == contentChecksum(*library) + "\n";
}

Status failed(std::string message) { return makeError(ErrorCode::Internal, std::move(message)); }

// Compiles the library in `work` (the caller holds the entry's lock), records its checksum and
// moves the directory to `dir`.
Status compileLibrary(const fs::path& work, const fs::path& dir, const std::string& unit,
                      const std::vector<GeneratedKernel>& kernels) {
  std::error_code ec;
  fs::remove_all(work, ec);  // what a build that died left behind
  if (Status made = ensurePrivateDirectory(work); !made) return made;
  bool written = writeFile(work / "all_ranks.cc", unit);
  for (const GeneratedKernel& kernel : kernels) written = written && writeFile(work / kernel.fileName, kernel.source);
  if (!written) return failed("cannot write the generated sources to " + work.string());
  if (Status status = writeDeviceHeaders(work / "device"); !status) return failed(status.message());
  const std::string command = "cd " + quote(work.string()) + " && " + hostCompiler() + " " + kFlags + " -o " +
                              kLibraryName + " all_ranks.cc";
  std::string output;
  if (runCommand(command, output) != 0) {
    return failed("host build of the generated kernels failed (sources in " + work.string() + "):\n" + command + "\n" +
                  output);
  }
  Expected<std::string> library = readWholeFile(work / kLibraryName);
  if (!library || !writeFile(work / kChecksumName, contentChecksum(*library) + "\n")) {
    return failed("cannot record the checksum of " + (work / kLibraryName).string());
  }
  // Whatever the umask: the library is this user's alone (loading checks it).
  fs::permissions(work / kLibraryName, fs::perms::owner_all, ec);
  fs::permissions(work / kChecksumName, fs::perms::owner_read | fs::perms::owner_write, ec);
  fs::remove_all(dir, ec);
  fs::rename(work, dir, ec);
  if (ec) return failed("cannot move " + work.string() + " to " + dir.string() + ": " + ec.message());
  return {};
}

using Library = Expected<std::shared_ptr<HostKernels>>;

// dlopen and the symbols of every rank; only a library in an entry no other user can write.
Library loadLibrary(const fs::path& library, const std::vector<GeneratedKernel>& kernels) {
  if (Status trusted = checkPrivateEntry(library.parent_path()); !trusted) return trusted;
  if (Status trusted = checkPrivateEntry(library); !trusted) return trusted;
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return failed("cannot load " + library.string() + ": " + dlerror());
  auto result = std::make_shared<HostKernels>();
  result->libraryPath = library.string();
  result->setBlock = reinterpret_cast<HostKernels::SetBlock>(dlsym(handle, "tuccl_host_set_block"));
  for (const GeneratedKernel& kernel : kernels) {
    auto fn = reinterpret_cast<HostKernels::Kernel>(dlsym(handle, kernel.kernelName.c_str()));
    if (fn == nullptr || result->setBlock == nullptr) return failed(library.string() + " lacks " + kernel.kernelName);
    result->kernels.push_back(fn);
  }
  result->ranks = result->kernels;
  return result;
}

// The library of `name` under `root`, built by the first process to take the entry's lock and
// loaded by every later one. A library whose checksum fails, or that does not load, is rebuilt.
Library buildOrLoad(const fs::path& root, const std::string& name, const std::string& unit,
                    const std::vector<GeneratedKernel>& kernels) {
  std::error_code ec;
  if (Status made = ensurePrivateDirectory(root); !made) {
    return makeError(made.code(), "the kernel cache " + made.message());
  }
  Expected<FileLock> lock = FileLock::acquire(root / (name + ".lock"));
  if (!lock) return failed(lock.status().message());
  const fs::path dir = root / name;
  const fs::path work = root / (name + ".tmp");
  bool cached = fs::exists(dir, ec);
  if (cached && !libraryIntact(dir)) {
    logLine(LogLevel::Warn, kLogInit, -1, "kernelgen: " + dir.string() + ": the cached host library is damaged (checksum); rebuilding it");
    cached = false;
  }
  if (!cached) {
    if (Status built = compileLibrary(work, dir, unit, kernels); !built) return built;
  }
  Library result = loadLibrary(dir / kLibraryName, kernels);
  if (!result && cached && result.status().code() != ErrorCode::InvalidArgument) {  // untrusted: refused, not rebuilt
    logLine(LogLevel::Warn, kLogInit, -1, "kernelgen: " + result.status().message() + "; rebuilding it");
    cached = false;
    if (Status built = compileLibrary(work, dir, unit, kernels); !built) return built;
    result = loadLibrary(dir / kLibraryName, kernels);
  }
  if (result) (*result)->fromCache = cached;
  return result;
}

}  // namespace

std::filesystem::path kernelCacheRoot(const std::string& cacheDir) {
  if (!cacheDir.empty()) return cacheDir;
  if (std::optional<std::string> dir = env::text("TUCCL_KERNELGEN_CACHE")) return *dir;
  return fs::temp_directory_path() / ("tuccl-kernelgen-" + std::to_string(getuid()));
}

Expected<std::shared_ptr<const HostKernels>> buildHostKernels(const std::vector<GeneratedKernel>& kernels,
                                                              const std::string& cacheDir) {
  static std::mutex mutex;
  static std::map<uint64_t, std::shared_ptr<const HostKernels>> loaded;

  const std::string unit = hostTranslationUnit(kernels);
  const uint64_t hash = libraryHash(unit, kernels);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(hash); it != loaded.end()) {
    // Loaded by this process already: the same functions, and nothing was compiled for this call.
    auto again = std::make_shared<HostKernels>(*it->second);
    again->fromCache = true;
    return std::shared_ptr<const HostKernels>(std::move(again));
  }
  Library result = buildOrLoad(kernelCacheRoot(cacheDir), hashFileName(hash), unit, kernels);
  if (!result) return result.status();
  loaded.emplace(hash, *result);
  return std::shared_ptr<const HostKernels>(std::move(*result));
}

Expected<std::shared_ptr<const HostKernels>> buildHostKernels(const GeneratedKernels& kernels,
                                                              const std::string& cacheDir) {
  Expected<std::shared_ptr<const HostKernels>> library = buildHostKernels(kernels.kernels, cacheDir);
  if (!library) return library;
  // The library is shared by every plan of the same kernels; the tables are this plan's.
  auto result = std::make_shared<HostKernels>(**library);
  result->ranks.clear();
  for (const RankKernel& rank : kernels.ranks) {
    result->ranks.push_back(result->kernels[rank.kernel]);
    result->rankValues.push_back(rank.values);
  }
  return std::shared_ptr<const HostKernels>(std::move(result));
}

}  // namespace tuccl
