#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace {

struct Run {
  int status = -1;
  std::string output;  // stdout and stderr together
};

Run run(const std::string& arguments) {
  std::string command = std::string(TUCCL_COMPILE) + " " + arguments + " 2>&1";
  Run result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), got);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string example(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name; }
std::string broken(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/lang/broken/" + name; }

TEST(TucclCompile, ChecksTheBundledDefault) {
  Run r = run("--check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("collective   AllReduce, in place"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ranks        32 (4 nodes x 8 GPUs, 8 NICs per node)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("operations   1984"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verified: AllReduce postcondition holds"), std::string::npos) << r.output;
}

TEST(TucclCompile, ParametersChangeTheShape) {
  Run r = run("--check " + example("hm_allgather.resccl") + " --param nRanks=16 --param GPUPerNode=4 --ranks all");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ranks        16 (4 nodes x 4 GPUs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verified: AllGather postcondition holds"), std::string::npos) << r.output;
  // Rank 5 (node 1, GPU 1) sends to its node's GPUs 4, 6, 7 and its ring successor 9.
  EXPECT_NE(r.output.find("     5: 4,6,7,9 "), std::string::npos) << r.output;
}

TEST(TucclCompile, ViolationIsReportedWithLineAndExitTwo) {
  Run r = run("--check " + broken("hm_allreduce_same_step_race.resccl") + " -p nRanks=8 -p GPUPerNode=4");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("hm_allreduce_same_step_race.resccl:17:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not verified"), std::string::npos) << r.output;
}

TEST(TucclCompile, SyntaxErrorShowsSourceAndCaret) {
  Run r = run("--check " + broken("unknown_name.resccl"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown_name.resccl:5:35: error: unknown name 'nGpus'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" 5 |             transfer(r, (r + 1) % nGpus"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("   |                                   ^"), std::string::npos) << r.output;
}

TEST(TucclCompile, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").status, 2);                                 // nothing to do
  EXPECT_EQ(run("--check --param nRanks").status, 2);           // not NAME=VALUE
  EXPECT_EQ(run("--check --param nRanks=abc").status, 2);       // not an integer
  EXPECT_EQ(run("--check --ranks many").status, 2);
  EXPECT_EQ(run("--check --no-such-flag").status, 2);
  EXPECT_EQ(run("--check --max-ops 0").status, 2);
  Run missing = run("--check /nonexistent/algo.resccl");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("/nonexistent/algo.resccl: error: cannot open file"), std::string::npos)
      << missing.output;
  Run unknown = run("--check --param nodes=4");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("nodes"), std::string::npos) << unknown.output;
}

TEST(TucclCompile, HelpAndVersion) {
  Run help = run("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--param"), std::string::npos);
  EXPECT_EQ(run("--version").status, 0);
}

TEST(TucclCompile, OperationLimitStopsRunawayPrograms) {
  Run r = run("--check --max-ops 100");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--max-ops"), std::string::npos) << r.output;
}

}  // namespace
