// One flag hop between two blocks of one GPU, the unit of every TuCCL slice hand-off: block 0
// posts i and waits for block 1's echo of i, 10,000 times; half the round trip is one hop.
//
//   gpu_flag_latency [ROUNDS]
//
// One line per variant:
//   flag memory=device|host fence=none|acq_rel.gpu|acq_rel.sys|sc.sys rounds=R hop_ns=H
// memory: the flags in device memory (cudaMalloc, as staging is) or in mapped host memory (as
// TuCCL's abort word is). fence: the fence a post issues before its store and a wait after it saw
// the value (TuCCL's post rule and acquire; none: volatile accesses only). Exit status 0, or 2
// on a CUDA error.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

enum Fence { kNone = 0, kGpu = 1, kSys = 2, kScSys = 3 };
const char* const kFenceNames[] = {"none", "acq_rel.gpu", "acq_rel.sys", "sc.sys"};

template <int F>
__device__ __forceinline__ void fence() {
  if (F == kGpu) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  if (F == kSys) asm volatile("fence.acq_rel.sys;" ::: "memory");
  if (F == kScSys) asm volatile("fence.sc.sys;" ::: "memory");
}

template <int F>
__global__ void pingPong(volatile unsigned long long* flags, int rounds, unsigned long long* nanos) {
  if (threadIdx.x != 0) return;
  volatile unsigned long long* mine = flags + 16 * blockIdx.x;         // separate 128-byte lines
  volatile unsigned long long* theirs = flags + 16 * (1 - blockIdx.x);
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (int i = 1; i <= rounds; ++i) {
    if (blockIdx.x == 0) {
      fence<F>();
      *mine = i;
      while (*theirs < static_cast<unsigned long long>(i)) {
      }
      fence<F>();
    } else {
      while (*theirs < static_cast<unsigned long long>(i)) {
      }
      fence<F>();
      fence<F>();
      *mine = i;
    }
  }
  unsigned long long end = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
  if (blockIdx.x == 0) *nanos = end - start;
}

bool ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_flag_latency: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

template <int F>
bool measure(volatile unsigned long long* flags, unsigned long long* hostView, unsigned long long* nanos, int rounds,
             const char* memory) {
  if (hostView != nullptr) {
    std::memset(hostView, 0, 256);
  } else if (!ok(cudaMemset(const_cast<unsigned long long*>(flags), 0, 256), "cudaMemset")) {
    return false;
  }
  pingPong<F><<<2, 32>>>(flags, rounds, nanos);
  if (!ok(cudaGetLastError(), "launch") || !ok(cudaDeviceSynchronize(), "the kernel")) return false;
  unsigned long long total = 0;
  if (!ok(cudaMemcpy(&total, nanos, sizeof total, cudaMemcpyDeviceToHost), "cudaMemcpy")) return false;
  std::printf("flag memory=%s fence=%s rounds=%d hop_ns=%.0f\n", memory, kFenceNames[F], rounds,
              static_cast<double>(total) / (2.0 * rounds));
  return true;
}

template <int F>
bool both(unsigned long long* device, unsigned long long* host, unsigned long long* hostDevice,
          unsigned long long* nanos, int rounds) {
  return measure<F>(device, nullptr, nanos, rounds, "device") &&
         measure<F>(hostDevice, host, nanos, rounds / 10, "host");
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 10000;
  if (rounds < 10) {
    std::fprintf(stderr, "usage: gpu_flag_latency [ROUNDS >= 10]\n");
    return 2;
  }
  unsigned long long* device = nullptr;
  unsigned long long* host = nullptr;
  unsigned long long* hostDevice = nullptr;
  unsigned long long* nanos = nullptr;
  if (!ok(cudaMalloc(&device, 256), "cudaMalloc") || !ok(cudaMalloc(&nanos, 8), "cudaMalloc") ||
      !ok(cudaHostAlloc(&host, 256, cudaHostAllocMapped), "cudaHostAlloc") ||
      !ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hostDevice), host, 0), "cudaHostGetDevicePointer")) {
    return 2;
  }
  const bool done = both<kNone>(device, host, hostDevice, nanos, rounds) &&
                    both<kGpu>(device, host, hostDevice, nanos, rounds) &&
                    both<kSys>(device, host, hostDevice, nanos, rounds) &&
                    both<kScSys>(device, host, hostDevice, nanos, rounds);
  cudaFree(device);
  cudaFree(nanos);
  cudaFreeHost(host);
  return done ? 0 : 2;
}
