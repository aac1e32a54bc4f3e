// The built libnccl-tuner-tuccl.so, loaded the way NCCL loads it (dlopen, ncclTunerPlugin_v6 ..
// _v2) and driven through every ABI version with realistic cost tables.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "table/table_io.h"
#include "table/tuner_constants.h"
#include "tuccl/nccl_tuner.h"

namespace {

namespace fs = std::filesystem;
const std::string kData = std::string(TUCCL_SOURCE_DIR) + "/tests/data/table/";
constexpr int A = TUCCL_NCCL_NUM_ALGORITHMS;
constexpr int P = TUCCL_NCCL_NUM_PROTOCOLS;
enum { TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT };
enum { LL, LL128, SIMPLE };

// ---- the plugin, loaded once per process as NCCL does -------------------------------------------
struct Plugin {
  void* handle = nullptr;
  const ncclTuner_v2_t* v2 = nullptr;
  const ncclTuner_v3_t* v3 = nullptr;
  const ncclTuner_v4_t* v4 = nullptr;
  const ncclTuner_v5_t* v5 = nullptr;
  const ncclTuner_v6_t* v6 = nullptr;
  const ncclTuner_v7_t* v7 = nullptr;
};

const Plugin& plugin() {
  static Plugin p = [] {
    Plugin loaded;
    loaded.handle = dlopen(TUCCL_TUNER_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (loaded.handle == nullptr) return loaded;
    loaded.v7 = static_cast<const ncclTuner_v7_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v7"));
    loaded.v6 = static_cast<const ncclTuner_v6_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v6"));
    loaded.v5 = static_cast<const ncclTuner_v5_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v5"));
    loaded.v4 = static_cast<const ncclTuner_v4_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v4"));
    loaded.v3 = static_cast<const ncclTuner_v3_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v3"));
    loaded.v2 = static_cast<const ncclTuner_v2_t*>(dlsym(loaded.handle, "ncclTunerPlugin_v2"));
    return loaded;
  }();
  return p;
}

// ---- NCCL's logger, captured ------------------------------------------------------------------------
struct LogLine {
  int level;
  unsigned long flags;
  std::string text;
};
std::mutex logMutex;
std::vector<LogLine> logLines;

void captureLog(ncclDebugLogLevel level, unsigned long flags, const char* /*file*/, int /*line*/,
                const char* fmt, ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(logMutex);
  logLines.push_back({static_cast<int>(level), flags, text});
}

std::vector<LogLine> takeLog() {
  std::lock_guard<std::mutex> lock(logMutex);
  return std::exchange(logLines, {});
}

int countLevel(const std::vector<LogLine>& lines, int level) {
  int n = 0;
  for (const LogLine& line : lines) n += line.level == level;
  return n;
}

std::string joined(const std::vector<LogLine>& lines) {
  std::string all;
  for (const LogLine& line : lines) all += std::to_string(line.level) + ": " + line.text + "\n";
  return all;
}

// ---- environment ------------------------------------------------------------------------------------
/// Sets the plugin's variables for one test and restores the previous values.
class ScopedEnv {
 public:
  ScopedEnv(std::map<std::string, std::string> values) {
    for (const char* name : {"TUCCL_TUNER_TABLE", "NCCL_TUNER_CONFIG_FILE", "TUCCL_TOPOLOGY_SIGNATURE",
                             "NCCL_DEBUG", "TUCCL_TUNER_TRACE"}) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      auto it = values.find(name);
      if (it != values.end()) {
        setenv(name, it->second.c_str(), 1);
      } else {
        unsetenv(name);
      }
    }
    takeLog();
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// ---- cost tables ------------------------------------------------------------------------------------
using Costs = std::vector<float>;

/// A plausible NCCL 2.2x table for 2 nodes x 8 GPUs: no CollNet; NVLS only Simple; PAT only for
/// AllGather / ReduceScatter; everything else available with rising costs.
Costs realisticCosts(int numAlgo = A, bool nvls = true, bool pat = false) {
  Costs c(static_cast<size_t>(numAlgo) * P);
  for (int a = 0; a < numAlgo; ++a) {
    for (int p = 0; p < P; ++p) c[a * P + p] = 30.0f + 3.0f * static_cast<float>(a) + static_cast<float>(p);
  }
  for (int p = 0; p < P; ++p) c[COLLNET_DIRECT * P + p] = c[COLLNET_CHAIN * P + p] = -1.0f;
  for (int a : {NVLS, NVLS_TREE}) {
    c[a * P + LL] = c[a * P + LL128] = -1.0f;
    if (!nvls) c[a * P + SIMPLE] = -1.0f;
  }
  if (numAlgo > PAT) {
    for (int p = 0; p < P; ++p) c[PAT * P + p] = pat && p == SIMPLE ? 25.0f : -1.0f;
  }
  return c;
}

std::pair<int, int> ncclPick(const Costs& c, int numAlgo) {
  int best = -1;
  float minTime = 3.4e38f;
  for (int i = 0; i < numAlgo * P; ++i) {
    if (c[i] >= 0.0f && c[i] < minTime) {
      minTime = c[i];
      best = i;
    }
  }
  return best < 0 ? std::pair{-1, -1} : std::pair{best / P, best % P};
}

float** asTable(Costs& c) { return reinterpret_cast<float**>(c.data()); }

std::string tempPath(const std::string& name) {
  return testing::TempDir() + "/tuccl_abi_" + std::to_string(getpid()) + "_" + name;
}

/// A session with one communicator through ncclTunerPlugin_v6 (the default) or _v7: the same five
/// entries, v7's init taking the larger constants struct.
struct Comm {
  int version = 6;
  void* ctx = nullptr;
  Comm(size_t nRanks, size_t nNodes, int version_ = 6, void* constants = nullptr) : version(version_) {
    if (version == 7) {
      EXPECT_EQ(plugin().v7->init(&ctx, 42, nRanks, nNodes, captureLog, nullptr,
                                  static_cast<ncclTunerConstants_v7_t*>(constants)),
                ncclSuccess);
    } else {
      EXPECT_EQ(plugin().v6->init(&ctx, 42, nRanks, nNodes, captureLog, nullptr,
                                  static_cast<ncclTunerConstants_v5_t*>(constants)),
                ncclSuccess);
    }
  }
  ~Comm() { EXPECT_EQ(version == 7 ? plugin().v7->finalize(ctx) : plugin().v6->finalize(ctx), ncclSuccess); }
  ncclResult_t collInfo(ncclFunc_t coll, size_t bytes, int pipeOps, float** costs, int numAlgo, int numProto,
                        int regBuff, int* channels) {
    return version == 7 ? plugin().v7->getCollInfo(ctx, coll, bytes, pipeOps, costs, numAlgo, numProto,
                                                   regBuff, channels)
                        : plugin().v6->getCollInfo(ctx, coll, bytes, pipeOps, costs, numAlgo, numProto,
                                                   regBuff, channels);
  }
  ncclResult_t chunkSize(ncclFunc_t coll, size_t bytes, int algo, int proto, int channels, size_t* chunk) {
    return version == 7 ? plugin().v7->getChunkSize(ctx, coll, bytes, algo, proto, channels, chunk)
                        : plugin().v6->getChunkSize(ctx, coll, bytes, algo, proto, channels, chunk);
  }
  std::pair<int, int> pick(ncclFunc_t coll, size_t bytes, Costs c, int* channels, int numAlgo = A,
                           int regBuff = 0) {
    EXPECT_EQ(collInfo(coll, bytes, 1, asTable(c), numAlgo, P, regBuff, channels), ncclSuccess);
    return ncclPick(c, numAlgo);
  }
};

/// The versions whose getCollInfo / getChunkSize have one shape: every decision test runs on both.
constexpr int kCostTableVersions[] = {6, 7};

// =====================================================================================================

TEST(TunerAbi, ExportsEveryVersionWithCLinkage) {
  const Plugin& p = plugin();
  ASSERT_NE(p.handle, nullptr) << dlerror();
  ASSERT_NE(p.v7, nullptr);
  ASSERT_NE(p.v6, nullptr);
  ASSERT_NE(p.v5, nullptr);
  ASSERT_NE(p.v4, nullptr);
  ASSERT_NE(p.v3, nullptr);
  ASSERT_NE(p.v2, nullptr);
  EXPECT_STREQ(p.v7->name, "TuCCL");
  EXPECT_STREQ(p.v6->name, "TuCCL");
  EXPECT_NE(p.v7->getChunkSize, nullptr);
  EXPECT_STREQ(p.v2->name, "TuCCL");
  EXPECT_NE(p.v6->getChunkSize, nullptr);
  for (const void* fn :
       {reinterpret_cast<const void*>(p.v7->init), reinterpret_cast<const void*>(p.v7->getCollInfo),
        reinterpret_cast<const void*>(p.v7->finalize), reinterpret_cast<const void*>(p.v6->init),
        reinterpret_cast<const void*>(p.v6->getCollInfo), reinterpret_cast<const void*>(p.v6->finalize),
        reinterpret_cast<const void*>(p.v5->init), reinterpret_cast<const void*>(p.v4->getCollInfo),
        reinterpret_cast<const void*>(p.v3->init), reinterpret_cast<const void*>(p.v2->getCollInfo),
        reinterpret_cast<const void*>(p.v2->destroy)}) {
    EXPECT_NE(fn, nullptr);
  }
  // One implementation behind the adapters: the same getCollInfo for v4..v7, one init for v5/v6.
  EXPECT_EQ(reinterpret_cast<const void*>(p.v7->getCollInfo),
            reinterpret_cast<const void*>(p.v6->getCollInfo));
  EXPECT_EQ(reinterpret_cast<const void*>(p.v7->getChunkSize),
            reinterpret_cast<const void*>(p.v6->getChunkSize));
  EXPECT_EQ(reinterpret_cast<const void*>(p.v6->init), reinterpret_cast<const void*>(p.v5->init));
  // Nothing of ours beyond the six structs is visible.
  EXPECT_EQ(dlsym(p.handle, "_ZN5tuccl13readTableJsonESt17basic_string_viewIcSt11char_traitsIcEES4_"),
            nullptr);
  EXPECT_EQ(dlsym(p.handle, "ncclTunerPlugin_v1"), nullptr);
}

TEST(TunerAbi, V6AndV7DecisionsMatchTheTable) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  for (int version : kCostTableVersions) {
    SCOPED_TRACE("tuner v" + std::to_string(version));
    Comm comm(16, 2, version);
    int channels = 0;
    // entries[0]: TREE/LL, nChannels 4.
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1024, realisticCosts(), &channels), std::pair(int{TREE}, int{LL}));
    EXPECT_EQ(channels, 4);
    // entries[1]: RING/LL128; unavailable -> TREE/LL128; both unavailable -> cheapest SIMPLE.
    channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1 << 20, realisticCosts(), &channels),
              std::pair(int{RING}, int{LL128}));
    EXPECT_EQ(channels, 16);
    Costs noRingLL128 = realisticCosts();
    noRingLL128[RING * P + LL128] = -1;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1 << 20, noRingLL128, &channels),
              std::pair(int{TREE}, int{LL128}));
    Costs noLL128 = noRingLL128;
    noLL128[TREE * P + LL128] = -1;
    noLL128[RING * P + SIMPLE] = 10;  // the cheapest SIMPLE
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1 << 20, noLL128, &channels), std::pair(int{RING}, int{SIMPLE}));
    // entries[2]: NVLS/SIMPLE, else RING/SIMPLE; no nChannels.
    channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 64 << 20, realisticCosts(), &channels),
              std::pair(int{NVLS}, int{SIMPLE}));
    EXPECT_EQ(channels, 0);
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 64 << 20, realisticCosts(A, false), &channels),
              std::pair(int{RING}, int{SIMPLE}));
    // entries[4]: PAT/SIMPLE when available, else RING/LL128.
    EXPECT_EQ(comm.pick(ncclFuncAllGather, 100000, realisticCosts(A, true, true), &channels),
              std::pair(int{PAT}, int{SIMPLE}));
    EXPECT_EQ(comm.pick(ncclFuncAllGather, 100000, realisticCosts(A, true, false), &channels),
              std::pair(int{RING}, int{LL128}));
    // entries[5]: protocol LL128 only: the cheapest LL128 (TREE).
    EXPECT_EQ(comm.pick(ncclFuncReduceScatter, 5 << 20, realisticCosts(), &channels),
              std::pair(int{TREE}, int{LL128}));
    // entries[7]: nChannels only.
    Costs costs = realisticCosts();
    Costs before = costs;
    channels = 0;
    ASSERT_EQ(comm.collInfo(ncclFuncReduce, 1500, 1, asTable(costs), A, P, 0, &channels), ncclSuccess);
    EXPECT_EQ(costs, before);
    EXPECT_EQ(channels, 8);
  }
}

