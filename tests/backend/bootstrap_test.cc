// The bootstrap (backend/bootstrap.h) with ranks as threads of this process: collectives and
// point-to-point on random payloads, refused strangers, timeouts, abort, lost peers, the
// TUCCL_COMM_ID mode, and readLaunchEnvironment.
#include "backend/bootstrap.h"

#include <netinet/in.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/socket.h"

namespace {

using namespace tuccl;
using namespace tuccl::backend;
using transport::Socket;
using transport::SocketAddress;

BootstrapOptions withTimeout(double seconds) {
  BootstrapOptions options;
  options.timeoutSeconds = seconds;
  return options;
}

/// Rank `rank`'s bytes of `size` for `round`: pseudo-random, and every rank can recompute them.
std::string payload(int rank, int round, size_t size) {
  std::mt19937_64 random(static_cast<uint64_t>(rank) * 1000003 + static_cast<uint64_t>(round));
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

/// Connects `n` ranks (threads) at `id`; each returns its bootstrap or its error.
std::vector<Expected<std::unique_ptr<Bootstrap>>> connectRanks(int n, const UniqueIdBytes& id,
                                                                const BootstrapOptions& options,
                                                                const std::vector<int>& ranks = {}) {
  std::vector<int> who = ranks;
  if (who.empty())
    for (int rank = 0; rank < n; ++rank) who.push_back(rank);
  std::vector<std::optional<Expected<std::unique_ptr<Bootstrap>>>> results(who.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < who.size(); ++i)
    threads.emplace_back([&, i] { results[i].emplace(Bootstrap::connect(id, who[i], n, options)); });
  for (std::thread& thread : threads) thread.join();
  std::vector<Expected<std::unique_ptr<Bootstrap>>> out;
  for (auto& result : results) out.push_back(std::move(*result));
  return out;
}

/// Runs `body(bootstrap)` on every rank at once, one thread each.
void onEveryRank(std::vector<std::unique_ptr<Bootstrap>>& ranks, const std::function<void(Bootstrap&)>& body) {
  std::vector<std::thread> threads;
  for (auto& bootstrap : ranks) threads.emplace_back([&] { body(*bootstrap); });
  for (std::thread& thread : threads) thread.join();
}

std::vector<std::unique_ptr<Bootstrap>> connectedRanks(int n, const UniqueIdBytes& id, double timeout = 20) {
  std::vector<std::unique_ptr<Bootstrap>> ranks;
  for (auto& result : connectRanks(n, id, withTimeout(timeout))) {
    EXPECT_TRUE(result.ok()) << result.status().message();
    if (result) ranks.push_back(std::move(result).value());
  }
  return ranks;
}

UniqueIdBytes freshId(double timeout = 20) {
  Expected<UniqueIdBytes> id = makeUniqueId(withTimeout(timeout));
  EXPECT_TRUE(id.ok()) << id.status().message();
  return id ? *id : UniqueIdBytes{};
}

/// The root address in an id, as describeUniqueId prints it.
SocketAddress rootOf(const UniqueIdBytes& id) {
  const std::string text = describeUniqueId(id);
  Expected<SocketAddress> address = transport::resolveHostPort(text.substr(0, text.find(" magic")));
  EXPECT_TRUE(address.ok()) << text;
  return address ? *address : SocketAddress();
}

/// A port on 127.0.0.1 that was free a moment ago.
uint16_t freePort() {
  Expected<Socket> probe = transport::listenOn(SocketAddress::loopback(AF_INET, 0));
  return probe ? probe->localAddress()->port() : 0;
}

/// A stranger: connects to `address` and sends `bytes` (a wrong magic).
Socket stranger(const SocketAddress& address, const std::string& bytes) {
  Expected<Socket> socket = transport::connectTo(address, {transport::deadlineAfter(10), -1});
  EXPECT_TRUE(socket.ok()) << socket.status().message();
  if (!socket) return Socket();
  EXPECT_TRUE(transport::sendAll(*socket, bytes.data(), bytes.size(), {transport::deadlineAfter(10), -1}).ok());
  return std::move(socket).value();
}

/// Whether the other side closed `socket` within `seconds` (what a refused stranger sees).
bool closedByPeer(const Socket& socket, double seconds) {
  char byte = 0;
  Status status = transport::recvAll(socket, &byte, 1, {transport::deadlineAfter(seconds), -1});
  return status.code() == ErrorCode::RemoteError;
}

const std::vector<size_t> kSizes = {0, 1, 13, 4096, 65537, 1 << 20};

class BootstrapRanks : public testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, AllGatherEveryRankSeesEveryBlock) {
  const int n = GetParam();
  auto ranks = connectedRanks(n, freshId());
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    for (size_t round = 0; round < kSizes.size(); ++round) {
      Expected<std::vector<std::string>> got =
          bootstrap.allGather(payload(bootstrap.rank(), static_cast<int>(round), kSizes[round]));
      ASSERT_TRUE(got.ok()) << got.status().message();
      ASSERT_EQ(got->size(), static_cast<size_t>(n));
      for (int peer = 0; peer < n; ++peer)
        EXPECT_EQ((*got)[static_cast<size_t>(peer)], payload(peer, static_cast<int>(round), kSizes[round]))
            << "rank " << bootstrap.rank() << " block " << peer << " size " << kSizes[round];
    }
  });
}

