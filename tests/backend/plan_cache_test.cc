// The plan cache: selection from a table (entries naming libtuccl algorithms, NCCL algorithm
// families, size ranges in the tuner's byte convention, nChannels and chunk sizes), the errors of
// entries whose algorithms do not load, identities that ignore the call's count and datatype, the
// table hash, concurrent callers, and the disk cache shared by processes (loading without
// compiling, damaged entries rebuilt, concurrent builders, an unwritable directory).
//
// Host builds are few: most tests plan without host kernels; the disk tests use 2-rank plans and
// share one cache directory per test program.
#include "backend/plan_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "backend/plan_selection.h"
#include "kernelgen/cpu_verify.h"
#include "kernelgen/host_executor.h"
#include "kernelgen/nvrtc.h"
#include "plan/plan_pairing.h"
#include "table/table_io.h"

namespace tuccl::backend {
namespace {

namespace fs = std::filesystem;

// ---- helpers

// A directory of this test process (ctest runs each test in its own), removed at exit.
fs::path testDirectory() {
  static const fs::path dir = [] {
    const fs::path d = fs::path(TUCCL_BINARY_DIR) / "plan_cache_test" / std::to_string(getpid());
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

class RemoveTestDirectory : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::path(TUCCL_BINARY_DIR) / "plan_cache_test" / std::to_string(getpid()), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveTestDirectory =
    ::testing::AddGlobalTestEnvironment(new RemoveTestDirectory);

void writeText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string example(const std::string& name) {
  return readText(fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms" / (name + ".resccl"));
}

LookupTable parseTable(const std::string& json) {
  Expected<LookupTable> table = readTableJson(json, "t.json");
  EXPECT_TRUE(table) << formatTableError(table.status());
  return table ? *table : LookupTable{};
}

// Selection and identity tests: state-based TBs at every size (single-TB plans for small calls
// have a test of their own).
PlanCacheOptions memoryOnly(int32_t nRanks, int32_t nNodes = 1) {
  PlanCacheOptions options;
  options.nRanks = nRanks;
  options.nNodes = nNodes;
  options.hostKernels = false;
  options.singleTbMaxBytes = 0;
  return options;
}

std::shared_ptr<const CompiledPlan> planOrFail(PlanCache& cache, const PlanQuery& query) {
  auto plan = cache.planFor(query);
  EXPECT_TRUE(plan) << plan.status().toString();
  return plan ? *plan : nullptr;
}

PlanQuery query(Collective collective, int64_t count, int32_t root = -1, DataType type = DataType::Float32) {
  PlanQuery query;
  query.collective = collective;
  query.count = count;
  query.dataType = type;
  query.root = root;
  return query;
}

// Runs `body` in a child process; returns its pid.
template <typename Body>
pid_t spawn(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int exitStatus(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// ---- the query

TEST(PlanCacheQuery, OneRankBadRootsAndNegativeCountsAreInvalidArguments) {
  PlanCache single(std::nullopt, memoryOnly(1));
  auto one = single.planFor(query(Collective::AllReduce, 10));
  ASSERT_FALSE(one);
  EXPECT_EQ(one.status().code(), ErrorCode::InvalidArgument);
  PlanCache cache(std::nullopt, memoryOnly(4));
  for (int32_t root : {-1, 4}) {
    auto rooted = cache.planFor(query(Collective::Broadcast, 10, root));
    ASSERT_FALSE(rooted);
    EXPECT_EQ(rooted.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(rooted.status().message().find("root"), std::string::npos);
  }
  auto negative = cache.planFor(query(Collective::AllGather, -1));
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.status().code(), ErrorCode::InvalidArgument);
}

TEST(PlanCacheQuery, BytesAreWhatTheTunerIsAskedWith) {
  // nccl-tuner-abi.md: AllGather and ReduceScatter pass the total size.
  EXPECT_EQ(tunerBytes(query(Collective::AllReduce, 1000), 8), 4000u);
  EXPECT_EQ(tunerBytes(query(Collective::Broadcast, 1000, 0, DataType::Float64), 8), 8000u);
  EXPECT_EQ(tunerBytes(query(Collective::Reduce, 1000, 0, DataType::Float16), 8), 2000u);
  EXPECT_EQ(tunerBytes(query(Collective::AllGather, 1000), 8), 32000u);
  EXPECT_EQ(tunerBytes(query(Collective::ReduceScatter, 1000, -1, DataType::Uint8), 8), 8000u);
  EXPECT_EQ(tunerBytes(query(Collective::AllToAll, 1000), 8), 32000u);
}

// ---- selection

TEST(PlanCacheSelection, WithoutATableEveryCollectiveGetsTheDefault) {
  PlanCacheOptions options = memoryOnly(4);
  options.defaultChannels = 3;
  options.defaultChunkSize = 64 << 10;
  PlanCache cache(std::nullopt, options);
  EXPECT_EQ(cache.tableHash(), 0u);
  // 1000 elements: a small AllReduce gets the direct algorithm (1M elements: the ring, below).
  const std::pair<Collective, const char*> expected[] = {
      {Collective::AllReduce, "builtin/direct_allreduce.resccl"},
      {Collective::AllGather, "builtin/ring_allgather.resccl"},
      {Collective::ReduceScatter, "builtin/ring_reducescatter.resccl"},
      {Collective::Broadcast, "builtin/chain_broadcast.resccl"},
      {Collective::Reduce, "builtin/chain_reduce.resccl"},
      {Collective::AllToAll, "builtin/direct_alltoall.resccl"}};
  for (const auto& [collective, source] : expected) {
    auto plan = planOrFail(cache, query(collective, 1000, hasRoot(collective) ? 2 : -1));
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(plan->plan.collective, collective);
    EXPECT_EQ(plan->plan.sourceName, source);
    EXPECT_EQ(plan->plan.nRanks, 4);
    EXPECT_EQ(plan->plan.config.nChannels, 3);
    EXPECT_EQ(plan->plan.config.chunkSize, 64 << 10);
    EXPECT_EQ(plan->kernels.ranks.size(), 4u);
    EXPECT_EQ(plan->layout.entries.size(), 4u);
    EXPECT_EQ(plan->host, nullptr);  // hostKernels off
    EXPECT_TRUE(plan->cubins.empty());
    EXPECT_NE(plan->description.find("no tuning table"), std::string::npos) << plan->description;
    if (hasRoot(collective)) {
      EXPECT_EQ(plan->plan.root, 2);
    }
  }
  auto large = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->plan.sourceName, "builtin/ring_allreduce.resccl");
  EXPECT_EQ(cache.stats().plansBuilt, 7);
  EXPECT_FALSE(cache.stats().diskCache);
}

// On several hosts of equal rank counts, AllReduce and AllGather default to the hierarchical mesh
// shaped by the hosts (GPUPerNode); uneven hosts and the other collectives keep the defaults.
TEST(PlanCacheSelection, SeveralEvenNodesGetHierarchicalAllReduceAndAllGather) {
  PlanCacheOptions options = memoryOnly(4);
  options.nNodes = 2;
  for (int64_t count : {int64_t{2}, int64_t{1} << 20}) {
    EXPECT_EQ(defaultFamily(query(Collective::AllReduce, count), options), "hm");
    EXPECT_EQ(defaultFamily(query(Collective::AllGather, count), options), "hm");
  }
  EXPECT_EQ(defaultFamily(query(Collective::ReduceScatter, 1000), options), "ring");
  EXPECT_EQ(defaultFamily(query(Collective::AllToAll, 1000), options), "direct");
  PlanCache cache(std::nullopt, options);
  auto plan = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->plan.sourceName, "builtin/hm_allreduce.resccl");
  options.nNodes = 3;  // 4 ranks on 3 hosts: no even split
  EXPECT_EQ(defaultFamily(query(Collective::AllReduce, 1 << 20), options), "ring");
  EXPECT_EQ(defaultFamily(query(Collective::AllReduce, 2), options), "direct");
}

// Small calls on the CPU device run in one TB per rank, posting each step's sends before waiting
// when every call of the plan is one micro-batch; larger calls, and every call for a GPU, keep
// state-based TBs.
TEST(PlanCacheSelection, SmallCallsOnTheCpuDeviceRunInOneTb) {
  PlanCacheOptions options = memoryOnly(4);
  options.singleTbMaxBytes = PlanCacheOptions().singleTbMaxBytes;  // the default: 64 KiB
  ASSERT_EQ(options.singleTbMaxBytes, 64u << 10);
  auto policy = [&](Collective collective, int64_t count) {
    Expected<PlanSelection> selection = selectPlan(query(collective, count), nullptr, nullptr, options);
    EXPECT_TRUE(selection) << selection.status().toString();
    return selection ? selection->tbPolicy : std::nullopt;
  };
  EXPECT_EQ(policy(Collective::AllReduce, 2), TbPolicy::Single);
  EXPECT_EQ(policy(Collective::AllReduce, 16384), TbPolicy::Single);  // 64 KiB
  EXPECT_EQ(policy(Collective::AllReduce, 16385), std::nullopt);
  EXPECT_EQ(policy(Collective::AllGather, 4096), TbPolicy::Single);  // 4 ranks x 16 KiB
  EXPECT_EQ(policy(Collective::AllGather, 4097), std::nullopt);
  const Expected<PlanSelection> small = selectPlan(query(Collective::AllReduce, 2), nullptr, nullptr, options);
  ASSERT_TRUE(small);
  EXPECT_NE(describeSelection(*small).find(", one TB per rank"), std::string::npos) << describeSelection(*small);
  options.singleTbMaxBytes = 0;
  EXPECT_EQ(policy(Collective::AllReduce, 0), std::nullopt);
  options.singleTbMaxBytes = 64 << 10;
  options.cudaArch = "sm_90";
  EXPECT_EQ(policy(Collective::AllReduce, 2), std::nullopt);

  // The plans: one TB per rank with send-ahead for a small AllGather; the large one is another
  // plan of the same algorithm with state-based TBs; with slices smaller than the calls the
  // single-TB plan keeps the pipeline's order.
  options.cudaArch.clear();
  PlanCache cache(std::nullopt, options);
  auto tiny = planOrFail(cache, query(Collective::AllGather, 100));
  auto large = planOrFail(cache, query(Collective::AllGather, 1 << 20));
  ASSERT_NE(tiny, nullptr);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(tiny->plan.sourceName, large->plan.sourceName);
  EXPECT_NE(tiny->key, large->key);
  EXPECT_EQ(tiny->plan.tbAllocation, TbPolicy::Single);
  EXPECT_EQ(tiny->plan.config.sendAhead, 1);
  for (const PlanRank& rank : tiny->plan.ranks) EXPECT_EQ(rank.tbs.size(), 1u);
  EXPECT_EQ(large->plan.tbAllocation, TbPolicy::StateBased);
  EXPECT_EQ(large->plan.config.sendAhead, 0);
  EXPECT_EQ(planOrFail(cache, query(Collective::AllGather, 200)), tiny);
  PlanCacheOptions smallSlices = options;
  smallSlices.defaultChunkSize = 4096;
  PlanCache sliced(std::nullopt, smallSlices);
  auto pipelined = planOrFail(sliced, query(Collective::AllGather, 100));
  ASSERT_NE(pipelined, nullptr);
  EXPECT_EQ(pipelined->plan.tbAllocation, TbPolicy::Single);
  EXPECT_EQ(pipelined->plan.config.sendAhead, 0);
}

// The TBs a rank's kernel runs at once (its TBs times the channels) stay within its share of the
// GPU: the channels, the default's or forced, are cut to what fits, and a plan whose TBs alone do
// not fit is refused, saying why.
TEST(PlanCacheSelection, ChannelsAreCutToTheBlocksARankMayRunAtOnce) {
  PlanCacheOptions options = memoryOnly(4);
  options.forcedAlgorithm = "ring";
  options.defaultChannels = 16;
  PlanCache unbounded(std::nullopt, options);
  auto all = planOrFail(unbounded, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->plan.config.nChannels, 16);
  size_t tbs = 0;
  for (const PlanRank& rank : all->plan.ranks) tbs = std::max(tbs, rank.tbs.size());
  ASSERT_GE(tbs, 1u);  // the fused ring: one TB per rank and channel

  for (const int32_t forced : {0, 16}) {
    options.forcedChannels = forced;
    // Room for 3 channels and part of a fourth: 3.
    options.maxBlocksPerRank = static_cast<int32_t>(4 * tbs - 1);
    PlanCache bounded(std::nullopt, options);
    auto cut = planOrFail(bounded, query(Collective::AllReduce, 1 << 20));
    ASSERT_NE(cut, nullptr);
    EXPECT_EQ(cut->plan.config.nChannels, 3) << "forced " << forced;
    EXPECT_EQ(cut->layout.channels, 3);
    for (int32_t r = 0; r < cut->plan.nRanks; ++r) {
      EXPECT_LE(cut->layout.blocksOf(cut->plan, r), options.maxBlocksPerRank);
    }
    // Exactly 16 channels' worth: all kept.
    options.maxBlocksPerRank = static_cast<int32_t>(16 * tbs);
    PlanCache fits(std::nullopt, options);
    auto kept = planOrFail(fits, query(Collective::AllReduce, 1 << 20));
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(kept->plan.config.nChannels, 16);
  }
  options.forcedChannels = 0;

  // Direct AllReduce: a TB per peer and direction, more than a share of one block holds.
  options.forcedAlgorithm = "direct";
  options.maxBlocksPerRank = 1;
  PlanCache tooSmall(std::nullopt, options);
  auto refused = tooSmall.planFor(query(Collective::AllReduce, 1 << 20));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), ErrorCode::ResourceExhausted);
  EXPECT_NE(refused.status().message().find("TBs on a rank"), std::string::npos) << refused.status().toString();
}

const char* kSelectionTable = R"({
  "version": 1,
  "entries": [
    {"collective": "allreduce", "maxBytes": "64K", "algorithm": "ring", "protocol": "simple",
     "nChannels": 2, "chunkSize": "16K"},
    {"collective": "allreduce", "minBytes": 65537, "tucclAlgorithm": "ring", "chunkSize": "512K"},
    {"collective": "allreduce", "minBytes": 65537, "nRanks": 4, "algorithm": "tree", "nChannels": 4},
    {"collective": "broadcast", "maxBytes": "1M", "algorithm": "tree", "protocol": "ll"},
    {"collective": "broadcast", "minBytes": 1048577, "algorithm": "ring"},
    {"collective": "reduce", "tucclAlgorithm": "Binomial"},
    {"collective": "allgather", "maxBytes": "1M", "tucclAlgorithm": "direct"},
    {"collective": "reducescatter", "algorithm": "nvls", "protocol": "simple"}
  ]
})";

// A call runs as many of its plan's channels as its size fills (NCCL's rule: 64 B a thread for
// Simple, 8 for LL and LL128), at least one, unless a table entry or TUCCL_NCHANNELS named them.
TEST(PlanCacheSelection, ChannelsFollowTheCallSizeUnlessTheTableOrTheEnvironmentNamesThem) {
  EXPECT_EQ(channelsForBytes(8, 16, 512, Protocol::Simple), 1);
  EXPECT_EQ(channelsForBytes(32768 - 1, 16, 512, Protocol::Simple), 1);
  EXPECT_EQ(channelsForBytes(65536, 16, 512, Protocol::Simple), 2);
  EXPECT_EQ(channelsForBytes(300 << 10, 16, 512, Protocol::Simple), 9);
  EXPECT_EQ(channelsForBytes(512 << 10, 16, 512, Protocol::Simple), 16);
  EXPECT_EQ(channelsForBytes(64 << 20, 16, 512, Protocol::Simple), 16);
  EXPECT_EQ(channelsForBytes(16 << 10, 16, 512, Protocol::LL), 4);
  EXPECT_EQ(channelsForBytes(16 << 10, 16, 256, Protocol::LL128), 8);
  EXPECT_EQ(channelsForBytes(0, 16, 512, Protocol::Simple), 1);
  EXPECT_EQ(channelsForBytes(1 << 30, 1, 512, Protocol::Simple), 1);

  PlanCacheOptions options = memoryOnly(4);
  options.defaultChannels = 16;
  PlanCache defaults(std::nullopt, options);
  const PlanQuery small = query(Collective::AllReduce, 2);     // 8 bytes: direct
  const PlanQuery large = query(Collective::AllReduce, 1 << 20);  // 4 MiB: ring
  for (const PlanQuery& q : {small, large}) {
    const CallDecision decision = defaults.decide(q);
    auto plan = defaults.planFor(decision);
    ASSERT_TRUE(plan) << plan.status().toString();
    EXPECT_EQ((*plan)->layout.channels, 16);
    EXPECT_EQ(defaults.channelsFor(decision, 0, **plan), q.count == 2 ? 1 : 16);
    EXPECT_EQ(defaults.channelsFor(decision, 1, **plan), q.count == 2 ? 1 : 16) << "the runtime phase's other group";
  }
  // A call of 96 KiB on the ring plan of the 4 MiB calls: 3 channels.
  const CallDecision mid = defaults.decide(query(Collective::AllReduce, 24 << 10));
  auto ring = defaults.planFor(mid);
  ASSERT_TRUE(ring);
  EXPECT_EQ(defaults.channelsFor(mid, 0, **ring), 3);

  options.forcedChannels = 16;
  PlanCache forced(std::nullopt, options);
  const CallDecision forcedSmall = forced.decide(small);
  auto forcedPlan = forced.planFor(forcedSmall);
  ASSERT_TRUE(forcedPlan);
  EXPECT_EQ(forced.channelsFor(forcedSmall, 0, **forcedPlan), 16) << "TUCCL_NCHANNELS runs them all";
  options.forcedChannels = 0;

  // entries[0] names 2 channels up to 64 KiB: both run however small the call; the LL broadcast
  // of entries[3] names none: 8 B a thread.
  PlanCache table(parseTable(kSelectionTable), options);
  const CallDecision named = table.decide(small);
  auto namedPlan = table.planFor(named);
  ASSERT_TRUE(namedPlan);
  EXPECT_EQ(table.channelsFor(named, 0, **namedPlan), 2);
  const CallDecision broadcast = table.decide(query(Collective::Broadcast, 2 << 10, 0));  // 8 KiB
  auto broadcastPlan = table.planFor(broadcast);
  ASSERT_TRUE(broadcastPlan);
  ASSERT_EQ((*broadcastPlan)->plan.config.protocol, Protocol::LL);
  EXPECT_EQ((*broadcastPlan)->layout.channels, 16);
  EXPECT_EQ(table.channelsFor(broadcast, 0, **broadcastPlan), 2);
}

// The kernels run the protocol the entry chose (LL for entries[3]), TUCCL_PROTO's over it, and
// Simple on several hosts, saying so.
// TUCCL_FUSE=0 (PlanCacheOptions::fuse): the same collective lowered without fused primitives, under
// a key of its own; by default the ring fuses.
TEST(PlanCacheSelection, FusionCanBeTurnedOff) {
  PlanCacheOptions options = memoryOnly(4);
  options.forcedAlgorithm = "ring";
  PlanCache fused(std::nullopt, options);
  auto withFusion = planOrFail(fused, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(withFusion, nullptr);
  EXPECT_TRUE(hasFusedEntries(withFusion->plan));
  options.fuse = false;
  PlanCache plain(std::nullopt, options);
  auto without = planOrFail(plain, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(without, nullptr);
  EXPECT_FALSE(hasFusedEntries(without->plan));
  EXPECT_NE(without->key, withFusion->key);
  EXPECT_EQ(pairTransfers(without->plan).value().size(), pairTransfers(withFusion->plan).value().size());
}

TEST(PlanCacheSelection, PlansRunTheEntrysProtocolOnOneHostOrSeveral) {
  PlanCache cache(parseTable(kSelectionTable), memoryOnly(4));
  auto bcast = planOrFail(cache, query(Collective::Broadcast, 1000, 1));
  ASSERT_NE(bcast, nullptr);
  EXPECT_EQ(bcast->plan.config.protocol, Protocol::LL);
  // The entry gives no chunk: LL's slice is at most kLlMaxChunkBytes, not the 256K default.
  EXPECT_NE(bcast->description.find("chunk 64K, LL"), std::string::npos) << bcast->description;
  EXPECT_EQ(bcast->plan.config.chunkSize, kLlMaxChunkBytes);
  auto ring = planOrFail(cache, query(Collective::AllReduce, 1000));
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->plan.config.protocol, Protocol::Simple);
  auto unset = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(unset, nullptr);
  EXPECT_EQ(unset->plan.config.protocol, Protocol::Simple) << "an entry without a protocol: Simple";

  PlanCacheOptions forced = memoryOnly(4);
  forced.forcedProtocol = Protocol::LL128;
  PlanCache forcedCache(parseTable(kSelectionTable), forced);
  for (const PlanQuery& q : {query(Collective::Broadcast, 1000, 1), query(Collective::AllReduce, 1000),
                             query(Collective::AllToAll, 4096)}) {
    auto plan = planOrFail(forcedCache, q);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(plan->plan.config.protocol, Protocol::LL128) << plan->description;
    EXPECT_NE(plan->description.find("; TUCCL_PROTO"), std::string::npos) << plan->description;
  }

  PlanCache hosts(parseTable(kSelectionTable), memoryOnly(4, 2));
  auto across = planOrFail(hosts, query(Collective::Broadcast, 1000, 1));
  ASSERT_NE(across, nullptr);
  EXPECT_EQ(across->plan.config.protocol, Protocol::LL) << "the inter-node proxy carries LL lines";
  EXPECT_EQ(across->description.find("Simple"), std::string::npos) << across->description;
}

TEST(PlanCacheSelection, TableEntriesChooseAlgorithmAndConfiguration) {
  PlanCacheOptions options = memoryOnly(4);
  options.tablePath = "/tables/sel.json";
  PlanCache cache(parseTable(kSelectionTable), options);
  EXPECT_NE(cache.tableHash(), 0u);

  // entries[0]: up to 64 KiB, RING -> ring, its channels and chunk size.
  auto small = planOrFail(cache, query(Collective::AllReduce, 1000));
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->plan.sourceName, "builtin/ring_allreduce.resccl");
  EXPECT_EQ(small->plan.config.nChannels, 2);
  EXPECT_EQ(small->plan.config.chunkSize, 16 << 10);
  EXPECT_EQ(small->description,
            "AllReduce: table entry 0 (RING/SIMPLE, 2 channels, 0..64K) -> built-in ring, 2 channels, chunk 16K");

  // Above 64 KiB the 4-rank entry (more specific) wins over entries[1]: TREE AllReduce -> ring.
  auto large = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->plan.sourceName, "builtin/ring_allreduce.resccl");
  EXPECT_EQ(large->plan.config.nChannels, 4);
  EXPECT_EQ(large->plan.config.chunkSize, 256 << 10) << "entries[2] sets no chunk size: the default";
  EXPECT_NE(large->description.find("table entry 2 (TREE/any, 4 channels"), std::string::npos) << large->description;
  EXPECT_NE(large->description.find("runs a TREE AllReduce as its ring"), std::string::npos) << large->description;

