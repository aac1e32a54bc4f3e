// One set of macros and fixed-width types for the three compilers that read the device header
// library (docs/kernels.md): nvcc (host and device passes), NVRTC (device only, no C++ standard
// library) and the host C++ compiler (the CPU shim in host_shim.h).
//
//   TUCCL_DEVICE_COMPILE   defined while compiling code that runs on the GPU
//   TUCCL_HOST_DEVICE      a function usable on both sides
//   TUCCL_DEVICE_INLINE    a small helper, inlined on the device
//   TUCCL_DEVICE_NOINLINE  a primitive: one out-of-line copy per kernel, so hundreds of call
//                          sites in straight-line code stay cheap to compile
//   TUCCL_KERNEL           a rank's kernel: extern "C" __global__ on CUDA, a plain exported
//                          function on the host (the executor calls it once per TB thread)
//   TUCCL_KERNEL_THREADS(n) the same, launched with exactly n threads per TB:
//                          __launch_bounds__(n), so the compiler may give each thread the
//                          registers n threads leave (128 at 512) instead of 1,024 threads' 64
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TUCCL_CUDA_COMPILER 1
#endif
#if defined(__CUDA_ARCH__)
#define TUCCL_DEVICE_COMPILE 1
#endif

#if defined(TUCCL_CUDA_COMPILER)
#define TUCCL_HOST_DEVICE __host__ __device__
#define TUCCL_DEVICE_INLINE __host__ __device__ __forceinline__
#define TUCCL_KERNEL extern "C" __global__ void __launch_bounds__(1024)
#define TUCCL_KERNEL_THREADS(threads) extern "C" __global__ void __launch_bounds__(threads)
#define TUCCL_DEVICE_NOINLINE __host__ __device__ __noinline__
#else
#define TUCCL_HOST_DEVICE
#define TUCCL_DEVICE_INLINE inline
#define TUCCL_DEVICE_NOINLINE inline
#define TUCCL_KERNEL extern "C" __attribute__((visibility("default"))) void
#define TUCCL_KERNEL_THREADS(threads) TUCCL_KERNEL
#endif

#if defined(__CUDACC_RTC__)
// NVRTC has no C++ standard library; the few types we need.
namespace tuccl::dev {
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
}  // namespace tuccl::dev
#else
#include <cstdint>
#include <cstring>
#include <type_traits>
namespace tuccl::dev {
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;
using std::uintptr_t;
}  // namespace tuccl::dev
#endif

#if !defined(TUCCL_CUDA_COMPILER)
#include "host_shim.h"
#endif

namespace tuccl::dev {

/// Bit casts that work in every compiler of the library.
TUCCL_DEVICE_INLINE uint32_t floatBits(float value) {
#if defined(TUCCL_DEVICE_COMPILE)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}
TUCCL_DEVICE_INLINE float bitsFloat(uint32_t bits) {
#if defined(TUCCL_DEVICE_COMPILE)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// All threads of the TB agree on thread 0's verdict: one barrier that is also the vote
/// (bar.red.and; free on the host).
TUCCL_DEVICE_INLINE bool tbAgree(bool threadZeroVerdict) {
#if defined(TUCCL_DEVICE_COMPILE)
  return __syncthreads_and(threadIdx.x == 0 ? (threadZeroVerdict ? 1 : 0) : 1) != 0;
#else
  return threadZeroVerdict;
#endif
}

/// A barrier of the TB's threads that tells whether every thread's `ok` held.
TUCCL_DEVICE_INLINE bool tbAll(bool ok) {
#if defined(TUCCL_DEVICE_COMPILE)
  return __syncthreads_and(ok ? 1 : 0) != 0;
#else
  return ok;
#endif
}

/// Barrier of the threads of one TB (a no-op on the host, where a TB is one thread).
TUCCL_DEVICE_INLINE void tbSync() {
#if defined(TUCCL_DEVICE_COMPILE)
  __syncthreads();
#endif
}

}  // namespace tuccl::dev
