// libtuccl across processes: every collective, datatype and op on 2, 4 and 8 ranks (each rank
// checks every element of its output), and the fault behaviour — a rank killed mid-collective,
// shared memory left by a crash.
#include <dirent.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "rank_processes.h"
#include "transport/shm_segment.h"

namespace tuccl::testing {
namespace {

const std::string kRank = TUCCL_COLLECTIVES_RANK;

std::string scratchDir(const std::string& name) {
  return freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/collectives/" + name);
}

// The plan cache is shared by every test (and kept between runs): plans compile once.
std::string cacheEnv() { return "TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache"; }

// Under AddressSanitizer the ranks keep its memory checks but not the leak check at exit, whose
// tracer crashes now and then in a process that ran many threads (a LeakSanitizer failure, not a
// leak); libtuccl's leaks are checked in process by api_test.
std::string sanitizerEnv() { return "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"; }

std::set<std::string> ourSegments() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* entry = readdir(dir)) {
      if (std::string(entry->d_name).rfind("tuccl-", 0) == 0) names.insert(entry->d_name);
    }
    closedir(dir);
  }
  return names;
}

void runMatrix(int n, const std::string& counts) {
  const std::string dir = scratchDir("matrix" + std::to_string(n));
  RankProcesses ranks = startRanks(
      n, {kRank, "matrix", counts, "float32,bfloat16,int32", "sum,max", "float32"},
      {cacheEnv(), "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu", sanitizerEnv()}, dir);
  ASSERT_TRUE(waitRanks(ranks, 900)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " failed\n" << logsOf(ranks);
  }
}

// The counts of the matrix: TUCCL_TEST_MATRIX_COUNTS (the sanitizer build of CI leaves out the
// million-element calls, which take minutes there), else all of them.
std::string matrixCounts() {
  const char* counts = std::getenv("TUCCL_TEST_MATRIX_COUNTS");
  return counts != nullptr && *counts != '\0' ? counts : "0,1,1237,1048579";
}

TEST(Collectives, EveryCollectiveTypeAndOpOnTwoRanks) { runMatrix(2, matrixCounts()); }
TEST(Collectives, EveryCollectiveTypeAndOpOnFourRanks) { runMatrix(4, matrixCounts()); }
TEST(Collectives, EveryCollectiveTypeAndOpOnEightRanks) { runMatrix(8, matrixCounts()); }

// `n` ranks of collectives_rank with `args`; every rank must exit 0.
void runRanks(int n, const std::vector<std::string>& args, const std::string& name) {
  const std::string dir = scratchDir(name);
  std::vector<std::string> command = {kRank};
  command.insert(command.end(), args.begin(), args.end());
  RankProcesses ranks =
      startRanks(n, command, {cacheEnv(), "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu", sanitizerEnv()}, dir);
  ASSERT_TRUE(waitRanks(ranks, 600)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " failed\n" << logsOf(ranks);
  }
}

// The datatypes beyond the first seven: int8, uint32 and uint64 over their whole range (sums and
// products wrap), fp8 e4m3 and e5m2 (rounded at every operation); every collective and op, in and
// out of place, every element checked. Small counts keep it short.
TEST(Collectives, Int8Uint32Uint64AndFp8EveryCollectiveAndOpOnFourRanks) {
  runRanks(4, {"matrix", "1,1237", "int8,uint32,uint64,float8e4m3,float8e5m2", "sum,prod,max,min,avg", "int8"},
           "new-datatypes");
}

// PreMulSum operators with host and device scalars (float32 and int32): AllReduce, ReduceScatter
// and Reduce in and out of place, every element of the scaled sum checked; the refusals of unknown,
// destroyed and mismatched operators.
TEST(Collectives, PreMulSumWithHostAndDeviceScalarsOnThreeRanks) { runRanks(3, {"premul", "1237"}, "premulsum"); }

// A staging too small for every plan of the matrix at once: when a plan no longer fits, every rank
// drains, restarts its rings and places it afresh (logged at INFO on every rank), and every
// element of every call is still right.
TEST(Collectives, AFullStagingRestartsOnEveryRankAndTheResultsStayRight) {
  constexpr int kRanks = 4;
  const std::string dir = scratchDir("staging-restart");
  RankProcesses ranks = startRanks(kRanks, {kRank, "matrix", "1237,70001", "float32", "sum", "float32"},
                                   {cacheEnv(), "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu", "TUCCL_STAGING_BYTES=6M",
                                    "TUCCL_DEBUG=INFO", sanitizerEnv()},
                                   dir);
  ASSERT_TRUE(waitRanks(ranks, 600)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " failed\n" << logsOf(ranks);
    const std::string log = readLog(ranks.logs[r]);
    EXPECT_NE(log.find("staging full (6M per rank, TUCCL_STAGING_BYTES): every rank drained"), std::string::npos)
        << "rank " << r << " never restarted its staging\n" << log;
  }
}