  // Broadcast: TREE -> binomial up to 1 MiB, RING -> chain above.
  auto bcastSmall = planOrFail(cache, query(Collective::Broadcast, 1000, 1));
  ASSERT_NE(bcastSmall, nullptr);
  EXPECT_EQ(bcastSmall->plan.sourceName, "builtin/binomial_broadcast.resccl");
  EXPECT_EQ(bcastSmall->plan.root, 1);
  auto bcastLarge = planOrFail(cache, query(Collective::Broadcast, 1 << 20, 3));
  ASSERT_NE(bcastLarge, nullptr);
  EXPECT_EQ(bcastLarge->plan.sourceName, "builtin/chain_broadcast.resccl");
  EXPECT_EQ(bcastLarge->plan.root, 3);

  // Reduce: the entry's own algorithm, in any case.
  auto reduce = planOrFail(cache, query(Collective::Reduce, 10, 0));
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(reduce->plan.sourceName, "builtin/binomial_reduce.resccl");
  EXPECT_NE(reduce->description.find("-> built-in binomial"), std::string::npos) << reduce->description;

  // AllGather: 1 MiB is the total over the 4 ranks (the tuner's convention), so 65536 float32
  // per rank is 1 MiB (direct) and 65537 is above it (the default ring).
  auto gatherAtLimit = planOrFail(cache, query(Collective::AllGather, 65536));
  ASSERT_NE(gatherAtLimit, nullptr);
  EXPECT_EQ(gatherAtLimit->plan.sourceName, "builtin/direct_allgather.resccl");
  auto gatherAbove = planOrFail(cache, query(Collective::AllGather, 65537));
  ASSERT_NE(gatherAbove, nullptr);
  EXPECT_EQ(gatherAbove->plan.sourceName, "builtin/ring_allgather.resccl");
  EXPECT_NE(gatherAbove->description.find("no table entry covers the size"), std::string::npos);

