// The CUDA driver API, loaded at run time (design.md "libtuccl": the CUDA device uses the driver
// API loaded at run time). libtuccl never links libcuda: a machine without a GPU driver loads the
// library and runs the CPU device; the CUDA device is Unsupported there.
//
// In:  the driver library: $TUCCL_CUDA_DRIVER when set (tests point it at a recording fake), else
//      libcuda.so.1 from the loader's search path.
// Out: a CudaDriver: the entry points the CUDA device uses, bound with dlsym to the ABI names of
//      cuda.h (cuMemAlloc_v2, cuIpcOpenMemHandle_v2, ...), after cuInit(0) succeeded.
//
// The ABI types and constants are declared here (their values are those of cuda.h, checked
// against it by tests/backend/cuda_driver_test.cc when the toolkit is installed), so TuCCL builds
// without the CUDA toolkit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::backend {

// ---- ABI types and constants (cuda.h) -----------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = tucclStream_t;  // struct CUstream_st*, cudaStream_t
using CUhostFn = void (*)(void* userData);
using CUevent = struct CUevent_st*;
inline constexpr size_t kCuIpcHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
struct CUipcMemHandle {
  char reserved[kCuIpcHandleBytes];
};

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

inline constexpr int CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;  // kHz
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 0x01;
inline constexpr unsigned CU_MEMHOSTREGISTER_DEVICEMAP = 0x02;
inline constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x01;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
/// CUstreamCaptureStatus: a stream not being captured into a CUDA graph (cuda.h).
inline constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;

/// The entry points the CUDA device calls; each field is named after the API function and bound
/// to its current ABI symbol (the comment says which where it is versioned).
struct CudaDriver {
  std::string library;  ///< the file it was loaded from
  int version = 0;      ///< cuDriverGetVersion: 1000 * major + 10 * minor
  int deviceCount = 0;

  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceCanAccessPeer)(int* canAccess, CUdevice device, CUdevice peer) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetPCIBusId)(char* busId, int length, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext context) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* context) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice* device) = nullptr;
  CUresult (*cuCtxEnablePeerAccess)(CUcontext peer, unsigned flags) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                             unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,
                             void** extra) = nullptr;
  CUresult (*cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void* userData) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;  // _v2
  CUresult (*cuStreamQuery)(CUstream stream) = nullptr;
  CUresult (*cuStreamIsCapturing)(CUstream stream, int* captureStatus) = nullptr;  // CUstreamCaptureStatus*
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventQuery)(CUevent event) = nullptr;
  CUresult (*cuEventElapsedTime)(float* milliseconds, CUevent start, CUevent end) = nullptr;  // the CUDA 2.0 symbol
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;                                       // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr* pointer, size_t bytes) = nullptr;  // _v2
  CUresult (*cuMemFree)(CUdeviceptr pointer) = nullptr;                  // _v2
  CUresult (*cuMemsetD8)(CUdeviceptr pointer, unsigned char value, size_t bytes) = nullptr;  // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr pointer, unsigned char value, size_t bytes, CUstream stream) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;        // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) = nullptr;  // _v2
  CUresult (*cuMemHostAlloc)(void** pointer, size_t bytes, unsigned flags) = nullptr;
  CUresult (*cuMemFreeHost)(void* pointer) = nullptr;
  CUresult (*cuMemHostRegister)(void* pointer, size_t bytes, unsigned flags) = nullptr;  // _v2
  CUresult (*cuMemHostUnregister)(void* pointer) = nullptr;
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr* device, void* host, unsigned flags) = nullptr;  // _v2
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr pointer) = nullptr;
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned flags) = nullptr;  // _v2
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr pointer) = nullptr;
};

/// "CUDA_ERROR_OUT_OF_MEMORY" (the driver's name), or "CUresult 1234" when it has none.
std::string cudaResultName(const CudaDriver& driver, CUresult result);

/// The Status of a failed driver call: "CUDA driver: cuMemAlloc (staging of 1048576 bytes) failed:
/// CUDA_ERROR_OUT_OF_MEMORY (out of memory)". ResourceExhausted for out-of-memory, Unsupported for
/// CUDA_ERROR_NO_DEVICE / CUDA_ERROR_NOT_SUPPORTED, SystemError otherwise; ok for CUDA_SUCCESS.
Status cudaStatus(const CudaDriver& driver, CUresult result, std::string_view call, std::string_view what = {});

/// Loads `library` (a file name for the loader's search path, or a path) and binds every entry
/// point, then cuInit(0). Unsupported, with the reason, when the library is absent (no driver
/// installed), lacks an entry point (a driver older than CUDA 11.0), or cuInit fails (no device).
/// The library stays loaded for the life of the process.
Expected<std::unique_ptr<CudaDriver>> openCudaDriver(const std::string& library);

/// The process's driver: openCudaDriver($TUCCL_CUDA_DRIVER, else "libcuda.so.1"), once per library
/// name (later calls return the first result, failure included).
Expected<const CudaDriver*> loadCudaDriver();

}  // namespace tuccl::backend
