// The tuner plugin's runtime phase across processes: one tuner_adapt_rank process per simulated
// rank, each loading the built plugin, asking getCollInfo and feeding injected durations to the
// duration intake, the ranks agreeing through a shared directory or a tuccl-adapt-store process.
// Group 0 (the table's static choice) is slow and group 1 fast: every rank must switch to group 1
// at the same call and run the same group at every call; without a rendezvous (unset, a directory
// that does not exist, a dead store, a store that refuses the ranks' secret) every call keeps
// group 0; when a rank stops publishing, nobody switches after that. A store told the rank count
// ends by itself after them. Each test bounds its processes' time and ends only them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/backend/rank_processes.h"

namespace {

namespace fs = std::filesystem;
using tuccl::testing::RankProcesses;
using tuccl::testing::readLog;
using tuccl::testing::startRanks;
using tuccl::testing::waitRanks;

constexpr int kRanks = 4;
constexpr double kProcessSeconds = 90;  // every test's processes end by then, or are killed
/// Group 0 (RING/SIMPLE, the static choice) is slow, group 1 (TREE/SIMPLE) fast, group 2 between.
const std::string kDurations = "300,100,250";
// Probes may cost a quarter of a key's time: the tests learn in a hundred calls, not thousands.
const std::string kQuickBudget = "TUCCL_ADAPT_BUDGET=25";

/// What one rank printed.
struct RankRun {
  std::vector<int> groups;            ///< by call
  std::vector<std::string> switches;  ///< the "TuCCL adapt: rank=..." lines
  std::string log;
};

RankRun parse(const std::string& log) {
  RankRun run;
  run.log = log;
  static const std::regex call(R"(^call=(\d+) group=(-?\d+)$)");
  static const std::regex switched(R"(^\[INFO\] (TuCCL adapt: rank=\d+ call=\d+ coll=\w+ bytes=\d+ group=\d+)$)");
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, call)) {
      EXPECT_EQ(std::stoul(match[1]), run.groups.size()) << line;
      run.groups.push_back(std::stoi(match[2]));
    } else if (std::regex_match(line, match, switched)) {
      run.switches.push_back(match[1]);
    }
  }
  return run;
}

class TunerAdaptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    work_ = fs::temp_directory_path() / ("tuccl-tuner-adapt-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(work_);
    fs::create_directories(work_ / "rendezvous");
    fs::create_directories(work_ / "logs");
    // One AllReduce entry for every size, with two alternative configuration groups.
    std::ofstream(work_ / "table.json") << R"({"format": "tuccl-tuning-table", "version": 1, "entries": [
      {"collective": "allreduce", "algorithm": "ring", "protocol": "simple",
       "groups": [{"algorithm": "tree", "protocol": "simple"}, {"algorithm": "ring", "protocol": "ll128"}]}]})";
  }
  void TearDown() override { fs::remove_all(work_); }

  std::string rendezvous() const { return (work_ / "rendezvous").string(); }

  /// Runs kRanks ranks for `calls` calls with `environment` and, for rank r, perRank(r)'s
  /// variables. Every rank's output, parsed.
  std::vector<RankRun> run(int calls, const std::vector<std::string>& environment, int version = 6,
                           const std::function<std::vector<std::string>(int)>& perRank = nullptr) {
    std::vector<std::string> common = environment;
    common.push_back("TUCCL_TUNER_TABLE=" + (work_ / "table.json").string());
    const std::vector<std::string> argv = {TUCCL_TUNER_ADAPT_RANK, std::to_string(version), "0x5eed00c0ffee1234",
                                           std::to_string(calls), kDurations};
    RankProcesses ranks = startRanks(kRanks, argv, common, (work_ / "logs").string(), perRank);
    EXPECT_TRUE(waitRanks(ranks, kProcessSeconds)) << "the ranks did not end in time";
    std::vector<RankRun> runs;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
          << "rank " << r << ":\n" << readLog(ranks.logs[r]);
      runs.push_back(parse(readLog(ranks.logs[r])));
    }
    return runs;
  }

  fs::path work_;
};