TEST_P(BootstrapRanks, BroadcastFromEveryRoot) {
  const int n = GetParam();
  auto ranks = connectedRanks(n, freshId());
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    for (size_t round = 0; round < kSizes.size(); ++round) {
      for (int root = 0; root < n; ++root) {
        const std::string expected = payload(root, static_cast<int>(round), kSizes[round]);
        const std::string mine = bootstrap.rank() == root ? expected : payload(bootstrap.rank(), 99, 5);
        Expected<std::string> got = bootstrap.broadcast(mine, root);
        ASSERT_TRUE(got.ok()) << got.status().message();
        EXPECT_EQ(*got, expected) << "rank " << bootstrap.rank() << " root " << root << " size " << kSizes[round];
      }
    }
    EXPECT_TRUE(bootstrap.barrier().ok());
  });
}

TEST_P(BootstrapRanks, SendRecvBetweenEveryPairInOrderPerTag) {
  const int n = GetParam();
  auto ranks = connectedRanks(n, freshId());
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    const int me = bootstrap.rank();
    // Small messages to every rank (itself too), two per tag, then receive them all: they fit in
    // the socket buffers, so sending everything first cannot block.
    for (int peer = 0; peer < n; ++peer)
      for (uint32_t tag : {1u, 2u})
        for (int k = 0; k < 2; ++k)
          ASSERT_TRUE(bootstrap.send(peer, tag, payload(me * 64 + peer, static_cast<int>(tag * 2) + k, 100 * k)).ok());
    for (int peer = n - 1; peer >= 0; --peer)
      for (uint32_t tag : {2u, 1u})
        for (int k = 0; k < 2; ++k) {
          Expected<std::string> got = bootstrap.recv(peer, tag);
          ASSERT_TRUE(got.ok()) << got.status().message();
          EXPECT_EQ(*got, payload(peer * 64 + me, static_cast<int>(tag * 2) + k, 100 * k))
              << "rank " << me << " from " << peer << " tag " << tag << " #" << k;
        }
    EXPECT_TRUE(bootstrap.barrier().ok());
    // 1 MB between rank 0 and each other rank, one pair at a time.
    for (int peer = 1; peer < n; ++peer) {
      if (me != 0 && me != peer) continue;
      const int other = me == 0 ? peer : 0;
      const std::string mine = payload(me, 1000 + peer, 1 << 20);
      if (me == 0) {
        ASSERT_TRUE(bootstrap.send(other, 7, mine).ok());
      }
      Expected<std::string> got = bootstrap.recv(other, 7);
      if (me != 0) {
        ASSERT_TRUE(bootstrap.send(other, 7, mine).ok());
      }
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(*got, payload(other, 1000 + peer, 1 << 20));
    }
  });
}