TEST(TunerAbi, NoMatchLeavesTableAndChannelsUntouched) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  for (int version : kCostTableVersions) {
    Comm comm(16, 2, version);
    for (auto [coll, bytes] :
         std::vector<std::pair<ncclFunc_t, size_t>>{{ncclFuncReduce, 5000},
                                                    {ncclFuncReduce, 0},
                                                    {ncclFuncBroadcast, 100},  // needs a signature
                                                    {ncclFuncAllGather, 2 << 20},
                                                    {ncclFuncSendRecv, 100},
                                                    {ncclFuncRecv, 100}}) {
      Costs costs = realisticCosts();
      Costs before = costs;
      int channels = 0;
      ASSERT_EQ(comm.collInfo(coll, bytes, 1, asTable(costs), A, P, 0, &channels), ncclSuccess);
      EXPECT_EQ(costs, before) << "v" << version << " coll " << coll << " bytes " << bytes;
      EXPECT_EQ(channels, 0);
      size_t chunk = 12345;
      ASSERT_EQ(comm.chunkSize(coll, bytes, RING, SIMPLE, 8, &chunk), ncclSuccess);
      EXPECT_EQ(chunk, 12345u);
    }
  }
}

TEST(TunerAbi, UnavailableEntriesAreNeverChosen) {
  // Random availability masks over every collective and size: whatever the table says, the
  // entry NCCL ends up picking was available, and -1 entries stay -1.
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  std::mt19937 rng(3);
  for (auto [nRanks, nNodes] : std::vector<std::pair<size_t, size_t>>{{16, 2}, {8, 1}, {32, 4}}) {
    Comm comm(nRanks, nNodes, nRanks == 8 ? 7 : 6);
    for (int i = 0; i < 4000; ++i) {
      int numAlgo = i % 2 ? A : 6;
      Costs costs(static_cast<size_t>(numAlgo) * P);
      for (float& c : costs) c = rng() % 3 == 0 ? -1.0f : static_cast<float>(rng() % 100);
      Costs before = costs;
      int channels = 0;
      auto coll = static_cast<ncclFunc_t>(rng() % 5);
      size_t bytes = static_cast<size_t>(1) << (rng() % 34);
      ASSERT_EQ(
          comm.collInfo(coll, bytes, 1, asTable(costs), numAlgo, P, static_cast<int>(rng() % 2), &channels),
          ncclSuccess);
      for (size_t k = 0; k < costs.size(); ++k) {
        if (before[k] < 0) {
          ASSERT_EQ(costs[k], before[k]);
        }
      }
      auto [a, p] = ncclPick(costs, numAlgo);
      if (a >= 0) {
        ASSERT_GE(before[a * P + p], 0.0f);
      }
      ASSERT_TRUE(channels == 0 || (channels >= 1 && channels <= 64));
    }
  }
}

