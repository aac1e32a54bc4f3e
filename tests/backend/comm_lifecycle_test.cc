// How libtuccl makes and ends communicators, NCCL's way (tests/backend/comm_lifecycle_rank_main.cc
// runs each case as rank processes on the CPU device, bounded in time, every element checked):
// several ranks initialised by one thread in a group, non-blocking inits (polled, used at once,
// aborted while in progress), split (keys, NOCOLOR, non-blocking), shrink (the excluded ranks
// taking part, or gone), finalize, the scalable init, and destroy, which waits for no peer: three
// communicators destroyed in different orders on different ranks end promptly, on one host, across
// (emulated) hosts with the inter-node proxy, and on the CUDA device (over the fake driver), with
// no warning.
#include <gtest/gtest.h>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

const std::string kRank = TUCCL_COMM_LIFECYCLE_RANK;
/// Every case ends long before this; a stalled destroy or init would not.
constexpr double kBoundSeconds = 120;

std::string scratchDir(const std::string& name) {
  return freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/comm_lifecycle/" + name);
}

/// The CPU device, unless `device` says otherwise.
std::vector<std::string> commonEnv(const std::vector<std::string>& device = {"TUCCL_DEVICE=cpu"}) {
  std::vector<std::string> env{"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
                               "TUCCL_TIMEOUT_S=60", "TUCCL_SOCKET_IFNAME=lo", "TUCCL_DEBUG=INFO",
                               "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  env.insert(env.end(), device.begin(), device.end());
  return env;
}

/// Runs `mode` on `n` ranks (hosts[r]: rank r's emulated host, when given) and expects every rank
/// to pass within the bound.
RankProcesses run(const std::string& mode, int n, const std::string& hosts = "",
                  const std::vector<std::string>& env = commonEnv()) {
  std::function<std::vector<std::string>(int)> perRank;
  if (!hosts.empty()) {
    perRank = [hosts](int r) { return std::vector<std::string>{std::string("TUCCL_HOSTID=host-") + hosts[r]}; };
  }
  RankProcesses ranks = startRanks(n, {kRank, mode}, env, scratchDir(mode + hosts), perRank);
  const bool ended = waitRanks(ranks, kBoundSeconds);
  EXPECT_TRUE(ended) << mode << ": a rank did not end within " << kBoundSeconds << " s\n" << logsOf(ranks);
  for (size_t r = 0; r < ranks.pids.size(); ++r) {
    EXPECT_TRUE(ranks.status[r] != -1 && WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << mode << ": rank " << r << " failed\n"
        << logsOf(ranks);
  }
  return ranks;
}

void expectNoWarning(const RankProcesses& ranks) {
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    EXPECT_EQ(readLog(ranks.logs[r]).find(" WARN "), std::string::npos) << "rank " << r << "\n" << logsOf(ranks);
  }
}

TEST(CommLifecycle, OneThreadInitialisesTwoRanksInAGroup) {
  RankProcesses ranks = run("group-init", 1);
  const std::string log = readLog(ranks.logs[0]);
  // The name of the communicator is in its init line.
  EXPECT_NE(log.find("communicator \"lifecycle-group\" of 2 ranks"), std::string::npos) << log;
  EXPECT_NE(log.find("communicator \"lifecycle-group-nb\" of 2 ranks"), std::string::npos) << log;
  expectNoWarning(ranks);
}

TEST(CommLifecycle, NonBlockingInitPolledOrUsedAtOnce) { expectNoWarning(run("nonblocking", 2)); }

TEST(CommLifecycle, AbortStopsANonBlockingInitInProgress) { run("abort-init", 1); }

TEST(CommLifecycle, SplitByColourAndKeyWithNoColourAndNonBlocking) { run("split", 4); }

TEST(CommLifecycle, DestroysInDifferentOrdersOnDifferentRanksWaitForNoPeer) {
  RankProcesses ranks = run("destroy-order", 3);
  expectNoWarning(ranks);
}

TEST(CommLifecycle, DestroysInDifferentOrdersAcrossHostsKeepTheProxyUntilThePeersAreDone) {
  RankProcesses ranks = run("destroy-order", 3, "aab");
  expectNoWarning(ranks);
  // The proxy's ranks left through the reaper, which freed once the peers were done.
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    EXPECT_NE(readLog(ranks.logs[r]).find("freed once"), std::string::npos) << logsOf(ranks);
  }
}

// On the CUDA device (the fake driver: device memory is host memory shared between processes
// through IPC handles) a peer's kernel may still write a credit into this rank's staging after
// this rank's part of the call ended: destroy keeps the staging with the reaper until the other
// ranks of the host are done. The fake runs no NVRTC kernel, so no collective runs here.
TEST(CommLifecycle, DestroysOnTheCudaDeviceKeepTheStagingUntilThePeersAreDone) {
  RankProcesses ranks = run("destroy-order-no-calls", 3, "",
                            commonEnv({"TUCCL_DEVICE=cuda", "TUCCL_CUDA_DRIVER=" + std::string(TUCCL_FAKE_CUDA_LIBRARY),
                                       "TUCCL_STAGING_BYTES=8M"}));
  expectNoWarning(ranks);
  for (size_t r = 0; r < ranks.logs.size(); ++r) {
    const std::string log = readLog(ranks.logs[r]);
    EXPECT_NE(log.find("on GPU 0"), std::string::npos) << logsOf(ranks);
    EXPECT_NE(log.find("its staging freed once its 2 peer(s) concerned were done"), std::string::npos) << logsOf(ranks);
  }
}

TEST(CommLifecycle, ShrinkWithTheExcludedRankTakingPartOrGone) { run("shrink", 4); }

TEST(CommLifecycle, FinalizeThenOnlyDestroy) { run("finalize", 2); }

TEST(CommLifecycle, ScalableInitFromSeveralIds) { run("scalable", 2); }

}  // namespace
}  // namespace tuccl::testing
