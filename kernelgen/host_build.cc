// Host build and load of generated kernels (host_build.h).
#include "kernelgen/host_build.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "kernelgen/device_headers.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

uint64_t fnv1a(std::string_view text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

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
    const char* value = std::getenv(variable);
    if (value == nullptr) continue;
    if (std::string command = commandFromWords(value); !command.empty()) return command;
  }
  std::error_code ec;
  if (fs::exists(TUCCL_KERNELGEN_HOST_CXX, ec)) return quote(TUCCL_KERNELGEN_HOST_CXX);
  return "c++";
}

fs::path cacheRoot() {
  if (const char* dir = std::getenv("TUCCL_KERNELGEN_CACHE"); dir != nullptr && *dir != '\0') return dir;
  return fs::temp_directory_path() / ("tuccl-kernelgen-" + std::to_string(getuid()));
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

}  // namespace

std::shared_ptr<const HostKernels> buildHostKernels(const std::vector<GeneratedKernel>& kernels, std::string& error) {
  static std::mutex mutex;
  static std::map<uint64_t, std::shared_ptr<const HostKernels>> loaded;
  static std::atomic<int> counter{0};

  const std::string unit = hostTranslationUnit(kernels);
  // The device headers are written into the build directory's `device/` (relative: the compiler
  // runs there), so the library's directory holds everything it was built from.
  const std::string flags = "-std=c++20 -O1 -fPIC -shared -Wall -Wextra -Werror -I device";
  uint64_t hash = fnv1a(unit);
  hash = fnv1a(hostCompiler() + " " + flags, hash);
  for (const GeneratedKernel& kernel : kernels) hash = fnv1a(kernel.source, fnv1a(kernel.fileName, hash));
  for (const EmbeddedFile& header : deviceHeaders()) hash = fnv1a(header.text, fnv1a(header.name, hash));
  std::error_code ec;

  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(hash); it != loaded.end()) return it->second;

  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(hash));
  const fs::path dir = cacheRoot() / name;
  const fs::path library = dir / "libtuccl_kernels.so";
  auto result = std::make_shared<HostKernels>();
  result->fromCache = fs::exists(library, ec);
  if (!result->fromCache) {
    // Build in a private directory, then move it into place (other processes may race us).
    const fs::path work = cacheRoot() / (std::string(name) + ".tmp." + std::to_string(getpid()) + "." +
                                         std::to_string(counter++));
    fs::create_directories(work, ec);
    if (ec) {
      error = "cannot create " + work.string() + ": " + ec.message();
      return nullptr;
    }
    bool written = writeFile(work / "all_ranks.cc", unit);
    for (const GeneratedKernel& kernel : kernels) written = written && writeFile(work / kernel.fileName, kernel.source);
    if (!written) {
      error = "cannot write the generated sources to " + work.string();
      return nullptr;
    }
    if (Status status = writeDeviceHeaders(work / "device"); !status) {
      error = status.message();
      return nullptr;
    }
    const std::string command = "cd " + quote(work.string()) + " && " + hostCompiler() + " " + flags +
                                " -o libtuccl_kernels.so all_ranks.cc";
    std::string output;
    const int status = runCommand(command, output);
    if (status != 0) {
      error = "host build of the generated kernels failed (sources in " + work.string() + "):\n" + command + "\n" + output;
      return nullptr;
    }
    fs::rename(work, dir, ec);
    if (ec) fs::remove_all(work, ec);  // another process was first; use its library
  }
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    error = "cannot load " + library.string() + ": " + dlerror();
    return nullptr;
  }
  result->libraryPath = library.string();
  result->setBlock = reinterpret_cast<HostKernels::SetBlock>(dlsym(handle, "tuccl_host_set_block"));
  for (const GeneratedKernel& kernel : kernels) {
    auto fn = reinterpret_cast<HostKernels::Kernel>(dlsym(handle, kernel.kernelName.c_str()));
    if (fn == nullptr || result->setBlock == nullptr) {
      error = library.string() + " lacks " + kernel.kernelName;
      return nullptr;
    }
    result->ranks.push_back(fn);
  }
  loaded.emplace(hash, result);
  return result;
}

}  // namespace tuccl
