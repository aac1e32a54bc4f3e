// The runtime phase of libtuccl across processes (adapt/runtime.h): a configuration
// group made slow on purpose (TUCCL_TEST_DELAY_GROUP) is left by every rank at the same call,
// every call's result is checked, the learned table is written and the next run starts from it,
// and a changed topology signature makes it start afresh. Also the runtime's pieces in process.
#include "adapt/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

using tuccl::AdaptKey;
using tuccl::AdaptiveRuntime;
using tuccl::AdaptSettings;

const std::string kRank = TUCCL_COLLECTIVES_RANK;

std::string scratchDir(const std::string& name) {
  return freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/adaptation/" + name);
}

// What one rank's log says the runtime phase did: its switches (call -> group) and, per call,
// the group it ran.
struct RankAdaptation {
  std::map<int, int> switches;
  std::map<int, int> ran;
  bool startedFromFile = false;
};
RankAdaptation parseLog(const std::string& text, int rank) {
  RankAdaptation parsed;
  static const std::regex kSwitch(R"(TuCCL adapt: rank=(\d+) call=(\d+) coll=allreduce bytes=\d+ group=(\d+))");
  static const std::regex kRan(R"(TuCCL adapt trace: rank=(\d+) call=(\d+) coll=allreduce bytes=\d+ runs group=(\d+))");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kSwitch)) {
      EXPECT_EQ(std::stoi(m[1]), rank) << line;
      parsed.switches[std::stoi(m[2])] = std::stoi(m[3]);
    } else if (std::regex_search(line, m, kRan)) {
      EXPECT_EQ(std::stoi(m[1]), rank) << line;
      parsed.ran[std::stoi(m[2])] = std::stoi(m[3]);
    }
    if (line.find("TuCCL adapt: starting from") != std::string::npos) parsed.startedFromFile = true;
  }
  return parsed;
}

constexpr int kRanks = 4;
constexpr int kCalls = 120;
constexpr const char* kCount = "4096";  // 16 KiB AllReduce: built-in direct, alternative ring

std::vector<RankAdaptation> runRanks(const std::string& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> env = {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
                                  "TUCCL_DEVICE=cpu", "TUCCL_TIMEOUT_S=60", "TUCCL_DEBUG=TRACE", "TUCCL_ADAPT=1",
                                  "TUCCL_ADAPT_WARMUP=0",
                                  "TUCCL_ADAPT_FILE=" + dir + "/../learned.json",
                                  "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  env.insert(env.end(), extra.begin(), extra.end());
  RankProcesses ranks = startRanks(kRanks, {kRank, "repeat", std::to_string(kCalls), kCount}, env, dir);
  EXPECT_TRUE(waitRanks(ranks, 300)) << "the ranks did not finish\n" << logsOf(ranks);
  std::vector<RankAdaptation> parsed;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0) << "rank " << r << "\n" << logsOf(ranks);
    parsed.push_back(parseLog(readLog(ranks.logs[r]), r));
  }
  return parsed;
}