TEST_P(BootstrapRanks, RanksOfOneHostShareTheHostHash) {
  const int n = GetParam();
  auto ranks = connectedRanks(n, freshId());
  ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
  for (auto& bootstrap : ranks) {
    EXPECT_NE(bootstrap->hostHash(), 0u);
    EXPECT_EQ(bootstrap->hostHash(), ranks[0]->hostHash());
    EXPECT_EQ(bootstrap->nRanks(), n);
    EXPECT_EQ(bootstrap->address().empty(), n == 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, testing::Values(1, 2, 3, 4, 8));

TEST(Bootstrap, RootRefusesAWrongMagicAndServesTheRightRanks) {
  const UniqueIdBytes id = freshId();
  const SocketAddress root = rootOf(id);
  Socket wrong = stranger(root, std::string(64, 'x'));
  Socket silent = stranger(root, "");  // connects and says nothing: must not hold up the others
  auto ranks = connectedRanks(3, id);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_TRUE(closedByPeer(wrong, 10));
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    Expected<std::vector<std::string>> got = bootstrap.allGather(payload(bootstrap.rank(), 0, 33));
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (int peer = 0; peer < 3; ++peer) EXPECT_EQ((*got)[static_cast<size_t>(peer)], payload(peer, 0, 33));
  });
}

TEST(Bootstrap, RankListenerRefusesAWrongMagicWhileWaiting) {
  auto ranks = connectedRanks(2, freshId());
  ASSERT_EQ(ranks.size(), 2u);
  Expected<SocketAddress> listener = transport::resolveHostPort(ranks[1]->address());
  ASSERT_TRUE(listener.ok()) << ranks[1]->address();
  std::atomic<bool> strangerRefused{false};
  std::thread receiver([&] {
    Expected<std::string> got = ranks[1]->recv(0, 5);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, payload(0, 5, 1000));
  });
  // Rank 1 is inside recv: it reads the stranger's bytes, closes it, and keeps waiting.
  Socket wrong = stranger(*listener, std::string(32, '\x5a'));
  strangerRefused = closedByPeer(wrong, 10);
  EXPECT_TRUE(ranks[0]->send(1, 5, payload(0, 5, 1000)).ok());
  receiver.join();
  EXPECT_TRUE(strangerRefused);
}

TEST(Bootstrap, AMissingRankTimesOutNamingIt) {
  const UniqueIdBytes id = freshId(1.5);
  auto results = connectRanks(4, id, withTimeout(1.5), {0, 1, 2});
  for (auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), ErrorCode::Timeout) << result.status().message();
    EXPECT_NE(result.status().message().find("rank 3 of 4 never joined"), std::string::npos)
        << result.status().message();
  }
}

// While a rank is missing the root says, on stderr, whom it waits for and when it gives up.
TEST(Bootstrap, TheRootSaysWhomItWaitsFor) {
  const UniqueIdBytes id = freshId(3);
  ::testing::internal::CaptureStderr();
  auto results = connectRanks(4, id, withTimeout(3), {0, 1, 2});
  const std::string said = ::testing::internal::GetCapturedStderr();
  for (auto& result : results) EXPECT_FALSE(result.ok());
  EXPECT_NE(said.find("waits for rank 3 of 4 (3 joined; giving up in "), std::string::npos) << said;
}

TEST(Bootstrap, AMissingRootTimesOut) {
  // TUCCL_COMM_ID mode without rank 0: nobody runs the root.
  Expected<UniqueIdBytes> id = uniqueIdFromAddress("127.0.0.1:" + std::to_string(freePort()));
  ASSERT_TRUE(id.ok());
  auto results = connectRanks(3, *id, withTimeout(1), {1, 2});
  for (auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), ErrorCode::Timeout) << result.status().message();
  }
}

TEST(Bootstrap, RanksDisagreeingOnTheSizeGetARemoteError) {
  const UniqueIdBytes id = freshId(10);
  std::optional<Expected<std::unique_ptr<Bootstrap>>> a;
  std::optional<Expected<std::unique_ptr<Bootstrap>>> b;
  std::thread first([&] { a.emplace(Bootstrap::connect(id, 0, 2, withTimeout(10))); });
  std::thread second([&] { b.emplace(Bootstrap::connect(id, 1, 3, withTimeout(10))); });
  first.join();
  second.join();
  EXPECT_EQ(a->status().code(), ErrorCode::RemoteError) << a->status().message();
  EXPECT_EQ(b->status().code(), ErrorCode::RemoteError) << b->status().message();
}

