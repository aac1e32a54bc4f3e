// The CUDA device (device.h): a rank's generated kernel as a CUBIN launched on the caller's stream
// through the driver API loaded at run time (cuda_driver.h). docs/runtime.md, "CUDA device".
//
// Memory:
//   staging   cuMemAlloc'd device memory, zeroed, exported as a blob: (host, pid, device ordinal,
//             device pointer, size, CUDA IPC handle, the name of a one-page control segment).
//             openStaging uses the pointer itself for ranks of this process (CUDA refuses to
//             IPC-open an allocation of its own process; peers on another GPU get peer access) and
//             cuIpcOpenMemHandle for other processes of the host; the destructor closes them.
//   abort     one word every TB of every rank of the host watches: in the POSIX shared-memory
//             control page of the host's lowest rank, registered with cuMemHostRegister
//             (DEVICEMAP), so abort() is a plain store from any thread, while kernels run.
//   per call  a call slot: progress and barrier counters (device memory, cleared once when
//             allocated; each call numbers its values), the TB reports (host-mapped pinned
//             memory, written by a TB only when it stops), the scratch buffer and a completion
//             event; a slot is reused once its call's event fired.
//   per plan  the RingDevice array of the plan's placement (device pointers into the ranks'
//             segments), uploaded once; the module of each rank's CUBIN, loaded once.
// Per call: cuLaunchKernel(grid = the rank's TBs, block = the plan's nThreads, {&KernelArgs}) on the
// stream, then cuEventRecord of the slot's completion event — no host function holds the stream.
// The next launch, drain and poll (the communicator's async-error query) look at the events: a
// finished call's TB reports are read and a Status naming every TB that did not finish goes to
// the error sink. Timed calls (the runtime phase) add two events around their work.
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda_driver.h"
#include "backend/device.h"
#include "support/status.h"

namespace tuccl::backend {

/// The device of GPU `ordinal` (its primary context, shared with the CUDA runtime). InvalidArgument
/// for an ordinal out of range; a driver error as its Status.
Expected<std::unique_ptr<Device>> createCudaDevice(const CudaDriver& driver, int ordinal);

/// The image a CUDA device loads for point-to-point (kernelgen/device/peer.h's
/// tuccl_peer_transfers) instead of compiling it with NVRTC at its first batch: a CUBIN built ahead,
/// or in tests an image the fake driver runs. No effect on another device.
void setCudaPeerKernelImage(Device& device, std::vector<char> image);

/// The GPU of the calling thread's current context (what cudaSetDevice chose), 0 when it has none.
Expected<int> currentCudaOrdinal(const CudaDriver& driver);

/// "sm_90": the architecture NVRTC compiles for on GPU `ordinal` (its compute capability).
Expected<std::string> cudaArchitecture(const CudaDriver& driver, int ordinal);

}  // namespace tuccl::backend
