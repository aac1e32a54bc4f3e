// How a call's user buffers become the kernel's input, output and scratch (docs/kernels.md, "In-
// place and out-of-place calls"), the same for every device.
//
// Generated plans are in place: one storage buffer. NCCL's in-place calls map straight onto it;
// out-of-place calls let the kernel's prologue copy the input into the output. Three cases need a
// workspace the device owns, so that TuCCL keeps NCCL's guarantees:
//   - ReduceScatter out of place: the storage is the input, which NCCL leaves unchanged; the
//     input is copied into the workspace, the kernel runs in place there, and block `rank` is
//     copied out to recvbuff afterwards;
//   - Reduce on a non-root: NCCL never writes its recvbuff (it may be NULL), while chain and tree
//     plans keep partial sums in a non-root's storage; the storage is the workspace;
//   - the plan's scratch buffer.
// Broadcast on a non-root never reads sendbuff: it runs in place on recvbuff.
// PreMulSum (CollectiveCall::preMul): the kernel's prologue writes scalar * input where the storage
// holds the input (KernelArgs::preScale), in place of the copy that would put it there: the
// relocation's copy, the prologue's own copy of an out-of-place call (the call then runs in place
// on its output), or nothing (in place: the input is scaled where it is). Plans that keep input
// and output apart read a relocated, scaled input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/device.h"

namespace tuccl::backend {

/// Workspace bytes `call` needs (0 for most calls); offsets in it are 256-byte aligned.
struct WorkspaceLayout {
  size_t storageOffset = 0;  ///< the relocated storage (ReduceScatter out of place, non-root Reduce)
  size_t storageBytes = 0;
  size_t scratchOffset = 0;
  size_t scratchBytes = 0;
  size_t total = 0;
};
WorkspaceLayout workspaceLayout(const KernelCall& call);

/// What the kernel gets, and the copies around it. Copies are (dst, src, bytes) in the device's
/// memory; a device runs `before` ahead of the kernel and `after` once it finished, in order.
struct CallBuffers {
  void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  bool inPlaceCall = true;
  struct Copy {
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  Copy before;  ///< bytes == 0: none
  Copy after;
  /// PreMulSum: the kernel's prologue stores scalar * src[i] at dst[i] (elems == 0: none).
  struct Scale {
    void* dst = nullptr;
    const void* src = nullptr;
    int64_t elems = 0;
  };
  Scale scale;
};
/// `workspace` points at workspaceLayout(call).total bytes (may be null when total is 0).
CallBuffers resolveCallBuffers(const KernelCall& call, char* workspace);

}  // namespace tuccl::backend
