// libtuccl-nccl.so exports the whole NCCL API and runs unchanged NCCL programs on the CPU device:
// tests/backend/nccl_program.c relinked against the drop-in and linked to the real libnccl with the
// drop-in preloaded; tests/backend/nccl_native_program.c for what TuCCL serves beyond the classic
// collectives (every datatype's reductions, PreMulSum), with no real NCCL to reach; and, with a
// stand-in real NCCL (fake_nccl.cc) that records what reaches it, what TUCCL_NCCL_FORWARD forwards,
// through which twin, and when.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

// ---- Exports -----------------------------------------------------------------------------------

std::set<std::string> definedSymbols(const std::string& library) {
  std::set<std::string> symbols;
  FILE* nm = popen(("nm -D --defined-only '" + library + "'").c_str(), "r");
  if (nm == nullptr) return symbols;
  char line[1024];
  while (std::fgets(line, sizeof line, nm) != nullptr) {
    std::istringstream fields(line);
    std::string address, kind, name;
    if (fields >> address >> kind >> name) symbols.insert(name.substr(0, name.find('@')));
  }
  pclose(nm);
  return symbols;
}

// Every function nccl.h declares: `ncclResult_t ncclX(` and `const char* ncclX(`.
std::set<std::string> ncclHeaderFunctions() {
  std::ifstream in(TUCCL_NCCL_HEADER);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const std::regex declaration(R"((?:ncclResult_t|const\s+char\s*\*)\s+(nccl[A-Za-z0-9_]+)\s*\()");
  std::set<std::string> functions;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), declaration);
       it != std::sregex_iterator(); ++it) {
    functions.insert((*it)[1].str());
  }
  return functions;
}

// The nccl* functions PyTorch 2.11's libtorch_cuda.so imports: the union of the NCCL API calls in
// its c10d sources (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, NCCLUtils.hpp/.cpp), version
// guards included, as listed by the drop-in's brief (39 names).
const std::vector<std::string> kTorchImports = {"ncclGetVersion",
                                                "ncclGetUniqueId",
                                                "ncclCommInitRank",
                                                "ncclCommInitRankConfig",
                                                "ncclCommInitRankScalable",
                                                "ncclCommInitAll",
                                                "ncclCommSplit",
                                                "ncclCommShrink",
                                                "ncclCommFinalize",
                                                "ncclCommDestroy",
                                                "ncclCommAbort",
                                                "ncclCommGetAsyncError",
                                                "ncclCommCount",
                                                "ncclCommUserRank",
                                                "ncclCommCuDevice",
                                                "ncclCommRegister",
                                                "ncclCommDeregister",
                                                "ncclCommWindowRegister",
                                                "ncclCommWindowDeregister",
                                                "ncclMemAlloc",
                                                "ncclMemFree",
                                                "ncclGetErrorString",
                                                "ncclGetLastError",
                                                "ncclAllReduce",
                                                "ncclAllGather",
                                                "ncclReduceScatter",
                                                "ncclBroadcast",
                                                "ncclBcast",
                                                "ncclReduce",
                                                "ncclAlltoAll",
                                                "ncclGather",
                                                "ncclScatter",
                                                "ncclSend",
                                                "ncclRecv",
                                                "ncclGroupStart",
                                                "ncclGroupEnd",
                                                "ncclRedOpCreatePreMulSum",
                                                "ncclRedOpDestroy",
                                                "ncclGroupSimulateEnd"};

// The nccl* functions nccl-tests 2.19.6 imports (src/common.cu and the per-collective tests), as
// listed by the drop-in's brief.
const std::vector<std::string> kNcclTestsImports = {"ncclGetUniqueId",
                                                    "ncclCommInitRank",
                                                    "ncclCommInitRankConfig",
                                                    "ncclCommInitAll",
                                                    "ncclCommDestroy",
                                                    "ncclCommFinalize",
                                                    "ncclCommAbort",
                                                    "ncclGetErrorString",
                                                    "ncclGetLastError",
                                                    "ncclGetVersion",
                                                    "ncclCommCount",
                                                    "ncclCommUserRank",
                                                    "ncclCommCuDevice",
                                                    "ncclGroupStart",
                                                    "ncclGroupEnd",
                                                    "ncclAllReduce",
                                                    "ncclAllGather",
                                                    "ncclReduceScatter",
                                                    "ncclBroadcast",
                                                    "ncclReduce",
                                                    "ncclAlltoAll",
                                                    "ncclGather",
                                                    "ncclScatter",
                                                    "ncclSend",
                                                    "ncclRecv",
                                                    "ncclRedOpCreatePreMulSum",
                                                    "ncclRedOpDestroy",
                                                    "ncclMemAlloc",
                                                    "ncclMemFree",
                                                    "ncclCommRegister",
                                                    "ncclCommDeregister",
                                                    "ncclCommWindowRegister",
                                                    "ncclCommWindowDeregister",
                                                    "ncclCommGetAsyncError"};