/// A tuccl-adapt-store process on a free loopback port, with a secret it writes to a new file
/// (--write-secret) for the ranks, ended (by its pid) with the test.
class StoreProcess {
 public:
  explicit StoreProcess(const fs::path& work, const std::vector<std::string>& options = {})
      : secretFile_((work / "store.secret").string()) {
    const std::string portFile = (work / "store.port").string();
    fs::remove(portFile);
    fs::remove(secretFile_);
    fs::create_directories(work / "logs" / "store");
    std::vector<std::string> argv = {TUCCL_ADAPT_STORE, "--host",         "127.0.0.1",  "--port", "0",
                                     "--port-file",     portFile,         "--write-secret", secretFile_};
    argv.insert(argv.end(), options.begin(), options.end());
    tuccl::testing::RankProcesses started = startRanks(1, argv, {}, (work / "logs").string() + "/store");
    pid_ = started.pids[0];
    for (int waited = 0; waited < 3000 && !fs::exists(portFile); ++waited) ::usleep(10'000);  // 30 s at most
    std::ifstream(portFile) >> port_;
  }
  ~StoreProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (endsWithin(10)) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;
  int port() const { return port_; }
  /// The variables that give the ranks this store.
  std::vector<std::string> rendezvous() const {
    return {"TUCCL_ADAPT_RENDEZVOUS=tcp:127.0.0.1:" + std::to_string(port_), "TUCCL_ADAPT_SECRET_FILE=" + secretFile_};
  }
  /// Whether the store ended within `seconds` (by itself, unless signalled).
  bool endsWithin(double seconds) {
    for (int waited = 0; waited < seconds * 100; ++waited) {
      if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      ::usleep(10'000);
    }
    return pid_ <= 0;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string secretFile_;
};

/// `environment` plus `more`.
std::vector<std::string> with(std::vector<std::string> environment, const std::vector<std::string>& more) {
  environment.insert(environment.end(), more.begin(), more.end());
  return environment;
}

/// The lines of `log` that start with `prefix`.
int linesStartingWith(const std::string& log, const std::string& prefix) {
  std::istringstream lines(log);
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.rfind(prefix, 0) == 0;
  return count;
}

/// Rank `rank` ends after `calls` calls without finalizing (TUNER_ADAPT_RANK_STOP_AFTER).
std::function<std::vector<std::string>(int)> stopping(int rank, int calls) {
  return [rank, calls](int r) {
    return r == rank ? std::vector<std::string>{"TUNER_ADAPT_RANK_STOP_AFTER=" + std::to_string(calls)}
                     : std::vector<std::string>{};
  };
}

/// The call of a rank's switch line ("... call=<k> ...").
int switchCall(const std::string& line) {
  std::smatch match;
  static const std::regex call(R"(call=(\d+))");
  return std::regex_search(line, match, call) ? std::stoi(match[1]) : -1;
}

/// Every rank ran the same groups, switched once to group 1 at the same call, and kept it.
void expectOneSwitchToTheFastGroup(const std::vector<RankRun>& runs, int kCalls) {
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(runs[r].groups.size(), static_cast<size_t>(kCalls)) << runs[r].log;
    EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r << " ran other groups than rank 0";
    // One switch, to group 1, logged by this rank at the call every rank switched at.
    ASSERT_EQ(runs[r].switches.size(), 1u) << runs[r].log;
    EXPECT_NE(runs[r].switches[0].find("rank=" + std::to_string(r) + " "), std::string::npos);
    EXPECT_NE(runs[r].switches[0].find(" coll=allreduce bytes=1048576 group=1"), std::string::npos)
        << runs[r].switches[0];
    EXPECT_EQ(switchCall(runs[r].switches[0]), switchCall(runs[0].switches[0]));
  }
  // Once group 1 had five timings on every rank (probes every few calls, the budget allowing a
  // quarter of the key's time) ...
  const int switched = switchCall(runs[0].switches[0]);
  EXPECT_GT(switched, 0);
  EXPECT_LE(switched, 100);
  // ... and from then on the fast group, except the probes the budget pays for.
  int fast = 0;
  for (int k = switched; k < kCalls; ++k) fast += runs[0].groups[k] == 1;
  EXPECT_GE(fast, (kCalls - switched) * 4 / 5) << "calls after the switch that run group 1";
  // Every group ran (exploration), identically everywhere.
  for (int g = 0; g < 3; ++g) EXPECT_NE(std::find(runs[0].groups.begin(), runs[0].groups.end(), g), runs[0].groups.end());
}

TEST_F(TunerAdaptTest, EveryRankSwitchesToTheFastGroupAtTheSameCall) {
  constexpr int kCalls = 160;
  const std::vector<RankRun> runs = run(kCalls, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(),
                                                 "TUCCL_ADAPT_TIMEOUT_MS=30000", kQuickBudget});
  expectOneSwitchToTheFastGroup(runs, kCalls);
  // Finalize removed every rendezvous file.
  EXPECT_TRUE(fs::is_empty(rendezvous())) << fs::directory_iterator(rendezvous())->path();
}

// The durations measured by TuCCL's profiler plugin (libnccl-profiler-tuccl.so) from the Coll and
// KernelCh events NCCL would send, in either order across two threads: the tuner adapts exactly as
// when they are reported to it directly (the test above), and the plugin asks NCCL for Coll and
// KernelCh events only (mask 66).
TEST_F(TunerAdaptTest, TheProfilerPluginsDurationsMakeEveryRankSwitchAsReportedOnes) {
  constexpr int kCalls = 160;
  const std::vector<RankRun> runs =
      run(kCalls, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(), "TUCCL_ADAPT_TIMEOUT_MS=30000",
                   kQuickBudget, "TUNER_ADAPT_RANK_PROFILER=" + std::string(TUCCL_PROFILER_PLUGIN_PATH)});
  for (const RankRun& rank : runs) {
    EXPECT_NE(rank.log.find("profiler TuCCL mask=66\n"), std::string::npos) << rank.log;
    EXPECT_EQ(rank.log.find("error:"), std::string::npos) << rank.log;
  }
  expectOneSwitchToTheFastGroup(runs, kCalls);
}