  // ReduceScatter: NVLS is not a libtuccl algorithm: the default, and the reason says so.
  auto scatter = planOrFail(cache, query(Collective::ReduceScatter, 100));
  ASSERT_NE(scatter, nullptr);
  EXPECT_EQ(scatter->plan.sourceName, "builtin/ring_reducescatter.resccl");
  EXPECT_NE(scatter->description.find("NVLS is not a libtuccl algorithm"), std::string::npos) << scatter->description;

  // AllToAll: tables hold none.
  auto alltoall = planOrFail(cache, query(Collective::AllToAll, 100));
  ASSERT_NE(alltoall, nullptr);
  EXPECT_EQ(alltoall->plan.sourceName, "builtin/direct_alltoall.resccl");
  EXPECT_NE(alltoall->description.find("tables hold no AllToAll entries"), std::string::npos);
}

// The runtime phase's configuration groups: every collective and size has at least two without
// a table; an entry's groups are its own decision then its "groups"; the environment fixes one.
TEST(PlanCacheSelection, ConfigurationGroupsFromTheDefaultsTheTableAndTheEnvironment) {
  PlanCacheOptions options = memoryOnly(4);
  PlanCache defaults(std::nullopt, options);
  struct Case {
    Collective collective;
    int32_t root;
    const char* first;
    const char* second;
  };
  const Case cases[] = {
      {Collective::AllReduce, -1, "builtin/ring_allreduce.resccl", "builtin/direct_allreduce.resccl"},
      {Collective::AllGather, -1, "builtin/ring_allgather.resccl", "builtin/direct_allgather.resccl"},
      {Collective::ReduceScatter, -1, "builtin/ring_reducescatter.resccl", "builtin/ring_reducescatter.resccl"},
      {Collective::Broadcast, 1, "builtin/chain_broadcast.resccl", "builtin/binomial_broadcast.resccl"},
      {Collective::Reduce, 2, "builtin/chain_reduce.resccl", "builtin/binomial_reduce.resccl"},
      {Collective::AllToAll, -1, "builtin/direct_alltoall.resccl", "builtin/direct_alltoall.resccl"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(collectiveName(c.collective)));
    const PlanQuery q = query(c.collective, 1 << 20, c.root);
    ASSERT_EQ(defaults.groupsFor(q).size(), 2u);
    EXPECT_EQ(defaults.entryAndGroupCount(q), (std::pair<int32_t, int32_t>{-1, 2}));
    auto first = defaults.planFor(q, 0);
    auto second = defaults.planFor(q, 1);
    ASSERT_TRUE(first && second);
    EXPECT_EQ((*first)->plan.sourceName, c.first);
    EXPECT_EQ((*second)->plan.sourceName, c.second);
    EXPECT_NE((*first)->key, (*second)->key) << "the alternative is another plan";
    if (std::string(c.first) == c.second) {
      EXPECT_EQ((*second)->plan.config.chunkSize, (*first)->plan.config.chunkSize / 2) << "half the slice";
    }
    EXPECT_NE((*second)->description.find("configuration group 1"), std::string::npos) << (*second)->description;
    Expected<std::shared_ptr<const CompiledPlan>> none = defaults.planFor(q, 2);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.status().code(), ErrorCode::InvalidArgument);
  }
  // Small AllReduce defaults to direct; its alternative is the ring.
  EXPECT_EQ((*defaults.planFor(query(Collective::AllReduce, 100), 1))->plan.sourceName, "builtin/ring_allreduce.resccl");

  // A table entry's groups, in order; the entry's own decision is group 0.
  const char* grouped = R"({"version": 1, "entries": [{"collective": "allreduce", "algorithm": "ring",
      "nChannels": 2, "chunkSize": "64K", "groups": [{"tucclAlgorithm": "direct", "chunkSize": "32K"},
      {"algorithm": "ring", "nChannels": 4}]}]})";
  PlanCache table(parseTable(grouped), options);
  const PlanQuery q = query(Collective::AllReduce, 1 << 20);
  ASSERT_EQ(table.groupsFor(q).size(), 3u);
  EXPECT_EQ(table.entryFor(q), 0);
  EXPECT_EQ(table.entryAndGroupCount(q), (std::pair<int32_t, int32_t>{0, 3}));
  auto own = table.planFor(q, 0), direct = table.planFor(q, 1), wide = table.planFor(q, 2);
  ASSERT_TRUE(own && direct && wide);
  EXPECT_EQ((*own)->plan.sourceName, "builtin/ring_allreduce.resccl");
  EXPECT_EQ((*own)->plan.config.nChannels, 2);
  EXPECT_EQ((*direct)->plan.sourceName, "builtin/direct_allreduce.resccl");
  EXPECT_EQ((*direct)->plan.config.chunkSize, 32 << 10);
  EXPECT_EQ((*wide)->plan.sourceName, "builtin/ring_allreduce.resccl");
  EXPECT_EQ((*wide)->plan.config.nChannels, 4);

  // TUCCL_ALGO (or TUCCL_NCHANNELS, TUCCL_CHUNK_SIZE) fixes the choice: one group.
  PlanCacheOptions forced = options;
  forced.forcedAlgorithm = "ring";
  PlanCache fixed(parseTable(grouped), forced);
  EXPECT_EQ(fixed.groupsFor(q).size(), 1u);
  EXPECT_EQ(fixed.entryAndGroupCount(q), (std::pair<int32_t, int32_t>{0, 1}));
  EXPECT_FALSE(fixed.planFor(q, 1));
  PlanCache fixedDefaults(std::nullopt, forced);
  EXPECT_EQ(fixedDefaults.entryAndGroupCount(q), (std::pair<int32_t, int32_t>{-1, 1}));
}