void expectExported(const std::set<std::string>& symbols, const std::vector<std::string>& functions,
                    const std::string& source) {
  for (const std::string& function : functions) {
    EXPECT_TRUE(symbols.count(function)) << function << " (" << source << ") is not exported";
    EXPECT_TRUE(symbols.count("p" + function)) << "p" << function << " (" << source << ") is not exported";
  }
}

TEST(NcclDropIn, ExportsEveryFunctionOfNcclH) {
  const std::set<std::string> functions = ncclHeaderFunctions();
  ASSERT_GE(functions.size(), 40u) << "the parse of " << TUCCL_NCCL_HEADER << " found too few functions";
  ASSERT_TRUE(functions.count("ncclAllReduce") && functions.count("ncclGetErrorString"));
  const std::set<std::string> symbols = definedSymbols(TUCCL_NCCL_DROPIN);
  ASSERT_FALSE(symbols.empty()) << "nm found no symbols in " << TUCCL_NCCL_DROPIN;
  expectExported(symbols, {functions.begin(), functions.end()}, "nccl.h");
}

TEST(NcclDropIn, ExportsWhatTorchAndNcclTestsImport) {
  const std::set<std::string> symbols = definedSymbols(TUCCL_NCCL_DROPIN);
  expectExported(symbols, kTorchImports, "torch 2.11");
  expectExported(symbols, kNcclTestsImports, "nccl-tests 2.19.6");
}

// ---- Programs ----------------------------------------------------------------------------------

