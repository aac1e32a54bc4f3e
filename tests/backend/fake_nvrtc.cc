// The fake of NVRTC (libtuccl-fake-nvrtc.so) that pairs with the fake CUDA driver: preloaded
// (LD_PRELOAD) into a process whose TUCCL_CUDA_DRIVER is the fake driver, it takes NVRTC's entry
// points, compiles each program with the host C++ compiler against the device headers' host shim
// (as kernelgen's host build does: docs/kernels.md), and hands back as the "CUBIN" a host image
// (fake_cuda_driver.h: hostCubin) naming the library built, which the fake driver runs when the
// CUDA device launches it. The image carries the library's bytes (hostLibraryImage), so it stays
// valid after the cache is cleaned, wherever libtuccl's plan store keeps it. So libtuccl's CUDA device runs its own code path end to end on a
// machine without a GPU, in every rank process, with the kernels it generated.
//
// Options: -D definitions are passed to the compiler (TUCCL_ONLY_DTYPE and the like), with
// TUCCL_PEER_HOST_KERNEL (the point-to-point kernel's host build, kernelgen/device/peer.h); everything
// else (architecture, standard, optimisation levels, TUCCL_NVRTC) is NVRTC's and dropped. The
// version reported is 0.0, so kernelgen's caches never mix these images with real CUBINs.
// Libraries are kept in $TUCCL_KERNELGEN_CACHE/fake-nvrtc, else /tmp/tuccl-fake-nvrtc-<uid>, one
// directory per program (a hash of its source, headers, options and compiler), built once under a
// lock shared by every process. The compiler: $TUCCL_HOST_CXX, else $CXX, else the one this
// library was built with.
#include <fcntl.h>
#include <nvrtc.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "fake_cuda_driver.h"

namespace {

namespace fs = std::filesystem;

struct Program {
  std::string source;
  std::string name;
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, text)
  std::vector<char> image;
  std::string ptx;
  std::string log;
};

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string hostCompiler() {
  for (const char* name : {"TUCCL_HOST_CXX", "CXX"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  return quoted(TUCCL_FAKE_NVRTC_CXX);
}

fs::path cacheRoot() {
  if (const char* dir = std::getenv("TUCCL_KERNELGEN_CACHE"); dir != nullptr && *dir != '\0') {
    return fs::path(dir) / "fake-nvrtc";
  }
  return fs::temp_directory_path() / ("tuccl-fake-nvrtc-" + std::to_string(getuid()));
}

bool writeText(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out.flush());
}

// Runs `command`, its output (stdout and stderr) into `output`; the exit status.
int run(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  return pclose(pipe);
}

// The library of `program` with `defines`, built unless a complete one is there; its path.
nvrtcResult build(Program& program, const std::vector<std::string>& defines, std::string& library) {
  const std::string compiler = hostCompiler();
  const std::string flags = "-std=c++20 -O1 -fPIC -shared -Wall -I device";
  uint64_t hash = fnv1a(compiler + " " + flags);
  hash = fnv1a(program.name + "\n" + program.source, hash);
  for (const auto& [name, text] : program.headers) hash = fnv1a(name + "\n" + text, hash);
  for (const std::string& define : defines) hash = fnv1a(define, hash);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  const fs::path root = cacheRoot();
  std::error_code ec;
  fs::create_directories(root, ec);
  fs::permissions(root, fs::perms::owner_all, ec);
  const fs::path dir = root / hex;
  library = (dir / "libkernel.so").string();
  const int lockFd = open((root / (std::string(hex) + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lockFd < 0 || flock(lockFd, LOCK_EX) != 0) {
    program.log = "fake NVRTC: cannot lock " + root.string() + ": " + std::strerror(errno);
    if (lockFd >= 0) close(lockFd);
    return NVRTC_ERROR_INTERNAL_ERROR;
  }
  nvrtcResult result = NVRTC_SUCCESS;
  if (!fs::exists(dir / "complete", ec)) {
    const fs::path work = root / (std::string(hex) + ".tmp");
    fs::remove_all(work, ec);
    bool written = writeText(work / program.name, program.source);
    for (const auto& [name, text] : program.headers) written = written && writeText(work / "device" / name, text);
    const std::string unit = "#include \"" + program.name +
                             "\"\nextern \"C\" __attribute__((visibility(\"default\"))) void "
                             "tuccl_host_set_block(unsigned block) { tuccl::dev::host::blockIdx.x = block; }\n";
    written = written && writeText(work / "unit.cc", unit);
    std::string command = "cd " + quoted(work.string()) + " && " + compiler + " " + flags;
    for (const std::string& define : defines) command += " " + quoted(define);
    command += " -o libkernel.so unit.cc";
    if (!written) {
      program.log = "fake NVRTC: cannot write the sources under " + work.string();
      result = NVRTC_ERROR_INTERNAL_ERROR;
    } else if (run(command, program.log) != 0) {
      program.log = "fake NVRTC: " + command + "\n" + program.log;
      result = NVRTC_ERROR_COMPILATION;
    } else {
      writeText(work / "complete", "");
      fs::remove_all(dir, ec);
      fs::rename(work, dir, ec);
      if (ec) {
        program.log = "fake NVRTC: cannot move " + work.string() + " to " + dir.string() + ": " + ec.message();
        result = NVRTC_ERROR_INTERNAL_ERROR;
      }
    }
  }
  flock(lockFd, LOCK_UN);
  close(lockFd);
  return result;
}

Program* programOf(nvrtcProgram handle) { return reinterpret_cast<Program*>(handle); }

}  // namespace

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult result) {
  switch (result) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR_INTERNAL_ERROR";
  }
}