// A table none of whose entries for a collective can match the communicator (another rank count,
// node count or topology) is named, with what its entries are for; a table that matches is not.
TEST(PlanCacheSelection, ATableForAnotherShapeIsNamed) {
  const char* fourRanks = R"({"version": 1, "entries": [
      {"collective": "allreduce", "nRanks": 4, "nNodes": 1, "algorithm": "ring"},
      {"collective": "allreduce", "nRanks": 4, "nNodes": 2, "algorithm": "ring"},
      {"collective": "allgather", "algorithm": "ring"}]})";
  PlanCache eight(parseTable(fourRanks), memoryOnly(8));
  const std::string mismatch = eight.tableMismatch();
  EXPECT_NE(mismatch.find("allreduce: the table's entries are for 4 ranks on 1 node; 4 ranks on 2 nodes, this "
                          "communicator is 8 ranks on 1 node: none applies"),
            std::string::npos)
      << mismatch;
  EXPECT_EQ(mismatch.find("allgather"), std::string::npos) << "its entry applies to any size";
  PlanCache four(parseTable(fourRanks), memoryOnly(4));
  EXPECT_EQ(four.tableMismatch(), "");
  PlanCache none(std::nullopt, memoryOnly(8));
  EXPECT_EQ(none.tableMismatch(), "");
}