TEST(Bootstrap, DifferentOperationsOnTwoRanksAreARemoteError) {
  auto ranks = connectedRanks(2, freshId());
  ASSERT_EQ(ranks.size(), 2u);
  std::thread root([&] { (void)ranks[0]->broadcast("hello", 0); });
  Expected<std::vector<std::string>> got = ranks[1]->allGather("x");
  root.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::RemoteError) << got.status().message();
  // The bootstrap stays failed.
  EXPECT_EQ(ranks[1]->barrier().code(), ErrorCode::RemoteError);
}

TEST(Bootstrap, AbortUnblocksAWaitingAllGather) {
  auto ranks = connectedRanks(2, freshId(), 60);
  ASSERT_EQ(ranks.size(), 2u);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ranks[0]->abort();
  });
  Expected<std::vector<std::string>> got = ranks[0]->allGather("only rank 0 calls");
  aborter.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::Aborted) << got.status().message();
  EXPECT_EQ(ranks[0]->barrier().code(), ErrorCode::Aborted);
  EXPECT_EQ(ranks[0]->recv(1, 0).status().code(), ErrorCode::Aborted);
}

TEST(Bootstrap, PeerLostOnceANeighbourIsGone) {
  auto ranks = connectedRanks(3, freshId());
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_FALSE(ranks[0]->peerLost());
  EXPECT_FALSE(ranks[2]->peerLost());
  ranks[1].reset();
  // Rank 0's successor and rank 2's predecessor was rank 1; the close reaches them at once on
  // loopback, polled here for a bounded while.
  bool lost0 = false;
  bool lost2 = false;
  for (int i = 0; i < 500 && !(lost0 && lost2); ++i) {
    lost0 = ranks[0]->peerLost();
    lost2 = ranks[2]->peerLost();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(lost0);
  EXPECT_TRUE(lost2);
}

TEST(Bootstrap, CommIdModeRankZeroRunsTheRoot) {
  const std::string address = "127.0.0.1:" + std::to_string(freePort());
  std::vector<std::unique_ptr<Bootstrap>> ranks;
  std::vector<std::optional<Expected<std::unique_ptr<Bootstrap>>>> results(4);
  std::vector<std::thread> threads;
  // Ranks 3..1 start first: they retry until rank 0's root listens.
  for (int rank = 3; rank >= 0; --rank)
    threads.emplace_back([&, rank] {
      Expected<UniqueIdBytes> id = uniqueIdFromAddress(address);
      ASSERT_TRUE(id.ok());
      results[static_cast<size_t>(rank)].emplace(Bootstrap::connect(*id, rank, 4, withTimeout(20)));
    });
  for (std::thread& thread : threads) thread.join();
  for (auto& result : results) {
    ASSERT_TRUE(result && result->ok()) << (result ? result->status().message() : "no result");
    ranks.push_back(std::move(*result).value());
  }
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    Expected<std::vector<std::string>> got = bootstrap.allGather(payload(bootstrap.rank(), 3, 777));
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (int peer = 0; peer < 4; ++peer) EXPECT_EQ((*got)[static_cast<size_t>(peer)], payload(peer, 3, 777));
  });
}

TEST(Bootstrap, CommIdModeOverIpv6) {
  if (!transport::listenOn(SocketAddress::loopback(AF_INET6, 0)).ok()) GTEST_SKIP() << "no IPv6 loopback here";
  Expected<Socket> probe = transport::listenOn(SocketAddress::loopback(AF_INET6, 0));
  const std::string address = "[::1]:" + std::to_string(probe->localAddress()->port());
  probe->close();
  Expected<UniqueIdBytes> id = uniqueIdFromAddress(address);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_NE(describeUniqueId(*id).find(address), std::string::npos) << describeUniqueId(*id);
  auto ranks = connectedRanks(2, *id);
  ASSERT_EQ(ranks.size(), 2u);
  onEveryRank(ranks, [&](Bootstrap& bootstrap) {
    Expected<std::string> got = bootstrap.broadcast(bootstrap.rank() == 1 ? "from one" : "", 1);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, "from one");
  });
}