TEST(TunerAbi, LibtucclAlgorithmsInTheTableChangeNoDecision) {
  // The same table with a libtuccl algorithm on every entry: the tuner reads it and decides, for
  // every collective, size and availability mask, exactly as without them.
  tuccl::Expected<tuccl::LoadedTable> loaded = tuccl::loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok());
  tuccl::LookupTable withAlgorithms = loaded->table;
  for (tuccl::TableEntry& entry : withAlgorithms.entries) entry.tucclAlgorithm = "ring";
  const std::string path = tempPath("libtuccl_algorithms.json");
  {
    std::ofstream out(path);
    out << tuccl::writeTableJson(withAlgorithms);
  }
  std::mt19937 rng(5);
  ScopedEnv plain({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  Comm reference(16, 2);
  ScopedEnv extended({{"TUCCL_TUNER_TABLE", path}});
  Comm comm(16, 2);
  for (int i = 0; i < 2000; ++i) {
    Costs costs(static_cast<size_t>(A) * P);
    for (float& c : costs) c = rng() % 3 == 0 ? -1.0f : static_cast<float>(rng() % 100);
    Costs expected = costs;
    auto coll = static_cast<ncclFunc_t>(rng() % 5);
    size_t bytes = static_cast<size_t>(1) << (rng() % 34);
    int channels = 0;
    int expectedChannels = 0;
    ASSERT_EQ(reference.collInfo(coll, bytes, 1, asTable(expected), A, P, 0, &expectedChannels), ncclSuccess);
    ASSERT_EQ(comm.collInfo(coll, bytes, 1, asTable(costs), A, P, 0, &channels), ncclSuccess);
    ASSERT_EQ(costs, expected) << "coll " << coll << " bytes " << bytes;
    ASSERT_EQ(channels, expectedChannels);
  }
  std::remove(path.c_str());
}

TEST(TunerAbi, V5V4V3UseTheSameDecisions) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  void* c5 = nullptr;
  void* c4 = nullptr;
  void* c3 = nullptr;
  ASSERT_EQ(plugin().v5->init(&c5, 7, 16, 2, captureLog, nullptr, nullptr), ncclSuccess);
  ASSERT_EQ(plugin().v4->init(16, 2, captureLog, &c4), ncclSuccess);
  ASSERT_EQ(plugin().v3->init(16, 2, captureLog, &c3), ncclSuccess);
  for (size_t bytes : {size_t{100}, size_t{1} << 20, size_t{64} << 20}) {
    for (int numAlgo : {6, 7}) {
      Costs a = realisticCosts(numAlgo), b = a, c = a;
      int ch5 = 0, ch4 = 0, ch3 = 0;
      ASSERT_EQ(plugin().v5->getCollInfo(c5, ncclFuncAllReduce, bytes, 1, asTable(a), numAlgo, P, 0, &ch5),
                ncclSuccess);
      ASSERT_EQ(plugin().v4->getCollInfo(c4, ncclFuncAllReduce, bytes, 1, asTable(b), numAlgo, P, 0, &ch4),
                ncclSuccess);
      ASSERT_EQ(plugin().v3->getCollInfo(c3, ncclFuncAllReduce, bytes, 1, asTable(c), numAlgo, P, &ch3),
                ncclSuccess);
      EXPECT_EQ(a, b);
      EXPECT_EQ(a, c);
      EXPECT_EQ(ch5, ch4);
      EXPECT_EQ(ch5, ch3);
    }
  }
  // PAT on the 6-algorithm table of NCCL < 2.23 is unavailable: AllGather falls back to RING/LL128.
  Costs old = realisticCosts(6);
  int channels = 0;
  ASSERT_EQ(plugin().v3->getCollInfo(c3, ncclFuncAllGather, 1000, 1, asTable(old), 6, P, &channels),
            ncclSuccess);
  EXPECT_EQ(ncclPick(old, 6), std::pair(int{RING}, int{LL128}));
  EXPECT_EQ(plugin().v5->finalize(c5), ncclSuccess);
  EXPECT_EQ(plugin().v4->destroy(c4), ncclSuccess);
  EXPECT_EQ(plugin().v3->destroy(c3), ncclSuccess);
}