TEST_F(TunerAdaptTest, EveryRankSwitchesTogetherThroughATcpStore) {
  constexpr int kCalls = 160;
  std::vector<RankRun> runs;
  {
    StoreProcess store(work_);
    ASSERT_GT(store.port(), 0) << readLog((work_ / "logs" / "store" / "rank0.log").string());
    runs = run(kCalls, with({"TUCCL_ADAPT=1", "TUCCL_ADAPT_TIMEOUT_MS=30000", kQuickBudget}, store.rendezvous()));
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(runs[r].groups.size(), static_cast<size_t>(kCalls)) << runs[r].log;
    EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r;
    ASSERT_EQ(runs[r].switches.size(), 1u) << runs[r].log;
    EXPECT_NE(runs[r].switches[0].find(" group=1"), std::string::npos) << runs[r].switches[0];
    EXPECT_EQ(switchCall(runs[r].switches[0]), switchCall(runs[0].switches[0]));
  }
  // The store ended by itself on SIGTERM, every name removed by the ranks' finalize.
  EXPECT_NE(readLog((work_ / "logs" / "store" / "rank0.log").string()).find("stopped (0 names left)"),
            std::string::npos);
}

TEST_F(TunerAdaptTest, CommunicatorsWithoutIdFromNcclAgreeUnderThePluginsId) {
  const std::vector<RankRun> runs = run(160, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(),
                                              "TUCCL_ADAPT_TIMEOUT_MS=30000", kQuickBudget},
                                        /*version=*/4);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r;
    ASSERT_EQ(runs[r].switches.size(), 1u) << runs[r].log;
    EXPECT_EQ(switchCall(runs[r].switches[0]), switchCall(runs[0].switches[0]));
  }
  EXPECT_TRUE(fs::is_empty(rendezvous()));
}

/// Every call of every rank ran group 0, and no rank logged a switch.
void expectStaticChoice(const std::vector<RankRun>& runs, int calls) {
  for (const RankRun& run : runs) {
    ASSERT_EQ(run.groups.size(), static_cast<size_t>(calls)) << run.log;
    for (int k = 0; k < calls; ++k) EXPECT_EQ(run.groups[k], 0) << "call " << k << "\n" << run.log;
    EXPECT_TRUE(run.switches.empty()) << run.log;
  }
}

TEST_F(TunerAdaptTest, WithoutARendezvousEveryCallKeepsTheStaticChoice) {
  const std::vector<RankRun> runs = run(40, {"TUCCL_ADAPT=1"});
  expectStaticChoice(runs, 40);
  EXPECT_NE(runs[0].log.find("TUCCL_ADAPT_RENDEZVOUS is unset"), std::string::npos) << runs[0].log;
}

TEST_F(TunerAdaptTest, AMissingRendezvousDirectoryKeepsTheStaticChoice) {
  const std::string missing = (work_ / "no-such-directory").string();
  const std::vector<RankRun> runs = run(40, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + missing});
  expectStaticChoice(runs, 40);
  for (const RankRun& run : runs) {
    EXPECT_NE(run.log.find("[WARN] TuCCL adapt: TUCCL_ADAPT_RENDEZVOUS=dir:" + missing), std::string::npos)
        << run.log;
  }
  EXPECT_FALSE(fs::exists(missing));
}