// LL and LL128 (TUCCL_PROTO, as a table entry's protocol would choose them): every collective,
// type and op, in and out of place, every element checked; the plans say their protocol.
TEST(Collectives, EveryCollectiveUnderLlAndLl128OnFourRanks) {
  constexpr int kRanks = 4;
  for (const std::string protocol : {"LL", "LL128"}) {
    const std::string dir = scratchDir("protocol-" + protocol);
    RankProcesses ranks = startRanks(kRanks, {kRank, "matrix", "1,1237,70001", "float32,bfloat16", "sum,max", "int32"},
                                     {cacheEnv(), "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu", "TUCCL_PROTO=" + protocol,
                                      "TUCCL_DEBUG=INFO", sanitizerEnv()},
                                     dir);
    ASSERT_TRUE(waitRanks(ranks, 600)) << "the ranks did not finish\n" << logsOf(ranks);
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
          << protocol << ": rank " << r << " failed\n" << logsOf(ranks);
      EXPECT_NE(readLog(ranks.logs[r]).find("; TUCCL_PROTO -> built-in"), std::string::npos) << logsOf(ranks);
      EXPECT_NE(readLog(ranks.logs[r]).find(", " + protocol + ","), std::string::npos) << logsOf(ranks);
    }
  }
}

// Ranks whose environment would build other plans (here: another protocol) fail init together,
// naming the rank, instead of waiting on each other.
TEST(Collectives, RanksThatPlanOtherwiseFailInitNamingTheRank) {
  const std::string dir = scratchDir("plan-mismatch");
  RankProcesses ranks =
      startRanks(3, {kRank, "repeat", "1", "1024"}, {cacheEnv(), "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu", sanitizerEnv()},
                 dir, [](int r) { return std::vector<std::string>{r == 1 ? "TUCCL_PROTO=LL" : "TUCCL_PROTO=Simple"}; });
  ASSERT_TRUE(waitRanks(ranks, 120)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) != 0) << "rank " << r << "\n" << logsOf(ranks);
  }
  EXPECT_NE(readLog(ranks.logs[0]).find("rank 1 plans otherwise (TUCCL_ALGO"), std::string::npos) << logsOf(ranks);
}

TEST(Faults, KillingARankMidAllReduceFailsTheOthersWithinTheTimeout) {
  const std::string dir = scratchDir("kill");
  const int n = 4;
  const double timeout = 10;
  RankProcesses ranks =
      startRanks(n, {kRank, "loop"}, {cacheEnv(), "TUCCL_TIMEOUT_S=10", "TUCCL_DEVICE=cpu", sanitizerEnv()}, dir);
  // Wait until every rank finished one AllReduce, then kill rank 1 while they run the next ones.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (int r = 0; r < n; ++r) {
    while (readLog(ranks.logs[r]).find("ready") == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << logsOf(ranks);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_EQ(kill(ranks.pids[1], SIGKILL), 0);
  ASSERT_TRUE(waitRanks(ranks, 2 * timeout)) << "a rank did not return within twice the timeout\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    if (r == 1) continue;
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0) << logsOf(ranks);
    EXPECT_NE(readLog(ranks.logs[r]).find("error"), std::string::npos) << logsOf(ranks);
  }
  // Segment names are removed once every rank mapped them: the crash left none behind.
  for (const std::string& name : ourSegments()) {
    for (pid_t pid : ranks.pids) EXPECT_NE(name.rfind("tuccl-" + std::to_string(pid) + "-", 0), 0u) << name;
  }
}

TEST(Faults, ASegmentLeftByACrashedProcessIsRemovedByTheNextRun) {
  // A child creates a segment and dies before it could remove the name.
  const pid_t child = fork();
  if (child == 0) {
    Expected<transport::SharedSegment> segment = transport::SharedSegment::create(4096);
    if (segment) std::printf("%s\n", segment->name().c_str());
    kill(getpid(), SIGKILL);
  }
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  bool left = false;
  for (const std::string& name : ourSegments()) left = left || name.rfind("tuccl-" + std::to_string(child) + "-", 0) == 0;
  ASSERT_TRUE(left) << "the crashed child left no segment to clean up";
  // The next run (any segment creation) removes it.
  Expected<transport::SharedSegment> next = transport::SharedSegment::create(4096);
  ASSERT_TRUE(next.ok());
  for (const std::string& name : ourSegments()) EXPECT_NE(name.rfind("tuccl-" + std::to_string(child) + "-", 0), 0u);
}

}  // namespace
}  // namespace tuccl::testing
