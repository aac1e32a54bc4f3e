// The recording fake of the CUDA driver (libtuccl-fake-cuda.so, fake_cuda_driver.cc): the entry
// points of libcuda under their ABI names, on a machine without a GPU. Tests load it as the driver
// (TUCCL_CUDA_DRIVER or openCudaDriver) and link it to read what the device asked of the driver.
//
// Device memory is host memory (memfd-backed, so another process can map it through an IPC
// handle, which encodes (pid, fd, size)); a stream is a worker thread running its operations in
// order; the NULL stream is one per device, as the legacy stream is one per context. A module
// whose image is hostCubin(library) runs: cuLaunchKernel starts one thread per TB of the grid,
// each calling the host build of the kernel (kernelgen/host_build.h) with the KernelArgs passed,
// the wait bound converted from clock cycles (spinLimit at the fake's clock rate) to a deadline.
// Any other image (a real CUBIN) is recorded and its launches recorded but not run. An event
// records the steady clock when its stream reaches it; the elapsed time of two is the difference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tuccl/tuccl.h"

namespace tuccl::fakecuda {

/// One driver call: its ABI symbol, the CUresult returned, its scalar arguments and results (as
/// documented per entry point in fake_cuda_driver.cc), and its byte or text payload (a kernel's
/// argument struct, a module image, a kernel name).
struct Call {
  std::string name;
  int result = 0;
  std::vector<uint64_t> values;
  std::vector<char> bytes;
  std::string text;
};

/// The calls recorded, oldest first (the most recent 2^17 .. 2^18 of a long run).
std::vector<Call> calls();
void clearCalls();
/// The calls of `name`, in order.
std::vector<Call> callsOf(const std::string& name);

/// The next call of `symbol` after `skip` others returns `result` and does nothing else.
void failNext(const std::string& symbol, int result, int skip = 0);
void clearFailures();

/// Makes cuStreamIsCapturing say that `stream` (NULL: the current context's NULL stream) is being
/// captured into a CUDA graph, or no longer.
void setCapturing(tucclStream_t stream, bool capturing);

inline constexpr std::string_view kHostCubinMagic = "TUCCL-FAKE-CUBIN\n";
/// A module image that makes the fake run the host build at `hostLibrary`.
inline std::vector<char> hostCubin(const std::string& hostLibrary) {
  std::string text = std::string(kHostCubinMagic) + hostLibrary;
  return std::vector<char>(text.c_str(), text.c_str() + text.size() + 1);
}

inline constexpr std::string_view kHostLibraryMagic = "TUCCL-FAKE-HOSTLIB\n";
/// A module image that carries a host build itself (the magic, its size as 8 bytes, its bytes):
/// the fake loads it from memory, so the image stays valid wherever it is kept (the fake NVRTC's
/// images, which libtuccl's plan store keeps beyond the library files).
inline std::vector<char> hostLibraryImage(const std::vector<char>& library) {
  std::string image(kHostLibraryMagic);
  const uint64_t size = library.size();
  image.append(reinterpret_cast<const char*>(&size), sizeof size);
  image.append(library.data(), library.size());
  return std::vector<char>(image.begin(), image.end());
}

/// What the fake holds: a device that cleaned up leaves none of it.
struct Resources {
  size_t deviceAllocations = 0;
  size_t hostAllocations = 0;
  size_t hostRegistrations = 0;
  size_t ipcMappings = 0;
  size_t modules = 0;
  size_t events = 0;
  int primaryContextRetains = 0;  ///< over every device
};
Resources resources();

/// Streams, as the CUDA runtime's cudaStreamCreate / cudaStreamDestroy would give them.
tucclStream_t createStream();
void destroyStream(tucclStream_t stream);
/// Waits until everything enqueued on `stream` (nullptr: the NULL stream of `ordinal`) ran.
void synchronize(tucclStream_t stream, int ordinal = 0);

/// The clock rate the fake reports (kHz), which turns a spin limit into seconds.
inline constexpr int kClockKhz = 1980000;
/// The multiprocessors the fake reports (an H100 SXM's).
inline constexpr int kMultiprocessors = 132;
/// The compute capability the fake reports.
inline constexpr int kComputeMajor = 9;
inline constexpr int kComputeMinor = 0;

}  // namespace tuccl::fakecuda
