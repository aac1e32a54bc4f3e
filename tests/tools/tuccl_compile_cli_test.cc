#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "plan/plan_json.h"
#include "plan/plan_validate.h"
#include "support/source_text.h"
#include "tests/tools/run_tool.h"

namespace {

using tuccl::tooltest::ToolRun;

ToolRun runTool(const std::string& arguments) {
  return tuccl::tooltest::runCommand(std::string(TUCCL_COMPILE) + " " + arguments);
}

std::string example(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name; }
std::string broken(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/lang/broken/" + name; }

TEST(TucclCompile, ChecksTheBundledDefault) {
  ToolRun r = runTool("--check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("collective   AllReduce, in place"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ranks        32 (4 nodes x 8 GPUs, 8 NICs per node)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("operations   1984"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verified: AllReduce postcondition holds"), std::string::npos) << r.output;
}

TEST(TucclCompile, ParametersChangeTheShape) {
  ToolRun r = runTool("--check " + example("hm_allgather.resccl") + " --param nRanks=16 --param GPUPerNode=4 --ranks all");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ranks        16 (4 nodes x 4 GPUs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verified: AllGather postcondition holds"), std::string::npos) << r.output;
  // Rank 5 (node 1, GPU 1) sends to its node's GPUs 4, 6, 7 and its ring successor 9.
  EXPECT_NE(r.output.find("     5: 4,6,7,9 "), std::string::npos) << r.output;
}

TEST(TucclCompile, ViolationIsReportedWithLineAndExitTwo) {
  ToolRun r = runTool("--check " + broken("hm_allreduce_same_step_race.resccl") + " -p nRanks=8 -p GPUPerNode=4");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("hm_allreduce_same_step_race.resccl:17:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not verified"), std::string::npos) << r.output;
}

TEST(TucclCompile, SyntaxErrorShowsSourceAndCaret) {
  ToolRun r = runTool("--check " + broken("unknown_name.resccl"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("unknown_name.resccl:5:35: error: unknown name 'nGpus'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" 5 |             transfer(r, (r + 1) % nGpus"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("   |                                   ^"), std::string::npos) << r.output;
}

TEST(TucclCompile, UsageErrorsExitTwo) {
  EXPECT_EQ(runTool("").status, 2);                                 // nothing to do
  EXPECT_EQ(runTool("--check --param nRanks").status, 2);           // not NAME=VALUE
  EXPECT_EQ(runTool("--check --param nRanks=abc").status, 2);       // not an integer
  EXPECT_EQ(runTool("--check --ranks many").status, 2);
  EXPECT_EQ(runTool("--check --no-such-flag").status, 2);
  EXPECT_EQ(runTool("--check --max-ops 0").status, 2);
  ToolRun missing = runTool("--check /nonexistent/algo.resccl");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.output.find("/nonexistent/algo.resccl: error: cannot open file"), std::string::npos)
      << missing.output;
  ToolRun unknown = runTool("--check --param nodes=4");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("nodes"), std::string::npos) << unknown.output;
}

TEST(TucclCompile, HelpAndVersion) {
  ToolRun help = runTool("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("--param"), std::string::npos);
  EXPECT_EQ(runTool("--version").status, 0);
}

TEST(TucclCompile, OperationLimitStopsRunawayPrograms) {
  ToolRun r = runTool("--check --max-ops 100");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--max-ops"), std::string::npos) << r.output;
}

class TucclCompilePlan : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("tuccl_cli_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// The kernel rank `rank` runs, from DIR/kernels.json ({"rank": R, "kernel": K, "values": [...]}).
int kernelOfRank(const std::filesystem::path& dir, int rank) {
  std::ifstream in(dir / "kernels.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "{\"rank\": " + std::to_string(rank) + ", \"kernel\": ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + key.size());
}

TEST_F(TucclCompilePlan, WritesAValidPlanForEveryScheduler) {
  for (const char* scheduler : {"hpds", "rr", "algorithm", "stage"}) {
    for (const char* tbAlloc : {"connection", "state"}) {
      SCOPED_TRACE(std::string(scheduler) + " " + tbAlloc);
      ToolRun r = runTool(example("hm_allgather.resccl") + " -p nRanks=8 -p GPUPerNode=4 --no-cubin --force -o " + dir_.string() +
                          " --scheduler " + scheduler + " --tb-alloc " + tbAlloc);
      ASSERT_EQ(r.status, 0) << r.output;
      const tuccl::Expected<tuccl::Plan> read = tuccl::readPlanJson(tuccl::readSourceFile((dir_ / "plan.json").string()));
      ASSERT_TRUE(read.ok()) << read.status().toString();
      const tuccl::Plan& plan = *read;
      EXPECT_EQ(plan.nRanks, 8);
      EXPECT_EQ(plan.collective, tuccl::Collective::AllGather);
      EXPECT_EQ(plan.scheduler, tuccl::parseScheduler(scheduler));
      EXPECT_EQ(plan.tbAllocation, tuccl::parseTbPolicy(tbAlloc));
      EXPECT_EQ(plan.config.nChannels, 4);  // the program's nChannels hint
      EXPECT_TRUE(tuccl::validatePlan(plan).ok());
      // Every entry names its transfer() in the program.
      for (const tuccl::PlanRank& rank : plan.ranks)
        for (const tuccl::PlanTb& tb : rank.tbs)
          for (const tuccl::PlanEntry& entry : tb.entries) EXPECT_TRUE(entry.loc.known());
      EXPECT_NE(plan.sourceName.find("hm_allgather.resccl"), std::string::npos);
      for (int rank = 0; rank < 8; ++rank) {
        const int kernel = kernelOfRank(dir_, rank);
        ASSERT_GE(kernel, 0) << "kernels.json names rank " << rank << "'s kernel";
        EXPECT_TRUE(std::filesystem::exists(dir_ / ("kernel" + std::to_string(kernel) + ".cu"))) << rank;
      }
    }
  }
}

TEST_F(TucclCompilePlan, WritesCubinAndPtxWithNvrtc) {
  ToolRun r = runTool(example("ring_allgather.resccl") + " -p nRanks=2 -p GPUPerNode=2 --arch sm_80,sm_90 -o " +
                      dir_.string());
  ASSERT_EQ(r.status, 0) << r.output;
#if defined(TUCCL_HAVE_CUDA)
  const std::string k0 = "kernel" + std::to_string(kernelOfRank(dir_, 0));
  const std::string k1 = "kernel" + std::to_string(kernelOfRank(dir_, 1));
  for (const std::string& file : {k0 + ".sm_80.cubin", k1 + ".sm_90.cubin", k0 + ".sm_90.ptx"}) {
    EXPECT_GT(std::filesystem::file_size(dir_ / file), 0u) << file;
  }
  std::ifstream ptx(dir_ / (k1 + ".sm_80.ptx"));
  std::string text((std::istreambuf_iterator<char>(ptx)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(".target sm_80"), std::string::npos);
  EXPECT_NE(text.find("tuccl_" + k1), std::string::npos);
#else
  EXPECT_NE(r.output.find("no NVRTC"), std::string::npos) << r.output;
#endif
}

TEST(TucclCompileVerify, RunsTheKernelsOnTheCpu) {
  ToolRun r = runTool(example("ring_allreduce.resccl") +
                      " -p nRanks=8 -p GPUPerNode=4 --verify --dtype int32 --count 1237 --out-of-place");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cpu verify   int32 sum, count 1237, out of place"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 7: ok"), std::string::npos) << r.output;
  EXPECT_EQ(runTool("--verify --dtype complex").status, 2);
  EXPECT_EQ(runTool("--verify --op xor").status, 2);
}

TEST(TucclCompileVerify, BroadcastAndReduceOnEveryRankAtAnyRoot) {
  for (const char* file : {"chain_broadcast.resccl", "binomial_broadcast.resccl", "chain_reduce.resccl",
                           "binomial_reduce.resccl"}) {
    for (int root : {0, 5}) {
      SCOPED_TRACE(std::string(file) + " root " + std::to_string(root));
      const bool reduce = std::string(file).find("reduce") != std::string::npos;
      ToolRun r = runTool(example(file) + " -p nRanks=8 -p GPUPerNode=4 -p Root=" + std::to_string(root) +
                          " --verify --dtype bfloat16 --count 999" + (root == 0 ? "" : " --out-of-place") +
                          (reduce ? " --op avg" : ""));
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_NE(r.output.find("\nok (seed "), std::string::npos) << r.output;
      for (int rank = 0; rank < 8; ++rank) {
        const std::string line = "  rank " + std::to_string(rank) + ": ok" +
                                 (reduce && rank != root ? " (not the root: its output is unspecified)" : "") + "\n";
        EXPECT_NE(r.output.find(line), std::string::npos) << line << r.output;
      }
    }
  }
  ToolRun bad = runTool(example("chain_reduce.resccl") + " -p nRanks=8 -p Root=8 --verify");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("Root = 8: the root rank is out of range [0, 8)"), std::string::npos) << bad.output;
}

TEST_F(TucclCompilePlan, RootedPlansCarryTheirRoot) {
  ToolRun r = runTool(example("binomial_reduce.resccl") + " -p nRanks=3 -p GPUPerNode=3 -p Root=2 --arch sm_90 -o " +
                      dir_.string());
  ASSERT_EQ(r.status, 0) << r.output;
  tuccl::Expected<tuccl::Plan> read = tuccl::readPlanJson(tuccl::readSourceFile((dir_ / "plan.json").string()));
  ASSERT_TRUE(read.ok()) << read.status().toString();
  const tuccl::Plan& plan = *read;
  EXPECT_EQ(plan.collective, tuccl::Collective::Reduce);
  EXPECT_EQ(plan.root, 2);
  EXPECT_TRUE(tuccl::validatePlan(plan).ok());
#if defined(TUCCL_HAVE_CUDA)
  for (int rank = 0; rank < 3; ++rank) {
    const int kernel = kernelOfRank(dir_, rank);
    EXPECT_GT(std::filesystem::file_size(dir_ / ("kernel" + std::to_string(kernel) + ".sm_90.cubin")), 0u) << rank;
  }
#endif
}

// Ranks of one role share a kernel; --emit-ranks writes only the listed ranks' kernels and tables.
TEST_F(TucclCompilePlan, WritesOneKernelPerRoleAndOnlyTheRanksAsked) {
  ToolRun all = runTool(example("ring_allreduce.resccl") + " -p nRanks=8 -p GPUPerNode=4 --no-cubin -o " + dir_.string());
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_NE(all.output.find("1 of 1 kernels (kernel<K>.cu) for 8 ranks"), std::string::npos) << all.output;
  for (int rank = 0; rank < 8; ++rank) EXPECT_EQ(kernelOfRank(dir_, rank), 0) << rank;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "kernel1.cu"));

  ToolRun some = runTool(example("binomial_broadcast.resccl") + " -p nRanks=8 -p GPUPerNode=4 --no-cubin --force " +
                         "--emit-ranks 0 -o " + dir_.string());
  ASSERT_EQ(some.status, 0) << some.output;
  const int root = kernelOfRank(dir_, 0);
  ASSERT_GE(root, 0);
  EXPECT_TRUE(std::filesystem::exists(dir_ / ("kernel" + std::to_string(root) + ".cu")));
  for (int rank = 1; rank < 8; ++rank) EXPECT_EQ(kernelOfRank(dir_, rank), -1) << "rank " << rank << " not written";
  EXPECT_NE(some.output.find("1 of "), std::string::npos) << some.output;

  ToolRun bad = runTool(example("ring_allreduce.resccl") + " -p nRanks=8 --no-cubin --force --emit-ranks 8 -o " +
                        dir_.string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--emit-ranks: rank 8 is not a rank of the plan's 8"), std::string::npos) << bad.output;
}

TEST_F(TucclCompilePlan, NeverOverwritesWithoutForce) {
  ASSERT_EQ(runTool("--no-cubin -o " + dir_.string()).status, 0);
  ToolRun again = runTool("--no-cubin -o " + dir_.string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  EXPECT_EQ(runTool("--no-cubin -o " + dir_.string() + " --force").status, 0);
}

TEST_F(TucclCompilePlan, ReportListsThreadBlocks) {
  ToolRun r = runTool("--no-cubin -o " + dir_.string() + " --report --ranks 1 -p nRanks=16 -p GPUPerNode=8");
  ASSERT_EQ(r.status, 0) << r.output;
  // HM AllReduce on 2x8: 16 connections per rank; MSCCL's channel split gives 30 (ResCCL Table 3).
  EXPECT_NE(r.output.find("     0               16                               30          16"), std::string::npos)
      << r.output;
}

TEST_F(TucclCompilePlan, RefusesBrokenAlgorithmsAndBadOptions) {
  EXPECT_EQ(runTool(broken("hm_allreduce_same_step_race.resccl") + " -p nRanks=8 -p GPUPerNode=4 -o " + dir_.string())
                .status,
            2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "plan.json"));
  EXPECT_EQ(runTool("-o " + dir_.string() + " --scheduler fifo").status, 2);
  EXPECT_EQ(runTool("-o " + dir_.string() + " --tb-alloc greedy").status, 2);
  EXPECT_EQ(runTool("-o " + dir_.string() + " --threads 8").status, 2);
}

// The existing plan is refused before the program is even read: a broken program still reports the
// output problem, not its own.
TEST_F(TucclCompilePlan, AnExistingPlanOrAFileAsDirIsRefusedBeforeAnyWork) {
  ASSERT_EQ(runTool("--no-cubin -o " + dir_.string()).status, 0);
  ToolRun again = runTool(broken("unknown_name.resccl") + " --no-cubin -o " + dir_.string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("plan.json exists; pass --force to overwrite it"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("unknown name"), std::string::npos) << again.output;
  ToolRun intoFile = runTool("--no-cubin -o " + (dir_ / "plan.json").string());
  EXPECT_EQ(intoFile.status, 2);
  EXPECT_NE(intoFile.output.find("not a directory"), std::string::npos) << intoFile.output;
}

// Hostile numbers end in a message and exit 2, never an abort: counts beyond any memory, a count
// the machine cannot hold, and out-of-range or non-numeric values.
TEST(TucclCompile, HostileNumbersEndInAMessage) {
  ToolRun huge = runTool("--verify --count 4611686018427387904");
  EXPECT_EQ(huge.status, 2) << huge.output;
  EXPECT_NE(huge.output.find("--count: '4611686018427387904' is out of range: must be between 0 and "
                             "1,099,511,627,776"),
            std::string::npos)
      << huge.output;
  ToolRun big = runTool(example("ring_allreduce.resccl") + " -p nRanks=2 -p GPUPerNode=2 --verify --dtype uint8 --count " +
                        "1099511627776");
  EXPECT_EQ(big.status, 2) << big.output;
  EXPECT_NE(big.output.find("of host memory; the CPU verification uses at most"), std::string::npos) << big.output;
  for (const char* bad : {"--count 1e14", "--count -1", "--count nan", "--chunk-size 1", "--chunk-size 2G",
                          "--threads 1e3", "--channels 0", "--stages -4", "--max-ops 0", "--arch sm_x"}) {
    ToolRun r = runTool(std::string("--check ") + bad);
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.output;
    EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  }
  ToolRun chunk = runTool("--check --chunk-size 1");
  EXPECT_NE(chunk.output.find("must be between 256 B and 1 GiB"), std::string::npos) << chunk.output;
}

}  // namespace

// ---- MSCCL algorithm XML ---------------------------------------------------------------------------

namespace {

std::string msccl(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name; }

TEST(TucclCompileMscclXml, ChecksAnXmlFile) {
  ToolRun r = runTool("--check " + msccl("ring_allreduce_2ch.xml"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("collective   AllReduce, in place"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("verified: AllReduce postcondition holds"), std::string::npos) << r.output;
}

TEST(TucclCompileMscclXml, ADefectIsReportedAtItsXmlLine) {
  ToolRun r = runTool("--check " + msccl("bad/reduce_mixed_chunks.xml"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("reduce_mixed_chunks.xml:22:7: error: reduces chunk 0 into rank 1 input chunk 1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("<step s=\"1\" type=\"rrc\""), std::string::npos) << r.output;  // the quoted line
  ToolRun bad = runTool("--check " + msccl("bad/step_type_ra.xml"));
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("step_type_ra.xml:57:19: error: step type \"ra\""), std::string::npos) << bad.output;
}

TEST(TucclCompileMscclXml, ParametersAreRefusedForXml) {
  ToolRun r = runTool("--check " + msccl("ring_allreduce_1ch.xml") + " -p nRanks=8");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("parameters apply to ResCCLang programs only"), std::string::npos) << r.output;
}

TEST_F(TucclCompilePlan, WritesAPlanAndVerifiesAnXmlFile) {
  ToolRun r = runTool(msccl("alltoall_copy.xml") + " --no-cubin -o " + dir_.string() + " --verify --dtype int32 --count 777");
  ASSERT_EQ(r.status, 0) << r.output;
  // An out-of-place file verifies out of place.
  EXPECT_NE(r.output.find("cpu verify   int32 sum, count 777, out of place"), std::string::npos) << r.output;
  const tuccl::Expected<tuccl::Plan> read = tuccl::readPlanJson(tuccl::readSourceFile((dir_ / "plan.json").string()));
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(read->collective, tuccl::Collective::AllToAll);
  EXPECT_TRUE(tuccl::validatePlan(*read).ok());
  ToolRun broadcast = runTool(msccl("broadcast_chain.xml") + " --verify --dtype float32 --count 301");
  EXPECT_EQ(broadcast.status, 0) << broadcast.output;
}

}  // namespace

namespace {

std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(TucclCompilePlan, EmitsAnMscclFileAsEditableResccl) {
  ToolRun printed = runTool(msccl("ring_allreduce_rrs.xml") + " --emit resccl");
  ASSERT_EQ(printed.status, 0) << printed.output;
  EXPECT_NE(printed.output.find("def ResCCLAlgo(nRanks=4, OpType=\"AllReduce\""), std::string::npos) << printed.output;
  const std::filesystem::path file = dir_ / "ring.resccl";
  ToolRun written = runTool(msccl("ring_allreduce_rrs.xml") + " --emit resccl -o " + file.string());
  ASSERT_EQ(written.status, 0) << written.output;
  EXPECT_NE(written.output.find("wrote " + file.string() + " (ResCCLang"), std::string::npos) << written.output;
  EXPECT_EQ(readText(file), printed.output);  // the same program on standard output and in the file
  // The printed program is an algorithm in its own right: it proves and runs.
  ToolRun again = runTool("--check " + file.string());
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("verified: AllReduce postcondition holds"), std::string::npos) << again.output;
  ToolRun run = runTool(file.string() + " --verify --dtype int32 --count 513");
  EXPECT_EQ(run.status, 0) << run.output;
  // An out-of-place file prints with InPlace=0 and still runs out of place.
  const std::filesystem::path alltoall = dir_ / "alltoall.resccl";
  ToolRun outOfPlace = runTool(msccl("alltoall_copy.xml") + " --emit resccl -o " + alltoall.string());
  ASSERT_EQ(outOfPlace.status, 0) << outOfPlace.output;
  EXPECT_NE(readText(alltoall).find(", InPlace=0):"), std::string::npos) << readText(alltoall);
  ToolRun alltoallRun = runTool(alltoall.string() + " --verify --dtype int32 --count 77");
  EXPECT_EQ(alltoallRun.status, 0) << alltoallRun.output;
  EXPECT_NE(alltoallRun.output.find("out of place"), std::string::npos) << alltoallRun.output;
}

TEST_F(TucclCompilePlan, EmitsMscclXmlThatImportsAndRunsCorrectly) {
  const std::filesystem::path file = dir_ / "ring.xml";
  ToolRun exported = runTool(example("ring_reducescatter.resccl") + " -p nRanks=8 -p GPUPerNode=4 --emit msccl -o " +
                             file.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  EXPECT_NE(exported.output.find("(MSCCL XML for executor,"), std::string::npos) << exported.output;
  const std::string text = readText(file);
  EXPECT_EQ(text.rfind("<algo ", 0), 0u) << text.substr(0, 200);
  EXPECT_NE(text.find("coll=\"reducescatter\""), std::string::npos);
  EXPECT_NE(text.find("inplace=\"1\""), std::string::npos);
  ToolRun run = runTool(file.string() + " --verify --dtype int32 --count 999");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("rank 7: ok"), std::string::npos) << run.output;
  // microsoft/msccl's spelling, to standard output.
  ToolRun msccl = runTool(example("ring_reducescatter.resccl") +
                          " -p nRanks=8 -p GPUPerNode=4 --emit msccl --msccl-runtime msccl");
  ASSERT_EQ(msccl.status, 0) << msccl.output;
  EXPECT_NE(msccl.output.find("coll=\"reduce_scatter\""), std::string::npos) << msccl.output.substr(0, 300);
  // --out-of-place: a file for out-of-place calls (an AllGather; ReduceScatter's in place is refused).
  const std::filesystem::path separate = dir_ / "allgather.xml";
  ToolRun outOfPlace = runTool(example("ring_allgather.resccl") + " -p nRanks=4 -p GPUPerNode=2 --emit msccl " +
                               "--out-of-place -o " + separate.string());
  ASSERT_EQ(outOfPlace.status, 0) << outOfPlace.output;
  EXPECT_NE(readText(separate).find("outofplace=\"1\""), std::string::npos);
  ToolRun separateRun = runTool(separate.string() + " --verify --dtype int32 --count 77");
  EXPECT_EQ(separateRun.status, 0) << separateRun.output;
  EXPECT_NE(separateRun.output.find("out of place"), std::string::npos) << separateRun.output;
  ToolRun refused = runTool(example("ring_reducescatter.resccl") + " -p nRanks=4 -p GPUPerNode=2 --emit msccl --out-of-place");
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("cannot serve out-of-place calls"), std::string::npos) << refused.output;
}

// A ring AllReduce of 750-chunk blocks: each transfer becomes 11 steps (cnt < 72), 66 per thread
// block, beyond msccl-executor's 64 but within microsoft/msccl's 256.
constexpr const char* kLongRing = R"(def ResCCLAlgo(nRanks=4, OpType="Allreduce", nChunks=3000, GPUPerNode=4):
    for r in range(nRanks):
        for s in range(nRanks - 1):
            transfer(r, (r + 1) % nRanks, s, ((r - s) % nRanks) * 750, rrc, count=750)
    for r in range(nRanks):
        for s in range(nRanks - 1):
            transfer(r, (r + 1) % nRanks, nRanks - 1 + s, ((r + 1 - s) % nRanks) * 750, recv, count=750)
)";

TEST_F(TucclCompilePlan, MscclLimitViolationsAreErrorsNamingEach) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path program = dir_ / "long_ring.resccl";
  std::ofstream(program) << kLongRing;
  const std::filesystem::path file = dir_ / "long_ring.xml";
  ToolRun executor = runTool(program.string() + " --emit msccl -o " + file.string());
  EXPECT_EQ(executor.status, 2) << executor.output;
  EXPECT_NE(executor.output.find("the plan exceeds 8 limits of executor"), std::string::npos) << executor.output;
  for (int gpu = 0; gpu < 4; ++gpu) {
    for (int tb = 0; tb < 2; ++tb) {
      const std::string line = "executor: gpu " + std::to_string(gpu) + " tb " + std::to_string(tb) +
                               ": steps per tb is 66, the most is 64";
      EXPECT_NE(executor.output.find(line), std::string::npos) << line << "\n" << executor.output;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(file));  // no file the runtime would reject
  ToolRun rccl = runTool(program.string() + " --emit msccl --msccl-runtime rccl -o " + file.string());
  EXPECT_EQ(rccl.status, 2) << rccl.output;
  EXPECT_NE(rccl.output.find("rccl: gpu 0 tb 0: steps per tb is 66"), std::string::npos) << rccl.output;
  ToolRun msccl = runTool(program.string() + " --emit msccl --msccl-runtime msccl -o " + file.string());
  EXPECT_EQ(msccl.status, 0) << msccl.output;
  ToolRun run = runTool(file.string() + " --verify --dtype int32 --count 3000");
  EXPECT_EQ(run.status, 0) << run.output;
}

TEST_F(TucclCompilePlan, EmitsThePlanJson) {
  const std::filesystem::path file = dir_ / "plan.json";
  ToolRun r = runTool(msccl("ring_allreduce_2ch.xml") + " --emit plan -o " + file.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const tuccl::Expected<tuccl::Plan> read = tuccl::readPlanJson(tuccl::readSourceFile(file.string()));
  ASSERT_TRUE(read.ok()) << read.status().toString();
  EXPECT_EQ(read->collective, tuccl::Collective::AllReduce);
  EXPECT_TRUE(tuccl::validatePlan(*read).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "kernel0.cu"));  // --emit writes the one file
}

TEST_F(TucclCompilePlan, WritesVersionFourUnlessAskedForAnOlderOne) {
  const std::string program = example("hm_allreduce.resccl") + " -p nRanks=16 -p GPUPerNode=4";
  ToolRun rolled = runTool(program + " --no-cubin -o " + dir_.string());
  ASSERT_EQ(rolled.status, 0) << rolled.output;
  const std::filesystem::path plain = dir_ / "plain.json", emitted = dir_ / "emitted.json";
  ToolRun v2 = runTool(program + " --emit plan --plan-version 2 -o " + plain.string());
  ASSERT_EQ(v2.status, 0) << v2.output;
  ToolRun v3 = runTool(program + " --emit plan -o " + emitted.string());
  ASSERT_EQ(v3.status, 0) << v3.output;
  const std::string rolledText = readText(dir_ / "plan.json"), plainText = readText(plain);
  EXPECT_NE(rolledText.find("\"version\": 4"), std::string::npos);
  EXPECT_NE(plainText.find("\"version\": 2"), std::string::npos);
  EXPECT_EQ(readText(emitted), rolledText);  // --emit plan streams the same text as -o DIR
  EXPECT_LT(rolledText.size() * 5, plainText.size());
  const tuccl::Expected<tuccl::Plan> a = tuccl::readPlanJson(tuccl::readSourceFile((dir_ / "plan.json").string()));
  const tuccl::Expected<tuccl::Plan> b = tuccl::readPlanJson(tuccl::readSourceFile(plain.string()));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b);
  ToolRun bad = runTool(program + " --emit plan --plan-version 1");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--plan-version"), std::string::npos) << bad.output;

  // A ring fuses: version 4 carries the fused entries, version 3 the same plan unfused, and
  // --no-fuse lowers without them.
  const std::string ring = example("ring_allreduce.resccl") + " -p nRanks=4 -p GPUPerNode=4 --emit plan -o ";
  const std::filesystem::path ring4 = dir_ / "ring4.json", ring3 = dir_ / "ring3.json", plainRing = dir_ / "ring_nofuse.json";
  ASSERT_EQ(runTool(ring + ring4.string()).status, 0);
  ASSERT_EQ(runTool(ring + ring3.string() + " --plan-version 3").status, 0);
  ASSERT_EQ(runTool(ring + plainRing.string() + " --no-fuse").status, 0);
  EXPECT_NE(readText(ring4).find("\"recvReduceSend\""), std::string::npos);
  EXPECT_EQ(readText(ring3).find("\"recvReduceSend\""), std::string::npos);
  EXPECT_EQ(readText(plainRing).find("\"recvReduceSend\""), std::string::npos);
  const tuccl::Expected<tuccl::Plan> fused = tuccl::readPlanJson(tuccl::readSourceFile(ring4.string()));
  const tuccl::Expected<tuccl::Plan> older = tuccl::readPlanJson(tuccl::readSourceFile(ring3.string()));
  ASSERT_TRUE(fused.ok() && older.ok());
  EXPECT_TRUE(tuccl::unfusedPlan(*fused) == *older);
}

TEST_F(TucclCompilePlan, EmitsAnMscclppPlanWithPortChannelsBetweenNodes) {
  const std::filesystem::path file = dir_ / "plan.mscclpp.json";
  ToolRun r = runTool(example("hm_allgather.resccl") + " -p nRanks=4 -p GPUPerNode=2 -p nChannels=1 --emit mscclpp -o " +
                      file.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 node(s) of 2 ranks"), std::string::npos) << r.output;
  const std::string json = readText(file);
  EXPECT_NE(json.find("\"collective\": \"allgather\""), std::string::npos) << json.substr(0, 400);
  EXPECT_NE(json.find("\"port\""), std::string::npos) << "ranks of two nodes talk over port channels";
  EXPECT_NE(json.find("\"memory\""), std::string::npos) << "ranks of one node share memory channels";
  // One node: memory channels only.
  ToolRun oneNode = runTool(example("hm_allgather.resccl") + " -p nRanks=4 -p GPUPerNode=2 -p nChannels=1 --emit mscclpp "
                            "--mscclpp-ranks-per-node 4");
  ASSERT_EQ(oneNode.status, 0) << oneNode.output;
  EXPECT_EQ(oneNode.output.find("\"port\""), std::string::npos);
  ToolRun alone = runTool("--check --mscclpp-ranks-per-node 2");
  EXPECT_EQ(alone.status, 2) << alone.output;
  EXPECT_NE(alone.output.find("--mscclpp-ranks-per-node applies to --emit mscclpp only"), std::string::npos)
      << alone.output;
  ToolRun uneven = runTool(example("ring_allgather.resccl") + " -p nRanks=4 --emit mscclpp --mscclpp-ranks-per-node 3");
  EXPECT_EQ(uneven.status, 2) << uneven.output;
}

TEST_F(TucclCompilePlan, RunsAnMscclFileAsWritten) {
  ToolRun r = runTool(msccl("ring_allreduce_2ch.xml") + " --scheduler as-written --verify --report");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("schedule     as-written"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 3: ok"), std::string::npos) << r.output;
  ToolRun program = runTool(example("ring_allreduce.resccl") + " -p nRanks=4 -p GPUPerNode=2 --scheduler as-written --verify");
  EXPECT_EQ(program.status, 2) << program.output;
  EXPECT_NE(program.output.find("as-written needs an MSCCL XML input"), std::string::npos) << program.output;
}

TEST_F(TucclCompilePlan, EmitOptionsAreChecked) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path file = dir_ / "out.resccl";
  std::ofstream(file) << "old";
  ToolRun exists = runTool(example("ring_allgather.resccl") + " -p nRanks=4 -p GPUPerNode=2 --emit resccl -o " + file.string());
  EXPECT_EQ(exists.status, 2) << exists.output;
  EXPECT_NE(exists.output.find("exists; pass --force to overwrite it"), std::string::npos) << exists.output;
  EXPECT_EQ(readText(file), "old");
  ToolRun forced = runTool(example("ring_allgather.resccl") + " -p nRanks=4 -p GPUPerNode=2 --emit resccl --force -o " +
                           file.string());
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_EQ(readText(file).rfind("# ", 0), 0u);
  ToolRun unknown = runTool("--emit cubin");
  EXPECT_EQ(unknown.status, 2) << unknown.output;
  ToolRun runtimeAlone = runTool("--check --msccl-runtime rccl");
  EXPECT_EQ(runtimeAlone.status, 2) << runtimeAlone.output;
  EXPECT_NE(runtimeAlone.output.find("--msccl-runtime applies to --emit msccl only"), std::string::npos)
      << runtimeAlone.output;
  ToolRun badRuntime = runTool(msccl("ring_allreduce_1ch.xml") + " --emit msccl --msccl-runtime nccl");
  EXPECT_EQ(badRuntime.status, 2) << badRuntime.output;
  ToolRun help = runTool("--help");
  EXPECT_NE(help.output.find("--emit"), std::string::npos);
  EXPECT_NE(help.output.find("--msccl-runtime"), std::string::npos);
}

}  // namespace
