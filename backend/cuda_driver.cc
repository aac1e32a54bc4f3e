// Loading the CUDA driver at run time (cuda_driver.h).
#include "backend/cuda_driver.h"
#include "support/environment.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace tuccl::backend {
namespace {

// Binds `fn` to `symbol`; records the symbol in `missing` when the library lacks it.
template <typename Fn>
void bind(void* handle, const char* symbol, Fn& fn, std::string& missing) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr) {
    missing += missing.empty() ? symbol : std::string(", ") + symbol;
    return;
  }
  fn = reinterpret_cast<Fn>(address);
}

// Every entry point under its ABI name: the versioned symbols are those cuda.h maps the API
// names to (CUDA 11.0 and later; the non-PTDS forms, as the runtime's legacy default stream).
std::string bindAll(void* handle, CudaDriver& d) {
  std::string missing;
  bind(handle, "cuInit", d.cuInit, missing);
  bind(handle, "cuDriverGetVersion", d.cuDriverGetVersion, missing);
  bind(handle, "cuGetErrorName", d.cuGetErrorName, missing);
  bind(handle, "cuGetErrorString", d.cuGetErrorString, missing);
  bind(handle, "cuDeviceGetCount", d.cuDeviceGetCount, missing);
  bind(handle, "cuDeviceGet", d.cuDeviceGet, missing);
  bind(handle, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, missing);
  bind(handle, "cuDeviceCanAccessPeer", d.cuDeviceCanAccessPeer, missing);
  bind(handle, "cuDeviceGetName", d.cuDeviceGetName, missing);
  bind(handle, "cuDeviceGetPCIBusId", d.cuDeviceGetPCIBusId, missing);
  bind(handle, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, missing);
  bind(handle, "cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease, missing);
  bind(handle, "cuCtxSetCurrent", d.cuCtxSetCurrent, missing);
  bind(handle, "cuCtxGetCurrent", d.cuCtxGetCurrent, missing);
  bind(handle, "cuCtxGetDevice", d.cuCtxGetDevice, missing);
  bind(handle, "cuCtxEnablePeerAccess", d.cuCtxEnablePeerAccess, missing);
  bind(handle, "cuModuleLoadData", d.cuModuleLoadData, missing);
  bind(handle, "cuModuleGetFunction", d.cuModuleGetFunction, missing);
  bind(handle, "cuModuleUnload", d.cuModuleUnload, missing);
  bind(handle, "cuLaunchKernel", d.cuLaunchKernel, missing);
  bind(handle, "cuLaunchHostFunc", d.cuLaunchHostFunc, missing);
  bind(handle, "cuStreamCreate", d.cuStreamCreate, missing);
  bind(handle, "cuStreamDestroy_v2", d.cuStreamDestroy, missing);
  bind(handle, "cuStreamQuery", d.cuStreamQuery, missing);
  bind(handle, "cuStreamIsCapturing", d.cuStreamIsCapturing, missing);
  bind(handle, "cuStreamSynchronize", d.cuStreamSynchronize, missing);
  bind(handle, "cuEventCreate", d.cuEventCreate, missing);
  bind(handle, "cuEventRecord", d.cuEventRecord, missing);
  bind(handle, "cuEventQuery", d.cuEventQuery, missing);
  bind(handle, "cuEventElapsedTime", d.cuEventElapsedTime, missing);
  bind(handle, "cuEventDestroy_v2", d.cuEventDestroy, missing);
  bind(handle, "cuMemAlloc_v2", d.cuMemAlloc, missing);
  bind(handle, "cuMemFree_v2", d.cuMemFree, missing);
  bind(handle, "cuMemsetD8_v2", d.cuMemsetD8, missing);
  bind(handle, "cuMemsetD8Async", d.cuMemsetD8Async, missing);
  bind(handle, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD, missing);
  bind(handle, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH, missing);
  bind(handle, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync, missing);
  bind(handle, "cuMemHostAlloc", d.cuMemHostAlloc, missing);
  bind(handle, "cuMemFreeHost", d.cuMemFreeHost, missing);
  bind(handle, "cuMemHostRegister_v2", d.cuMemHostRegister, missing);
  bind(handle, "cuMemHostUnregister", d.cuMemHostUnregister, missing);
  bind(handle, "cuMemHostGetDevicePointer_v2", d.cuMemHostGetDevicePointer, missing);
  bind(handle, "cuIpcGetMemHandle", d.cuIpcGetMemHandle, missing);
  bind(handle, "cuIpcOpenMemHandle_v2", d.cuIpcOpenMemHandle, missing);
  bind(handle, "cuIpcCloseMemHandle", d.cuIpcCloseMemHandle, missing);
  return missing;
}

Status unsupported(const std::string& library, const std::string& reason) {
  return makeError(ErrorCode::Unsupported, "CUDA driver " + library + ": " + reason +
                                               "; the CUDA device is unavailable (set TUCCL_CUDA_DRIVER to the "
                                               "driver library, or use the CPU device)");
}

}  // namespace