/// Sets environment variables for one test and restores the previous values afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }
  void set(const char* name, const char* value) {
    ASSERT_TRUE(saved_.count(name)) << name << " is not saved";
    setenv(name, value, 1);
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

#define LAUNCH_VARIABLES                                                                                          \
  "TUCCL_RANK", "TUCCL_NRANKS", "TUCCL_LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",               \
      "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS",    \
      "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TUCCL_COMM_ID", "MASTER_ADDR", "MASTER_PORT",         \
      "TUCCL_COMM_MAGIC", "TUCCL_SOCKET_IFNAME"

TEST(UniqueId, CommIdInTheEnvironmentGivesTheSameIdEverywhere) {
  ScopedEnvironment environment{LAUNCH_VARIABLES};
  environment.set("TUCCL_COMM_ID", "127.0.0.1:29555");
  Expected<UniqueIdBytes> made = makeUniqueId(withTimeout(5));
  Expected<UniqueIdBytes> computed = uniqueIdFromAddress("127.0.0.1:29555");
  ASSERT_TRUE(made.ok() && computed.ok());
  EXPECT_EQ(std::string(made->bytes, kUniqueIdBytes), std::string(computed->bytes, kUniqueIdBytes));
  EXPECT_NE(describeUniqueId(*made).find("127.0.0.1:29555"), std::string::npos) << describeUniqueId(*made);
  environment.set("TUCCL_COMM_MAGIC", "another-job");
  Expected<UniqueIdBytes> other = uniqueIdFromAddress("127.0.0.1:29555");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(describeUniqueId(*other), describeUniqueId(*computed));
  environment.set("TUCCL_COMM_ID", "no-port-here");
  Expected<UniqueIdBytes> bad = makeUniqueId(withTimeout(5));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("TUCCL_COMM_ID"), std::string::npos) << bad.status().message();
}

TEST(UniqueId, TwoFreshIdsDiffer) {
  const UniqueIdBytes a = freshId(1);
  const UniqueIdBytes b = freshId(1);
  EXPECT_NE(std::string(a.bytes, kUniqueIdBytes), std::string(b.bytes, kUniqueIdBytes));
}

TEST(UniqueId, SocketIfnameChoosesTheRootInterface) {
  ScopedEnvironment environment{LAUNCH_VARIABLES};
  environment.set("TUCCL_SOCKET_IFNAME", "lo");
  const UniqueIdBytes id = freshId(10);
  EXPECT_TRUE(rootOf(id).isLoopback()) << describeUniqueId(id);
  auto ranks = connectedRanks(2, id);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]->address().rfind("127.", 0), 0u) << ranks[0]->address();
  environment.set("TUCCL_SOCKET_IFNAME", "nonexistent-if9");
  Expected<UniqueIdBytes> missing = makeUniqueId(withTimeout(1));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::NotFound);
}

TEST(Bootstrap, RejectsBadArguments) {
  const UniqueIdBytes id = freshId(1);
  EXPECT_EQ(Bootstrap::connect(id, 2, 2, withTimeout(1)).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Bootstrap::connect(id, -1, 2, withTimeout(1)).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Bootstrap::connect(id, 0, 0, withTimeout(1)).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Bootstrap::connect(UniqueIdBytes{}, 0, 2, withTimeout(1)).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(uniqueIdFromAddress("nonsense").status().code(), ErrorCode::InvalidArgument);
  auto single = Bootstrap::connect(id, 0, 1, withTimeout(1));
  ASSERT_TRUE(single.ok());
  Bootstrap& one = **single;
  EXPECT_EQ(one.broadcast("x", 1).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(one.send(1, 0, "x").code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(one.recv(0, 0).status().code(), ErrorCode::InvalidArgument);  // nothing sent to itself
  EXPECT_FALSE(one.peerLost());
}

// ---- readLaunchEnvironment -----------------------------------------------------------------------

Expected<LaunchEnvironment> readWith(std::initializer_list<std::pair<const char*, const char*>> values) {
  ScopedEnvironment environment{LAUNCH_VARIABLES};
  for (const auto& [name, value] : values) environment.set(name, value);
  return readLaunchEnvironment();
}

void expectLaunch(const Expected<LaunchEnvironment>& got, int rank, int nRanks, int localRank,
                  const std::string& commId, const std::string& source) {
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->rank, rank);
  EXPECT_EQ(got->nRanks, nRanks);
  EXPECT_EQ(got->localRank, localRank);
  EXPECT_EQ(got->commId, commId);
  EXPECT_EQ(got->source, source);
}

TEST(LaunchEnvironment, ReadsEachLaunchersVariables) {
  expectLaunch(readWith({{"TUCCL_RANK", "2"}, {"TUCCL_NRANKS", "4"}, {"TUCCL_LOCAL_RANK", "2"},
                         {"TUCCL_COMM_ID", "127.0.0.1:5000"}}),
               2, 4, 2, "127.0.0.1:5000", "tuccl-run");
  expectLaunch(readWith({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "16"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"TUCCL_COMM_ID", "node0:7000"}}),
               5, 16, 1, "node0:7000", "mpirun");
  expectLaunch(readWith({{"PMI_RANK", "3"}, {"PMI_SIZE", "8"}, {"TUCCL_COMM_ID", "[fd00::1]:7000"}}), 3, 8, -1,
               "[fd00::1]:7000", "mpich");
  expectLaunch(readWith({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"},
                         {"TUCCL_COMM_ID", "10.0.0.1:6000"}}),
               7, 8, 3, "10.0.0.1:6000", "srun");
  expectLaunch(readWith({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.9"},
                         {"MASTER_PORT", "29500"}}),
               1, 2, 1, "10.0.0.9:29501", "torchrun");
  expectLaunch(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "29500"}}), 0, 2,
               -1, "[::1]:29501", "torchrun");
}

