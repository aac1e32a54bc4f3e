// ThreadSanitizer stress test of the tuner plugin (built with -fsanitize=thread by
// plugin/CMakeLists.txt, linked with the plugin sources directly).
//
// Readers: many threads call getCollInfo (v6, v4, v3, v2) and getChunkSize on shared
// communicators, each with its own cost table, and check every answer against the one computed
// before the threads started (determinism). Churners: threads init and destroy communicators of
// several sizes over the same table, so the shared index cache is created, shared and released
// concurrently with the readers. Exit code 0 when every answer matched; TSan reports races itself.
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tuccl/nccl_tuner.h"

extern "C" const ncclTuner_v6_t ncclTunerPlugin_v6;
extern "C" const ncclTuner_v4_t ncclTunerPlugin_v4;
extern "C" const ncclTuner_v3_t ncclTunerPlugin_v3;
extern "C" const ncclTuner_v2_t ncclTunerPlugin_v2;

namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
constexpr int kQueries = 512;

std::atomic<long> logCalls{0};

/// A thread-safe logger, as NCCL's is: formats into a local buffer, counts.
void countingLogger(ncclDebugLogLevel /*level*/, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                    const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  ++logCalls;
}

std::string writeTable() {
  std::string path = "/tmp/tuccl_tsan_table_" + std::to_string(getpid()) + ".json";
  std::ofstream out(path);
  out << "{\"version\": 1, \"entries\": [\n";
  const char* colls[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce"};
  const char* algos[] = {"tree", "ring", "nvls", "pat"};
  const char* protos[] = {"ll", "ll128", "simple"};
  for (int i = 0; i < 1000; ++i) {
    uint64_t lo = static_cast<uint64_t>(i / 5) * 4096;
    out << (i ? ",\n" : "") << "{\"collective\": \"" << colls[i % 5] << "\", \"minBytes\": " << lo
        << ", \"maxBytes\": " << lo + 4095 << ", \"nNodes\": " << (i % 3 == 0 ? -1 : 2)
        << ", \"algorithm\": \"" << algos[i % 4] << "\", \"protocol\": \"" << protos[i % 3]
        << "\", \"fallback\": [{\"algorithm\": \"ring\", "
        << "\"protocol\": \"simple\"}], \"nChannels\": " << 1 + i % 32
        << ", \"chunkSize\": " << 65536 * (1 + i % 4) << "}";
  }
  out << "]}\n";
  return path;
}

void fillCosts(float* table, int query) {
  for (int i = 0; i < kAlgos * kProtos; ++i)
    table[i] = ((query + i) % 5 == 0) ? -1.0f : 10.0f + static_cast<float>(i);
}

struct Answer {
  float costs[kAlgos * kProtos];
  int nChannels;
  size_t chunkSize;
};

Answer ask(void* ctx, int query) {
  Answer answer{};
  fillCosts(answer.costs, query);
  auto coll = static_cast<ncclFunc_t>(query % 5);
  size_t bytes = static_cast<size_t>(query) * 977;
  ncclTunerPlugin_v6.getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(answer.costs), kAlgos,
                                 kProtos, 0, &answer.nChannels);
  answer.chunkSize = 0;
  ncclTunerPlugin_v6.getChunkSize(ctx, coll, bytes, 1, 2, 8, &answer.chunkSize);
  return answer;
}

bool same(const Answer& a, const Answer& b) {
  for (int i = 0; i < kAlgos * kProtos; ++i) {
    if (a.costs[i] != b.costs[i]) return false;
  }
  return a.nChannels == b.nChannels && a.chunkSize == b.chunkSize;
}

}  // namespace

int main() {
  std::string path = writeTable();
  setenv("TUCCL_TUNER_TABLE", path.c_str(), 1);
  setenv("TUCCL_TUNER_TRACE", "1", 1);  // every decision goes through the logger, from every thread
  unsetenv("NCCL_TUNER_CONFIG_FILE");

  void* shared = nullptr;
  if (ncclTunerPlugin_v6.init(&shared, 1, 16, 2, countingLogger, nullptr, nullptr) != ncclSuccess ||
      shared == nullptr) {
    std::fprintf(stderr, "init failed\n");
    return 1;
  }
  std::vector<Answer> expected;
  for (int q = 0; q < kQueries; ++q) expected.push_back(ask(shared, q));

  std::atomic<int> mismatches{0};
  std::atomic<bool> stop{false};
  std::atomic<long> churned{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      // At least 200 rounds, and until the churners have created and destroyed 100 communicators.
      for (int round = 0; round < 200 || churned.load() < 100; ++round) {
        for (int q = t; q < kQueries; q += 3) {
          if (!same(ask(shared, q), expected[q])) ++mismatches;
        }
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int iteration = 0;
      while (!stop.load()) {
        size_t nNodes = 1 + static_cast<size_t>((t + iteration) % 3);
        size_t nRanks = nNodes * 8;
        void* ctx = nullptr;
        float costs[kAlgos * kProtos];
        int channels = 0;
        int algorithm = -1;
        int protocol = -1;
        switch (iteration % 4) {
          case 0:
            ncclTunerPlugin_v6.init(&ctx, static_cast<uint64_t>(iteration), nRanks, nNodes, nullptr, nullptr,
                                    nullptr);
            if (nNodes == 2 && !same(ask(ctx, iteration % kQueries), expected[iteration % kQueries]))
              ++mismatches;
            ncclTunerPlugin_v6.finalize(ctx);
            break;
          case 1:
            ncclTunerPlugin_v4.init(nRanks, nNodes, countingLogger, &ctx);
            fillCosts(costs, iteration);
            ncclTunerPlugin_v4.getCollInfo(ctx, ncclFuncAllReduce, 4096, 1, reinterpret_cast<float**>(costs),
                                           kAlgos, kProtos, 1, &channels);
            ncclTunerPlugin_v4.destroy(ctx);
            break;
          case 2:
            ncclTunerPlugin_v3.init(nRanks, nNodes, nullptr, &ctx);
            fillCosts(costs, iteration);
            ncclTunerPlugin_v3.getCollInfo(ctx, ncclFuncAllGather, 8192, 2, reinterpret_cast<float**>(costs),
                                           6, kProtos, &channels);
            ncclTunerPlugin_v3.destroy(ctx);
            break;
          default:
            ncclTunerPlugin_v2.init(nRanks, nNodes, nullptr, &ctx);
            ncclTunerPlugin_v2.getCollInfo(ctx, ncclFuncReduceScatter, 100, 1, 1, 1, &algorithm, &protocol,
                                           &channels);
            ncclTunerPlugin_v2.destroy(ctx);
            break;
        }
        ++iteration;
        ++churned;
      }
    });
  }
  for (int t = 0; t < 8; ++t) threads[t].join();
  stop = true;
  for (size_t t = 8; t < threads.size(); ++t) threads[t].join();
  ncclTunerPlugin_v6.finalize(shared);
  std::remove(path.c_str());
  if (mismatches.load() != 0) {
    std::fprintf(stderr, "%d answers differed from the single-threaded ones\n", mismatches.load());
    return 1;
  }
  std::printf("plugin_tsan_stress: %d queries x 200+ rounds on 8 threads, %ld communicators created and "
              "destroyed meanwhile, %ld log calls: consistent\n",
              kQueries, churned.load(), logCalls.load());
  return 0;
}
