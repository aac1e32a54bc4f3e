// libtuccl across hosts: ranks with distinct TUCCL_HOSTIDs on loopback are separate nodes, joined
// by the inter-node proxy and a net plugin (TuCCL's own, or one loaded by NCCL_NET_PLUGIN). Every
// collective runs on every rank with every element checked; the log names the plugin that
// carries the inter-node transfers; a rank killed on the other host fails the rest; a plugin that
// does not load fails every rank's init with the variable named.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

const std::string kRank = TUCCL_COLLECTIVES_RANK;

std::string scratchDir(const std::string& name) {
  return freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/multi_node/" + name);
}

/// The variables of every rank: the CPU device, the shared plan cache, loopback only, INFO log.
std::vector<std::string> commonEnv(const std::string& timeout = "60") {
  return {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
          "TUCCL_TIMEOUT_S=" + timeout,
          "TUCCL_DEVICE=cpu",
          "TUCCL_SOCKET_IFNAME=lo",
          "TUCCL_DEBUG=INFO",
          "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
}

/// Rank r on host hosts[r] (a letter per rank).
std::function<std::vector<std::string>(int)> hostsOf(const std::string& hosts) {
  return [hosts](int r) { return std::vector<std::string>{std::string("TUCCL_HOSTID=host-") + hosts[r]}; };
}

void expectAllPassed(const RankProcesses& ranks) {
  for (size_t r = 0; r < ranks.pids.size(); ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0) << "rank " << r << " failed\n"
                                                                                    << logsOf(ranks);
  }
}

void expectEveryLogHas(const RankProcesses& ranks, const std::string& text) {
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    EXPECT_NE(readLog(ranks.logs[r]).find(text), std::string::npos) << "rank " << r << " does not say '" << text
                                                                     << "'\n" << logsOf(ranks);
  }
}

// The counts of the matrix: TUCCL_TEST_MATRIX_COUNTS when set (CI's sanitizer build leaves out
// the large ones, which ran in the first build).
std::string matrixCounts() {
  const char* counts = std::getenv("TUCCL_TEST_MATRIX_COUNTS");
  return counts != nullptr && *counts != '\0' ? counts : "0,1,1237,300007";
}

TEST(MultiNode, EveryCollectiveOnTwoHostsOfTwoRanks) {
  RankProcesses ranks = startRanks(4, {kRank, "matrix", matrixCounts(), "float32,int32", "sum,max", "float32"},
                                   commonEnv(), scratchDir("two_by_two"), hostsOf("aabb"));
  ASSERT_TRUE(waitRanks(ranks, 600)) << "the ranks did not finish\n" << logsOf(ranks);
  expectAllPassed(ranks);
  expectEveryLogHas(ranks, "communicator of 4 ranks (2 hosts)");
  expectEveryLogHas(ranks, "inter-node transfers: net plugin TuCCL (built into libtuccl, sockets), device 0 lo");
  expectEveryLogHas(ranks, "AllReduce: no tuning table -> built-in hm");
  expectEveryLogHas(ranks, "AllGather: no tuning table -> built-in hm");
  // An orderly shutdown is silent: no rank takes a peer's closing connection for a failure.
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    EXPECT_EQ(readLog(ranks.logs[r]).find(" WARN "), std::string::npos) << "rank " << r << "\n" << logsOf(ranks);
  }
}

/// The numbers of rank r's "inter-node proxy: S slices in F frames (C carrying credits alone); T of
/// R rounds run by waiting TBs" line: {S, F, C, T, R}, or none.
std::vector<uint64_t> proxySummary(const RankProcesses& ranks, size_t r) {
  const std::string log = readLog(ranks.logs[r]);
  const size_t at = log.find("inter-node proxy: ");
  if (at == std::string::npos) return {};
  uint64_t s = 0, f = 0, c = 0, t = 0, n = 0;
  if (std::sscanf(log.c_str() + at,
                  "inter-node proxy: %lu slices in %lu frames (%lu carrying credits alone); %lu of %lu rounds", &s, &f,
                  &c, &t, &n) != 5) {
    return {};
  }
  return {s, f, c, t, n};
}

// Small calls between hosts: the CPU device's TBs that wait for a slice from the other host run
// the proxy's rounds themselves (no switch to its thread), and the credits for the slots ride on
// the slices going back (AllReduce sends both ways), none on a frame of its own unless the
// sender's ring is full. 2 hosts x 1 rank, 300 calls of one element, every result checked.
TEST(MultiNode, SmallCallsAreProgressedByTheWaitingTbsWithCreditsOnTheSlices) {
  RankProcesses ranks =
      startRanks(2, {kRank, "repeat", "300", "1"}, commonEnv(), scratchDir("small_calls"), hostsOf("ab"));
  ASSERT_TRUE(waitRanks(ranks, 300)) << logsOf(ranks);
  expectAllPassed(ranks);
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    const std::vector<uint64_t> counts = proxySummary(ranks, r);
    ASSERT_EQ(counts.size(), 5u) << "rank " << r << " logs no proxy summary\n" << logsOf(ranks);
    const uint64_t slices = counts[0], frames = counts[1], creditFrames = counts[2], tbRounds = counts[3];
    EXPECT_GE(slices, 300u) << logsOf(ranks);  // a slice per call at least
    EXPECT_LE(frames, slices + creditFrames) << logsOf(ranks);
    EXPECT_LE(creditFrames * 2, slices) << logsOf(ranks);
    EXPECT_GT(tbRounds, 0u) << logsOf(ranks);
  }
}