// Both groups' plans built into the plan cache beforehand (TUCCL_ALGO fixes each in turn): a group
// whose plan must first be compiled is tried only once the key's calls pay for that (seconds on a
// fresh cache), and this test is about the choice, not about a cold cache.
void buildBothPlans(const std::string& dir) {
  for (const char* algo : {"TUCCL_ALGO=direct", "TUCCL_ALGO=ring"}) {
    const std::vector<std::string> env = {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
                                          "TUCCL_DEVICE=cpu", "TUCCL_TIMEOUT_S=60", algo,
                                          "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
    const std::string logs = dir + "/" + (algo + 11);  // "direct", "ring"
    std::filesystem::create_directories(logs);
    RankProcesses ranks = startRanks(kRanks, {kRank, "repeat", "1", kCount}, env, logs);
    ASSERT_TRUE(waitRanks(ranks, 300)) << "the ranks did not finish\n" << logsOf(ranks);
  }
}

TEST(AdaptiveRuntime, EveryRankLeavesASlowGroupAtTheSameCallAndTheNextRunStartsThere) {
  const std::string base = scratchDir("slow-group");
  const std::string learned = base + "/learned.json";
  buildBothPlans(base);
  if (HasFatalFailure()) return;
  // Group 0 (the built-in default) is slowed by 20 ms a call — far more than a loaded machine
  // adds to a 16 KiB call — with agreements every 8 calls, and probes allowed half the key's time
  // (so the test needs few calls).
  const std::vector<std::string> slow = {"TUCCL_TEST_DELAY_GROUP=0:20000", "TUCCL_ADAPT_SYNC=8",
                                         "TUCCL_ADAPT_BUDGET=50", "TUCCL_ADAPT_FIRST=0"};
  std::filesystem::create_directories(base + "/first");
  const std::vector<RankAdaptation> first = runRanks(base + "/first", slow);
  ASSERT_EQ(first.size(), static_cast<size_t>(kRanks));
  // Every rank ran the same group at every call, and switched to group 1 at the same call.
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(first[r].ran.size(), static_cast<size_t>(kCalls)) << "rank " << r;
    EXPECT_EQ(first[r].ran, first[0].ran) << "rank " << r << " ran other groups than rank 0";
    EXPECT_EQ(first[r].switches, first[0].switches) << "rank " << r;
  }
  ASSERT_EQ(first[0].switches.size(), 1u);
  const auto [switchCall, switchedTo] = *first[0].switches.begin();
  EXPECT_EQ(switchedTo, 1);
  EXPECT_LE(switchCall, 100) << "once group 1 had five timings on every rank";
  // After the switch group 0 runs only as a probe, spaced by what it costs: with half the key's
  // time to spend, a probe of a 20 ms call against calls of t ms comes 40 / t - 2 calls after the
  // last, at least every 5 calls for calls up to 6 ms (a sanitizer build's).
  int slowCalls = 0;
  for (const auto& [call, group] : first[0].ran) slowCalls += call > switchCall && group == 0;
  EXPECT_LE(slowCalls, (kCalls - switchCall) / 5 + 1);

  // The learned table names the key and its choice; the next run starts from it.
  ASSERT_TRUE(std::filesystem::exists(learned));
  std::ifstream in(learned);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"format\": \"tuccl-adaptation\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"best\": 1"), std::string::npos) << text;
  std::filesystem::create_directories(base + "/second");
  const std::vector<RankAdaptation> second = runRanks(base + "/second", slow);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(second[r].startedFromFile || r != 0) << "rank 0 says where it started from";
    EXPECT_TRUE(second[r].switches.empty()) << "rank " << r << " switched though it started from the choice";
    EXPECT_EQ(second[r].ran, second[0].ran);
  }
  ASSERT_FALSE(second[0].ran.empty());
  EXPECT_EQ(second[0].ran.at(0), 1) << "the first call already runs the learned group";

  // Another topology signature: the learned entries start afresh (group 0 first, then the switch).
  std::filesystem::create_directories(base + "/third");
  std::vector<std::string> moved = slow;
  moved.push_back("TUCCL_TOPOLOGY_SIGNATURE=another-cluster");
  const std::vector<RankAdaptation> third = runRanks(base + "/third", moved);
  EXPECT_FALSE(third[0].startedFromFile);
  ASSERT_FALSE(third[0].ran.empty());
  EXPECT_EQ(third[0].ran.at(0), 0) << "a new topology explores from the static choice";
  EXPECT_EQ(third[0].switches.size(), 1u);
}