TEST(TunerAbi, V2OutputsIndicesAndRespectsSupportFlags) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v2->init(16, 2, captureLog, &ctx), ncclSuccess);
  int algorithm = -1, protocol = -1, channels = 0;
  ASSERT_EQ(plugin().v2->getCollInfo(ctx, ncclFuncAllReduce, 1024, 0, 0, 1, &algorithm, &protocol, &channels),
            ncclSuccess);
  EXPECT_EQ(algorithm, TREE);
  EXPECT_EQ(protocol, LL);
  EXPECT_EQ(channels, 4);
  algorithm = protocol = -1;
  channels = 0;
  plugin().v2->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 0, 0, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, RING) << "NVLS needs nvlsSupport";
  EXPECT_EQ(protocol, SIMPLE);
  plugin().v2->getCollInfo(ctx, ncclFuncAllReduce, 64 << 20, 0, 1, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, NVLS);
  // AllGather's PAT does not exist in NCCL 2.21: the fallback RING/LL128.
  plugin().v2->getCollInfo(ctx, ncclFuncAllGather, 1000, 0, 0, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, RING);
  EXPECT_EQ(protocol, LL128);
  // A protocol-only entry cannot be expressed in v2; a non-matching call: outputs untouched.
  for (auto [coll, bytes] :
       std::vector<std::pair<ncclFunc_t, size_t>>{{ncclFuncReduceScatter, 100}, {ncclFuncReduce, 5000}}) {
    algorithm = protocol = -1;
    channels = 0;
    plugin().v2->getCollInfo(ctx, coll, bytes, 1, 1, 1, &algorithm, &protocol, &channels);
    EXPECT_EQ(algorithm, -1);
    EXPECT_EQ(protocol, -1);
    EXPECT_EQ(channels, 0);
  }
  EXPECT_EQ(plugin().v2->destroy(ctx), ncclSuccess);
}

TEST(TunerAbi, V6AndV7ChunkSizeOnlyWhenTheEntryGivesOne) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  for (int version : kCostTableVersions) {
    SCOPED_TRACE("tuner v" + std::to_string(version));
    Comm comm(16, 2, version);
    size_t chunk = 0;
    ASSERT_EQ(comm.chunkSize(ncclFuncAllReduce, 1 << 20, RING, LL128, 16, &chunk), ncclSuccess);
    EXPECT_EQ(chunk, 512u << 10);
    chunk = 777;
    comm.chunkSize(ncclFuncAllReduce, 1 << 20, NVLS, LL, 16, &chunk);
    EXPECT_EQ(chunk, 777u) << "NVLS/LL is none of the entry's choices";
    comm.chunkSize(ncclFuncAllReduce, 1024, TREE, LL, 4, &chunk);
    EXPECT_EQ(chunk, 777u) << "entries[0] sets no chunk size";
    comm.chunkSize(ncclFuncAllReduce, 1 << 20, 9, LL128, 4, &chunk);
    EXPECT_EQ(chunk, 777u) << "an algorithm index out of range is no choice of the entry";
    comm.chunkSize(ncclFuncAllReduce, 64 << 20, NVLS, SIMPLE, 4, &chunk);
    EXPECT_EQ(chunk, 1u << 20);
    EXPECT_EQ(comm.chunkSize(ncclFuncAllReduce, 1024, TREE, LL, 4, nullptr), ncclSuccess);
  }
}

TEST(TunerAbi, ConstantsChangeOnlyWhenTheTableSaysSo) {
  ncclTunerConstants_v5_t constants;
  auto* values = reinterpret_cast<double*>(&constants);
  const size_t count = sizeof constants / sizeof(double);
  ASSERT_EQ(count, tuccl::kNumTunerConstantsV5);
  for (size_t i = 0; i < count; ++i) values[i] = 1.0 + static_cast<double>(i);
  ncclTunerConstants_v5_t before = constants;
  {
    ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
    Comm comm(16, 2, 6, &constants);
  }
  EXPECT_DOUBLE_EQ(constants.baseLatencies[RING][LL], 6.6);
  EXPECT_DOUBLE_EQ(constants.hwLatencies[2][TREE][SIMPLE], 14.5);
  EXPECT_DOUBLE_EQ(constants.llMaxBws[2][1], 80.0);
  int changed = 0;
  for (size_t i = 0; i < count; ++i) changed += values[i] != reinterpret_cast<double*>(&before)[i];
  EXPECT_EQ(changed, 3);
  // v5 too; tables without constants, broken tables and a null pointer change nothing.
  for (size_t i = 0; i < count; ++i) values[i] = 1.0;
  for (const char* table : {"valid.csv", "empty_entries.json", "broken.json", "no-such.json"}) {
    ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + table}});
    void* ctx = nullptr;
    ASSERT_EQ(plugin().v5->init(&ctx, 1, 16, 2, captureLog, nullptr, &constants), ncclSuccess);
    plugin().v5->finalize(ctx);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(values[i], 1.0) << table;
  }
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  ncclNvlDomainInfo_v5_t domains{2, 8, 8};
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v5->init(&ctx, 1, 16, 2, captureLog, &domains, &constants), ncclSuccess);
  EXPECT_DOUBLE_EQ(constants.baseLatencies[RING][LL], 6.6);
  plugin().v5->finalize(ctx);
  ASSERT_EQ(plugin().v6->init(&ctx, 1, 16, 2, nullptr, nullptr, nullptr), ncclSuccess);
  plugin().v6->finalize(ctx);
}

