// Loading the CUDA driver at run time: a missing driver or a failed cuInit is Unsupported (and
// nothing links libcuda), every entry point binds to the ABI symbol of cuda.h, and driver errors
// name the call and the CUresult. (cuda_driver_abi_test.cc checks the ABI declarations
// against the toolkit's cuda.h.)
#include "backend/cuda_driver.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "fake_cuda_driver.h"

namespace tuccl::backend {
namespace {

bool libcudaMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("/libcuda.so") != std::string::npos;
}

TEST(CudaDriver, MissingDriverIsUnsupported) {
  Expected<std::unique_ptr<CudaDriver>> driver = openCudaDriver("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(driver.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos)
      << driver.status().message();
  EXPECT_NE(driver.status().message().find("TUCCL_CUDA_DRIVER"), std::string::npos);

  setenv("TUCCL_CUDA_DRIVER", "/nonexistent/libcuda-for-load.so.1", 1);
  Expected<const CudaDriver*> loaded = loadCudaDriver();
  unsetenv("TUCCL_CUDA_DRIVER");
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(loaded.status().message().find("libcuda-for-load.so.1"), std::string::npos);
  EXPECT_FALSE(libcudaMapped()) << "TuCCL must not link libcuda";
}

TEST(CudaDriver, LibraryWithoutTheEntryPointsIsUnsupported) {
  Expected<std::unique_ptr<CudaDriver>> driver = openCudaDriver("libm.so.6");
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(driver.status().message().find("lacks cuInit"), std::string::npos) << driver.status().message();
  EXPECT_NE(driver.status().message().find("cuMemAlloc_v2"), std::string::npos);
}

TEST(CudaDriver, FailedCuInitIsUnsupported) {
  fakecuda::failNext("cuInit", CUDA_ERROR_NO_DEVICE);
  Expected<std::unique_ptr<CudaDriver>> driver = openCudaDriver(TUCCL_FAKE_CUDA_LIBRARY);
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(driver.status().message().find("cuInit failed: CUDA_ERROR_NO_DEVICE"), std::string::npos)
      << driver.status().message();
}

TEST(CudaDriver, BindsTheVersionedSymbolsAndInitialises) {
  fakecuda::clearCalls();
  Expected<std::unique_ptr<CudaDriver>> driver = openCudaDriver(TUCCL_FAKE_CUDA_LIBRARY);
  ASSERT_TRUE(driver) << driver.status().toString();
  EXPECT_EQ((*driver)->library, TUCCL_FAKE_CUDA_LIBRARY);
  EXPECT_EQ((*driver)->version, 12040);
  EXPECT_EQ((*driver)->deviceCount, 4);
  ASSERT_EQ(fakecuda::callsOf("cuInit").size(), 1u);
  EXPECT_EQ(fakecuda::callsOf("cuInit")[0].values, std::vector<uint64_t>{0});

  // The _v2 entry points are the ones bound: the fake exports no unversioned cuMemAlloc.
  CUdeviceptr pointer = 0;
  const CudaDriver& cu = **driver;
  CUcontext context = nullptr;
  ASSERT_EQ(cu.cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuCtxSetCurrent(context), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemAlloc(&pointer, 256), CUDA_SUCCESS);
  EXPECT_EQ(fakecuda::callsOf("cuMemAlloc_v2").back().values, (std::vector<uint64_t>{256, pointer}));
  EXPECT_EQ(cu.cuMemFree(pointer), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(fakecuda::callsOf("cuDevicePrimaryCtxRelease_v2").size(), 1u);
}

TEST(CudaDriver, ErrorsNameTheCallAndTheResult) {
  Expected<std::unique_ptr<CudaDriver>> driver = openCudaDriver(TUCCL_FAKE_CUDA_LIBRARY);
  ASSERT_TRUE(driver);
  const CudaDriver& cu = **driver;
  EXPECT_TRUE(cudaStatus(cu, CUDA_SUCCESS, "cuMemAlloc"));
  Status oom = cudaStatus(cu, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "staging of 64 bytes");
  EXPECT_EQ(oom.code(), ErrorCode::ResourceExhausted);
  EXPECT_NE(oom.message().find("cuMemAlloc (staging of 64 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos)
      << oom.message();
  EXPECT_EQ(cudaStatus(cu, CUDA_ERROR_NO_DEVICE, "cuDeviceGet").code(), ErrorCode::Unsupported);
  EXPECT_EQ(cudaStatus(cu, CUDA_ERROR_LAUNCH_FAILED, "cuLaunchKernel").code(), ErrorCode::SystemError);
  EXPECT_EQ(cudaResultName(cu, 123456), "CUresult 123456");
}

}  // namespace
}  // namespace tuccl::backend
