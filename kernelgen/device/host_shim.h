// The host shim: CUDA's execution model on a CPU, enough for the generated kernels (design.md,
// "Kernels"; docs/kernels.md). A TB is a host thread; `blockIdx` is per thread and set by the
// executor before it calls a rank's kernel; a TB has one thread (`blockDim.x == 1`), so every
// "for (i = threadIdx.x; i < n; i += blockDim.x)" loop of the primitives covers the TB's whole
// share in that one thread. __syncthreads is a no-op; flags are std::atomic_ref (flags.h).
#pragma once

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)

namespace tuccl::dev::host {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

/// The calling thread's block index (set by the executor, one TB per thread).
inline thread_local Dim3 blockIdx{0, 0, 0};
inline constexpr Dim3 threadIdx{0, 0, 0};
inline constexpr Dim3 blockDim{1, 1, 1};

}  // namespace tuccl::dev::host

// The generated source spells them as CUDA does.
using tuccl::dev::host::blockDim;
using tuccl::dev::host::blockIdx;
using tuccl::dev::host::threadIdx;

#endif