TEST(AdaptiveRuntime, OffAndBadSettingsAreRefusedByName) {
  setenv("TUCCL_ADAPT", "maybe", 1);
  Expected<AdaptSettings> bad = adaptSettingsFromEnvironment("");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("TUCCL_ADAPT=maybe"), std::string::npos);
  unsetenv("TUCCL_ADAPT");
  Expected<AdaptSettings> unset = adaptSettingsFromEnvironment("");
  ASSERT_TRUE(unset);
  EXPECT_FALSE(unset->enabled) << "off unless turned on";
  EXPECT_EQ(unset->warmup, kDefaultAdaptWarmup);
  EXPECT_TRUE(unset->file.empty()) << "no cache directory, no learned table";
  setenv("TUCCL_ADAPT", "0", 1);
  setenv("TUCCL_TEST_DELAY_GROUP", "1-5", 1);
  Expected<AdaptSettings> delay = adaptSettingsFromEnvironment("");
  ASSERT_FALSE(delay);
  EXPECT_NE(delay.status().message().find("TUCCL_TEST_DELAY_GROUP=1-5: expected <group>:<microseconds>"),
            std::string::npos);
  setenv("TUCCL_TEST_DELAY_GROUP", "1:5", 1);
  Expected<AdaptSettings> off = adaptSettingsFromEnvironment("/tmp/cache");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->enabled);
  EXPECT_EQ(off->delayGroup, 1);
  EXPECT_EQ(off->delayMicros, 5);
  EXPECT_TRUE(off->fileFromDefault);
  unsetenv("TUCCL_TEST_DELAY_GROUP");
  for (const auto& [name, value, expected] :
       {std::tuple{"TUCCL_ADAPT_SYNC", "0", "a whole number of calls from 1 to 1048576"},
        std::tuple{"TUCCL_ADAPT_SYNC", "8x", "a whole number of calls from 1 to 1048576"},
        std::tuple{"TUCCL_ADAPT_PROBE", "1", "a whole number of calls from 2 to 1048576"},
        std::tuple{"TUCCL_ADAPT_PROBE", "-4", "a whole number of calls from 2 to 1048576"},
        std::tuple{"TUCCL_ADAPT_WARMUP", "many", "a whole number of calls from 0 to 1048576"},
        std::tuple{"TUCCL_ADAPT_FIRST", "-1", "a whole number of calls from 0 to 1048576"},
        std::tuple{"TUCCL_ADAPT_BUDGET", "0", "a percentage from 0.1 to 50"},
        std::tuple{"TUCCL_ADAPT_BUDGET", "60", "a percentage from 0.1 to 50"},
        std::tuple{"TUCCL_ADAPT_BUDGET", "3%", "a percentage from 0.1 to 50"}}) {
    setenv(name, value, 1);
    Expected<AdaptSettings> refused = adaptSettingsFromEnvironment("");
    unsetenv(name);
    ASSERT_FALSE(refused) << name << "=" << value;
    EXPECT_NE(refused.status().message().find(std::string(name) + "=" + value), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find(expected), std::string::npos) << refused.status().message();
  }
  setenv("TUCCL_ADAPT_SYNC", "16", 1);
  setenv("TUCCL_ADAPT_PROBE", "64", 1);
  setenv("TUCCL_ADAPT_BUDGET", "5", 1);
  Expected<AdaptSettings> counts = adaptSettingsFromEnvironment("");
  unsetenv("TUCCL_ADAPT_SYNC");
  unsetenv("TUCCL_ADAPT_PROBE");
  unsetenv("TUCCL_ADAPT_BUDGET");
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->rule.syncEvery, 16);
  EXPECT_EQ(counts->rule.probeEvery, 64);
  EXPECT_DOUBLE_EQ(counts->rule.budget, 0.05);
  unsetenv("TUCCL_ADAPT");
}

