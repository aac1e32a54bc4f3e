// tuccl-run end to end: the variables each rank gets, exit statuses, stopping the other ranks by
// pid, --timeout, signal forwarding, and a four-process bootstrap (bootstrap_rank_main).
// Every run is bounded by --timeout; every process a test starts is a child of the tuccl-run it
// runs.
#include <signal.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/tools/run_tool.h"

namespace {

using tuccl::tooltest::runCommand;
using tuccl::tooltest::ToolRun;

const std::string kRun = TUCCL_RUN;
const std::string kRank = BOOTSTRAP_RANK_MAIN;

/// A fresh directory under the temporary directory, removed with the object.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tuccl-run-test.XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

pid_t readPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

/// Whether `pid` no longer exists (tuccl-run reaped it, so the number is free).
bool processGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST(TucclRun, GivesEveryRankItsVariables) {
  ToolRun r = runCommand(kRun + " -n 3 --tag-output --timeout 60 -- sh -c "
                                "'echo $TUCCL_RANK $TUCCL_NRANKS $TUCCL_LOCAL_RANK $TUCCL_LOCAL_SIZE $TUCCL_COMM_ID'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[" + std::to_string(rank) + "] " + std::to_string(rank) + " 3 " + std::to_string(rank) +
                             " 3 127.0.0.1:";
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
}

TEST(TucclRun, RanksPerNodeGivesEachNodeItsHostIdAndLocalRanks) {
  ToolRun r = runCommand(kRun + " -n 5 --ranks-per-node 2 --tag-output --timeout 60 -- sh -c "
                                "'echo $TUCCL_LOCAL_RANK $TUCCL_LOCAL_SIZE host=$TUCCL_HOSTID'");
  ASSERT_EQ(r.status, 0) << r.output;
  // Ranks 0,1 | 2,3 | 4: the last node has one rank.
  const char* expected[] = {"[0] 0 2 host=", "[1] 1 2 host=", "[2] 0 2 host=", "[3] 1 2 host=", "[4] 0 1 host="};
  std::vector<std::string> hosts;
  for (int rank = 0; rank < 5; ++rank) {
    const size_t at = r.output.find(expected[rank]);
    ASSERT_NE(at, std::string::npos) << expected[rank] << "\n" << r.output;
    const size_t begin = at + std::strlen(expected[rank]);
    hosts.push_back(r.output.substr(begin, r.output.find('\n', begin) - begin));
    EXPECT_FALSE(hosts.back().empty()) << r.output;
  }
  EXPECT_EQ(hosts[0], hosts[1]);
  EXPECT_EQ(hosts[2], hosts[3]);
  EXPECT_NE(hosts[0], hosts[2]);
  EXPECT_NE(hosts[2], hosts[4]);
  EXPECT_NE(hosts[0], hosts[4]);
  // Without the option no host id is set: the machine's own identity holds.
  ToolRun plain = runCommand(kRun + " -n 1 --timeout 60 -- sh -c 'echo host=${TUCCL_HOSTID:-none}'");
  EXPECT_NE(plain.output.find("host=none"), std::string::npos) << plain.output;
  EXPECT_EQ(runCommand(kRun + " -n 2 --ranks-per-node 3 -- true").status, 2);
}

TEST(TucclRun, UsesTheGivenPort) {
  ToolRun r = runCommand(kRun + " -n 2 --port 45123 --timeout 60 -- sh -c 'echo id=$TUCCL_COMM_ID'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("id=127.0.0.1:45123"), std::string::npos) << r.output;
}

TEST(TucclRun, TagsUnterminatedLinesAndErrorOutput) {
  ToolRun r = runCommand(kRun + " -n 2 --tag-output --timeout 60 -- sh -c 'echo out; printf last >&2'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[0] out\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] last\n"), std::string::npos) << r.output;
}

TEST(TucclRun, RunsABootstrapAcrossFourProcesses) {
  ToolRun r = runCommand(kRun + " -n 4 --timeout 100 --tag-output -- " + kRank);
  ASSERT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line = "[" + std::to_string(rank) + "] rank " + std::to_string(rank) + " of 4: ok (from tuccl-run)";
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
}

TEST(TucclRun, ExitsWithTheFailedRanksStatusAndStopsTheOthers) {
  TemporaryDirectory directory;
  ASSERT_FALSE(directory.path().empty());
  // Rank 1 ignores SIGTERM and sleeps; rank 2 exits 3; ranks 0 and 3 wait in the rendezvous.
  ToolRun r = runCommand(kRun + " -n 4 --timeout 100 --grace 0.5 -- " + kRank + " --hang 1 --pid-dir " +
                         directory.path() + " --fail 2 --code 3");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("rank 2 (pid"), std::string::npos) << r.output;
  const pid_t hung = readPid(directory.path() + "/rank1.pid");
  ASSERT_GT(hung, 0) << r.output;
  EXPECT_TRUE(processGone(hung)) << "rank 1 (pid " << hung << ") still runs";
}

TEST(TucclRun, ReportsASignalAsShellsDo) {
  ToolRun r = runCommand(kRun + " -n 2 --timeout 60 -- sh -c 'kill -KILL $$'");
  EXPECT_EQ(r.status, 128 + SIGKILL) << r.output;
}

TEST(TucclRun, TimeoutEndsAHungRunWith124) {
  TemporaryDirectory directory;
  ASSERT_FALSE(directory.path().empty());
  ToolRun r = runCommand(kRun + " -n 2 --timeout 1 --grace 0.5 -- " + kRank + " --hang 0 --pid-dir " + directory.path());
  EXPECT_EQ(r.status, 124) << r.output;
  EXPECT_NE(r.output.find("timed out after 1 s"), std::string::npos) << r.output;
  const pid_t hung = readPid(directory.path() + "/rank0.pid");
  ASSERT_GT(hung, 0) << r.output;
  EXPECT_TRUE(processGone(hung)) << "rank 0 (pid " << hung << ") still runs";
}

TEST(TucclRun, ForwardsSigtermToTheRanks) {
  // The shell starts tuccl-run in the background, terminates it, and reports its status: the
  // ranks (sleep) die of the forwarded SIGTERM, so tuccl-run exits 128 + SIGTERM.
  ToolRun r = runCommand("sh -c '" + kRun + " -n 2 --timeout 60 -- sleep 30 & launcher=$!; sleep 0.5; "
                                            "kill -TERM $launcher; wait $launcher; echo status=$?'");
  EXPECT_NE(r.output.find("status=" + std::to_string(128 + SIGTERM)), std::string::npos) << r.output;
}

TEST(TucclRun, CommandThatCannotRunExits127) {
  ToolRun r = runCommand(kRun + " -n 2 --timeout 60 -- /nonexistent/program");
  EXPECT_EQ(r.status, 127) << r.output;
  EXPECT_NE(r.output.find("cannot run /nonexistent/program"), std::string::npos) << r.output;
}

TEST(TucclRun, BadUsageExits2) {
  EXPECT_EQ(runCommand(kRun + " -n 2").status, 2);
  EXPECT_EQ(runCommand(kRun + " -n 0 -- true").status, 2);
  EXPECT_EQ(runCommand(kRun + " -- true").status, 2);
  EXPECT_EQ(runCommand(kRun + " -n 2 --timeout -1 -- true").status, 2);
  EXPECT_EQ(runCommand(kRun + " -n 2 --bogus -- true").status, 2);
  ToolRun r = runCommand(kRun + " -n 2");
  EXPECT_NE(r.output.find("no command to run"), std::string::npos) << r.output;
  ToolRun withoutSeparator = runCommand(kRun + " -n 2 true");
  EXPECT_EQ(withoutSeparator.status, 2);
  EXPECT_NE(withoutSeparator.output.find("unexpected 'true'"), std::string::npos) << withoutSeparator.output;
}

}  // namespace