/// v7 hands init the constants with a fifth (RUBIN) row in every bandwidth array: the same names
/// land at other offsets, and a RUBIN override reaches only v7.
TEST(TunerAbi, V7ConstantsHaveTheRubinRow) {
  const std::string path = tempPath("constants.json");
  {
    std::ofstream out(path);
    out << R"({"version": 1, "constants": {"baseLatencies": {"TREE": {"LL128": 3.5}},
             "llMaxBws": {"RUBIN": {"2": 91.5}}, "perChMaxTreeBws": {"HOPPER": {"4+": 33.0}},
             "perChMaxNVLSTreeBws": {"RUBIN": {"1": 44.0}}}})";
  }
  ScopedEnv env({{"TUCCL_TUNER_TABLE", path}});
  ncclTunerConstants_v7_t v7;
  auto* values7 = reinterpret_cast<double*>(&v7);
  ASSERT_EQ(sizeof v7 / sizeof(double), tuccl::kNumTunerConstantsV7);
  for (size_t i = 0; i < tuccl::kNumTunerConstantsV7; ++i) values7[i] = 1.0 + static_cast<double>(i);
  const ncclTunerConstants_v7_t before7 = v7;
  { Comm comm(16, 2, 7, &v7); }
  EXPECT_DOUBLE_EQ(v7.baseLatencies[TREE][LL128], 3.5);
  EXPECT_DOUBLE_EQ(v7.llMaxBws[4][1], 91.5);
  EXPECT_DOUBLE_EQ(v7.perChMaxTreeBws[2][2], 33.0);
  EXPECT_DOUBLE_EQ(v7.perChMaxNVLSTreeBws[4][0], 44.0);
  int changed = 0;
  for (size_t i = 0; i < tuccl::kNumTunerConstantsV7; ++i)
    changed += values7[i] != reinterpret_cast<const double*>(&before7)[i];
  EXPECT_EQ(changed, 4);
  takeLog();

  // v6: the same table, the v5 struct: the RUBIN overrides are skipped (and said so), the others
  // land where v5 keeps them.
  ncclTunerConstants_v5_t v5;
  auto* values5 = reinterpret_cast<double*>(&v5);
  for (size_t i = 0; i < tuccl::kNumTunerConstantsV5; ++i) values5[i] = 1.0 + static_cast<double>(i);
  const ncclTunerConstants_v5_t before5 = v5;
  { Comm comm(16, 2, 6, &v5); }
  EXPECT_DOUBLE_EQ(v5.baseLatencies[TREE][LL128], 3.5);
  EXPECT_DOUBLE_EQ(v5.perChMaxTreeBws[2][2], 33.0);
  changed = 0;
  for (size_t i = 0; i < tuccl::kNumTunerConstantsV5; ++i)
    changed += values5[i] != reinterpret_cast<const double*>(&before5)[i];
  EXPECT_EQ(changed, 2);
  const std::string log = joined(takeLog());
  EXPECT_NE(log.find("llMaxBws.RUBIN.2: not a constant of this NCCL's tuner interface (v5); skipped"),
            std::string::npos)
      << log;
  fs::remove(path);
}

