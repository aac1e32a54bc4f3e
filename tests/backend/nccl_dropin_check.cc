// libtuccl-nccl.so runs an unchanged NCCL program (tests/backend/nccl_program.c) on the CPU
// device: relinked against the drop-in, and linked to the real libnccl with the drop-in preloaded.
#include <gtest/gtest.h>

#include <filesystem>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

void runProgram(const std::string& program, const std::string& name, const std::vector<std::string>& env) {
  const std::string dir = std::string(TUCCL_BINARY_DIR) + "/tests/runs/nccl_dropin/" + name;
  std::filesystem::create_directories(dir);
  std::vector<std::string> extra = env;
  extra.push_back("TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache");
  extra.push_back("TUCCL_TIMEOUT_S=60");
  extra.push_back("TUCCL_DEVICE=cpu");
  RankProcesses ranks = startRanks(3, {program}, extra, dir);
  ASSERT_TRUE(waitRanks(ranks, 300));
  for (size_t r = 0; r < ranks.pids.size(); ++r) {
    const std::string log = readLog(ranks.logs[r]);
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " exit " << WEXITSTATUS(ranks.status[r]) << "\n" << log;
    EXPECT_NE(log.find("OK"), std::string::npos) << log;
  }
}

TEST(NcclDropIn, RelinkedProgramRunsOnTuccl) { runProgram(TUCCL_NCCL_PROGRAM_RELINKED, "relinked", {}); }

#ifdef TUCCL_NCCL_PROGRAM_REAL
TEST(NcclDropIn, ProgramLinkedToRealNcclRunsOnTucclWhenPreloaded) {
  runProgram(TUCCL_NCCL_PROGRAM_REAL, "preloaded", {"LD_PRELOAD=" + std::string(TUCCL_NCCL_DROPIN)});
}
#endif

}  // namespace
}  // namespace tuccl::testing