// LL and LL128 across hosts: the plans keep the protocol (TUCCL_PROTO), the sending proxy cuts
// each slice into pieces of whole lines and the receiving one stores them as the kernels read
// them; every collective checked on every rank, small counts (the protocols' sizes) and one
// that spans several pieces of a slice.
TEST(MultiNode, LowLatencyProtocolsCrossHostsAsThemselves) {
  for (const std::string protocol : {"LL", "LL128"}) {
    std::vector<std::string> env = commonEnv();
    env.push_back("TUCCL_PROTO=" + protocol);
    RankProcesses ranks = startRanks(4, {kRank, "matrix", "1,1237,70001", "float32", "sum", "float32"}, env,
                                     scratchDir("protocol_" + protocol), hostsOf("aabb"));
    ASSERT_TRUE(waitRanks(ranks, 600)) << "the ranks did not finish\n" << logsOf(ranks);
    expectAllPassed(ranks);
    expectEveryLogHas(ranks, "communicator of 4 ranks (2 hosts)");
    expectEveryLogHas(ranks, "; TUCCL_PROTO -> built-in hm");
    expectEveryLogHas(ranks, ", " + protocol + "\n");
    for (size_t r = 0; r < ranks.logs.size(); ++r) {
      EXPECT_EQ(readLog(ranks.logs[r]).find("Simple across hosts"), std::string::npos) << logsOf(ranks);
    }
  }
}

TEST(MultiNode, HostsWhoseRanksInterleaveAndHostsOfUnequalSize) {
  // Ranks 0 and 2 on one host, 1 and 3 on the other: hm still runs (correct for any placement).
  RankProcesses interleaved = startRanks(4, {kRank, "matrix", "1,4099,70001", "float32", "sum", "int32"}, commonEnv(),
                                         scratchDir("interleaved"), hostsOf("abab"));
  // Three hosts for four ranks: no even split, so the single-node defaults (ring, direct, ...) run.
  RankProcesses uneven = startRanks(4, {kRank, "matrix", "1,4099,70001", "float32", "sum", "float32"}, commonEnv(),
                                    scratchDir("uneven"), hostsOf("abbc"));
  ASSERT_TRUE(waitRanks(interleaved, 600)) << logsOf(interleaved);
  ASSERT_TRUE(waitRanks(uneven, 600)) << logsOf(uneven);
  expectAllPassed(interleaved);
  expectAllPassed(uneven);
  expectEveryLogHas(uneven, "communicator of 4 ranks (3 hosts)");
  expectEveryLogHas(uneven, "AllReduce: no tuning table -> built-in ring");
}

TEST(MultiNode, ThroughTheNetPluginNcclLoadsByPath) {
  // The plugin NCCL would load, dlopened by libtuccl: its newest table (v12) behind the adapter.
  std::vector<std::string> env = commonEnv();
  env.push_back(std::string("NCCL_NET_PLUGIN=") + TUCCL_NET_PLUGIN_PATH);
  RankProcesses ranks = startRanks(4, {kRank, "matrix", "1237,300007", "float32", "sum", "float32"}, env,
                                   scratchDir("plugin_by_path"), hostsOf("aabb"));
  ASSERT_TRUE(waitRanks(ranks, 600)) << logsOf(ranks);
  expectAllPassed(ranks);
  expectEveryLogHas(ranks, std::string("inter-node transfers: net plugin TuCCL (") + TUCCL_NET_PLUGIN_PATH +
                               ", ncclNetPlugin_v12)");
}

TEST(MultiNode, APluginThatDoesNotLoadFailsEveryRanksInit) {
  std::vector<std::string> env = commonEnv("20");
  env.push_back("TUCCL_NET_PLUGIN=no-such-plugin");
  RankProcesses ranks = startRanks(4, {kRank, "matrix", "1", "float32", "sum", "float32"}, env,
                                   scratchDir("missing_plugin"), hostsOf("aabb"));
  ASSERT_TRUE(waitRanks(ranks, 60)) << logsOf(ranks);
  for (size_t r = 0; r < ranks.pids.size(); ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 3) << logsOf(ranks);
  }
  // The ranks that tried to load it name the variable and the file; the others name a peer.
  EXPECT_NE(readLog(ranks.logs[0]).find("TUCCL_NET_PLUGIN=no-such-plugin: cannot load the net plugin "
                                        "(libnccl-net-no-such-plugin.so"),
            std::string::npos)
      << logsOf(ranks);
}