TEST(PlanCacheSelection, EntriesFollowTheCommunicatorSize) {
  // The 4-rank entry does not apply to 8 ranks on 2 nodes: entries[1] does, with its chunk size.
  PlanCache cache(parseTable(kSelectionTable), memoryOnly(8, 2));
  auto plan = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->plan.nRanks, 8);
  EXPECT_EQ(plan->plan.config.chunkSize, 512 << 10);
  EXPECT_EQ(plan->plan.config.nChannels, 1);
  EXPECT_NE(plan->description.find("table entry 1 (tucclAlgorithm ring"), std::string::npos) << plan->description;
}

TEST(PlanCacheSelection, ProgramFilesResolveAgainstTheTableDirectory) {
  const fs::path dir = testDirectory() / "program_files";
  std::string program = example("ring_allreduce");
  const std::string name = "AlgoName=\"Ring\"";
  program.replace(program.find(name), name.size(), "AlgoName=\"TableRing\"");
  writeText(dir / "algos/table_ring.resccl", program);
  writeText(dir / "table.json", R"({"version": 1, "entries": [
      {"collective": "allreduce", "tucclAlgorithm": "algos/table_ring.resccl", "nChannels": 2}]})");
  Expected<LoadedTable> loaded = loadTableFile((dir / "table.json").string());
  ASSERT_TRUE(loaded) << loaded.status().toString();
  PlanCacheOptions options = memoryOnly(3);
  options.tablePath = (dir / "table.json").string();
  PlanCache cache(loaded->table, options);
  auto plan = planOrFail(cache, query(Collective::AllReduce, 999));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->plan.algorithm, "TableRing");
  EXPECT_EQ(plan->plan.sourceName, (dir / "algos/table_ring.resccl").string());
  EXPECT_EQ(plan->plan.nRanks, 3);
  EXPECT_EQ(plan->description,
            "AllReduce: table entry 0 (2 channels, tucclAlgorithm algos/table_ring.resccl, all sizes) -> "
            "algos/table_ring.resccl, 2 channels, chunk 256K");
  // The program runs: every rank, every element, on the CPU.
  VerifyOptions verify;
  verify.count = 1237;
  verify.chunkSize = 40;
  const CpuVerifyReport report = verifyPlanOnCpu(plan->plan, verify);
  EXPECT_TRUE(report.ok) << report.summary();
}

