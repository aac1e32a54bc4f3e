// The compile pipeline of a plan (docs/kernels.md "Compiling a plan"): static checks -> kernel
// layout -> kernels -> what runs them: the host library (the CPU device, the CPU verification)
// and CUBINs for a GPU architecture (the CUDA device, tuccl-compile). libtuccl's plan cache, the
// CPU verification, tuccl-compile and the benchmarks all compile plans through it.
//
// In:  a Plan and the Targets to build.
// Out: a CompiledPlan; or the Status of the first stage that failed: a static check or the layout
//      (InvalidInput: a plan failing validatePlan or checkPlanRaceFree, sends and receives that do
//      not pair), NVRTC (Unsupported in a build without it; Internal with NVRTC's log, the
//      diagnostic's file the kernel's) or the host build (Internal with the compiler's output).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/host_build.h"
#include "kernelgen/kernel_layout.h"
#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// What compilePlan builds besides the layout and the kernels, and how.
struct Targets {
  /// validatePlan before the layout and checkPlanRaceFree after it (the CPU verification; a plan
  /// the scheduler built passed them already).
  bool staticChecks = false;
  KernelGenOptions kernelGen;  ///< how the kernels are generated (rerolled loops, shared roles)
  bool hostKernels = false;    ///< build and load the host library (HostKernels)
  std::string cudaArch;        ///< non-empty: the CUBIN of every kernel for it ("sm_90")
  /// CUBINs only of the kernels these ranks run (tuccl-compile --emit-ranks); empty: every kernel.
  std::vector<int32_t> cubinRanks;
  bool keepPtx = false;  ///< keep NVRTC's PTX beside the CUBINs (tuccl-compile writes both)
  /// kernelgen's cache directory for host libraries and NVRTC results (host_build.h
  /// kernelCacheRoot); empty: the default.
  std::string cacheDir;
};

/// A plan ready to run: its layout, its kernels and the targets built for them. libtuccl's plan
/// cache hands these out (compiled once per process, shared by the communicators that use them).
struct CompiledPlan {
  Plan plan;
  KernelLayout layout;
  GeneratedKernels kernels;  ///< the distinct kernels; per rank its kernel and value table
  std::string key;           ///< the plan cache's content hash of the plan (its cache key)
  std::string description;   ///< the plan cache's: why the plan was chosen, for TUCCL_DEBUG=INFO
  /// Targets::hostKernels (the CPU device): the host build.
  std::shared_ptr<const HostKernels> host;
  /// Targets::cudaArch (the CUDA device): per kernel (GeneratedKernel::id) its CUBIN for the
  /// architecture, empty for kernels not built (Targets::cubinRanks) or not yet compiled.
  std::vector<std::vector<char>> cubins;
  std::vector<std::string> ptx;  ///< Targets::keepPtx: per kernel its PTX, as `cubins`
  size_t cubinsFromCache = 0;    ///< of the CUBINs built last, those NVRTC's on-disk cache gave back
};

/// The whole pipeline: the layout (after the static checks when asked), the kernels, then
/// buildTargets. The plan is taken by value: callers done with theirs move it in.
Expected<CompiledPlan> compilePlan(Plan plan, const Targets& targets);

/// The targets alone, for a plan compilePlan compiled: CUBINs for `targets.cudaArch` (replacing
/// any, every kernel's or those of `cubinRanks`), then the host library when `hostKernels`.
/// Callers that do something between generation and a target call compilePlan with no targets,
/// then this (tuccl-compile writes the sources first, the plan cache reads CUBINs from its store,
/// the CPU verification refuses a call before building). `staticChecks` and `kernelGen` are
/// compilePlan's and not read here.
Status buildTargets(CompiledPlan& compiled, const Targets& targets);

}  // namespace tuccl