// One rank without a rendezvous serves the static choice; the others must not explore without it.
TEST_F(TunerAdaptTest, WhenOneRankHasNoRendezvousNoRankLeavesTheStaticChoice) {
  const std::string dir = "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous();
  const std::vector<RankRun> runs = run(40, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_TIMEOUT_MS=2000"}, 6, [&](int r) {
    return r == 2 ? std::vector<std::string>{} : std::vector<std::string>{dir};
  });
  expectStaticChoice(runs, 40);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(runs[r].log.find(r == 2 ? "TUCCL_ADAPT_RENDEZVOUS is unset" : "not every one of its 4 ranks joined"),
              std::string::npos)
        << runs[r].log;
  }
}

// The same when one rank's rule differs: its choices would fall at other calls.
TEST_F(TunerAdaptTest, WhenOneRanksSettingsDifferNoRankLeavesTheStaticChoice) {
  const std::vector<RankRun> runs =
      run(40, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(), "TUCCL_ADAPT_TIMEOUT_MS=30000"}, 6,
          [](int r) { return std::vector<std::string>{r == 1 ? "TUCCL_ADAPT_SYNC=16" : "TUCCL_ADAPT_SYNC=8"}; });
  expectStaticChoice(runs, 40);
  // Every rank finalized: nothing is left in the directory.
  EXPECT_TRUE(fs::is_empty(rendezvous()));
}

TEST_F(TunerAdaptTest, ADeadStoreKeepsTheStaticChoice) {
  int port = 0;
  std::vector<std::string> rendezvous;
  {
    StoreProcess store(work_);  // started and ended: nobody listens at its port any more
    port = store.port();
    rendezvous = store.rendezvous();
  }
  ASSERT_GT(port, 0);
  const std::vector<RankRun> runs = run(40, with({"TUCCL_ADAPT=1"}, rendezvous));
  expectStaticChoice(runs, 40);
  for (const RankRun& run : runs) {
    EXPECT_NE(run.log.find("[WARN] TuCCL adapt: TUCCL_ADAPT_RENDEZVOUS=tcp:127.0.0.1:"), std::string::npos)
        << run.log;
  }
}

// Ranks without the store's secret, or with another, are refused: one warning each, the static
// choice for every call; the store names the refused peer host once and counts every refusal.
TEST_F(TunerAdaptTest, RanksWithoutTheStoresSecretKeepTheStaticChoiceWithOneWarning) {
  const std::string wrong = (work_ / "wrong.secret").string();
  std::ofstream(wrong) << "another job's secret\n";
  fs::permissions(wrong, fs::perms::owner_read | fs::perms::owner_write);
  for (const std::string& secret : {"TUCCL_ADAPT_SECRET_FILE=" + wrong, std::string("TUCCL_ADAPT_SECRET_FILE=")}) {
    std::string storeLog;
    {
      StoreProcess store(work_);
      ASSERT_GT(store.port(), 0);
      std::vector<std::string> environment = with({"TUCCL_ADAPT=1"}, store.rendezvous());
      environment.back() = secret;  // instead of the store's
      const std::vector<RankRun> runs = run(40, environment);
      expectStaticChoice(runs, 40);
      const std::string why = secret == "TUCCL_ADAPT_SECRET_FILE=" ? "no secret file was given" : "refused this rank's secret";
      for (const RankRun& run : runs) {
        EXPECT_EQ(linesStartingWith(run.log, "[WARN] "), 1) << run.log;
        EXPECT_NE(run.log.find("[WARN] TuCCL adapt: TUCCL_ADAPT_RENDEZVOUS=tcp:127.0.0.1:"), std::string::npos) << run.log;
        EXPECT_NE(run.log.find(why), std::string::npos) << run.log;
      }
    }
    storeLog = readLog((work_ / "logs" / "store" / "rank0.log").string());
    const bool wrongSecret = secret != "TUCCL_ADAPT_SECRET_FILE=";
    // Without a secret file no rank connects at all.
    EXPECT_EQ(linesStartingWith(storeLog, "tuccl-adapt-store: refused a connection from 127.0.0.1:"), wrongSecret ? 1 : 0)
        << storeLog;
    EXPECT_EQ(storeLog.find("refused 4 connections") != std::string::npos, wrongSecret) << storeLog;
  }
}