/// Broken, invalid, empty, missing, unreadable and oversized tables: init succeeds with one
/// warning, every call is a no-op, for every version.
TEST(TunerAbi, BadTablesAreOneWarningThenANoOp) {
  std::string oversized = tempPath("oversized.json");
  {
    std::ofstream out(oversized, std::ios::binary);
    std::string padding(1 << 20, ' ');
    for (uint64_t written = 0; written <= tuccl::kMaxTableFileBytes; written += padding.size())
      out << padding;
    out << "{\"version\": 1, \"entries\": []}";
  }
  std::string binary = tempPath("binary.json");
  {
    std::ofstream out(binary, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(i * 131 % 256));
  }
  std::vector<std::string> tables = {kData + "broken.json",
                                     kData + "invalid.json",
                                     kData + "future_version.json",
                                     kData + "empty.json",
                                     kData + "broken.csv",
                                     kData + "no-such-table.json",
                                     kData,
                                     oversized,
                                     binary};
  for (const std::string& table : tables) {
    for (int version = 2; version <= 7; ++version) {
      ScopedEnv env({{"TUCCL_TUNER_TABLE", table}});
      void* ctx = nullptr;
      ncclResult_t result = ncclSuccess;
      switch (version) {
        case 2:
          result = plugin().v2->init(16, 2, captureLog, &ctx);
          break;
        case 3:
          result = plugin().v3->init(16, 2, captureLog, &ctx);
          break;
        case 4:
          result = plugin().v4->init(16, 2, captureLog, &ctx);
          break;
        case 5:
          result = plugin().v5->init(&ctx, 1, 16, 2, captureLog, nullptr, nullptr);
          break;
        case 6:
          result = plugin().v6->init(&ctx, 1, 16, 2, captureLog, nullptr, nullptr);
          break;
        default:
          result = plugin().v7->init(&ctx, 1, 16, 2, captureLog, nullptr, nullptr);
          break;
      }
      ASSERT_EQ(result, ncclSuccess) << table;
      std::vector<LogLine> lines = takeLog();
      EXPECT_EQ(countLevel(lines, NCCL_LOG_WARN), 1) << table << "\n" << joined(lines);
      for (const LogLine& line : lines) EXPECT_EQ(line.flags, TUCCL_NCCL_TUNING_FLAG);
      for (size_t bytes : {size_t{0}, size_t{1024}, size_t{1} << 30}) {
        Costs costs = realisticCosts();
        Costs before = costs;
        int channels = 0;
        int algorithm = -1, protocol = -1;
        size_t chunk = 99;
        switch (version) {
          case 2:
            plugin().v2->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, 1, 1, &algorithm, &protocol,
                                     &channels);
            break;
          case 3:
            plugin().v3->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, asTable(costs), A, P, &channels);
            break;
          case 4:
            plugin().v4->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, asTable(costs), A, P, 0, &channels);
            break;
          case 5:
            plugin().v5->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, asTable(costs), A, P, 0, &channels);
            break;
          case 6:
            plugin().v6->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, asTable(costs), A, P, 0, &channels);
            plugin().v6->getChunkSize(ctx, ncclFuncAllReduce, bytes, RING, SIMPLE, 8, &chunk);
            break;
          default:
            plugin().v7->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, asTable(costs), A, P, 0, &channels);
            plugin().v7->getChunkSize(ctx, ncclFuncAllReduce, bytes, RING, SIMPLE, 8, &chunk);
            break;
        }
        EXPECT_EQ(costs, before);
        EXPECT_EQ(channels, 0);
        EXPECT_EQ(algorithm, -1);
        EXPECT_EQ(protocol, -1);
        EXPECT_EQ(chunk, 99u);
      }
      switch (version) {
        case 2:
          EXPECT_EQ(plugin().v2->destroy(ctx), ncclSuccess);
          break;
        case 3:
          EXPECT_EQ(plugin().v3->destroy(ctx), ncclSuccess);
          break;
        case 4:
          EXPECT_EQ(plugin().v4->destroy(ctx), ncclSuccess);
          break;
        case 5:
          EXPECT_EQ(plugin().v5->finalize(ctx), ncclSuccess);
          break;
        case 6:
          EXPECT_EQ(plugin().v6->finalize(ctx), ncclSuccess);
          break;
        default:
          EXPECT_EQ(plugin().v7->finalize(ctx), ncclSuccess);
          break;
      }
    }
  }
  fs::remove(oversized);
  fs::remove(binary);
}

TEST(TunerAbi, NullLoggerAndNullArgumentsAreSafe) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "broken.json"}, {"TUCCL_TUNER_TRACE", "1"}});
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v6->init(&ctx, 1, 16, 2, nullptr, nullptr, nullptr), ncclSuccess);
  plugin().v6->finalize(ctx);
  ScopedEnv valid({{"TUCCL_TUNER_TABLE", kData + "valid.json"}, {"TUCCL_TUNER_TRACE", "1"}});
  ASSERT_EQ(plugin().v6->init(&ctx, 1, 16, 2, nullptr, nullptr, nullptr), ncclSuccess);
  Costs costs = realisticCosts();
  EXPECT_EQ(plugin().v6->getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, asTable(costs), A, P, 0, nullptr),
            ncclSuccess);
  EXPECT_EQ(plugin().v6->getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, nullptr, A, P, 0, nullptr),
            ncclSuccess);
  EXPECT_EQ(plugin().v6->getCollInfo(ctx, ncclFuncAllReduce, 1024, 1, asTable(costs), 0, 0, 0, nullptr),
            ncclSuccess);
  int algorithm = -1;
  void* c2 = nullptr;
  ASSERT_EQ(plugin().v2->init(16, 2, nullptr, &c2), ncclSuccess);
  EXPECT_EQ(plugin().v2->getCollInfo(c2, ncclFuncAllReduce, 1024, 0, 0, 1, &algorithm, nullptr, nullptr),
            ncclSuccess);
  EXPECT_EQ(algorithm, -1) << "no half answers";
  plugin().v2->destroy(c2);
  plugin().v6->finalize(ctx);
  // A null context (e.g. after a failed allocation) is a no-op.
  EXPECT_EQ(plugin().v6->getCollInfo(nullptr, ncclFuncAllReduce, 1024, 1, asTable(costs), A, P, 0, nullptr),
            ncclSuccess);
  EXPECT_EQ(plugin().v6->finalize(nullptr), ncclSuccess);
  EXPECT_EQ(plugin().v6->init(nullptr, 1, 16, 2, nullptr, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(plugin().v2->init(16, 2, nullptr, nullptr), ncclInvalidArgument);
}

TEST(TunerAbi, InitLogsPathHashAndEntryCount) {
  std::string path = kData + "valid.json";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ScopedEnv env({{"TUCCL_TUNER_TABLE", path}});
  Comm comm(16, 2);
  std::vector<LogLine> lines = takeLog();
  std::string all = joined(lines);
  EXPECT_EQ(countLevel(lines, NCCL_LOG_WARN), 0) << all;
  EXPECT_NE(all.find(path), std::string::npos) << all;
  EXPECT_NE(all.find(tuccl::formatHash(tuccl::fnv1a64(bytes))), std::string::npos) << all;
  EXPECT_NE(all.find("9 entries"), std::string::npos) << all;
  EXPECT_NE(all.find("NCCL_NTHREADS=512"), std::string::npos) << "the environment recommendation\n" << all;
  for (const LogLine& line : lines) EXPECT_EQ(line.flags, TUCCL_NCCL_TUNING_FLAG);
}

TEST(TunerAbi, TraceExplainsEachDecisionOnlyWhenAskedFor) {
  {
    ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
    Comm comm(16, 2);
    takeLog();
    int channels = 0;
    comm.pick(ncclFuncAllReduce, 1 << 20, realisticCosts(), &channels);
    EXPECT_EQ(countLevel(takeLog(), NCCL_LOG_TRACE), 0);
  }
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}, {"NCCL_DEBUG", "TRACE"}});
  Comm comm(16, 2);
  takeLog();
  int channels = 0;
  Costs noRingLL128 = realisticCosts();
  noRingLL128[RING * P + LL128] = -1;
  comm.pick(ncclFuncAllReduce, 1 << 20, noRingLL128, &channels);
  comm.pick(ncclFuncReduce, 5000, realisticCosts(), &channels);
  std::vector<LogLine> lines = takeLog();
  ASSERT_EQ(countLevel(lines, NCCL_LOG_TRACE), 2) << joined(lines);
  EXPECT_NE(lines[0].text.find("entries[1] -> TREE/LL128 (choice 2 of 3; earlier choices unavailable)"),
            std::string::npos)
      << lines[0].text;
  EXPECT_NE(lines[1].text.find("no table entry matches"), std::string::npos) << lines[1].text;
}

