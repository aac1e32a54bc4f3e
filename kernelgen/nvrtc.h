// NVRTC compilation of generated kernels: source -> CUBIN and PTX for a GPU architecture,
// without a GPU (the toolkit's libnvrtc only).
//
// In:  a GeneratedKernel (codegen.h) and an architecture ("sm_80", "sm_90", ...).
// Out: NvrtcResult: the CUBIN and PTX bytes, or NVRTC's log and the generated file's name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/datatype.h"

namespace tuccl {

struct NvrtcOptions {
  /// Specialise the kernel to one datatype (and operation), as a runtime compiling per call
  /// configuration does; unset: one kernel serves every datatype and operation (runtime switch).
  std::optional<DataType> dataType;
  std::optional<ReduceOp> op;
  std::vector<std::string> extraOptions;  ///< passed to nvrtcCompileProgram as they are
};

struct NvrtcResult {
  bool ok = false;
  std::string fileName;  ///< the generated file the result is about (rank<N>.cu)
  std::string arch;
  std::vector<char> cubin;
  std::string ptx;
  std::string log;    ///< NVRTC's log (warnings on success, errors on failure)
  std::string error;  ///< one line: what failed ("built without CUDA", "rank3.cu: compilation failed ...")
};

/// Whether this build links NVRTC.
bool nvrtcAvailable();

/// Compiles one rank's kernel for `arch` ("sm_80", "sm_90"); the device headers are the ones
/// embedded in this build (device_headers.h), given to NVRTC in memory.
NvrtcResult compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions& options = {});

/// NVRTC's version ("13.0"); empty in a build without CUDA.
std::string nvrtcVersionText();

/// The options compileWithNvrtc adds before `options.extraOptions`: --Ofast-compile=min where
/// NVRTC has it (12.8 and later) and the extra options choose no -Ofast-compile level themselves.
std::vector<std::string> nvrtcDefaultOptions(const NvrtcOptions& options = {});

/// compileWithNvrtc through kernelgen's on-disk cache (host_build.h: kernelCacheRoot(cacheDir)),
/// one sealed entry per source, device headers, architecture, options and NVRTC version, so
/// compiling the same plan again reads the CUBIN and PTX back instead of running NVRTC.
/// `fromCache` (optional) says that nothing was compiled. Failures are not cached; an entry that
/// fails its checksum or cannot be written only costs a compilation.
NvrtcResult compileWithNvrtcCached(const GeneratedKernel& kernel, std::string_view arch,
                                   const NvrtcOptions& options = {}, const std::string& cacheDir = {},
                                   bool* fromCache = nullptr);

/// compileWithNvrtcCached of every kernel, `workers` at a time (0: one per core), results in the
/// order of `kernels`; `fromCache` (optional) counts those read from the cache.
std::vector<NvrtcResult> compileKernelsWithNvrtc(const std::vector<const GeneratedKernel*>& kernels,
                                                 std::string_view arch, const NvrtcOptions& options = {},
                                                 const std::string& cacheDir = {}, size_t workers = 0,
                                                 size_t* fromCache = nullptr);

}  // namespace tuccl
