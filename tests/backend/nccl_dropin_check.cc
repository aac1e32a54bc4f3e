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

// With a (stand-in) real NCCL named by TUCCL_NCCL_LIBRARY, every rank gets a twin communicator
// made from rank 0's real unique id, and what TuCCL does not serve reaches it, with the twin.
TEST(NcclDropIn, WhatTucclDoesNotServeGoesToTheRealNcclThroughATwin) {
  const std::string dir = std::string(TUCCL_BINARY_DIR) + "/tests/runs/nccl_dropin/forwarded";
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/fake_nccl.log";
  std::filesystem::remove(log);
  runProgram(TUCCL_NCCL_PROGRAM_RELINKED, "forwarded",
             {"TUCCL_NCCL_LIBRARY=" + std::string(TUCCL_FAKE_NCCL), "TUCCL_FAKE_NCCL_LOG=" + log,
              "NCCL_PROGRAM_FORWARDED=1"});
  const std::string calls = readLog(log);
  const size_t idAt = calls.find("getUniqueId id=");
  ASSERT_NE(idAt, std::string::npos) << calls;
  const std::string id = calls.substr(idAt + 15, 16);
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_NE(calls.find("init nranks=3 rank=" + rank + " id=" + id), std::string::npos) << calls;
    EXPECT_NE(calls.find("send peer=" + std::to_string((r + 1) % 3) + " count=1 twin=" + rank), std::string::npos)
        << calls;
    EXPECT_NE(calls.find("recv peer=" + std::to_string((r + 2) % 3) + " count=1 twin=" + rank), std::string::npos)
        << calls;
    EXPECT_NE(calls.find("allreduce count=4 datatype=5 twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("destroy rank=" + rank), std::string::npos) << calls;
  }
  EXPECT_NE(calls.find("groupStart"), std::string::npos) << calls;
  EXPECT_NE(calls.find("groupEnd"), std::string::npos) << calls;
}

#ifdef TUCCL_NCCL_PROGRAM_REAL
TEST(NcclDropIn, ProgramLinkedToRealNcclRunsOnTucclWhenPreloaded) {
  runProgram(TUCCL_NCCL_PROGRAM_REAL, "preloaded", {"LD_PRELOAD=" + std::string(TUCCL_NCCL_DROPIN)});
}
#endif

}  // namespace
}  // namespace tuccl::testing
