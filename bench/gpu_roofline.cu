// gpu_roofline: the memory ceilings of one GPU, for bench/gpu_roofline.sh.
//
//   gpu_roofline info                                  the device (one line)
//   gpu_roofline copy   [--bytes N] [--reps R]         cudaMemcpy device-to-device of N bytes
//   gpu_roofline reduce [--bytes N] [--reps R] [--inputs "2 4 8"] [--dtype float|bfloat16|all]
//                                                      out[i] = sum of n inputs[i], N bytes each
//   gpu_roofline launch [--reps R]                     empty-kernel launch latency
//
// Every measurement is the best of R repetitions timed with CUDA events on one stream (launch
// latency: host wall clock, since it is the host's cost). Results are one line each, key=value
// pairs that the script parses ("copy bytes=... B_GBps=..."); errors go to stderr with exit 1.
//
// copy:   B_GBps = N / t (bytes copied per second); rw_GBps = 2N / t counts the bytes read and
//         written: the traffic rate gpu_roofline.sh calls B.
// reduce: 16-byte vector loads, 8 loads in flight per thread (8/n vectors of each of the n inputs
//         before any is used), a grid of (resident blocks per SM) x SMs; the sum is accumulated
//         in fp32 (bf16 converted in and out). traffic_GBps = (n+1) N / t, buffer_GBps = N / t.
//         Inputs are filled with input k = k+1, so every output element must be n(n+1)/2 (exact in
//         bf16 for n <= 8); a sample at the start, middle and end is checked.
// launch: R back-to-back launches of an empty kernel then one synchronize (us per launch), and R
//         rounds of launch + cudaStreamSynchronize (us per round trip: mean and best).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void fail(const char* what, cudaError_t err, const char* file, int line) {
  std::fprintf(stderr, "gpu_roofline: %s failed: %s (%s) at %s:%d\n", what, cudaGetErrorName(err),
               cudaGetErrorString(err), file, line);
  std::exit(1);
}

#define CHECK(call)                                               \
  do {                                                            \
    cudaError_t err_ = (call);                                    \
    if (err_ != cudaSuccess) fail(#call, err_, __FILE__, __LINE__); \
  } while (0)

constexpr int kThreads = 256;
constexpr int kLoadsInFlight = 8;

template <int N>
struct Inputs {
  const uint4* p[N];
};

// Lanes<T>::sum<NIN>(v): NIN vectors of 16 bytes summed lane by lane as T (float: 4 lanes, bf16: 8
// lanes), accumulating in fp32.
template <typename T>
struct Lanes;

template <>
struct Lanes<float> {
  template <int NIN>
  __device__ __forceinline__ static uint4 sum(const uint4* v) {
    float4 acc = *reinterpret_cast<const float4*>(&v[0]);
#pragma unroll
    for (int k = 1; k < NIN; ++k) {
      const float4 x = *reinterpret_cast<const float4*>(&v[k]);
      acc.x += x.x;
      acc.y += x.y;
      acc.z += x.z;
      acc.w += x.w;
    }
    return *reinterpret_cast<uint4*>(&acc);
  }
};

template <>
struct Lanes<__nv_bfloat16> {
  template <int NIN>
  __device__ __forceinline__ static uint4 sum(const uint4* v) {
    float2 acc[4];
    const __nv_bfloat162* first = reinterpret_cast<const __nv_bfloat162*>(&v[0]);
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] = __bfloat1622float2(first[j]);
#pragma unroll
    for (int k = 1; k < NIN; ++k) {
      const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(&v[k]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(x[j]);
        acc[j].x += f.x;
        acc[j].y += f.y;
      }
    }
    uint4 out;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int j = 0; j < 4; ++j) o[j] = __float22bfloat162_rn(acc[j]);
    return out;
  }
};

// out[i] = sum_k in[k][i] over nvec 16-byte vectors. Each thread issues U = 8/NIN vectors of each
// input (8 loads) before summing, at i, i+stride, ..., so a warp's loads stay coalesced.
template <typename T, int NIN>
__global__ void __launch_bounds__(kThreads) sumKernel(Inputs<NIN> in, uint4* out, size_t nvec) {
  constexpr int U = kLoadsInFlight / NIN > 0 ? kLoadsInFlight / NIN : 1;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < nvec; i += U * stride) {
    uint4 v[U][NIN];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < NIN; ++k) v[u][k] = __ldg(in.p[k] + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) out[i + u * stride] = Lanes<T>::template sum<NIN>(v[u]);
  }
  for (; i < nvec; i += stride) {
    uint4 v[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) v[k] = __ldg(in.p[k] + i);
    out[i] = Lanes<T>::template sum<NIN>(v);
  }
}

template <typename T>
__global__ void fillKernel(T* p, size_t count, float value) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    p[i] = static_cast<T>(value);
}

__global__ void emptyKernel() {}