// Ranks that would adapt otherwise (one rank agrees every 4 calls, the others every 8) could
// choose differently: init fails on every rank, naming the rank that differs.
TEST(AdaptiveRuntime, RanksWithOtherSettingsFailInitNamingTheRank) {
  const std::string dir = scratchDir("mismatch");
  const std::vector<std::string> env = {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
                                        "TUCCL_DEVICE=cpu", "TUCCL_TIMEOUT_S=60", "TUCCL_ADAPT=1",
                                        "TUCCL_ADAPT_FILE=" + dir + "/learned.json",
                                        "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  RankProcesses ranks = startRanks(3, {kRank, "repeat", "2", kCount}, env, dir, [](int r) {
    return std::vector<std::string>{r == 2 ? "TUCCL_ADAPT_SYNC=4" : "TUCCL_ADAPT_SYNC=8"};
  });
  ASSERT_TRUE(waitRanks(ranks, 120)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) != 0) << "rank " << r << "\n"
                                                                                 << logsOf(ranks);
  }
  const std::string rank0 = readLog(ranks.logs[0]);
  EXPECT_NE(rank0.find("rank 2 adapts otherwise"), std::string::npos) << logsOf(ranks);
  EXPECT_FALSE(std::filesystem::exists(dir + "/learned.json")) << "nothing learnt, nothing written";
}

// One rank's runtime (its all-gather hands back its own summary): the fastest group takes over at
// an agreement, and a group that cannot run is never chosen again.
TEST(AdaptiveRuntime, AgreedTimesChooseAndExcludedGroupsNeverRun) {
  AdaptSettings settings;
  settings.warmup = 0;
  settings.firstAgreement = 0;
  settings.rule.syncEvery = 4;
  settings.rule.budget = 0.5;
  AdaptiveRuntime runtime(settings, 0, 1, 7, 0, [](const std::string& bytes) -> Expected<std::vector<std::string>> {
    return std::vector<std::string>{bytes};
  });
  const AdaptKey key{Collective::AllReduce, sizeBucket(1 << 20), -1};
  for (int call = 0; call < 200; ++call) {
    const int32_t group = *runtime.choose(key, 3, 1 << 20);
    runtime.record(key, group, group == 2 ? 0.001 : 0.004);
  }
  EXPECT_EQ(runtime.best(key), 2);
  EXPECT_EQ(runtime.calls(key), 200u);
  EXPECT_GT(runtime.exchangesStarted(), 0u);
  runtime.exclude(key, 2, "its plan does not fit");
  EXPECT_EQ(runtime.best(key), 0) << "an excluded best falls back to the static choice";
  // Agreements have backed off (the choice was settled): the new landscape needs a while.
  for (int call = 0; call < 1000; ++call) {
    const int32_t group = *runtime.choose(key, 3, 1 << 20);
    EXPECT_NE(group, 2) << "call " << call;
    runtime.record(key, group, group == 1 ? 0.002 : 0.004);
  }
  EXPECT_EQ(runtime.best(key), 1);
  EXPECT_EQ(sizeBucket(0), 0);
  EXPECT_EQ(sizeBucket(1), 0);
  EXPECT_EQ(sizeBucket(4096), 12);
  EXPECT_EQ(sizeBucket(8191), 12);
}

// A key's first agreement waits until its calls pay for an exchange within the budget, judged
// from its size before anything is measured: 3 % of 8-byte calls (at least 5 us each) pays for
// a 1 ms exchange after 6,667 calls, of 1 GiB calls (at least 2.15 ms at 500 GB/s) after 16.
TEST(AdaptiveRuntime, AKeyAgreesOnlyOnceItsCallsPayForAnExchange) {
  AdaptSettings settings;
  settings.warmup = 0;
  std::atomic<int> exchanges = 0;
  AdaptiveRuntime runtime(settings, 0, 1, 5, 0, [&exchanges](const std::string& bytes) -> Expected<std::vector<std::string>> {
    ++exchanges;
    return std::vector<std::string>{bytes};
  });
  const AdaptKey tiny{Collective::AllReduce, sizeBucket(8), -1};
  for (int call = 0; call < 6000; ++call) {
    ASSERT_EQ(*runtime.choose(tiny, 2, 8), 0);
    runtime.record(tiny, 0, 5e-6);
  }
  runtime.quiesce();
  EXPECT_EQ(exchanges, 0) << "6,000 calls of 8 bytes do not pay for an exchange";
  for (int call = 0; call < 670; ++call) runtime.record(tiny, *runtime.choose(tiny, 2, 8), 5e-6);
  runtime.quiesce();
  EXPECT_EQ(exchanges, 1) << "6,670 do";
  const AdaptKey huge{Collective::AllReduce, sizeBucket(uint64_t{1} << 30), -1};
  for (int call = 0; call < 17; ++call) {
    ASSERT_EQ(*runtime.choose(huge, 2, uint64_t{1} << 30), 0);
    runtime.record(huge, 0, 2e-3);
  }
  runtime.quiesce();
  EXPECT_EQ(exchanges, 2) << "17 calls of 1 GiB pay for one";
}

