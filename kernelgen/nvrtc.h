// NVRTC compilation of generated kernels: source -> CUBIN and PTX for a GPU architecture,
// without a GPU (the toolkit's libnvrtc only).
//
// In:  a GeneratedKernel (codegen.h) and an architecture ("sm_80", "sm_90", ...).
// Out: NvrtcOutput: the CUBIN and PTX bytes (and NVRTC's warnings); or a Status whose file is the
//      generated file's name and whose message is the failure, then NVRTC's log.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/datatype.h"
#include "support/status.h"

namespace tuccl {

struct NvrtcOptions {
  /// Specialise the kernel to one datatype (and operation), as a runtime compiling per call
  /// configuration does; unset: one kernel serves every datatype and operation (runtime switch).
  std::optional<DataType> dataType;
  std::optional<ReduceOp> op;
  std::vector<std::string> extraOptions;  ///< passed to nvrtcCompileProgram as they are
};

/// One kernel compiled for one architecture.
struct NvrtcOutput {
  std::string fileName;  ///< the generated file compiled (kernel<K>.cu)
  std::string arch;
  std::vector<char> cubin;
  std::string ptx;
  std::string log;  ///< NVRTC's warnings
};

/// Whether this build links NVRTC.
bool nvrtcAvailable();

/// Compiles one kernel for `arch` ("sm_80", "sm_90"); the device headers are the ones embedded in
/// this build (device_headers.h), given to NVRTC in memory. Errors name the kernel's file (the
/// diagnostic's file, and the message's start): Unsupported in a build without CUDA,
/// InvalidArgument for an unknown architecture, Internal when NVRTC fails (the message is one
/// line saying what failed, then NVRTC's log).
Expected<NvrtcOutput> compileWithNvrtc(const GeneratedKernel& kernel, std::string_view arch,
                                       const NvrtcOptions& options = {});

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
Expected<NvrtcOutput> compileWithNvrtcCached(const GeneratedKernel& kernel, std::string_view arch,
                                             const NvrtcOptions& options = {}, const std::string& cacheDir = {},
                                             bool* fromCache = nullptr);

/// compileWithNvrtcCached of every kernel, `workers` at a time (0: one per core), outputs in the
/// order of `kernels`, or the error of the first kernel (in that order) that failed; every kernel
/// is compiled either way. `fromCache` (optional) counts those read from the cache.
Expected<std::vector<NvrtcOutput>> compileKernelsWithNvrtc(const std::vector<const GeneratedKernel*>& kernels,
                                                           std::string_view arch, const NvrtcOptions& options = {},
                                                           const std::string& cacheDir = {}, size_t workers = 0,
                                                           size_t* fromCache = nullptr);

}  // namespace tuccl