struct Options {
  size_t bytes = size_t{1} << 30;
  int reps = 10;
  std::vector<int> inputs{2, 4, 8};
  std::string dtype = "all";
  bool repsGiven = false;
};

size_t parseBytes(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  double scale = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': case 'k': scale = 1024.0; break;
      case 'M': case 'm': scale = 1024.0 * 1024; break;
      case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
      default:
        std::fprintf(stderr, "gpu_roofline: bad size '%s'\n", text);
        std::exit(2);
    }
  }
  if (!(value > 0)) {
    std::fprintf(stderr, "gpu_roofline: bad size '%s'\n", text);
    std::exit(2);
  }
  return static_cast<size_t>(value * scale);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gpu_roofline: %s needs a value\n", flag.c_str());
      std::exit(2);
    }
    const char* value = argv[++i];
    if (flag == "--bytes") {
      o.bytes = parseBytes(value);
    } else if (flag == "--reps") {
      o.reps = std::max(1, std::atoi(value));
      o.repsGiven = true;
    } else if (flag == "--inputs") {
      o.inputs.clear();
      for (const char* s = value; *s;) {
        char* end = nullptr;
        const long n = std::strtol(s, &end, 10);
        if (end == s) break;
        if (n != 2 && n != 4 && n != 8) {
          std::fprintf(stderr, "gpu_roofline: --inputs takes 2, 4 and 8, not %ld\n", n);
          std::exit(2);
        }
        o.inputs.push_back(static_cast<int>(n));
        s = end;
        while (*s == ' ' || *s == ',') ++s;
      }
    } else if (flag == "--dtype") {
      o.dtype = value;
      if (o.dtype != "float" && o.dtype != "bfloat16" && o.dtype != "all") {
        std::fprintf(stderr, "gpu_roofline: --dtype takes float, bfloat16 or all\n");
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "gpu_roofline: unknown option %s\n", flag.c_str());
      std::exit(2);
    }
  }
  o.bytes = o.bytes / 16 * 16;  // whole 16-byte vectors
  if (o.bytes == 0) o.bytes = 16;
  return o;
}

// Times `body` (enqueued on `stream`) reps times with events: the best and the median in ms.
template <typename Body>
void timeIt(cudaStream_t stream, int reps, Body body, float& best, float& median) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  body();  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(start, stream));
    body();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaGetLastError());
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  best = ms.front();
  median = ms[ms.size() / 2];
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
}

int runInfo() {
  int device = 0;
  CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  int clockKHz = 0, memClockKHz = 0, busWidth = 0;
  cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&memClockKHz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&busWidth, cudaDevAttrGlobalMemoryBusWidth, device);
  // DDR: two transfers per clock.
  const double peak = 2.0 * memClockKHz * 1e3 * (busWidth / 8.0) / 1e9;
  std::printf("info cc=%d.%d sms=%d mem_GiB=%.1f sm_clock_MHz=%d mem_peak_GBps=%.0f driver=%d runtime=%d name=%s\n",
              prop.major, prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024), clockKHz / 1000, peak, driver,
              runtime, prop.name);
  return 0;
}

int runCopy(const Options& o) {
  void *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, o.bytes));
  CHECK(cudaMalloc(&dst, o.bytes));
  CHECK(cudaMemset(src, 1, o.bytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float best = 0, median = 0;
  timeIt(stream, o.reps, [&] { CHECK(cudaMemcpyAsync(dst, src, o.bytes, cudaMemcpyDeviceToDevice, stream)); },
         best, median);
  const double s = best * 1e-3;
  std::printf("copy bytes=%zu reps=%d best_ms=%.4f median_ms=%.4f B_GBps=%.1f rw_GBps=%.1f\n", o.bytes, o.reps,
              best, median, o.bytes / s / 1e9, 2.0 * o.bytes / s / 1e9);
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
  return 0;
}

template <typename T, int NIN>
void launchSum(const std::vector<void*>& buffers, void* out, size_t nvec, int blocks, cudaStream_t stream) {
  Inputs<NIN> in;
  for (int k = 0; k < NIN; ++k) in.p[k] = static_cast<const uint4*>(buffers[k]);
  sumKernel<T, NIN><<<blocks, kThreads, 0, stream>>>(in, static_cast<uint4*>(out), nvec);
}

template <typename T, int NIN>
int gridFor() {
  int device = 0, sms = 0, perSm = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, sumKernel<T, NIN>, kThreads, 0));
  return sms * std::max(1, perSm);
}

