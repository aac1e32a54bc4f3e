// The CPU device (design.md "libtuccl"): buffers are host memory, a TB is a thread running the
// host build of the generated kernel (kernelgen/host_build.h), the staging segments are POSIX
// shared memory (transport/shm_segment.h) mapped by the ranks of the node, and a stream is a CPU
// stream (cpu_stream.h) or the NULL stream (the call runs in the caller's thread).
//
// Calls of one communicator run in their sequence order (KernelCall::sequence), whatever stream
// they were enqueued on, so every rank runs them in the order they were issued. Every wait of a
// TB is bounded by the call's timeout; the abort word (in rank 0's segment) stops every TB of
// every rank at its next wait. After a call failed, the rings' counters no longer agree between
// ranks: the communicator is unusable and every later call fails at once.
#pragma once

#include <memory>

#include "backend/device.h"

namespace tuccl::backend {

std::unique_ptr<Device> createCpuDevice(int32_t rank, int32_t nRanks);

}  // namespace tuccl::backend