// An MSCCL XML file is a program like a ResCCLang one (TUCCL_ALGO or a table's tucclAlgorithm),
// with its own shape: it serves communicators of its ngpus ranks, and refuses others by name.
TEST(PlanCacheSelection, MscclXmlProgramsServeCommunicatorsOfTheirSize) {
  const std::string xml = (fs::path(TUCCL_SOURCE_DIR) / "tests/data/msccl/ring_allreduce_1ch.xml").string();
  PlanCacheOptions options = memoryOnly(4);
  options.forcedAlgorithm = xml;
  PlanCache cache(std::nullopt, options);
  auto plan = planOrFail(cache, query(Collective::AllReduce, 1001));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->plan.sourceName, xml);
  EXPECT_EQ(plan->plan.nRanks, 4);
  VerifyOptions verify;
  verify.count = 1001;
  verify.chunkSize = 64;
  const CpuVerifyReport report = verifyPlanOnCpu(plan->plan, verify);
  EXPECT_TRUE(report.ok) << report.summary();

  // From a table, resolved against its directory.
  const fs::path dir = testDirectory() / "xml_programs";
  writeText(dir / "algos/ring.xml", readText(xml));
  const std::string json = R"({"version": 1, "entries": [
      {"collective": "allreduce", "tucclAlgorithm": "algos/ring.xml"}]})";
  writeText(dir / "table.json", json);
  PlanCacheOptions fromTable = memoryOnly(4);
  fromTable.tablePath = (dir / "table.json").string();
  PlanCache tableCache(parseTable(json), fromTable);
  auto tablePlan = planOrFail(tableCache, query(Collective::AllReduce, 4096));
  ASSERT_NE(tablePlan, nullptr);
  EXPECT_EQ(tablePlan->plan.sourceName, (dir / "algos/ring.xml").string());

  // Another communicator size: an error naming the file and both sizes.
  fromTable.nRanks = 3;
  PlanCache three(parseTable(json), fromTable);
  auto refused = three.planFor(query(Collective::AllReduce, 4096));
  ASSERT_FALSE(refused);
  const std::string message = refused.status().toString();
  EXPECT_NE(message.find("algos/ring.xml"), std::string::npos) << message;
  EXPECT_NE(message.find("for 4 GPUs"), std::string::npos) << message;
  EXPECT_NE(message.find("has 3 ranks"), std::string::npos) << message;
}

// ---- errors of entries whose algorithm does not load

struct BadEntry {
  std::string algorithm;     ///< the entry's tucclAlgorithm
  std::string collective;    ///< the entry's collective
  std::string fileText;      ///< written to bad/<algorithm> when not empty
  std::string expectedPart;  ///< in the error message
};

TEST(PlanCacheErrors, AnEntryWhoseAlgorithmFailsIsAnErrorNamingTableAndEntry) {
  const fs::path dir = testDirectory() / "bad_entries";
  std::string unproved = example("ring_allreduce");
  // The AllGather half forwards chunk r - s, which rank r does not hold reduced.
  const std::string forward = "(r + 1 - s) % nRanks, recv)";
  unproved.replace(unproved.find(forward), forward.size(), "(r - s) % nRanks, recv)");
  const std::vector<BadEntry> cases = {
      {"binomial", "allreduce", "", "there is no built-in binomial AllReduce (built-ins for AllReduce: ring, direct, hm)"},
      {"chain", "allgather", "", "there is no built-in chain AllGather (built-ins for AllGather: ring, direct, hm)"},
      {"missing.resccl", "allreduce", "", "cannot"},
      {"syntax.resccl", "allreduce", "def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    transfer(0, 1, 0, 0\n",
       "syntax.resccl:2:"},
      {"unproved.resccl", "allreduce", unproved, "unproved.resccl:"},
      {"gather.resccl", "allreduce", example("ring_allgather"), "the program's collective is AllGather, the call's AllReduce"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const BadEntry& c = cases[i];
    SCOPED_TRACE(c.algorithm);
    if (!c.fileText.empty()) writeText(dir / c.algorithm, c.fileText);
    // The bad entry is entries[1], after one that covers other sizes.
    const std::string json = R"({"version": 1, "entries": [
        {"collective": ")" + c.collective + R"(", "minBytes": "1M", "tucclAlgorithm": "ring"},
        {"collective": ")" + c.collective + R"(", "maxBytes": 1000, "tucclAlgorithm": ")" + c.algorithm + R"("}]})";
    writeText(dir / "table.json", json);
    PlanCacheOptions options = memoryOnly(4);
    options.tablePath = (dir / "table.json").string();
    PlanCache cache(parseTable(json), options);
    const Collective collective = *parseCollective(c.collective);
    auto plan = cache.planFor(query(collective, 10));
    ASSERT_FALSE(plan);
    const std::string message = plan.status().toString();
    EXPECT_NE(message.find(options.tablePath), std::string::npos) << message;
    EXPECT_NE(message.find("entries[1].tucclAlgorithm"), std::string::npos) << message;
    EXPECT_NE(message.find(c.expectedPart), std::string::npos) << message;
    // Other sizes are served by the good entry; nothing silently replaced the bad one.
    EXPECT_TRUE(cache.planFor(query(collective, 1 << 20)));
    EXPECT_FALSE(cache.planFor(query(collective, 10)));
  }
}

// ---- identity, hash and concurrency

TEST(PlanCacheIdentity, TheSameQueryGetsTheSamePlanAndCountsAndTypesDoNotMatter) {
  PlanCache cache(parseTable(kSelectionTable), memoryOnly(4));
  auto first = planOrFail(cache, query(Collective::AllReduce, 1000));
  auto again = planOrFail(cache, query(Collective::AllReduce, 1000));
  EXPECT_EQ(first, again);
  // Another count and datatype under the same entry: the same plan (kernels take both at run time).
  auto otherCount = planOrFail(cache, query(Collective::AllReduce, 7, -1, DataType::BFloat16));
  EXPECT_EQ(first, otherCount);
  EXPECT_EQ(cache.stats().plansBuilt, 1);
  // Another entry's chunk size: another plan.
  auto large = planOrFail(cache, query(Collective::AllReduce, 1 << 20));
  EXPECT_NE(large->key, first->key);
  // Another cache (another rank) computes the same key and plan.
  PlanCache peer(parseTable(kSelectionTable), memoryOnly(4));
  auto peerPlan = planOrFail(peer, query(Collective::AllReduce, 1000));
  EXPECT_EQ(peerPlan->key, first->key);
  EXPECT_EQ(peerPlan->plan, first->plan);
  EXPECT_EQ(peerPlan->description, first->description);
}

TEST(PlanCacheIdentity, OnePlanServesSelectionsWithTheirOwnDescriptions) {
  // Two entries that select the same plan: built once, described each by its own entry.
  PlanCache cache(parseTable(R"({"version": 1, "entries": [
      {"collective": "allreduce", "maxBytes": 1000, "algorithm": "ring"},
      {"collective": "allreduce", "minBytes": 1001, "tucclAlgorithm": "ring"}]})"),
                  memoryOnly(2));
  auto a = planOrFail(cache, query(Collective::AllReduce, 10));
  auto b = planOrFail(cache, query(Collective::AllReduce, 10000));
  EXPECT_EQ(a->key, b->key);
  EXPECT_EQ(cache.stats().plansBuilt, 1);
  EXPECT_NE(a->description.find("table entry 0"), std::string::npos);
  EXPECT_NE(b->description.find("table entry 1"), std::string::npos);
  EXPECT_EQ(planOrFail(cache, query(Collective::AllReduce, 20000)), b);
}

