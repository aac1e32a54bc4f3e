// NCCL programs on TuCCL alone, through the drop-in (libtuccl-nccl.so) on the CPU device, with no
// real NCCL to fall back on (TUCCL_NCCL_LIBRARY names none, TUCCL_NCCL_FALLBACK=0): PyTorch DDP's
// default call sequence (dropin_ddp_replay.c), blocking and non-blocking, and nccl-tests' pattern
// of several ranks per process initialised in one group (dropin_nccl_tests_pattern.c). Every
// element is checked by the programs; each rank must exit 0.
#include <gtest/gtest.h>

#include <filesystem>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

std::string scratchDir(const std::string& name) {
  const std::string dir = freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/dropin_programs/" + name);
  std::filesystem::create_directories(dir + "/store");
  return dir;
}

// `n` processes of `program` with `args` after the store directory.
void runProgram(const std::string& name, const std::string& program, int n, const std::vector<std::string>& args) {
  const std::string dir = scratchDir(name);
  std::vector<std::string> argv = {program, dir + "/store"};
  argv.insert(argv.end(), args.begin(), args.end());
  RankProcesses ranks = startRanks(
      n, argv,
      {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache", "TUCCL_TIMEOUT_S=60",
       "TUCCL_DEVICE=cpu", "TUCCL_NCCL_LIBRARY=/nonexistent/libnccl.so.2", "TUCCL_NCCL_FALLBACK=0",
       "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"},
      dir);
  ASSERT_TRUE(waitRanks(ranks, 240)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " failed\n" << logsOf(ranks);
  }
}

TEST(DropInPrograms, PyTorchDdpDefaultSequenceOnFourRanks) {
  runProgram("ddp-blocking", TUCCL_DROPIN_DDP_REPLAY, 4, {"20", "blocking"});
}

TEST(DropInPrograms, PyTorchDdpSequenceWithNonBlockingCommunicators) {
  runProgram("ddp-nonblocking", TUCCL_DROPIN_DDP_REPLAY, 3, {"5", "nonblocking"});
}

TEST(DropInPrograms, NcclTestsTwoRanksPerProcessInitialisedInOneGroup) {
  runProgram("nccl-tests-g2", TUCCL_DROPIN_NCCL_TESTS_PATTERN, 2, {"2"});
}

TEST(DropInPrograms, NcclTestsOneRankPerProcess) {
  runProgram("nccl-tests-g1", TUCCL_DROPIN_NCCL_TESTS_PATTERN, 3, {"1"});
}

}  // namespace
}  // namespace tuccl::testing
