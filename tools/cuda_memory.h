// Device memory for the tools that drive libtuccl's CUDA device (tuccl-bench, tuccl-topo probe):
// the GPU's primary context made current, a stream, and device buffers, through the CUDA driver
// loaded as libtuccl loads it (backend/cuda_driver.h; TUCCL_CUDA_DRIVER names another, the fake
// of the tests included). Failures are thrown as StatusError.
#pragma once

#include <algorithm>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda_driver.h"
#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::tools {

/// A driver call's failure, thrown for main's one handler.
inline void checkCuda(const backend::CudaDriver& driver, backend::CUresult result, std::string_view call,
               std::string_view what = {}) {
  throwIfError(backend::cudaStatus(driver, result, call, what));
}

/// The CUDA side of a communicator on the CUDA device: its GPU's primary context made current, a
/// stream, and device buffers, all released by the destructor.
class CudaMemory {
 public:
  explicit CudaMemory(int ordinal) : ordinal_(ordinal) {
    Expected<const backend::CudaDriver*> loaded = backend::loadCudaDriver();
    throwIfError(loaded.status());
    driver_ = *loaded;
    checkCuda(*driver_, driver_->cuDeviceGet(&device_, ordinal_), "cuDeviceGet");
    checkCuda(*driver_, driver_->cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    retained_ = true;
    checkCuda(*driver_, driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
    // A blocking stream: it waits for the synchronous copies of the legacy stream, whose DMA from
    // pageable memory may still run when the copy returns.
    checkCuda(*driver_, driver_->cuStreamCreate(&stream_, 0), "cuStreamCreate");
  }
  ~CudaMemory() {
    // Unwinding from a failure: a kernel may still wait for a peer until main aborts the
    // communicator, and freeing its buffers would wait for it; the process's exit frees them.
    if (std::uncaught_exceptions() > 0) return;
    for (backend::CUdeviceptr pointer : allocations_) driver_->cuMemFree(pointer);
    if (stream_ != nullptr) driver_->cuStreamDestroy(stream_);
    if (retained_) driver_->cuDevicePrimaryCtxRelease(device_);
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  tucclStream_t stream() const { return stream_; }

  void* allocate(size_t bytes) {
    backend::CUdeviceptr pointer = 0;
    checkCuda(*driver_, driver_->cuMemAlloc(&pointer, std::max<size_t>(bytes, 1)), "cuMemAlloc",
              std::to_string(bytes) + " bytes of call buffers");
    allocations_.push_back(pointer);
    return reinterpret_cast<void*>(pointer);
  }

  void toDevice(void* device, const void* host, size_t bytes) {
    if (bytes == 0) return;
    checkCuda(*driver_, driver_->cuMemcpyHtoD(reinterpret_cast<backend::CUdeviceptr>(device), host, bytes),
              "cuMemcpyHtoD");
  }

  void toHost(void* host, const void* device, size_t bytes) {
    if (bytes == 0) return;
    checkCuda(*driver_, driver_->cuMemcpyDtoH(host, reinterpret_cast<backend::CUdeviceptr>(device), bytes),
              "cuMemcpyDtoH");
  }

  void synchronize() { checkCuda(*driver_, driver_->cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

  const backend::CudaDriver& driver() const { return *driver_; }
  backend::CUdevice device() const { return device_; }
  int ordinal() const { return ordinal_; }

 private:
  int ordinal_;
  const backend::CudaDriver* driver_ = nullptr;
  backend::CUdevice device_ = 0;
  backend::CUcontext context_ = nullptr;
  bool retained_ = false;
  tucclStream_t stream_ = nullptr;
  std::vector<backend::CUdeviceptr> allocations_;
};

}  // namespace tuccl::tools
