// NVRTC compilation (nvrtc.h).
#include "kernelgen/nvrtc.h"

#if defined(TUCCL_HAVE_CUDA)
#include <nvrtc.h>

#include "kernelgen/device_headers.h"
#endif

namespace tuccl {

#if !defined(TUCCL_HAVE_CUDA)

bool nvrtcAvailable() { return false; }

std::string nvrtcVersionText() { return {}; }

std::vector<std::string> nvrtcDefaultOptions(const NvrtcOptions&) { return {}; }

Expected<NvrtcOutput> compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions&) {
  return makeError(ErrorCode::Unsupported, kernel.fileName, {},
                   kernel.fileName + ": cannot compile for " + std::string(arch) + ": TuCCL was built without CUDA (NVRTC)");
}

#else

bool nvrtcAvailable() { return true; }

std::string nvrtcVersionText() {
  int major = 0;
  int minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtcDefaultOptions(const NvrtcOptions& options) {
  for (const std::string& extra : options.extraOptions) {
    if (extra.rfind("--Ofast-compile", 0) == 0 || extra.rfind("-Ofast-compile", 0) == 0 || extra.rfind("-Ofc", 0) == 0) {
      return {};
    }
  }
  int major = 0;
  int minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS || major * 100 + minor < 1208) return {};
  // NVVM's full -O3 pipeline crashes (SIGSEGV inside nvrtcCompileProgram, NVRTC 13.0) on some
  // large generated kernels, e.g. HM AllReduce's first node at 16 nodes x 8 GPUs; the kernels
  // spend their time waiting on flags and moving slices, and -Ofast-compile=min keeps the
  // optimisations that matter for that while compiling in about half the time.
  return {"--Ofast-compile=min"};
}

namespace {

// An error about `kernel`: one line saying what failed, then NVRTC's log when there is one.
Status nvrtcError(ErrorCode code, const GeneratedKernel& kernel, const std::string& line, const std::string& log = {}) {
  return makeError(code, kernel.fileName, {}, log.empty() ? line : line + "\n" + log);
}

std::vector<std::string> compileOptions(const std::string& gpuArch, const NvrtcOptions& options) {
  std::vector<std::string> strings = {"--gpu-architecture=" + gpuArch, "-std=c++17", "-DTUCCL_NVRTC=1"};
  if (options.dataType) strings.push_back("-DTUCCL_ONLY_DTYPE=" + std::to_string(deviceDataType(*options.dataType)));
  if (options.op) strings.push_back("-DTUCCL_ONLY_OP=" + std::to_string(deviceReduceOp(*options.op)));
  for (const std::string& option : nvrtcDefaultOptions(options)) strings.push_back(option);
  for (const std::string& extra : options.extraOptions) strings.push_back(extra);
  return strings;
}

std::string programLog(nvrtcProgram program) {
  size_t logSize = 0;
  if (nvrtcGetProgramLogSize(program, &logSize) != NVRTC_SUCCESS || logSize <= 1) return {};
  std::string log(logSize, '\0');
  nvrtcGetProgramLog(program, log.data());
  log.resize(logSize - 1);
  return log;
}

// The CUBIN and PTX of a compiled program; false when NVRTC gives either back empty.
bool programOutput(nvrtcProgram program, NvrtcOutput& output) {
  size_t size = 0;
  bool ok = nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS && size > 0;
  if (ok) {
    output.cubin.resize(size);
    ok = nvrtcGetCUBIN(program, output.cubin.data()) == NVRTC_SUCCESS;
  }
  size = 0;
  ok = ok && nvrtcGetPTXSize(program, &size) == NVRTC_SUCCESS && size > 1;
  if (ok) {
    output.ptx.assign(size, '\0');
    ok = nvrtcGetPTX(program, output.ptx.data()) == NVRTC_SUCCESS;
    output.ptx.resize(size - 1);
  }
  return ok;
}

// One NVRTC compilation for the real architecture `gpuArch` ("sm_90"): CUBIN and PTX. The device
// headers are handed to NVRTC in memory under their file names (they include one another by name).
Expected<NvrtcOutput> compileOnce(const GeneratedKernel& kernel, const std::string& gpuArch,
                                  const NvrtcOptions& options, NvrtcOutput output) {
  std::vector<std::string> headerTexts, headerNames;  // NUL-terminated copies
  for (const EmbeddedFile& header : deviceHeaders()) {
    headerTexts.emplace_back(header.text);
    headerNames.emplace_back(header.name);
  }
  std::vector<const char*> headers, includeNames;
  for (size_t i = 0; i < headerTexts.size(); ++i) {
    headers.push_back(headerTexts[i].c_str());
    includeNames.push_back(headerNames[i].c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult status = nvrtcCreateProgram(&program, kernel.source.c_str(), kernel.fileName.c_str(),
                                          static_cast<int>(headers.size()), headers.data(), includeNames.data());
  if (status != NVRTC_SUCCESS) {
    return nvrtcError(ErrorCode::Internal, kernel, kernel.fileName + ": nvrtcCreateProgram failed: " + nvrtcGetErrorString(status));
  }
  const std::vector<std::string> strings = compileOptions(gpuArch, options);
  std::vector<const char*> argv;
  for (const std::string& s : strings) argv.push_back(s.c_str());
  status = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  output.log = programLog(program);
  const bool produced = status == NVRTC_SUCCESS && programOutput(program, output);
  nvrtcDestroyProgram(&program);
  if (status != NVRTC_SUCCESS) {
    return nvrtcError(ErrorCode::Internal, kernel,
                      kernel.fileName + ": NVRTC compilation for " + gpuArch + " failed: " + nvrtcGetErrorString(status),
                      output.log);
  }
  if (!produced) {
    return nvrtcError(ErrorCode::Internal, kernel, kernel.fileName + ": NVRTC produced no CUBIN or PTX for " + gpuArch,
                      output.log);
  }
  return output;
}

}  // namespace

Expected<NvrtcOutput> compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions& options) {
  NvrtcOutput output;
  output.fileName = kernel.fileName;
  output.arch = std::string(arch);
  std::string number(arch);
  if (number.rfind("sm_", 0) == 0) number = number.substr(3);
  if (number.rfind("compute_", 0) == 0) number = number.substr(8);
  if (number.empty() || number.find_first_not_of("0123456789a") != std::string::npos) {
    return nvrtcError(ErrorCode::InvalidArgument, kernel,
                      kernel.fileName + ": unknown GPU architecture '" + output.arch + "' (expected e.g. sm_80, sm_90)");
  }
  return compileOnce(kernel, "sm_" + number, options, std::move(output));
}

#endif

}  // namespace tuccl
