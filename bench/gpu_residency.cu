// Whether the blocks of several processes sharing one GPU (under MPS) are resident at once, as
// TuCCL's kernels need: their blocks wait on each other's flags, so a block that never starts
// stops every other one at its timeout.
//
//   gpu_residency BLOCKS TOTAL FILE
//
// Each process launches one kernel of BLOCKS blocks of 512 threads with 48 KiB of shared memory
// and __launch_bounds__(512, 1), as TuCCL's kernels run: one block per SM. Thread 0 of every block
// adds one to a counter in FILE (shared memory of every process, mapped into the GPU) and spins
// until the counter reaches TOTAL (every block of every process) or 8 s pass. One line per process:
//   residency pid=PID blocks=BLOCKS total=TOTAL seen=MAX resident=yes|no
// where MAX is the most any block saw. Start the processes together, with a fresh FILE (the
// caller removes it). Exit status: 0 measured (either way), 2 on a usage or CUDA error.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kThreads = 512;
constexpr int kSharedWords = 12 * 1024;  // 48 KiB: with 512 threads, one block per SM
constexpr long long kSpinSeconds = 8;

__global__ void __launch_bounds__(kThreads, 1)
    arriveAndWait(volatile unsigned* counter, unsigned total, unsigned* seen, long long spinCycles) {
  __shared__ unsigned scratch[kSharedWords];
  if (threadIdx.x == 0) {
    scratch[0] = atomicAdd_system(const_cast<unsigned*>(counter), 1u) + 1u;
    const long long start = clock64();
    unsigned value = *counter;
    while (value < total && clock64() - start < spinCycles) value = *counter;
    atomicMax(seen, value > scratch[0] ? value : scratch[0]);
  }
  __syncthreads();
}

bool ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_residency: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: gpu_residency BLOCKS TOTAL FILE\n");
    return 2;
  }
  const int blocks = std::atoi(argv[1]);
  const long total = std::atol(argv[2]);
  if (blocks < 1 || total < blocks) {
    std::fprintf(stderr, "gpu_residency: BLOCKS must be >= 1 and TOTAL >= BLOCKS\n");
    return 2;
  }
  const int fd = open(argv[3], O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    std::perror("gpu_residency: the counter file");
    return 2;
  }
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (page == MAP_FAILED) {
    std::perror("gpu_residency: mmap");
    return 2;
  }
  unsigned* counter = nullptr;
  unsigned* seen = nullptr;
  int clockKhz = 0;
  if (!ok(cudaHostRegister(page, 4096, cudaHostRegisterMapped), "cudaHostRegister") ||
      !ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&counter), page, 0), "cudaHostGetDevicePointer") ||
      !ok(cudaMalloc(&seen, sizeof(unsigned)), "cudaMalloc") || !ok(cudaMemset(seen, 0, sizeof(unsigned)), "cudaMemset") ||
      !ok(cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute")) {
    return 2;
  }
  arriveAndWait<<<blocks, kThreads>>>(counter, static_cast<unsigned>(total), seen,
                                      static_cast<long long>(clockKhz) * 1000 * kSpinSeconds);
  if (!ok(cudaGetLastError(), "launch") || !ok(cudaDeviceSynchronize(), "the kernel")) return 2;
  unsigned most = 0;
  if (!ok(cudaMemcpy(&most, seen, sizeof most, cudaMemcpyDeviceToHost), "cudaMemcpy")) return 2;
  std::printf("residency pid=%d blocks=%d total=%ld seen=%u resident=%s\n", static_cast<int>(getpid()), blocks, total,
              most, most >= total ? "yes" : "no");
  cudaHostUnregister(page);
  munmap(page, 4096);
  cudaFree(seen);
  return 0;
}