std::string runDir(const std::string& name) {
  const std::string dir = std::string(TUCCL_BINARY_DIR) + "/tests/runs/nccl_dropin/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `argv` as `n` ranks on the CPU device; each must exit 0 and print OK. Returns their logs.
std::vector<std::string> runProgram(const std::vector<std::string>& argv, const std::string& name,
                                    const std::vector<std::string>& env, int n = 3) {
  const std::string dir = runDir(name);
  std::vector<std::string> extra = env;
  extra.push_back("TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache");
  extra.push_back("TUCCL_TIMEOUT_S=60");
  extra.push_back("TUCCL_DEVICE=cpu");
  RankProcesses ranks = startRanks(n, argv, extra, dir);
  EXPECT_TRUE(waitRanks(ranks, 300)) << "the ranks did not end within 300 s";
  std::vector<std::string> logs;
  for (size_t r = 0; r < ranks.pids.size(); ++r) {
    logs.push_back(readLog(ranks.logs[r]));
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " exit " << WEXITSTATUS(ranks.status[r]) << "\n"
        << logs.back();
    EXPECT_NE(logs.back().find("OK"), std::string::npos) << logs.back();
  }
  return logs;
}

// A fresh call log for the stand-in real NCCL, and the variables that make the drop-in load it.
std::string fakeNcclLog(const std::string& name) {
  const std::string log = runDir(name) + "/fake_nccl.log";
  std::filesystem::remove(log);
  return log;
}
std::vector<std::string> withFakeNccl(const std::string& log, std::vector<std::string> env = {}) {
  env.push_back("TUCCL_NCCL_LIBRARY=" + std::string(TUCCL_FAKE_NCCL));
  env.push_back("TUCCL_FAKE_NCCL_LOG=" + log);
  return env;
}

// The calls TUCCL_NCCL_FORWARD forwards in these tests: fp8 e4m3 reductions and PreMulSum operators.
const std::string kForward = "TUCCL_NCCL_FORWARD=float8e4m3,premulsum";

TEST(NcclDropIn, RelinkedProgramRunsOnTucclAndRefusesWhatItCannotForward) {
  // No TUCCL_NCCL_LIBRARY: a CPU communicator gets no twin, whatever real NCCL is installed.
  const std::vector<std::string> logs =
      runProgram({TUCCL_NCCL_PROGRAM_RELINKED}, "relinked", {"NCCL_PROGRAM_FORWARD=refused", kForward});
  for (const std::string& log : logs) {
    EXPECT_NE(log.find("REFUSED: ncclAllReduce: TUCCL_NCCL_FORWARD sends float8e4m3 reductions to the real "
                       "NCCL; the communicator runs on the CPU device"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("REFUSED: ncclRedOpCreatePreMulSum: TUCCL_NCCL_FORWARD sends PreMulSum operators to "
                       "the real NCCL; the communicator runs on the CPU device"),
              std::string::npos)
        << log;
  }
}

#ifdef TUCCL_NCCL_PROGRAM_REAL
TEST(NcclDropIn, ProgramLinkedToRealNcclRunsOnTucclWhenPreloaded) {
  runProgram({TUCCL_NCCL_PROGRAM_REAL}, "preloaded", {"LD_PRELOAD=" + std::string(TUCCL_NCCL_DROPIN)});
}
#endif

// The twin is made when a forwarded call first needs it: a program that forwards nothing never
// reaches the real NCCL, not even for a unique id.
TEST(NcclDropIn, AProgramThatForwardsNothingMakesNoTwin) {
  const std::string log = fakeNcclLog("never_forwards");
  runProgram({TUCCL_NCCL_PROGRAM_RELINKED}, "never_forwards", withFakeNccl(log, {kForward}));
  EXPECT_EQ(readLog(log), "") << "the stand-in real NCCL was called";
}

// Forwarding is the user's choice: without TUCCL_NCCL_FORWARD, an fp8 AllReduce and a PreMulSum
// operator are TuCCL's even with a real NCCL at hand.
TEST(NcclDropIn, WithoutTucclNcclForwardFp8AndPreMulSumStayWithTuccl) {
  const std::string log = fakeNcclLog("not_listed");
  runProgram({TUCCL_NCCL_PROGRAM_RELINKED}, "not_listed", withFakeNccl(log, {"NCCL_PROGRAM_FORWARD=yes"}));
  EXPECT_EQ(readLog(log), "") << "the stand-in real NCCL was called";
}

// With a (stand-in) real NCCL named by TUCCL_NCCL_LIBRARY, the first forwarded call makes every
// rank's twin from rank 0's real unique id, and what TUCCL_NCCL_FORWARD lists reaches it with the
// twin (never a TuCCL handle): an fp8 AllReduce kept until its group's end, a PreMulSum operator,
// the (float) AllReduce using it and its destroy. The program's other float AllReduce stays TuCCL's.
TEST(NcclDropIn, WhatTucclNcclForwardListsGoesToTheRealNcclThroughALazyTwin) {
  const std::string log = fakeNcclLog("forwarded");
  runProgram({TUCCL_NCCL_PROGRAM_RELINKED}, "forwarded",
             withFakeNccl(log, {"NCCL_PROGRAM_FORWARD=yes", kForward}));
  const std::string calls = readLog(log);
  const size_t idAt = calls.find("getUniqueId id=");
  ASSERT_NE(idAt, std::string::npos) << calls;
  const std::string id = calls.substr(idAt + 15, 16);
  EXPECT_EQ(calls.find("getUniqueId", idAt + 1), std::string::npos) << "more than one real unique id\n"
                                                                    << calls;
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_NE(calls.find("init nranks=3 rank=" + rank + " id=" + id), std::string::npos) << calls;
    EXPECT_NE(calls.find("allreduce count=4 datatype=10 op=0 twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("premulsum op=5 scalar=0.500000 twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("allreduce count=5 datatype=7 op=5 twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("redOpDestroy op=5 twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("finalize twin=" + rank), std::string::npos) << calls;
    EXPECT_NE(calls.find("destroy rank=" + rank), std::string::npos) << calls;
  }
  EXPECT_EQ(calls.find("foreign"), std::string::npos) << "a TuCCL handle reached the real NCCL\n" << calls;
  EXPECT_EQ(calls.find("send"), std::string::npos) << "point-to-point is TuCCL's\n" << calls;
  EXPECT_EQ(calls.find("count=1000"), std::string::npos) << "a float sum is TuCCL's\n" << calls;
  EXPECT_NE(calls.find("groupStart"), std::string::npos) << calls;
  EXPECT_NE(calls.find("groupEnd"), std::string::npos) << calls;
}

// TUCCL_NCCL_FALLBACK=0: nothing is forwarded, even with a real NCCL at hand and TUCCL_NCCL_FORWARD
// listing it; the reason names both variables.
TEST(NcclDropIn, FallbackOffRefusesWhatWouldBeForwarded) {
  const std::string log = fakeNcclLog("fallback_off");
  const std::vector<std::string> logs =
      runProgram({TUCCL_NCCL_PROGRAM_RELINKED}, "fallback_off",
                 withFakeNccl(log, {"NCCL_PROGRAM_FORWARD=refused", "TUCCL_NCCL_FALLBACK=0", kForward}));
  for (const std::string& rank : logs) {
    EXPECT_NE(rank.find("REFUSED: ncclAllReduce: TUCCL_NCCL_FORWARD sends float8e4m3 reductions to the real "
                        "NCCL; forwarding to the real NCCL is off (TUCCL_NCCL_FALLBACK=0)"),
              std::string::npos)
        << rank;
    EXPECT_NE(rank.find("REFUSED: ncclRedOpCreatePreMulSum: TUCCL_NCCL_FORWARD sends PreMulSum operators to "
                        "the real NCCL; forwarding to the real NCCL is off (TUCCL_NCCL_FALLBACK=0)"),
              std::string::npos)
        << rank;
  }
  EXPECT_EQ(readLog(log), "") << "the stand-in real NCCL was called";
}

// Point-to-point of every datatype, Gather/Scatter, fp8 e4m3, int8 and uint64 AllReduce, PreMulSum
// operators (host and device scalars) and their reductions, split, shrink, config and scalable init,
// finalize, revoke, hints, ncclGroupSimulateEnd and ncclMemAlloc (over the fake CUDA driver): all
// TuCCL's, with no real NCCL anywhere; every element checked on every rank.
TEST(NcclDropIn, ServesPointToPointSplitAndConfigWithNoRealNccl) {
  runProgram({TUCCL_NCCL_NATIVE_PROGRAM}, "native",
             {"TUCCL_NCCL_LIBRARY=/nonexistent/libnccl.so.2", "TUCCL_NCCL_FALLBACK=0",
              "TUCCL_CUDA_DRIVER=" + std::string(TUCCL_FAKE_CUDA), "NCCL_PROGRAM_MEMALLOC=device"});
}

// A TUCCL_NCCL_FORWARD naming what it does not take: every reduction and ncclRedOpCreatePreMulSum
// is refused with ncclInvalidArgument, naming the variable, its value and the bad name; data
// movement is still served.
TEST(NcclDropIn, ABadTucclNcclForwardIsRefusedWithItsName) {
  const std::vector<std::string> logs =
      runProgram({TUCCL_NCCL_NATIVE_PROGRAM, "bad-forward"}, "bad_forward",
                 {"TUCCL_NCCL_LIBRARY=/nonexistent/libnccl.so.2", "TUCCL_NCCL_FALLBACK=0",
                  "TUCCL_NCCL_FORWARD=float8e4m3,fp9"});
  for (const std::string& rank : logs) {
    EXPECT_NE(rank.find("BADFORWARD: ncclAllReduce: TUCCL_NCCL_FORWARD='float8e4m3,fp9': expected a "
                        "comma-separated list of NCCL datatype names"),
              std::string::npos)
        << rank;
    EXPECT_NE(rank.find("'fp9' is none of them"), std::string::npos) << rank;
  }
}

TEST(NcclDropIn, MemAllocWithoutACudaDriverSaysWhy) {
  const std::vector<std::string> logs =
      runProgram({TUCCL_NCCL_NATIVE_PROGRAM, "memalloc-only"}, "memalloc_none",
                 {"TUCCL_CUDA_DRIVER=/nonexistent/libcuda.so.1", "NCCL_PROGRAM_MEMALLOC=none"}, 1);
  EXPECT_NE(logs[0].find("MEMALLOC: ncclMemAlloc: no CUDA driver to allocate device memory with"),
            std::string::npos)
      << logs[0];
}

// One thread driving the three ranks of ncclCommInitAll: the forwarded calls (fp8 e5m2, by
// TUCCL_NCCL_FORWARD) wait for the group's end, where the real ncclCommInitAll makes the three
// twins at once.
TEST(NcclDropIn, InitAllTwinsAreMadeTogetherAtTheGroupsEnd) {
  const std::string log = fakeNcclLog("initall");
  runProgram({TUCCL_NCCL_INITALL_PROGRAM}, "initall", withFakeNccl(log, {"TUCCL_NCCL_FORWARD=float8e5m2"}),
             1);
  const std::string calls = readLog(log);
  const size_t initAll = calls.find("initAll ndev=3");
  ASSERT_NE(initAll, std::string::npos) << calls;
  EXPECT_EQ(calls.find("initAll", initAll + 1), std::string::npos) << calls;
  EXPECT_EQ(calls.find("init nranks"), std::string::npos) << calls;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(calls.find("allreduce count=8 datatype=11 op=2 twin=" + std::to_string(r)), std::string::npos)
        << calls;
    EXPECT_NE(calls.find("destroy rank=" + std::to_string(r)), std::string::npos) << calls;
  }
  EXPECT_LT(calls.find("groupStart"), calls.find("allreduce")) << calls;
  EXPECT_EQ(calls.find("foreign"), std::string::npos) << calls;
}

}  // namespace
}  // namespace tuccl::testing