nvrtcResult nvrtcVersion(int* major, int* minor) {
  if (major == nullptr || minor == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *major = 0;
  *minor = 0;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* handle, const char* source, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames) {
  if (handle == nullptr || source == nullptr || numHeaders < 0 ||
      (numHeaders > 0 && (headers == nullptr || includeNames == nullptr))) {
    return NVRTC_ERROR_INVALID_INPUT;
  }
  auto* program = new Program;
  program->source = source;
  program->name = name != nullptr && *name != '\0' ? name : "default_program";
  for (int i = 0; i < numHeaders; ++i) program->headers.emplace_back(includeNames[i], headers[i]);
  *handle = reinterpret_cast<nvrtcProgram>(program);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* handle) {
  if (handle == nullptr || *handle == nullptr) return NVRTC_ERROR_INVALID_PROGRAM;
  delete programOf(*handle);
  *handle = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram handle, int numOptions, const char* const* options) {
  Program* program = programOf(handle);
  if (program == nullptr) return NVRTC_ERROR_INVALID_PROGRAM;
  if (numOptions < 0 || (numOptions > 0 && options == nullptr)) return NVRTC_ERROR_INVALID_INPUT;
  // peer.h defines its kernel for NVRTC (TUCCL_CUDA_COMPILER) or, in a host build, on request.
  std::vector<std::string> defines = {"-DTUCCL_PEER_HOST_KERNEL=1"};
  for (int i = 0; i < numOptions; ++i) {
    const std::string option = options[i];
    if (option.rfind("-D", 0) == 0 && option.rfind("-DTUCCL_NVRTC", 0) != 0) defines.push_back(option);
  }
  std::string library;
  program->log.clear();
  const nvrtcResult result = build(*program, defines, library);
  if (result != NVRTC_SUCCESS) return result;
  std::ifstream in(library, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) {
    program->log = "fake NVRTC: cannot read " + library;
    return NVRTC_ERROR_INTERNAL_ERROR;
  }
  program->image = tuccl::fakecuda::hostLibraryImage(bytes);
  program->ptx = "// fake NVRTC: the host build " + library + "\n";
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram handle, size_t* size) {
  if (programOf(handle) == nullptr || size == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *size = programOf(handle)->log.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram handle, char* log) {
  if (programOf(handle) == nullptr || log == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(log, programOf(handle)->log.c_str(), programOf(handle)->log.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram handle, size_t* size) {
  if (programOf(handle) == nullptr || size == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *size = programOf(handle)->image.size();
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram handle, char* cubin) {
  if (programOf(handle) == nullptr || cubin == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(cubin, programOf(handle)->image.data(), programOf(handle)->image.size());
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram handle, size_t* size) {
  if (programOf(handle) == nullptr || size == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  *size = programOf(handle)->ptx.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram handle, char* ptx) {
  if (programOf(handle) == nullptr || ptx == nullptr) return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(ptx, programOf(handle)->ptx.c_str(), programOf(handle)->ptx.size() + 1);
  return NVRTC_SUCCESS;
}

}  // extern "C"