TEST(LaunchEnvironment, InnerLauncherWinsAndTucclCommIdBeatsMasterAddr) {
  expectLaunch(readWith({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "4"}, {"TUCCL_COMM_ID", "h:1"}, {"MASTER_ADDR", "m"},
                         {"MASTER_PORT", "9"}}),
               3, 4, -1, "h:1", "mpirun");
}

void expectError(const Expected<LaunchEnvironment>& got, ErrorCode code, const std::string& variable) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), code) << got.status().message();
  EXPECT_NE(got.status().message().find(variable), std::string::npos) << got.status().message();
}

TEST(LaunchEnvironment, MalformedOrMissingValuesNameTheVariable) {
  expectError(readWith({}), ErrorCode::NotFound, "TUCCL_RANK");
  expectError(readWith({{"TUCCL_RANK", "abc"}, {"TUCCL_NRANKS", "4"}, {"TUCCL_COMM_ID", "h:1"}}),
              ErrorCode::InvalidArgument, "TUCCL_RANK='abc'");
  expectError(readWith({{"TUCCL_RANK", "1"}, {"TUCCL_NRANKS", "4x"}, {"TUCCL_COMM_ID", "h:1"}}),
              ErrorCode::InvalidArgument, "TUCCL_NRANKS");
  expectError(readWith({{"TUCCL_RANK", "4"}, {"TUCCL_NRANKS", "4"}, {"TUCCL_COMM_ID", "h:1"}}),
              ErrorCode::InvalidArgument, "TUCCL_RANK=4");
  expectError(readWith({{"TUCCL_RANK", "0"}, {"TUCCL_NRANKS", "0"}, {"TUCCL_COMM_ID", "h:1"}}),
              ErrorCode::InvalidArgument, "TUCCL_NRANKS=0");
  expectError(readWith({{"TUCCL_RANK", "0"}, {"TUCCL_NRANKS", "2"}, {"TUCCL_LOCAL_RANK", "-1"},
                        {"TUCCL_COMM_ID", "h:1"}}),
              ErrorCode::InvalidArgument, "TUCCL_LOCAL_RANK");
  expectError(readWith({{"PMI_RANK", "0"}, {"TUCCL_COMM_ID", "h:1"}}), ErrorCode::NotFound, "PMI_SIZE");
  expectError(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TUCCL_COMM_ID", "nocolon"}}), ErrorCode::InvalidArgument,
              "TUCCL_COMM_ID");
  expectError(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), ErrorCode::NotFound, "TUCCL_COMM_ID");
  expectError(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}), ErrorCode::NotFound, "MASTER_PORT");
  expectError(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}}),
              ErrorCode::InvalidArgument, "MASTER_PORT=65535");
  expectError(readWith({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "port"}}),
              ErrorCode::InvalidArgument, "MASTER_PORT='port'");
}

}  // namespace
