// getCollInfo latency of the built tuner plugin (libnccl-tuner-tuccl.so, loaded with dlopen as
// NCCL loads it) for tables of 10, 1,000 and 100,000 entries that all match the communicator.
//
// Each call is timed on its own (steady_clock, the clock's own cost subtracted) with a fresh copy
// of a realistic v6 cost table (some entries -1); the table prints median and p99 in ns, and the
// mean of back-to-back batches (no clock in the loop). Not asserted anywhere.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tuccl/nccl_tuner.h"

namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
constexpr int kQueries = 4096;
constexpr int kSamples = 200000;

using Clock = std::chrono::steady_clock;

std::string writeTable(int entries, const std::string& path) {
  std::ofstream out(path);
  out << "{\"version\": 1, \"entries\": [\n";
  const char* colls[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
  const char* algos[] = {"ring", "tree", "nvls", "pat"};
  const char* protos[] = {"ll", "ll128", "simple"};
  int perColl = std::max(1, entries / 5);
  for (int i = 0; i < entries; ++i) {
    int slot = i / 5;
    uint64_t lo = static_cast<uint64_t>(slot) * (1ull << 34) / static_cast<uint64_t>(perColl);
    uint64_t hi = static_cast<uint64_t>(slot + 1) * (1ull << 34) / static_cast<uint64_t>(perColl) - 1;
    out << (i ? ",\n" : "") << "{\"collective\": \"" << colls[i % 5] << "\", \"minBytes\": " << lo
        << ", \"maxBytes\": " << hi << ", \"nNodes\": 2, \"nRanks\": 16, \"algorithm\": \"" << algos[i % 4]
        << "\", \"protocol\": \"" << protos[i % 3]
        << "\", \"fallback\": [{\"algorithm\": \"ring\", \"protocol\": \"simple\"}], \"nChannels\": "
        << 1 + i % 32 << "}";
  }
  out << "]}\n";
  return path;
}

struct Query {
  ncclFunc_t coll;
  size_t bytes;
  float costs[kAlgos * kProtos];
};

std::vector<Query> makeQueries() {
  std::mt19937_64 rng(42);
  std::vector<Query> queries(kQueries);
  for (Query& q : queries) {
    q.coll = static_cast<ncclFunc_t>(rng() % 5);
    q.bytes = static_cast<size_t>(rng() % (1ull << 34));
    for (int i = 0; i < kAlgos * kProtos; ++i)
      q.costs[i] = (rng() % 6 == 0) ? -1.0f : 5.0f + (rng() % 1000) / 10.0f;
  }
  return queries;
}

struct Stats {
  double median;
  double p99;
  double batchMean;
};

double clockOverhead() {
  std::vector<double> samples(kSamples);
  for (double& s : samples) {
    auto t0 = Clock::now();
    auto t1 = Clock::now();
    s = std::chrono::duration<double, std::nano>(t1 - t0).count();
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

template <typename Call>
Stats measure(const std::vector<Query>& queries, Call call, double overhead) {
  std::vector<double> samples(kSamples);
  float costs[kAlgos * kProtos];
  for (int i = 0; i < kSamples; ++i) {
    const Query& q = queries[static_cast<size_t>(i) % queries.size()];
    std::memcpy(costs, q.costs, sizeof costs);
    auto t0 = Clock::now();
    call(q, costs);
    auto t1 = Clock::now();
    samples[i] = std::max(0.0, std::chrono::duration<double, std::nano>(t1 - t0).count() - overhead);
  }
  std::sort(samples.begin(), samples.end());
  // Back to back: the memcpy of the cost table is part of the loop, as it is in NCCL.
  auto t0 = Clock::now();
  for (int i = 0; i < kSamples; ++i) {
    const Query& q = queries[static_cast<size_t>(i) % queries.size()];
    std::memcpy(costs, q.costs, sizeof costs);
    call(q, costs);
  }
  auto t1 = Clock::now();
  return {samples[samples.size() / 2], samples[samples.size() * 99 / 100],
          std::chrono::duration<double, std::nano>(t1 - t0).count() / kSamples};
}

}  // namespace

int main() {
  void* library = dlopen(TUCCL_TUNER_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", TUCCL_TUNER_PLUGIN_PATH, dlerror());
    return 1;
  }
  auto* tuner = static_cast<const ncclTuner_v6_t*>(dlsym(library, "ncclTunerPlugin_v6"));
  if (tuner == nullptr) {
    std::fprintf(stderr, "no ncclTunerPlugin_v6 in %s\n", TUCCL_TUNER_PLUGIN_PATH);
    return 1;
  }
  unsetenv("NCCL_TUNER_CONFIG_FILE");
  std::vector<Query> queries = makeQueries();
  double overhead = clockOverhead();
  std::printf(
      "plugin: %s\nclock overhead subtracted: %.1f ns; %d calls per row, v6 getCollInfo, 7x3 cost table\n\n",
      TUCCL_TUNER_PLUGIN_PATH, overhead, kSamples);
  std::printf("%-10s %10s %12s %12s %12s %14s\n", "entries", "init ms", "median ns", "p99 ns", "mean ns",
              "chunk med ns");
  for (int entries : {10, 1000, 100000}) {
    std::string path =
        "/tmp/tuccl_bench_table_" + std::to_string(getpid()) + "_" + std::to_string(entries) + ".json";
    writeTable(entries, path);
    setenv("TUCCL_TUNER_TABLE", path.c_str(), 1);
    void* ctx = nullptr;
    auto t0 = Clock::now();
    tuner->init(&ctx, 1, 16, 2, nullptr, nullptr, nullptr);
    double initMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    Stats info = measure(
        queries,
        [&](const Query& q, float* costs) {
          int channels = 0;
          tuner->getCollInfo(ctx, q.coll, q.bytes, 1, reinterpret_cast<float**>(costs), kAlgos, kProtos, 0,
                             &channels);
        },
        overhead);
    Stats chunk = measure(
        queries,
        [&](const Query& q, float*) {
          size_t chunkSize = 0;
          tuner->getChunkSize(ctx, q.coll, q.bytes, 1, 2, 8, &chunkSize);
        },
        overhead);
    std::printf("%-10d %10.1f %12.1f %12.1f %12.1f %14.1f\n", entries, initMs, info.median, info.p99,
                info.batchMean, chunk.median);
    tuner->finalize(ctx);
    std::remove(path.c_str());
  }
  dlclose(library);
  return 0;
}