// With --ranks the store ends by itself once the job's ranks said hello and closed.
TEST_F(TunerAdaptTest, AStoreToldTheRankCountStopsAfterTheRanks) {
  StoreProcess store(work_, {"--ranks", std::to_string(kRanks)});
  ASSERT_GT(store.port(), 0);
  const std::vector<RankRun> runs =
      run(40, with({"TUCCL_ADAPT=1", "TUCCL_ADAPT_TIMEOUT_MS=30000", kQuickBudget}, store.rendezvous()));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r;
  EXPECT_TRUE(store.endsWithin(10)) << "the store still runs after its ranks";
  EXPECT_NE(readLog((work_ / "logs" / "store" / "rank0.log").string())
                .find("stopped (0 names left): the 4 connections of --ranks said hello and closed"),
            std::string::npos)
      << readLog((work_ / "logs" / "store" / "rank0.log").string());
}

TEST_F(TunerAdaptTest, BadSettingsAreOneWarningAndTheStaticChoice) {
  for (const std::vector<std::string>& environment :
       {std::vector<std::string>{"TUCCL_ADAPT=maybe", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous()},
        std::vector<std::string>{"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=nfs:/shared"},
        std::vector<std::string>{"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(),
                                 "TUCCL_ADAPT_SYNC=0"}}) {
    const std::vector<RankRun> runs = run(24, environment);
    expectStaticChoice(runs, 24);
    for (const RankRun& run : runs) EXPECT_NE(run.log.find("[WARN] TuCCL adapt: TUCCL_ADAPT"), std::string::npos);
  }
}

TEST_F(TunerAdaptTest, WhenARankStopsPublishingBeforeAnyAgreementNobodyLeavesTheStaticChoice) {
  constexpr int kCalls = 40, kStop = 5;
  const std::vector<RankRun> runs =
      run(kCalls, {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(), "TUCCL_ADAPT_TIMEOUT_MS=3000"}, 6,
          stopping(kRanks - 1, kStop));
  ASSERT_EQ(runs[kRanks - 1].groups.size(), static_cast<size_t>(kStop));
  for (int r = 0; r < kRanks - 1; ++r) {
    ASSERT_EQ(runs[r].groups.size(), static_cast<size_t>(kCalls)) << runs[r].log;
    EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r;
    EXPECT_TRUE(runs[r].switches.empty()) << runs[r].log;
    // The agreement at call 8 (the one at call 0 had no timings to agree on) is abandoned: group
    // 0, the static choice, from then on.
    for (int k = 8; k < kCalls; ++k) EXPECT_EQ(runs[r].groups[k], 0) << "rank " << r << " call " << k;
    EXPECT_NE(runs[r].log.find("was abandoned"), std::string::npos) << runs[r].log;
  }
  for (int k = 0; k < kStop; ++k) EXPECT_EQ(runs[kRanks - 1].groups[k], runs[0].groups[k]);
}

TEST_F(TunerAdaptTest, WhenARankStopsPublishingAfterASwitchNobodySwitchesAgain) {
  constexpr int kCalls = 400, kStop = 110;
  const std::vector<RankRun> runs =
      run(kCalls,
          {"TUCCL_ADAPT=1", "TUCCL_ADAPT_RENDEZVOUS=dir:" + rendezvous(), "TUCCL_ADAPT_TIMEOUT_MS=3000", kQuickBudget},
          6, stopping(kRanks - 1, kStop));
  for (int r = 0; r < kRanks - 1; ++r) {
    ASSERT_EQ(runs[r].groups.size(), static_cast<size_t>(kCalls)) << runs[r].log;
    EXPECT_EQ(runs[r].groups, runs[0].groups) << "rank " << r;
    // The switch to group 1 happened while every rank published, and no other after the stop.
    ASSERT_EQ(runs[r].switches.size(), 1u) << runs[r].log;
    EXPECT_LT(switchCall(runs[r].switches[0]), kStop);
    // The next agreement after the stop (at most 128 calls later, the settled interval then) is
    // abandoned: the agreed group, no probes, from then on.
    for (int k = kStop + 128; k < kCalls; ++k) EXPECT_EQ(runs[r].groups[k], 1) << "rank " << r << " call " << k;
    EXPECT_NE(runs[r].log.find("was abandoned"), std::string::npos) << runs[r].log;
  }
}

}  // namespace