TEST(TunerAbi, TablePrecedenceAndTheDefaultCsv) {
  // Both set: TUCCL_TUNER_TABLE wins (and says so).
  {
    ScopedEnv env(
        {{"TUCCL_TUNER_TABLE", kData + "valid.json"}, {"NCCL_TUNER_CONFIG_FILE", kData + "valid.csv"}});
    Comm comm(16, 2);
    int channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1024, realisticCosts(), &channels), std::pair(int{TREE}, int{LL}));
    EXPECT_NE(joined(takeLog()).find("takes precedence"), std::string::npos);
  }
  // NCCL_TUNER_CONFIG_FILE alone: the CSV (line 4: RING/LL for 2 nodes).
  {
    ScopedEnv env({{"NCCL_TUNER_CONFIG_FILE", kData + "valid.csv"}});
    Comm comm(16, 2);
    int channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1024, realisticCosts(), &channels), std::pair(int{RING}, int{LL}));
    EXPECT_EQ(channels, 0) << "channels -1 keeps NCCL's (never forced to 1)";
  }
  // Neither: ./nccl_tuner.conf if present, silently nothing otherwise.
  fs::path dir = tempPath("cwd");
  fs::create_directories(dir);
  fs::path previous = fs::current_path();
  fs::current_path(dir);
  {
    ScopedEnv env({});
    Comm comm(16, 2);
    std::vector<LogLine> lines = takeLog();
    EXPECT_EQ(countLevel(lines, NCCL_LOG_WARN), 0) << joined(lines);
    Costs costs = realisticCosts();
    Costs before = costs;
    int channels = 0;
    plugin().v6->getCollInfo(comm.ctx, ncclFuncAllReduce, 1024, 1, asTable(costs), A, P, 0, &channels);
    EXPECT_EQ(costs, before);
  }
  fs::copy_file(kData + "valid.csv", dir / "nccl_tuner.conf");
  {
    ScopedEnv env({});
    Comm comm(16, 2);
    int channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1024, realisticCosts(), &channels), std::pair(int{RING}, int{LL}));
  }
  fs::current_path(previous);
  fs::remove_all(dir);
}

/// NCCL's example tuner, as documented: the first matching line wins; its (algorithm, protocol)
/// is set to 0.0 if NCCL did not mark it -1. The same file must give the same choices.
std::pair<int, int> exampleTunerPick(const tuccl::LookupTable& csv, int coll, size_t bytes, int nNodes,
                                     int nRanks, int numPipeOps, int regBuff, Costs costs, int numAlgo) {
  for (const tuccl::TableEntry& e : csv.entries) {
    if (static_cast<int>(e.collective) != coll || bytes < e.minBytes || bytes > e.maxBytes) continue;
    if ((e.nNodes != -1 && e.nNodes != nNodes) || (e.nRanks != -1 && e.nRanks != nRanks)) continue;
    if ((e.numPipeOps != -1 && e.numPipeOps != numPipeOps) || (e.regBuff != -1 && e.regBuff != regBuff))
      continue;
    int a = static_cast<int>(e.choices.at(0).algorithm.value());
    int p = static_cast<int>(e.choices.at(0).protocol.value());
    if (a < numAlgo && costs[a * P + p] != TUCCL_NCCL_ALGO_PROTO_IGNORE) costs[a * P + p] = 0.0f;
    break;
  }
  return ncclPick(costs, numAlgo);
}

TEST(TunerAbi, CsvGivesTheSameChoicesAsNcclsExampleTuner) {
  tuccl::Expected<tuccl::LoadedTable> csv = tuccl::loadTableFile(kData + "valid.csv");
  ASSERT_TRUE(csv.ok());
  ScopedEnv env({{"NCCL_TUNER_CONFIG_FILE", kData + "valid.csv"}});
  std::mt19937 rng(11);
  for (auto [nRanks, nNodes] : std::vector<std::pair<int, int>>{{16, 2}, {8, 1}, {64, 8}}) {
    Comm comm(static_cast<size_t>(nRanks), static_cast<size_t>(nNodes), nNodes == 8 ? 7 : 6);
    for (int i = 0; i < 3000; ++i) {
      int numAlgo = i % 3 == 0 ? 6 : A;
      Costs costs = realisticCosts(numAlgo, rng() % 2, rng() % 2);
      for (float& c : costs) {
        if (rng() % 8 == 0) c = -1.0f;
      }
      auto coll = static_cast<int>(rng() % 5);
      size_t bytes = (size_t{1} << (rng() % 33)) + static_cast<size_t>(rng() % 3) - 1;
      int pipeOps = 1 + static_cast<int>(rng() % 2);
      int regBuff = static_cast<int>(rng() % 2);
      Costs ours = costs;
      int channels = 0;
      ASSERT_EQ(comm.collInfo(static_cast<ncclFunc_t>(coll), bytes, pipeOps, asTable(ours), numAlgo, P,
                              regBuff, &channels),
                ncclSuccess);
      ASSERT_EQ(ncclPick(ours, numAlgo),
                exampleTunerPick(csv->table, coll, bytes, nNodes, nRanks, pipeOps, regBuff, costs, numAlgo))
          << "coll " << coll << " bytes " << bytes << " pipeOps " << pipeOps << " regBuff " << regBuff;
    }
  }
}

