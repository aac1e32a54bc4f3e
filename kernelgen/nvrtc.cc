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

NvrtcResult compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions&) {
  NvrtcResult result;
  result.fileName = kernel.fileName;
  result.arch = std::string(arch);
  result.error = kernel.fileName + ": cannot compile for " + result.arch + ": TuCCL was built without CUDA (NVRTC)";
  return result;
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

// One NVRTC compilation for the real architecture `gpuArch` ("sm_90"): CUBIN and PTX. The device
// headers are handed to NVRTC in memory under their file names (they include one another by name).
bool compileOnce(const GeneratedKernel& kernel, const std::string& gpuArch, const NvrtcOptions& options,
                 NvrtcResult& result) {
  std::vector<std::string> headerTexts, headerNames;
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
    result.error = kernel.fileName + ": nvrtcCreateProgram failed: " + nvrtcGetErrorString(status);
    return false;
  }
  std::vector<std::string> strings = {"--gpu-architecture=" + gpuArch, "-std=c++17", "-DTUCCL_NVRTC=1"};
  if (options.dataType) strings.push_back("-DTUCCL_ONLY_DTYPE=" + std::to_string(deviceDataType(*options.dataType)));
  if (options.op) strings.push_back("-DTUCCL_ONLY_OP=" + std::to_string(deviceReduceOp(*options.op)));
  for (const std::string& option : nvrtcDefaultOptions(options)) strings.push_back(option);
  for (const std::string& extra : options.extraOptions) strings.push_back(extra);
  std::vector<const char*> argv;
  for (const std::string& s : strings) argv.push_back(s.c_str());
  status = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  size_t logSize = 0;
  if (nvrtcGetProgramLogSize(program, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    std::string log(logSize, '\0');
    nvrtcGetProgramLog(program, log.data());
    log.resize(logSize - 1);
    result.log += log;
  }
  bool ok = status == NVRTC_SUCCESS;
  if (!ok) {
    result.error = kernel.fileName + ": NVRTC compilation for " + gpuArch + " failed: " + nvrtcGetErrorString(status);
  } else {
    size_t size = 0;
    ok = nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS && size > 0;
    if (ok) {
      result.cubin.resize(size);
      ok = nvrtcGetCUBIN(program, result.cubin.data()) == NVRTC_SUCCESS;
    }
    size = 0;
    ok = ok && nvrtcGetPTXSize(program, &size) == NVRTC_SUCCESS && size > 1;
    if (ok) {
      result.ptx.assign(size, '\0');
      ok = nvrtcGetPTX(program, result.ptx.data()) == NVRTC_SUCCESS;
      result.ptx.resize(size - 1);
    }
    if (!ok) result.error = kernel.fileName + ": NVRTC produced no CUBIN or PTX for " + gpuArch;
  }
  nvrtcDestroyProgram(&program);
  return ok;
}

}  // namespace

NvrtcResult compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions& options) {
  NvrtcResult result;
  result.fileName = kernel.fileName;
  result.arch = std::string(arch);
  std::string number(arch);
  if (number.rfind("sm_", 0) == 0) number = number.substr(3);
  if (number.rfind("compute_", 0) == 0) number = number.substr(8);
  if (number.empty() || number.find_first_not_of("0123456789a") != std::string::npos) {
    result.error = kernel.fileName + ": unknown GPU architecture '" + result.arch + "' (expected e.g. sm_80, sm_90)";
    return result;
  }
  result.ok = compileOnce(kernel, "sm_" + number, options, result);
  return result;
}

#endif

}  // namespace tuccl
