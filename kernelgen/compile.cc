// The compile pipeline (compile.h): checks, layout, kernels, CUBINs and the host library.
#include "kernelgen/compile.h"

#include <utility>

#include "kernelgen/nvrtc.h"
#include "plan/plan_validate.h"

namespace tuccl {
namespace {

Status refuse(std::string message) { return makeError(ErrorCode::InvalidInput, std::move(message)); }

// The layout (which pairs the sends with the receives), after validatePlan and before the race
// check when the static checks are asked for.
Expected<KernelLayout> checkedLayout(const Plan& plan, bool staticChecks) {
  if (staticChecks) {
    if (Status problem = validatePlan(plan); !problem) return refuse("the plan fails its static check: " + problem.message());
  }
  Expected<KernelLayout> layout = layoutKernels(plan);
  if (!layout || !staticChecks) return layout;
  if (Status race = checkPlanRaceFree(plan); !race) return refuse("the plan fails its race check: " + race.message());
  return layout;
}

// The kernels `ranks` run (every kernel when empty), in kernel order.
Expected<std::vector<const GeneratedKernel*>> kernelsOfRanks(const GeneratedKernels& kernels,
                                                              const std::vector<int32_t>& ranks) {
  std::vector<bool> chosen(kernels.kernels.size(), ranks.empty());
  for (int32_t rank : ranks) {
    if (rank < 0 || static_cast<size_t>(rank) >= kernels.ranks.size()) {
      return makeError(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + " is not a rank of the plan's " +
                                                       std::to_string(kernels.ranks.size()));
    }
    chosen[kernels.ranks[rank].kernel] = true;
  }
  std::vector<const GeneratedKernel*> chosenKernels;
  for (const GeneratedKernel& kernel : kernels.kernels) {
    if (chosen[kernel.id]) chosenKernels.push_back(&kernel);
  }
  return chosenKernels;
}

// NVRTC over the chosen kernels, concurrently, through kernelgen's NVRTC cache (the plan cache
// and tuccl-compile share it: the same kernel text is compiled once per machine).
Status addCubins(CompiledPlan& compiled, const Targets& targets) {
  if (!nvrtcAvailable()) {
    return makeError(ErrorCode::Unsupported, "CUBINs for " + targets.cudaArch + " need NVRTC, which this build lacks");
  }
  Expected<std::vector<const GeneratedKernel*>> kernels = kernelsOfRanks(compiled.kernels, targets.cubinRanks);
  if (!kernels) return kernels.status();
  size_t cached = 0;
  Expected<std::vector<NvrtcOutput>> outputs =
      compileKernelsWithNvrtc(*kernels, targets.cudaArch, {}, targets.cacheDir, 0, &cached);
  if (!outputs) return outputs.status();
  const size_t nKernels = compiled.kernels.kernels.size();
  compiled.cubins.assign(nKernels, {});
  compiled.ptx.assign(targets.keepPtx ? nKernels : 0, {});
  for (size_t i = 0; i < kernels->size(); ++i) {
    const int32_t id = (*kernels)[i]->id;
    compiled.cubins[id] = std::move((*outputs)[i].cubin);
    if (targets.keepPtx) compiled.ptx[id] = std::move((*outputs)[i].ptx);
  }
  compiled.cubinsFromCache = cached;
  return {};
}

}  // namespace

Expected<CompiledPlan> compilePlan(Plan plan, const Targets& targets) {
  Expected<KernelLayout> layout = checkedLayout(plan, targets.staticChecks);
  if (!layout) return layout.status();
  CompiledPlan compiled;
  compiled.plan = std::move(plan);
  compiled.layout = std::move(*layout);
  compiled.kernels = generateKernels(compiled.plan, compiled.layout, targets.kernelGen);
  if (Status status = buildTargets(compiled, targets); !status) return status;
  return compiled;
}

Status buildTargets(CompiledPlan& compiled, const Targets& targets) {
  if (!targets.cudaArch.empty()) {
    if (Status status = addCubins(compiled, targets); !status) return status;
  }
  if (targets.hostKernels) {
    Expected<std::shared_ptr<const HostKernels>> host = buildHostKernels(compiled.kernels, targets.cacheDir);
    if (!host) return host.status();
    compiled.host = std::move(*host);
  }
  return {};
}

}  // namespace tuccl
