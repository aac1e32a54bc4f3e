// What every device checks and derives from a KernelCall (device.h) before it runs the rank's
// kernel: the call agrees with its plan and placement, and the part of the kernel's arguments the
// call alone determines (mirroring the host executor, kernelgen/host_executor.cc).
//
// In:  a KernelCall.
// Out: InvalidArgument naming what disagrees; the KernelArgs fields of the call (buffers, count,
//      slice, datatype, op, rank, chunk unit, in place). The device adds its memory: rings,
//      progress, barrier, reports, abort and the wait bound.
#pragma once

#include <cstdint>

#include "backend/call_buffers.h"
#include "backend/device.h"
#include "kernelgen/device/kernel_args.h"
#include "support/status.h"

namespace tuccl::backend {

/// The call has a plan, a placement of the plan's rings and a kernel for its rank; its collective
/// and ranks are the plan's; a slice fits a ring slot. (The communicator checked the buffers.)
Status checkKernelCall(const KernelCall& call);

/// The call runs at most its plan's channels (KernelCall::channels; 0: all of them).
Status checkCallChannels(const KernelCall& call);

/// The KernelArgs fields the call and its buffers (call_buffers.h) determine; rings, progress,
/// barrier, reports, abort and the wait bound are the device's.
dev::KernelArgs callKernelArgs(const KernelCall& call, const CallBuffers& buffers);

}  // namespace tuccl::backend
