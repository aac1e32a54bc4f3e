// Mapping of a call's user buffers onto a plan's buffers (call_buffers.h).
#include "backend/call_buffers.h"

#include "kernelgen/host_executor.h"

namespace tuccl::backend {
namespace {

constexpr size_t kWorkspaceAlignment = 256;

size_t aligned(size_t bytes) { return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; }

enum class Storage { User, RelocatedInput, RelocatedOutput };

// Where the storage of `call` lives on its rank.
Storage storageOf(const KernelCall& call) {
  const CollectiveCall& c = call.call;
  if (c.collective == Collective::ReduceScatter && !c.inPlace) return Storage::RelocatedInput;
  if (c.collective == Collective::Reduce && call.rank != c.root) return Storage::RelocatedOutput;
  // The plan keeps input and output apart (and reads a PreMulSum's input where it is).
  if ((c.inPlace || c.preMul) && !call.plan->plan.inPlace) return Storage::RelocatedInput;
  return Storage::User;
}

}  // namespace

WorkspaceLayout workspaceLayout(const KernelCall& call) {
  const CollectiveCall& c = call.call;
  const auto elementSize = static_cast<size_t>(dataTypeSize(c.dataType));
  WorkspaceLayout layout;
  switch (storageOf(call)) {
    case Storage::RelocatedInput: layout.storageBytes = static_cast<size_t>(inputElements(c)) * elementSize; break;
    case Storage::RelocatedOutput: layout.storageBytes = static_cast<size_t>(outputElements(c)) * elementSize; break;
    case Storage::User: break;
  }
  const RankBufferElements elements = planBufferElements(call.plan->plan, call.plan->layout, c.count);
  layout.scratchBytes = static_cast<size_t>(elements.scratch) * elementSize;
  layout.storageOffset = 0;
  layout.scratchOffset = aligned(layout.storageBytes);
  layout.total = layout.scratchOffset + aligned(layout.scratchBytes);
  return layout;
}

CallBuffers resolveCallBuffers(const KernelCall& call, char* workspace) {
  const CollectiveCall& c = call.call;
  const WorkspaceLayout layout = workspaceLayout(call);
  const auto elementSize = static_cast<size_t>(dataTypeSize(c.dataType));
  CallBuffers buffers;
  buffers.scratch = layout.scratchBytes > 0 ? workspace + layout.scratchOffset : nullptr;
  char* storage = workspace + layout.storageOffset;
  auto* send = const_cast<void*>(call.call.sendbuff);  // the kernel never writes its input out of place
  switch (storageOf(call)) {
    case Storage::RelocatedInput:
      buffers.before = {storage, call.call.sendbuff, layout.storageBytes};
      buffers.input = storage;
      if (c.collective == Collective::ReduceScatter) {
        // Runs in place in the workspace; block `rank` of it is the result.
        const size_t block = static_cast<size_t>(c.count) * elementSize;
        buffers.output = storage + static_cast<size_t>(call.rank) * block;
        buffers.after = {call.call.recvbuff, buffers.output, block};
        buffers.inPlaceCall = true;
      } else {
        buffers.output = call.call.recvbuff;
        buffers.inPlaceCall = false;
      }
      break;
    case Storage::RelocatedOutput:
      buffers.input = send;
      buffers.output = storage;
      buffers.inPlaceCall = false;  // the prologue copies the input into the workspace
      break;
    case Storage::User:
      if (c.collective == Collective::Broadcast && call.rank != c.root) {
        buffers.input = call.call.recvbuff;  // a non-root's input is never read
        buffers.output = call.call.recvbuff;
        buffers.inPlaceCall = true;
      } else {
        buffers.input = send;
        buffers.output = call.call.recvbuff;
        buffers.inPlaceCall = c.inPlace;
      }
      break;
  }
  if (c.preMul) {
    // The scaled input lands where the storage wants the input, instead of the copy that would
    // put it there.
    void* at = buffers.input;
    switch (storageOf(call)) {
      case Storage::RelocatedInput: at = storage; buffers.before = {}; break;
      case Storage::RelocatedOutput: at = storage; break;
      case Storage::User: at = c.collective == Collective::ReduceScatter ? send : call.call.recvbuff; break;
    }
    buffers.scale = {at, call.call.sendbuff, inputElements(c)};
    buffers.input = at;
    if (c.collective != Collective::ReduceScatter && buffers.output == at) buffers.inPlaceCall = true;
  }
  return buffers;
}

}  // namespace tuccl::backend