// A key runs its static choice, exchanging nothing, for its first TUCCL_ADAPT_WARMUP calls; then
// it is explored and the fast group wins. A key the learned table knows skips the warm-up and
// keeps what was measured: the next run needs no exploration to stay on the fast group.
TEST(AdaptiveRuntime, KeysWarmUpBeforeTheyAreExploredUnlessLearned) {
  AdaptSettings settings;
  settings.warmup = 10;
  settings.firstAgreement = 0;
  settings.rule.syncEvery = 4;
  settings.rule.budget = 0.5;
  settings.file = scratchDir("warmup") + "/learned.json";
  const AdaptKey key{Collective::AllGather, sizeBucket(1 << 16), 3};
  std::atomic<int> exchanges = 0;
  auto self = [&exchanges](const std::string& bytes) -> Expected<std::vector<std::string>> {
    ++exchanges;
    return std::vector<std::string>{bytes};
  };
  {
    AdaptiveRuntime runtime(settings, 0, 1, 11, 0, self);
    ASSERT_TRUE(runtime.loadLearned());
    exchanges = 0;
    for (int call = 0; call < 10; ++call) {
      EXPECT_EQ(*runtime.choose(key, 2, 1 << 16), 0) << "call " << call;
      runtime.record(key, 0, 0.004);
    }
    runtime.quiesce();
    EXPECT_EQ(exchanges, 0) << "warming up exchanges nothing";
    std::set<int32_t> ran;
    for (int call = 10; call < 120; ++call) {
      const int32_t group = *runtime.choose(key, 2, 1 << 16);
      ran.insert(group);
      runtime.record(key, group, group == 1 ? 0.001 : 0.004);
    }
    EXPECT_EQ(ran, (std::set<int32_t>{0, 1})) << "explored after the warm-up";
    EXPECT_GT(exchanges, 0);
    EXPECT_EQ(runtime.best(key), 1);
    runtime.quiesce();
    ASSERT_TRUE(runtime.persist());
  }
  std::ifstream in(settings.file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos) << text;
  EXPECT_NE(text.find("\"samples\""), std::string::npos) << "the learned table keeps the timings, not just the choice";
  AdaptiveRuntime next(settings, 0, 1, 11, 0, self);
  ASSERT_TRUE(next.loadLearned());
  int32_t slowCalls = 0;
  for (int call = 0; call < 100; ++call) {
    const int32_t group = *next.choose(key, 2, 1 << 16);
    if (call == 0) {
      EXPECT_EQ(group, 1) << "a learned key starts at its best, no warm-up";
    }
    slowCalls += group == 0;
    next.record(key, group, group == 1 ? 0.001 : 0.004);
  }
  EXPECT_EQ(next.best(key), 1);
  EXPECT_LE(slowCalls, 100 / 6 + 1) << "group 0 is known slow: only budgeted probes";

  // A run that learns nothing writes nothing.
  settings.file = scratchDir("warmup-idle") + "/learned.json";
  AdaptiveRuntime idle(settings, 0, 1, 11, 0, self);
  ASSERT_TRUE(idle.loadLearned());
  for (int call = 0; call < 5; ++call) EXPECT_EQ(*idle.choose(key, 2, 1 << 16), 0);
  ASSERT_TRUE(idle.persist());
  EXPECT_FALSE(std::filesystem::exists(settings.file));
}

}  // namespace
}  // namespace tuccl::testing
