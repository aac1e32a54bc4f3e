// Point-to-point in libtuccl across processes on the CPU device (peer_rank_main.cc): rings of
// int8, float32 and float64 data over one and many slices, on the NULL stream and a CPU stream;
// every rank sending to and receiving from every rank in one group in an order of its own;
// all-to-all-v with zero counts; Gather and Scatter at every root; a group mixing a collective
// with sends and receives; pairs between two hosts (the inter-node proxy); and a send and a
// receive of different sizes, which fail instead of delivering. Every received byte is checked on every rank.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "rank_processes.h"

namespace tuccl::testing {
namespace {

const std::string kRank = TUCCL_PEER_RANK;

std::string scratchDir(const std::string& name) {
  return freshDirectory(std::string(TUCCL_BINARY_DIR) + "/tests/runs/peer/" + name);
}

// Runs `n` ranks of peer_rank with `args`; every rank must exit 0.
void runRanks(const std::string& name, int n, const std::vector<std::string>& args,
              const std::vector<std::string>& env = {},
              const std::function<std::vector<std::string>(int)>& perRank = nullptr) {
  const std::string dir = scratchDir(name);
  std::vector<std::string> argv = {kRank};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> common = {"TUCCL_CACHE_DIR=" + std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache",
                                     "TUCCL_TIMEOUT_S=60", "TUCCL_DEVICE=cpu",
                                     "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"};
  common.insert(common.end(), env.begin(), env.end());
  RankProcesses ranks = startRanks(n, argv, common, dir, perRank);
  ASSERT_TRUE(waitRanks(ranks, 240)) << "the ranks did not finish\n" << logsOf(ranks);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(WIFEXITED(ranks.status[r]) && WEXITSTATUS(ranks.status[r]) == 0)
        << "rank " << r << " failed\n" << logsOf(ranks);
  }
}

TEST(PeerToPeer, ARingOfOneSliceOfFloats) { runRanks("ring-small", 4, {"ring", "4096", "float32", "3"}); }

// 1 MiB + 3 bytes of int8 over slots of 64 KiB: many slices, the last one short, more slices than
// the ring holds.
TEST(PeerToPeer, ARingOfManySlicesOfInt8WithAShortLastSlice) {
  runRanks("ring-int8", 3, {"ring", "1048579", "int8", "2"}, {"TUCCL_CHUNK_SIZE=64K"});
}

TEST(PeerToPeer, ARingOfDoublesOnACpuStream) {
  runRanks("ring-stream", 4, {"ring", "300000", "float64", "4", "stream"}, {"TUCCL_CHUNK_SIZE=32K"});
}

TEST(PeerToPeer, SeveralTransfersBetweenOnePairInOneGroupMatchInIssueOrder) {
  runRanks("ring-grouped", 3, {"ring-grouped", "150000", "4"}, {"TUCCL_CHUNK_SIZE=16K"});
  runRanks("ring-grouped-two", 2, {"ring-grouped", "3", "5"});
}

TEST(PeerToPeer, TwoRanksExchangeInBothDirections) { runRanks("ring-two", 2, {"ring", "200000", "float32", "2"}); }

TEST(PeerToPeer, EveryPairInOneGroupInAnyOrderOfCalls) {
  runRanks("shuffled", 4, {"shuffled", "100000"}, {"TUCCL_CHUNK_SIZE=16K", "TUCCL_STAGING_SLOTS=2"});
}

TEST(PeerToPeer, AllToAllvWithZeroCounts) { runRanks("alltoallv", 4, {"alltoallv", "50000"}); }

TEST(PeerToPeer, GatherAndScatterAtEveryRoot) { runRanks("gather-scatter", 3, {"gather-scatter", "70001"}); }

TEST(PeerToPeer, AGroupMixesACollectiveWithSendsAndReceives) { runRanks("mixed", 4, {"mixed", "65536"}); }

// Ranks with distinct TUCCL_HOSTIDs are separate hosts: the pairs between them go through the
// inter-node proxy, which carries the point-to-point rings like a plan's.
std::function<std::vector<std::string>(int)> hostsOf(const std::string& hosts) {
  return [hosts](int r) { return std::vector<std::string>{std::string("TUCCL_HOSTID=host-") + hosts[r]}; };
}

TEST(PeerToPeer, EveryPairAcrossTwoHosts) {
  runRanks("hosts-shuffled", 4, {"shuffled", "70000"},
           {"TUCCL_SOCKET_IFNAME=lo", "TUCCL_CHUNK_SIZE=16K", "TUCCL_DEBUG=INFO"}, hostsOf("abab"));
  const std::string log = readLog(std::string(TUCCL_BINARY_DIR) + "/tests/runs/peer/hosts-shuffled/rank0.log");
  EXPECT_NE(log.find("communicator of 4 ranks (2 hosts)"), std::string::npos) << log;
  EXPECT_EQ(log.find(" WARN "), std::string::npos) << log;
}

TEST(PeerToPeer, AllToAllvAndARingAcrossTwoHosts) {
  runRanks("hosts-alltoallv", 4, {"alltoallv", "40000"}, {"TUCCL_SOCKET_IFNAME=lo"}, hostsOf("aabb"));
  runRanks("hosts-ring", 3, {"ring", "1000003", "int8", "3"}, {"TUCCL_SOCKET_IFNAME=lo"}, hostsOf("aab"));
}

TEST(PeerToPeer, ASendAndAReceiveOfDifferentSizesFailInsteadOfDelivering) {
  const std::string dir = scratchDir("mismatch-done");
  runRanks("mismatch", 2, {"mismatch", dir + "/done"});
}

}  // namespace
}  // namespace tuccl::testing