TEST(PlanCacheIdentity, TableHashFollowsTheContentAndTheProgramsItNames) {
  const fs::path dir = testDirectory() / "table_hash";
  writeText(dir / "ring.resccl", example("ring_allreduce"));
  const std::string json =
      R"({"version": 1, "entries": [{"collective": "allreduce", "tucclAlgorithm": "ring.resccl"}]})";
  PlanCacheOptions options = memoryOnly(4);
  options.tablePath = (dir / "t.json").string();
  const uint64_t hash = PlanCache(parseTable(json), options).tableHash();
  EXPECT_NE(hash, 0u);
  EXPECT_EQ(PlanCache(parseTable(json), options).tableHash(), hash);
  // The same table written back and read again (canonical JSON): the same hash.
  EXPECT_EQ(PlanCache(parseTable(writeTableJson(parseTable(json))), options).tableHash(), hash);
  // Another table, or the same table naming a changed program: another hash.
  LookupTable changed = parseTable(json);
  changed.entries[0].nChannels = 2;
  EXPECT_NE(PlanCache(changed, options).tableHash(), hash);
  writeText(dir / "ring.resccl", example("ring_allreduce") + "# edited\n");
  EXPECT_NE(PlanCache(parseTable(json), options).tableHash(), hash);
}

TEST(PlanCacheIdentity, ConcurrentCallersBuildAPlanOnce) {
  PlanCache cache(std::nullopt, memoryOnly(8));
  std::vector<std::shared_ptr<const CompiledPlan>> plans(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < plans.size(); ++i) {
    threads.emplace_back([&, i] { plans[i] = *cache.planFor(query(Collective::AllReduce, 100 + int64_t(i))); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& plan : plans) EXPECT_EQ(plan, plans.front());
  EXPECT_EQ(cache.stats().plansBuilt, 1);
}

// ---- the environment

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PlanCacheEnvironment, TableFromTucclTunerTable) {
  const fs::path dir = testDirectory() / "environment";
  {
    ScopedEnv unset("TUCCL_TUNER_TABLE", nullptr);
    auto none = loadTableFromEnvironment();
    ASSERT_TRUE(none);
    EXPECT_FALSE(none->has_value());
  }
  writeText(dir / "good.json", kSelectionTable);
  {
    ScopedEnv good("TUCCL_TUNER_TABLE", (dir / "good.json").c_str());
    auto table = loadTableFromEnvironment();
    ASSERT_TRUE(table) << table.status().toString();
    ASSERT_TRUE(table->has_value());
    EXPECT_EQ((*table)->entries.size(), 8u);
  }
  writeText(dir / "bad.json", "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"tucclAlgorithm\": 1}]}");
  {
    ScopedEnv bad("TUCCL_TUNER_TABLE", (dir / "bad.json").c_str());
    auto table = loadTableFromEnvironment();
    ASSERT_FALSE(table);
    // The message alone (what libtuccl's callers see) names the file and the field.
    EXPECT_NE(table.status().message().find("TUCCL_TUNER_TABLE: " + (dir / "bad.json").string() + ": error: "),
              std::string::npos) << table.status().message();
    EXPECT_NE(table.status().message().find("entries[0].tucclAlgorithm"), std::string::npos);
  }
  writeText(dir / "syntax.json", "{\"version\": 1,\n \"entries\": [\n  {\"collective\": \"allreduce\" \"algorithm\": \"ring\"}]}");
  {
    ScopedEnv syntax("TUCCL_TUNER_TABLE", (dir / "syntax.json").c_str());
    auto table = loadTableFromEnvironment();
    ASSERT_FALSE(table);
    EXPECT_NE(table.status().message().find((dir / "syntax.json").string() + ":3:"), std::string::npos)
        << "the line (and column) of a syntax error: " << table.status().message();
  }
  {
    ScopedEnv missing("TUCCL_TUNER_TABLE", (dir / "missing.json").c_str());
    auto table = loadTableFromEnvironment();
    ASSERT_FALSE(table);
    EXPECT_NE(table.status().toString().find("missing.json"), std::string::npos);
  }
}

TEST(PlanCacheEnvironment, CacheDirectoryFromTheEnvironment) {
  ScopedEnv cache("TUCCL_CACHE_DIR", "/c/tuccl");
  ScopedEnv xdg("XDG_CACHE_HOME", "/x");
  ScopedEnv home("HOME", "/h");
  EXPECT_EQ(defaultCacheDir(), "/c/tuccl");
  {
    ScopedEnv unset("TUCCL_CACHE_DIR", nullptr);
    EXPECT_EQ(defaultCacheDir(), "/x/tuccl");
    ScopedEnv emptyXdg("XDG_CACHE_HOME", "");
    EXPECT_EQ(defaultCacheDir(), "/h/.cache/tuccl");
    ScopedEnv noHome("HOME", nullptr);
    EXPECT_EQ(defaultCacheDir(), "");
  }
}

// ---- the disk cache

PlanCacheOptions onDisk(const fs::path& dir) {
  PlanCacheOptions options;
  options.nRanks = 2;
  options.cacheDir = dir.string();
  options.hostKernels = true;
  return options;
}

// A child's PlanCacheStats as its exit status: plans built (bit 0), host libraries compiled
// (bit 1), plans loaded from disk (bit 2); 100 on an error.
int planInChild(const fs::path& dir, const PlanQuery& q) {
  PlanCache cache(std::nullopt, onDisk(dir));
  auto plan = cache.planFor(q);
  if (!plan || (*plan)->host == nullptr) return 100;
  const PlanCacheStats stats = cache.stats();
  return int(stats.plansBuilt == 1) | int(stats.hostBuilds == 1) << 1 | int(stats.plansLoaded == 1) << 2;
}

fs::path diskDirectory() { return testDirectory() / "disk"; }

fs::path planFile(const fs::path& dir, const std::string& key) { return dir / "plans" / (key + ".plan"); }

// Runs the plan's host kernels on every rank: AllReduce (sum) of rank-dependent values.
void expectAllReduceRuns(const CompiledPlan& compiled, int64_t count) {
  ASSERT_NE(compiled.host, nullptr);
  const Plan& plan = compiled.plan;
  CollectiveCall call{Collective::AllReduce, plan.nRanks, -1, DataType::Float32, ReduceOp::Sum, count, true};
  const RankBufferElements elements = planBufferElements(plan, compiled.layout, count);
  std::vector<std::vector<float>> data(static_cast<size_t>(plan.nRanks));
  std::vector<RankBuffers> buffers;
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    data[r].resize(static_cast<size_t>(elements.output));
    for (int64_t i = 0; i < count; ++i) data[r][i] = static_cast<float>((r + 1) * (i % 17));
  }
  std::vector<std::vector<float>> scratch(static_cast<size_t>(plan.nRanks),
                                          std::vector<float>(static_cast<size_t>(elements.scratch) + 1));
  for (int32_t r = 0; r < plan.nRanks; ++r) buffers.push_back({data[r].data(), data[r].data(), scratch[r].data()});
  // Slices of 64 bytes, except for a send-ahead plan, whose calls are one micro-batch of its own
  // slice size (plan_cache.h).
  const CallGeometry geometry =
      callGeometry(plan, compiled.layout, call, plan.config.sendAhead > 0 ? plan.config.chunkSize : 64, 4);
  HostStaging staging(compiled.layout, geometry);
  Expected<HostRun> run = runPlanOnHost(*compiled.host, plan, compiled.layout, call, buffers, staging);
  ASSERT_TRUE(run) << run.status().toString();
  ASSERT_TRUE(run->completed) << run->status().toString();
  const float ranksSum = static_cast<float>(plan.nRanks * (plan.nRanks + 1) / 2);
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[r][i], ranksSum * static_cast<float>(i % 17)) << r << " " << i;
  }
}

