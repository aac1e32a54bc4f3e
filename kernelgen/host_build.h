// Host build of generated kernels: the same per-rank sources compiled by the host C++ compiler
// against the host shim (kernelgen/device/host_shim.h) into a shared library, loaded with dlopen.
//
// In:  the GeneratedKernels of one plan.
// Out: HostKernels: per rank the callable of its kernel and its value table, and the setter of
//      the calling thread's blockIdx.
// Libraries are cached by a hash of the sources, the device headers and the compile command (in
// the caller's cache directory, else $TUCCL_KERNELGEN_CACHE, else a directory under the system
// temp dir), so processes share them. An entry's directory holds everything the library was built
// from: the generated sources and the device headers (embedded in TuCCL, written out under
// device/), so no source tree is needed, and the library's checksum. Processes sharing a cache
// build an entry once (a lock file per entry); a library that fails its checksum (truncated,
// damaged) or does not load is rebuilt.
// The compiler: $TUCCL_HOST_CXX, else $CXX (either may be a command line such as "ccache g++"),
// else the C++ compiler TuCCL was built with if it still exists, else `c++` from PATH.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/device/kernel_args.h"
#include "support/status.h"

namespace tuccl {

struct HostKernels {
  using Kernel = void (*)(tuccl::dev::KernelArgs);
  using SetBlock = void (*)(unsigned);
  std::vector<Kernel> kernels;                   ///< by kernel (GeneratedKernel::id)
  std::vector<Kernel> ranks;                     ///< by rank: its kernel
  std::vector<std::vector<int32_t>> rankValues;  ///< by rank: its value table (KernelArgs::roleValues)
  SetBlock setBlock = nullptr;
  std::string libraryPath;
  bool fromCache = false;

  /// Rank `rank`'s value table; null when it has none.
  const int32_t* valuesOf(int32_t rank) const {
    return static_cast<size_t>(rank) < rankValues.size() && !rankValues[rank].empty() ? rankValues[rank].data()
                                                                                      : nullptr;
  }
};

/// The directory of kernelgen's on-disk caches (host libraries, NVRTC results): `cacheDir` when
/// given, else $TUCCL_KERNELGEN_CACHE, else tuccl-kernelgen-<uid> under the system temp dir.
std::filesystem::path kernelCacheRoot(const std::string& cacheDir = {});

/// Compiles (or finds in the cache) and loads the host library of `kernels`; `fromCache` says
/// that this call compiled nothing. `cacheDir`: the cache directory; empty: the default above.
/// Every rank gets its kernel's function and its value table. Internal on failure, with the
/// compiler's output naming the generated files.
Expected<std::shared_ptr<const HostKernels>> buildHostKernels(const GeneratedKernels& kernels,
                                                              const std::string& cacheDir = {});

/// The same for kernels without value tables, rank i running kernels[i].
Expected<std::shared_ptr<const HostKernels>> buildHostKernels(const std::vector<GeneratedKernel>& kernels,
                                                              const std::string& cacheDir = {});

}  // namespace tuccl