// Checks a sample of `out` (count elements of T): every one must equal `expected`.
template <typename T>
bool checkSample(const void* out, size_t count, float expected) {
  const size_t sample = std::min<size_t>(count, 4096);
  const size_t starts[3] = {0, count / 2 - std::min(count / 2, sample / 2), count - sample};
  std::vector<T> host(sample);
  for (size_t start : starts) {
    CHECK(cudaMemcpy(host.data(), static_cast<const T*>(out) + start, sample * sizeof(T), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sample; ++i)
      if (static_cast<float>(host[i]) != expected) return false;
  }
  return true;
}

template <typename T>
void runSumType(const Options& o, const char* name, std::vector<void*>& buffers, void* out, cudaStream_t stream) {
  const size_t count = o.bytes / sizeof(T);
  const size_t nvec = o.bytes / 16;
  for (size_t k = 0; k < buffers.size(); ++k)
    fillKernel<T><<<1024, kThreads, 0, stream>>>(static_cast<T*>(buffers[k]), count, static_cast<float>(k + 1));
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  for (int n : o.inputs) {
    CHECK(cudaMemsetAsync(out, 0, o.bytes, stream));
    int blocks = 0;
    float best = 0, median = 0;
    auto body = [&] {
      switch (n) {
        case 2: launchSum<T, 2>(buffers, out, nvec, blocks, stream); break;
        case 4: launchSum<T, 4>(buffers, out, nvec, blocks, stream); break;
        default: launchSum<T, 8>(buffers, out, nvec, blocks, stream); break;
      }
    };
    blocks = n == 2 ? gridFor<T, 2>() : n == 4 ? gridFor<T, 4>() : gridFor<T, 8>();
    timeIt(stream, o.reps, body, best, median);
    const bool ok = checkSample<T>(out, count, n * (n + 1) / 2.0f);
    const double s = best * 1e-3;
    std::printf("reduce dtype=%s n=%d bytes=%zu reps=%d blocks=%d best_ms=%.4f median_ms=%.4f traffic_GBps=%.1f "
                "buffer_GBps=%.1f check=%s\n",
                name, n, o.bytes, o.reps, blocks, best, median, (n + 1.0) * o.bytes / s / 1e9, o.bytes / s / 1e9,
                ok ? "ok" : "WRONG");
    std::fflush(stdout);
  }
}

int runReduce(const Options& o) {
  const int most = *std::max_element(o.inputs.begin(), o.inputs.end());
  size_t freeBytes = 0, totalBytes = 0;
  CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  if ((most + 1) * o.bytes > freeBytes) {
    std::fprintf(stderr, "gpu_roofline: %d buffers of %zu bytes do not fit in %zu free bytes (use --bytes)\n",
                 most + 1, o.bytes, freeBytes);
    return 1;
  }
  std::vector<void*> buffers(most);
  for (void*& b : buffers) CHECK(cudaMalloc(&b, o.bytes));
  void* out = nullptr;
  CHECK(cudaMalloc(&out, o.bytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (o.dtype == "float" || o.dtype == "all") runSumType<float>(o, "float", buffers, out, stream);
  if (o.dtype == "bfloat16" || o.dtype == "all") runSumType<__nv_bfloat16>(o, "bfloat16", buffers, out, stream);
  CHECK(cudaStreamDestroy(stream));
  for (void* b : buffers) CHECK(cudaFree(b));
  CHECK(cudaFree(out));
  return 0;
}

int runLaunch(const Options& o) {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 100; ++i) emptyKernel<<<1, 1, 0, stream>>>();  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));

  const Clock::time_point start = Clock::now();
  for (int i = 0; i < o.reps; ++i) emptyKernel<<<1, 1, 0, stream>>>();
  CHECK(cudaStreamSynchronize(stream));
  const double backToBack = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / o.reps;
  CHECK(cudaGetLastError());

  double total = 0, best = 1e30;
  for (int i = 0; i < o.reps; ++i) {
    const Clock::time_point t0 = Clock::now();
    emptyKernel<<<1, 1, 0, stream>>>();
    CHECK(cudaStreamSynchronize(stream));
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    total += us;
    best = std::min(best, us);
  }
  CHECK(cudaGetLastError());
  std::printf("launch reps=%d back_to_back_us=%.2f roundtrip_us=%.2f roundtrip_min_us=%.2f\n", o.reps, backToBack,
              total / o.reps, best);
  CHECK(cudaStreamDestroy(stream));
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: gpu_roofline info\n"
               "       gpu_roofline copy   [--bytes N] [--reps R]\n"
               "       gpu_roofline reduce [--bytes N] [--reps R] [--inputs \"2 4 8\"] [--dtype float|bfloat16|all]\n"
               "       gpu_roofline launch [--reps R]\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  const std::string command = argv[1];
  if (command == "-h" || command == "--help") {
    usage();
    return 0;
  }
  Options o = parseOptions(argc, argv);
  CHECK(cudaSetDevice(0));
  if (command == "info") return runInfo();
  if (command == "copy") return runCopy(o);
  if (command == "reduce") return runReduce(o);
  if (command == "launch") {
    if (!o.repsGiven) o.reps = 1000;
    return runLaunch(o);
  }
  usage();
  return 2;
}
