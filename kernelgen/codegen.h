// Kernel generation: plan -> CUDA C++ source (ResCCL §4.5; design.md "Kernels"; docs/kernels.md).
//
// In:  a Plan (plan/plan.h) and its KernelLayout (kernel_layout.h).
// Out: GeneratedKernels: the distinct kernels (kernel<K>.cu defining
//        TUCCL_KERNEL_THREADS(nThreads) tuccl_kernel<K>(tuccl::dev::KernelArgs args))
//      and, per rank, the kernel it runs and its value table. A kernel's blockIdx.x selects a TB's
//      code: each entry loops over its micro-batches, waits on the flags of the entries it depends
//      on, runs its primitive (kernelgen/device/primitives.h) and posts its own progress. Runs of
//      entries whose constants step affinely become loops with computed indices (rerolling), and
//      ranks whose code differs only in values share one kernel (a role) that computes a value
//      as a literal, `a * rank + b`, or reads it from KernelArgs::roleValues (kernel_roles.h).
//      Comments name the plan entries and their operations in the algorithm source
//      (Plan::sourceName, PlanEntry::loc). The same text compiles with NVRTC/nvcc for the GPU and
//      with the host compiler against the host shim (docs/kernels.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelgen/kernel_layout.h"
#include "plan/plan.h"

namespace tuccl {

struct GeneratedKernel {
  int32_t id = 0;          ///< index in GeneratedKernels::kernels
  std::string fileName;    ///< "kernel<K>.cu"
  std::string kernelName;  ///< "tuccl_kernel<K>"
  std::string source;
  int32_t nTbs = 0;            ///< the grid size to launch
  std::vector<int32_t> ranks;  ///< the ranks that run it, ascending
  int32_t tableSize = 0;       ///< values in each of its ranks' tables
};

/// What one rank runs.
struct RankKernel {
  int32_t kernel = 0;           ///< index into GeneratedKernels::kernels
  std::vector<int32_t> values;  ///< its value table (KernelArgs::roleValues), tableSize values
};

struct GeneratedKernels {
  std::vector<GeneratedKernel> kernels;
  std::vector<RankKernel> ranks;  ///< by rank
  const GeneratedKernel& kernelOf(int32_t rank) const { return kernels[ranks[rank].kernel]; }
};

struct KernelGenOptions {
  bool reroll = true;      ///< runs of affine entries become loops
  bool shareRoles = true;  ///< ranks of one structure share a kernel; false: one kernel per rank
};

/// The kernels of `plan` with its layout (layoutKernels). compilePlan (compile.h) runs the whole
/// pipeline: layout, kernels and what runs them.
GeneratedKernels generateKernels(const Plan& plan, const KernelLayout& layout, const KernelGenOptions& options = {});

/// The host translation unit of `kernels`: includes every kernel's file (which must sit beside
/// it) and exports tuccl_host_set_block, which the executor calls on each TB thread.
std::string hostTranslationUnit(const std::vector<GeneratedKernel>& kernels);

/// "0-3, 5, 8-11": ascending ranks as ranges, at most `maxRanges` of them, then "...".
std::string rankRanges(const std::vector<int32_t>& ranks, size_t maxRanges = 8);

}  // namespace tuccl