/// A CSV with bad lines: the tuner serves the valid lines and logs the skipped ones and the warnings
/// at WARN once per process, however many communicators load the table.
TEST(TunerAbi, CsvBadLinesAreSkippedAndLoggedOnce) {
  ScopedEnv env({{"NCCL_TUNER_CONFIG_FILE", kData + "partly_broken.csv"}});
  takeLog();
  {
    Comm comm(8, 1);
    const std::vector<LogLine> lines = takeLog();
    const std::string log = joined(lines);
    EXPECT_EQ(countLevel(lines, NCCL_LOG_WARN), 5) << log;
    EXPECT_NE(log.find("partly_broken.csv: 2 lines skipped, 2 warnings; the table is served without the skipped lines"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("partly_broken.csv:3:24: line skipped: unknown protocol 'll256'"), std::string::npos) << log;
    EXPECT_NE(log.find("partly_broken.csv:5:1: line skipped: expected 8 to 10 comma-separated fields"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("partly_broken.csv:4:13: warning: maxbytes '64K' is read as 64"), std::string::npos) << log;
    EXPECT_NE(log.find("3 entries"), std::string::npos) << log;
    int channels = 0;
    EXPECT_EQ(comm.pick(ncclFuncAllReduce, 1024, realisticCosts(), &channels), std::pair(int{RING}, int{LL}));
    EXPECT_EQ(channels, 4);
    EXPECT_EQ(comm.pick(ncclFuncBroadcast, 64, realisticCosts(), &channels), std::pair(int{TREE}, int{SIMPLE}));
    EXPECT_EQ(channels, 8);
    Costs costs = realisticCosts();
    Costs before = costs;
    plugin().v6->getCollInfo(comm.ctx, ncclFuncBroadcast, 65, 1, asTable(costs), A, P, 0, &channels);
    EXPECT_EQ(costs, before) << "64K is 64 bytes, as to NCCL's example tuner";
  }
  Comm other(16, 2);
  const std::vector<LogLine> again = takeLog();
  EXPECT_EQ(countLevel(again, NCCL_LOG_WARN), 0) << joined(again);
}

TEST(TunerAbi, EveryRankMakesTheSameChoice) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}});
  std::vector<std::unique_ptr<Comm>> ranks;
  // Ranks of one job may even run different tuner versions of the plugin: the same answers.
  for (int r = 0; r < 8; ++r) ranks.push_back(std::make_unique<Comm>(16, 2, r % 2 ? 7 : 6));
  std::mt19937 rng(5);
  for (int i = 0; i < 500; ++i) {
    Costs costs = realisticCosts(A, rng() % 2, rng() % 2);
    auto coll = static_cast<ncclFunc_t>(rng() % 5);
    size_t bytes = size_t{1} << (rng() % 30);
    std::vector<Costs> results;
    std::vector<int> channels;
    for (auto& rank : ranks) {
      Costs c = costs;
      int ch = 0;
      rank->collInfo(coll, bytes, 1, asTable(c), A, P, 0, &ch);
      results.push_back(c);
      channels.push_back(ch);
    }
    for (size_t r = 1; r < ranks.size(); ++r) {
      ASSERT_EQ(results[r], results[0]);
      ASSERT_EQ(channels[r], channels[0]);
    }
  }
  std::string log = joined(takeLog());
  EXPECT_NE(log.find("shared"), std::string::npos) << "communicators of one size share one index\n" << log;
}

/// Tables of 100,000 entries (JSON and CSV), generated here: load, and decide like the table.
TEST(TunerAbi, HugeTablesLoadAndDecide) {
  constexpr int kEntries = 100000;
  std::string json = tempPath("huge.json");
  std::string csv = tempPath("huge.conf");
  {
    std::ofstream j(json);
    std::ofstream c(csv);
    j << "{\"version\": 1, \"entries\": [\n";
    for (int i = 0; i < kEntries; ++i) {
      uint64_t lo = static_cast<uint64_t>(i) * 1000;
      const char* proto = i % 3 == 0 ? "ll" : i % 3 == 1 ? "ll128" : "simple";
      const char* algo = i % 2 ? "ring" : "tree";
      j << (i ? ",\n" : "") << "{\"collective\": \"allreduce\", \"minBytes\": " << lo
        << ", \"maxBytes\": " << lo + 999 << ", \"nNodes\": 2, \"nRanks\": 16, \"algorithm\": \"" << algo
        << "\", \"protocol\": \"" << proto << "\", \"nChannels\": " << 1 + i % 64 << "}";
      c << "allreduce," << lo << "," << lo + 999 << "," << algo << "," << proto << "," << 1 + i % 64
        << ",2,16\n";
    }
    j << "]}\n";
  }
  for (const std::string& path : {json, csv}) {
    ScopedEnv env({{"TUCCL_TUNER_TABLE", path}});
    Comm comm(16, 2);
    std::vector<LogLine> lines = takeLog();
    ASSERT_EQ(countLevel(lines, NCCL_LOG_WARN), 0) << joined(lines);
    EXPECT_NE(joined(lines).find("100000 entries"), std::string::npos) << joined(lines);
    for (int i = 0; i < kEntries; i += 997) {
      int channels = 0;
      auto pick =
          comm.pick(ncclFuncAllReduce, static_cast<size_t>(i) * 1000 + 500, realisticCosts(), &channels);
      ASSERT_EQ(pick, std::pair(i % 2 ? int{RING} : int{TREE}, i % 3)) << path << " entry " << i;
      ASSERT_EQ(channels, 1 + i % 64);
    }
    int channels = 0;
    Costs costs = realisticCosts();
    Costs before = costs;
    plugin().v6->getCollInfo(comm.ctx, ncclFuncAllReduce, size_t{kEntries} * 1000, 1, asTable(costs), A, P, 0,
                             &channels);
    EXPECT_EQ(costs, before) << "past the last entry";
  }
  fs::remove(json);
  fs::remove(csv);
}

TEST(TunerAbi, TopologySignatureFromTheEnvironment) {
  ScopedEnv env({{"TUCCL_TUNER_TABLE", kData + "valid.json"}, {"TUCCL_TOPOLOGY_SIGNATURE", "dgx-h100"}});
  Comm comm(16, 2);
  int channels = 0;
  EXPECT_EQ(comm.pick(ncclFuncBroadcast, 100, realisticCosts(), &channels), std::pair(int{TREE}, int{LL}));
  EXPECT_EQ(channels, 2);
}

}  // namespace