TEST(PlanCacheDisk, AnotherProcessLoadsThePlanWithoutCompiling) {
  const fs::path dir = diskDirectory();
  const PlanQuery q = query(Collective::AllReduce, 1237);
  // Built by a child process: plan and host library.
  EXPECT_EQ(exitStatus(spawn([&] { return planInChild(dir, q); })) & 3, 3);
  PlanCache cache(std::nullopt, onDisk(dir));
  auto plan = planOrFail(cache, q);
  ASSERT_NE(plan, nullptr);
  const PlanCacheStats stats = cache.stats();
  EXPECT_TRUE(stats.diskCache);
  EXPECT_EQ(stats.plansLoaded, 1);
  EXPECT_EQ(stats.plansBuilt, 0);
  EXPECT_EQ(stats.hostBuilds, 0);
  EXPECT_EQ(stats.hostLoaded, 1);
  EXPECT_TRUE(fs::exists(planFile(dir, plan->key)));
  EXPECT_EQ(fs::path(plan->host->libraryPath).parent_path().parent_path(), dir / "host");
  // The loaded plan is the one the algorithm compiles to, and its library runs it.
  PlanCacheOptions memoryOptions = memoryOnly(2);
  memoryOptions.singleTbMaxBytes = onDisk(dir).singleTbMaxBytes;
  PlanCache memory(std::nullopt, memoryOptions);
  EXPECT_EQ(planOrFail(memory, q)->plan, plan->plan);
  expectAllReduceRuns(*plan, 1237);
}

TEST(PlanCacheDisk, ADamagedPlanIsDetectedRemovedAndRebuilt) {
  const fs::path dir = diskDirectory();
  const PlanQuery q = query(Collective::AllReduce, 5);
  std::string key;
  {
    PlanCache cache(std::nullopt, onDisk(dir));
    key = planOrFail(cache, q)->key;
  }
  const fs::path file = planFile(dir, key);
  ASSERT_TRUE(fs::exists(file));
  std::string bytes = readText(file);
  for (auto damage : {+[](std::string& b) { b[b.size() / 2] ^= 0x20; }, +[](std::string& b) { b.resize(b.size() / 3); }}) {
    std::string damaged = bytes;
    damage(damaged);
    writeText(file, damaged);
    PlanCache cache(std::nullopt, onDisk(dir));
    auto plan = planOrFail(cache, q);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(cache.stats().damagedEntries, 1);
    EXPECT_EQ(cache.stats().plansBuilt, 1);
    EXPECT_EQ(cache.stats().plansLoaded, 0);
    EXPECT_EQ(readText(file), bytes) << "rewritten whole";
    PlanCache later(std::nullopt, onDisk(dir));
    ASSERT_NE(planOrFail(later, q), nullptr);
    EXPECT_EQ(later.stats().plansLoaded, 1);
    EXPECT_EQ(later.stats().damagedEntries, 0);
  }
}

TEST(PlanCacheDisk, ConcurrentProcessesBuildAnEntryOnce) {
  const fs::path dir = diskDirectory();
  // A plan no other test builds: a new plan and a new host library.
  PlanCacheOptions options = onDisk(dir);
  const PlanQuery q = query(Collective::Broadcast, 100, 1);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) children.push_back(spawn([&] { return planInChild(dir, q); }));
  int plansBuilt = 0;
  int hostBuilds = 0;
  for (pid_t child : children) {
    const int status = exitStatus(child);
    ASSERT_TRUE(status >= 0 && status < 8) << status;
    plansBuilt += status & 1;
    hostBuilds += (status >> 1) & 1;
    EXPECT_NE(status & 1, (status >> 2) & 1) << "each child built the plan or loaded it";
  }
  EXPECT_EQ(plansBuilt, 1);
  EXPECT_EQ(hostBuilds, 1);
  PlanCache cache(std::nullopt, options);
  ASSERT_NE(planOrFail(cache, q), nullptr);
  EXPECT_EQ(cache.stats().plansLoaded, 1);
}

TEST(PlanCacheDisk, AnUnwritableDirectoryKeepsPlansInMemory) {
  const fs::path file = testDirectory() / "not_a_directory";
  writeText(file, "a file");
  PlanCacheOptions options = onDisk(file / "cache");
  options.hostKernels = false;
  PlanCache cache(std::nullopt, options);
  auto plan = planOrFail(cache, query(Collective::AllGather, 10));
  ASSERT_NE(plan, nullptr);
  EXPECT_FALSE(cache.stats().diskCache);
  EXPECT_EQ(cache.stats().plansBuilt, 1);
  EXPECT_EQ(planOrFail(cache, query(Collective::AllGather, 10)), plan);
}

TEST(PlanCacheDisk, CubinsAreCompiledOnceAndLoadedFromDisk) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without NVRTC";
  const fs::path dir = diskDirectory();
  PlanCacheOptions options = onDisk(dir);
  options.hostKernels = false;
  options.cudaArch = "sm_80";
  const PlanQuery q = query(Collective::ReduceScatter, 64);
  std::vector<std::vector<char>> cubins;
  {
    PlanCache cache(std::nullopt, options);
    auto plan = planOrFail(cache, q);
    ASSERT_NE(plan, nullptr);
    // One CUBIN per distinct kernel.
    ASSERT_EQ(plan->cubins.size(), plan->kernels.kernels.size());
    for (const auto& cubin : plan->cubins) EXPECT_FALSE(cubin.empty());
    EXPECT_EQ(cache.stats().cubinsCompiled, static_cast<int64_t>(plan->kernels.kernels.size()));
    cubins = plan->cubins;
  }
  PlanCache again(std::nullopt, options);
  auto plan = planOrFail(again, q);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(again.stats().cubinsCompiled, 0);
  EXPECT_EQ(again.stats().cubinsLoaded, 1);
  EXPECT_EQ(plan->cubins, cubins);
}

}  // namespace
}  // namespace tuccl::backend