TEST(MultiNode, KillingARankOnTheOtherHostFailsTheOthers) {
  const int n = 4;
  const double timeout = 10;
  RankProcesses ranks = startRanks(n, {kRank, "loop"}, commonEnv("10"), scratchDir("kill"), hostsOf("aabb"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (int r = 0; r < n; ++r) {
    while (readLog(ranks.logs[r]).find("ready") == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << logsOf(ranks);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_EQ(kill(ranks.pids[2], SIGKILL), 0);
  ASSERT_TRUE(waitRanks(ranks, 2 * timeout)) << "a rank did not return within twice the timeout\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    if (r == 2) continue;
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0) << logsOf(ranks);
    EXPECT_NE(readLog(ranks.logs[r]).find("error"), std::string::npos) << logsOf(ranks);
  }
}

#if defined(TUCCL_FAKE_NVRTC_LIBRARY)
/// commonEnv for the CUDA device of the fake driver, whose kernels are the fake NVRTC's host
/// builds, with its own plan and kernel caches under `dir`.
std::vector<std::string> fakeCudaEnv(const std::string& dir, const std::string& timeout) {
  std::vector<std::string> env = commonEnv(timeout);
  for (std::string& variable : env) {
    if (variable == "TUCCL_DEVICE=cpu") variable = "TUCCL_DEVICE=cuda";
    if (variable.rfind("TUCCL_CACHE_DIR=", 0) == 0) variable = "TUCCL_CACHE_DIR=" + dir + "/cache";
  }
  env.push_back("TUCCL_CUDA_DRIVER=" + std::string(TUCCL_FAKE_CUDA_LIBRARY));
  env.push_back("LD_PRELOAD=" + std::string(TUCCL_FAKE_NVRTC_LIBRARY));
  env.push_back("TUCCL_KERNELGEN_CACHE=" + dir + "/kernels");
  return env;
}

// The CUDA device across hosts (the fake driver, with the fake NVRTC preloaded so its kernels
// run): tuccl-bench in a loop on 2 hosts x 2 ranks; killing a rank on the other host makes every
// other rank's call fail (the proxy's lost connection or the peer-loss watchdog), each exits with
// tuccl-bench's error status, within twice the timeout, and no process is left.
TEST(MultiNode, KillingARankOnTheOtherHostFailsTheCudaDevicesOfTheOthers) {
  const int n = 4;
  const double timeout = 10;
  const std::string dir = scratchDir("kill_cuda");
  const std::vector<std::string> env = fakeCudaEnv(dir, "10");
  RankProcesses ranks = startRanks(n, {TUCCL_BENCH_PROGRAM, "allreduce", "-b", "64K", "-e", "64K", "-n", "1000000", "-w",
                                      "1", "-c", "0"},
                                   env, dir, hostsOf("aabb"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  // Rank 0 prints the column header once every rank is in; then the timed loop runs.
  while (readLog(ranks.logs[0]).find("(elements)") == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) {
      waitRanks(ranks, 0);  // stops them
      FAIL() << "the loop did not start\n" << logsOf(ranks);
    }
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (waitpid(ranks.pids[r], &status, WNOHANG) == ranks.pids[r]) {
        ranks.status[r] = status;
        waitRanks(ranks, 0);
        FAIL() << "rank " << r << " ended before the loop\n" << logsOf(ranks);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(kill(ranks.pids[2], SIGKILL), 0);
  ASSERT_TRUE(waitRanks(ranks, 2 * timeout)) << "a rank did not return within twice the timeout\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    if (r == 2) continue;
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 1) << "rank " << r << "\n"
                                                                                 << logsOf(ranks);
    EXPECT_NE(readLog(ranks.logs[r]).find("error"), std::string::npos) << logsOf(ranks);
  }
}

// On the CUDA device (the fake driver, two hosts of two ranks), the default plans have 16 channels
// and each call runs as many as its size fills, which every rank says at INFO (once per plan and
// count): one for the small AllReduce calls, 8 for 256 KiB; every element is checked.
TEST(MultiNode, CudaDeviceCallsRunTheChannelsTheirSizeFills) {
  const std::string dir = scratchDir("cuda_channels");
  RankProcesses ranks = startRanks(4, {TUCCL_BENCH_PROGRAM, "allreduce", "-b", "8", "-e", "256K", "-f", "32768", "-n",
                                      "2", "-w", "0", "-c", "1"},
                                   fakeCudaEnv(dir, "60"), dir, hostsOf("aabb"));
  ASSERT_TRUE(waitRanks(ranks, 300)) << logsOf(ranks);
  expectAllPassed(ranks);
  EXPECT_NE(readLog(ranks.logs[0]).find("# Out of bounds values : 0 OK"), std::string::npos) << logsOf(ranks);
  expectEveryLogHas(ranks, "bytes runs 1 of its plan's 16 channels");  // the first small AllReduce
  expectEveryLogHas(ranks, "AllReduce: a call of 262144 bytes runs 8 of its plan's 16 channels");
}
#endif

}  // namespace
}  // namespace tuccl::testing
