// Checks and kernel arguments of a KernelCall (kernel_call.h).
#include "backend/kernel_call.h"

#include <string>

#include "kernelgen/datatype.h"
#include "kernelgen/host_executor.h"

namespace tuccl::backend {
namespace {

Status invalid(const std::string& message) { return makeError(ErrorCode::InvalidArgument, "kernel call: " + message); }

Status checkPlacement(const KernelCall& call) {
  const CompiledPlan& compiled = *call.plan;
  if (call.placement->rings.size() != compiled.layout.rings.size()) {
    return invalid("the placement has " + std::to_string(call.placement->rings.size()) + " rings, the plan " +
                   std::to_string(compiled.layout.rings.size()));
  }
  const Protocol protocol = compiled.plan.config.protocol;
  const int64_t sliceBytes = call.sliceElems * dataTypeSize(call.call.dataType);
  const int64_t slotBytes = stagingSlotBytes(protocol, sliceBytes);
  for (size_t i = 0; i < call.placement->rings.size(); ++i) {
    const RingPlacement& ring = call.placement->rings[i];
    const RingInfo& info = compiled.layout.rings[i];
    if (ring.srcRank != info.srcRank || ring.dstRank != info.dstRank || ring.nSlots < 1) {
      return invalid("ring " + std::to_string(i) + " of the placement is not the plan's");
    }
    if (ring.slotBytes < slotBytes) {
      return invalid("a slice of " + std::to_string(sliceBytes) + " bytes (" + std::to_string(slotBytes) + " in " +
                     std::string(protocolName(protocol)) + ") does not fit the " + std::to_string(ring.slotBytes) +
                     "-byte slots of ring " + std::to_string(i));
    }
  }
  return {};
}

}  // namespace

Status checkKernelCall(const KernelCall& call) {
  if (call.plan == nullptr || call.placement == nullptr) return invalid("no plan or no placement");
  const CompiledPlan& compiled = *call.plan;
  const Plan& plan = compiled.plan;
  if (Status status = checkCall(call.call); !status) return status;
  if (call.call.collective != compiled.layout.collective || call.call.nRanks != plan.nRanks) {
    return invalid("the call (" + std::string(collectiveName(call.call.collective)) + ", " +
                   std::to_string(call.call.nRanks) + " ranks) is not the plan's (" +
                   std::string(collectiveName(plan.collective)) + ", " + std::to_string(plan.nRanks) + " ranks)");
  }
  const GeneratedKernels& kernels = compiled.kernels;
  if (call.rank < 0 || call.rank >= plan.nRanks || static_cast<int32_t>(kernels.ranks.size()) != plan.nRanks ||
      kernels.ranks[call.rank].kernel < 0 ||
      static_cast<size_t>(kernels.ranks[call.rank].kernel) >= kernels.kernels.size() ||
      static_cast<int32_t>(kernels.ranks[call.rank].values.size()) != kernels.kernelOf(call.rank).tableSize) {
    return invalid("rank " + std::to_string(call.rank) + " has no kernel in the plan");
  }
  if (call.sliceElems < 1) return invalid("a slice of " + std::to_string(call.sliceElems) + " elements");
  if (Status status = checkCallChannels(call); !status) return status;
  return checkPlacement(call);
}

Status checkCallChannels(const KernelCall& call) {
  const int32_t planChannels = call.plan->layout.channels;
  if (call.channels >= 0 && call.channels <= planChannels) return {};
  return invalid(std::to_string(call.channels) + " channels of a plan of " + std::to_string(planChannels));
}

dev::KernelArgs callKernelArgs(const KernelCall& call, const CallBuffers& buffers) {
  const CompiledPlan& compiled = *call.plan;
  dev::KernelArgs a;
  a.input = buffers.input;
  a.output = buffers.output;
  a.scratch = buffers.scratch;
  a.count = call.call.count;
  a.sliceElems = call.sliceElems;
  a.dtype = deviceDataType(call.call.dataType);
  a.op = deviceReduceOp(call.call.op);
  a.rank = call.rank;
  a.nRanks = compiled.plan.nRanks;
  a.chunksPerUnit = compiled.layout.chunksPerUnit;
  a.inPlaceCall = buffers.inPlaceCall ? 1 : 0;
  a.protocol = deviceProtocol(compiled.plan.config.protocol);
  a.channels = call.channels > 0 ? call.channels : compiled.layout.channels;
  a.ringsPerChannel = compiled.layout.ringsPerChannel;
  a.progressPerChannel = compiled.layout.progressPerChannel[call.rank];
  if (buffers.scale.elems > 0) {
    a.preScaleSrc = buffers.scale.src;
    a.preScaleDst = buffers.scale.dst;
    a.preScaleElems = buffers.scale.elems;
    a.preScaleScalar = call.call.preMulScalar;
    a.preScaleBits = call.call.preMulBits;
  }
  return a;
}

}  // namespace tuccl::backend
