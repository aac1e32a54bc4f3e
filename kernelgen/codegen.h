// Kernel generation: a plan -> one CUDA C++ kernel per rank (ResCCL §4.5; design.md "Kernels").
//
// In:  a Plan (plan/plan.h).
// Out: per rank a self-contained source file rank<N>.cu defining
//        TUCCL_KERNEL tuccl_rank<N>(tuccl::dev::KernelArgs args)
//      whose blockIdx.x selects a TB's straight-line code: each entry loops over its
//      micro-batches, waits on the flags of the entries it depends on, runs its primitive
//      (kernelgen/device/primitives.h) and posts its own progress; comments name every entry's
//      operation in the algorithm source (Plan::sourceName, PlanEntry::loc). The same text compiles with
//      NVRTC/nvcc for the GPU and with the host compiler against the host shim
//      (docs/kernels.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernelgen/kernel_layout.h"
#include "plan/plan.h"

namespace tuccl {

struct GeneratedKernel {
  int32_t rank = 0;
  std::string fileName;    ///< "rank<N>.cu"
  std::string kernelName;  ///< "tuccl_rank<N>"
  std::string source;
  int32_t nTbs = 0;        ///< the grid size to launch
};

/// One kernel per rank. Throws std::invalid_argument for a plan whose sends and receives do not
/// pair up (layoutKernels).
std::vector<GeneratedKernel> generateKernels(const Plan& plan);

/// The generated source of one rank given a precomputed layout.
GeneratedKernel generateRankKernel(const Plan& plan, const KernelLayout& layout, int32_t rank);

/// The host translation unit of all ranks: includes every rank<N>.cu (which must sit beside it)
/// and exports tuccl_host_set_block, which the executor calls on each TB thread.
std::string hostTranslationUnit(const std::vector<GeneratedKernel>& kernels);

}  // namespace tuccl
