// The ABI declarations of cuda_driver.h are those of the toolkit's cuda.h (a build with the CUDA
// toolkit; without it there is nothing to compare with). cuda.h maps API names to versioned
// symbols with macros (cuMemAlloc -> cuMemAlloc_v2), so no CudaDriver field is named after it.
#include "backend/cuda_driver.h"

#include <type_traits>

#include <gtest/gtest.h>

#if defined(TUCCL_HAVE_CUDA) && __has_include(<cuda.h>)
// Our flag constants, read before cuda.h defines macros of the same names.
namespace {
constexpr unsigned kHostAllocPortable = tuccl::backend::CU_MEMHOSTALLOC_PORTABLE;
constexpr unsigned kHostAllocDeviceMap = tuccl::backend::CU_MEMHOSTALLOC_DEVICEMAP;
constexpr unsigned kHostRegisterPortable = tuccl::backend::CU_MEMHOSTREGISTER_PORTABLE;
constexpr unsigned kHostRegisterDeviceMap = tuccl::backend::CU_MEMHOSTREGISTER_DEVICEMAP;
}  // namespace

#include <cuda.h>

namespace tuccl::backend {
namespace {

TEST(CudaDriver, DeclarationsMatchCudaH) {
  static_assert(sizeof(backend::CUipcMemHandle) == sizeof(::CUipcMemHandle));
  static_assert(sizeof(backend::CUdeviceptr) == sizeof(::CUdeviceptr));
  static_assert(sizeof(backend::CUresult) == sizeof(::CUresult));
  static_assert(sizeof(backend::CUdevice) == sizeof(::CUdevice));
  static_assert(std::is_same_v<backend::CUstream, ::CUstream>);
  static_assert(backend::CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY);
  static_assert(backend::CUDA_ERROR_NOT_INITIALIZED == ::CUDA_ERROR_NOT_INITIALIZED);
  static_assert(backend::CUDA_ERROR_NO_DEVICE == ::CUDA_ERROR_NO_DEVICE);
  static_assert(backend::CUDA_ERROR_INVALID_DEVICE == ::CUDA_ERROR_INVALID_DEVICE);
  static_assert(backend::CUDA_ERROR_INVALID_IMAGE == ::CUDA_ERROR_INVALID_IMAGE);
  static_assert(backend::CUDA_ERROR_INVALID_CONTEXT == ::CUDA_ERROR_INVALID_CONTEXT);
  static_assert(backend::CUDA_ERROR_INVALID_HANDLE == ::CUDA_ERROR_INVALID_HANDLE);
  static_assert(backend::CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND);
  static_assert(backend::CUDA_ERROR_NOT_READY == ::CUDA_ERROR_NOT_READY);
  static_assert(backend::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED == ::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  static_assert(backend::CUDA_ERROR_LAUNCH_FAILED == ::CUDA_ERROR_LAUNCH_FAILED);
  static_assert(backend::CUDA_ERROR_NOT_SUPPORTED == ::CUDA_ERROR_NOT_SUPPORTED);
  static_assert(backend::CUDA_ERROR_UNKNOWN == ::CUDA_ERROR_UNKNOWN);
  static_assert(backend::CU_DEVICE_ATTRIBUTE_CLOCK_RATE == ::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  static_assert(backend::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  static_assert(backend::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  static_assert(kHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE);
  static_assert(kHostAllocDeviceMap == CU_MEMHOSTALLOC_DEVICEMAP);
  static_assert(kHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE);
  static_assert(kHostRegisterDeviceMap == CU_MEMHOSTREGISTER_DEVICEMAP);
  static_assert(backend::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == ::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  static_assert(backend::kCuIpcHandleBytes == CU_IPC_HANDLE_SIZE);
  static_assert(backend::CU_EVENT_DEFAULT == ::CU_EVENT_DEFAULT);
  static_assert(backend::CU_STREAM_CAPTURE_STATUS_NONE == ::CU_STREAM_CAPTURE_STATUS_NONE);
  static_assert(sizeof(::CUstreamCaptureStatus) == sizeof(int));
  static_assert(std::is_same_v<decltype(&::cuStreamIsCapturing), ::CUresult (*)(::CUstream, ::CUstreamCaptureStatus*)>);
  // The function types, with CUresult as the int it is passed as.
  static_assert(std::is_same_v<decltype(CudaDriver::cuLaunchKernel),
                               backend::CUresult (*)(backend::CUfunction, unsigned, unsigned, unsigned, unsigned,
                                                     unsigned, unsigned, unsigned, ::CUstream, void**, void**)>);
  static_assert(std::is_same_v<decltype(CudaDriver::cuDeviceGetName),
                               backend::CUresult (*)(char*, int, backend::CUdevice)>);
  static_assert(std::is_same_v<decltype(&::cuDeviceGetName), ::CUresult (*)(char*, int, ::CUdevice)>);
  static_assert(std::is_same_v<decltype(&::cuDeviceGetPCIBusId), ::CUresult (*)(char*, int, ::CUdevice)>);
  static_assert(std::is_same_v<decltype(&::cuStreamCreate), ::CUresult (*)(::CUstream*, unsigned)>);
  static_assert(std::is_same_v<decltype(&::cuEventElapsedTime), ::CUresult (*)(float*, ::CUevent, ::CUevent)>);
  static_assert(std::is_same_v<decltype(&::cuEventRecord), ::CUresult (*)(::CUevent, ::CUstream)>);
  SUCCEED();
}

}  // namespace
}  // namespace tuccl::backend

#else

TEST(CudaDriver, DeclarationsMatchCudaH) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#endif