std::string cudaResultName(const CudaDriver& driver, CUresult result) {
  const char* name = nullptr;
  if (driver.cuGetErrorName != nullptr && driver.cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(result);
}

Status cudaStatus(const CudaDriver& driver, CUresult result, std::string_view call, std::string_view what) {
  if (result == CUDA_SUCCESS) return {};
  std::string message = "CUDA driver: " + std::string(call);
  if (!what.empty()) message += " (" + std::string(what) + ")";
  message += " failed: " + cudaResultName(driver, result);
  const char* text = nullptr;
  if (driver.cuGetErrorString != nullptr && driver.cuGetErrorString(result, &text) == CUDA_SUCCESS &&
      text != nullptr) {
    message += " (" + std::string(text) + ")";
  }
  const ErrorCode code = result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::ResourceExhausted
                         : result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_NOT_SUPPORTED
                             ? ErrorCode::Unsupported
                             : ErrorCode::SystemError;
  return makeError(code, message);
}

Expected<std::unique_ptr<CudaDriver>> openCudaDriver(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return unsupported(library, std::string("cannot load it (") + (error != nullptr ? error : "unknown error") +
                                    "): no NVIDIA driver on this machine?");
  }
  auto driver = std::make_unique<CudaDriver>();
  driver->library = library;
  if (std::string missing = bindAll(handle, *driver); !missing.empty()) {
    dlclose(handle);
    return unsupported(library, "lacks " + missing + " (a driver older than CUDA 11.0?)");
  }
  // The handle is never closed: contexts and modules of the driver may outlive any one user.
  if (CUresult result = driver->cuInit(0); result != CUDA_SUCCESS) {
    return unsupported(library, "cuInit failed: " + cudaResultName(*driver, result));
  }
  if (CUresult result = driver->cuDriverGetVersion(&driver->version); result != CUDA_SUCCESS) {
    return unsupported(library, "cuDriverGetVersion failed: " + cudaResultName(*driver, result));
  }
  if (CUresult result = driver->cuDeviceGetCount(&driver->deviceCount); result != CUDA_SUCCESS) {
    return unsupported(library, "cuDeviceGetCount failed: " + cudaResultName(*driver, result));
  }
  if (driver->deviceCount < 1) return unsupported(library, "no CUDA device");
  return driver;
}

Expected<const CudaDriver*> loadCudaDriver() {
  static std::mutex mutex;
  static std::map<std::string, Expected<std::unique_ptr<CudaDriver>>> loaded;
  const std::string library = env::text("TUCCL_CUDA_DRIVER").value_or("libcuda.so.1");
  std::lock_guard lock(mutex);
  auto it = loaded.find(library);
  if (it == loaded.end()) it = loaded.emplace(library, openCudaDriver(library)).first;
  if (!it->second) return it->second.status();
  return static_cast<const CudaDriver*>(it->second->get());
}

}  // namespace tuccl::backend
