// The rendezvous of the tuner's runtime phase (adapt/rendezvous.h) over both stores, a directory
// and the TCP store (adapt/rendezvous_server.h), with the ranks of a communicator as threads:
// every rank that gets an outcome of a round gets the same one — also when some ranks time out
// while others see every summary — and the names go at finish.
#include "adapt/rendezvous.h"

#include "adapt/rendezvous_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace tuccl {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

/// Each test runs over a directory ("dir") and over a TCP store served by a thread ("tcp").
class RendezvousTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = c == '/' ? '-' : c;
    directory_ = fs::temp_directory_path() / ("tuccl-rendezvous-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(directory_);
    fs::create_directories(directory_);
    if (GetParam() == "tcp") {
      Expected<std::unique_ptr<RendezvousServer>> server = RendezvousServer::listen("127.0.0.1", 0);
      ASSERT_TRUE(server) << server.status().message();
      server_ = std::move(*server);
      serving_ = std::thread([this] { server_->serve(); });
    }
  }
  void TearDown() override {
    if (server_) {
      server_->stop();
      serving_.join();
      server_.reset();
    }
    fs::remove_all(directory_);
  }
  std::string spec() const {
    return GetParam() == "tcp" ? "tcp:127.0.0.1:" + std::to_string(server_->port()) : "dir:" + directory_.string();
  }
  /// A rank's rendezvous: its own store (connection) like every plugin instance.
  std::unique_ptr<Rendezvous> open(uint64_t commId, int32_t nRanks, milliseconds timeout) const {
    Expected<std::unique_ptr<RendezvousStore>> store = openRendezvousStore(spec(), milliseconds(5000));
    EXPECT_TRUE(store) << store.status().message();
    return store ? std::make_unique<Rendezvous>(std::move(*store), commId, nRanks, timeout) : nullptr;
  }
  /// Whether the store holds nothing.
  bool empty() const { return GetParam() == "tcp" ? server_->size() == 0 : fs::is_empty(directory_); }

  fs::path directory_;
  std::unique_ptr<RendezvousServer> server_;
  std::thread serving_;
};

/// Rank r's summary of round `round`: distinct bytes per rank and round, binary included.
std::string summaryOf(int32_t rank, uint64_t round) {
  std::string bytes = "summary\n";
  bytes += static_cast<char>(rank);
  bytes += '\0';
  return bytes + std::to_string(rank * 1000 + static_cast<int32_t>(round));
}

TEST_P(RendezvousTest, EveryRankGetsEverySummaryInRankOrder) {
  constexpr int32_t kRanks = 5;
  std::vector<Expected<RoundOutcome>> outcomes(kRanks, RoundOutcome{});
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Rendezvous> rendezvous = open(0xabcdef, kRanks, milliseconds(30000));
      const Expected<bool> joined = rendezvous->join("same settings");
      EXPECT_TRUE(joined && *joined);
      outcomes[r] = rendezvous->agree("allreduce-b20-e0", 1, r, summaryOf(r, 1));
      rendezvous->finish();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int32_t r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(outcomes[r]) << outcomes[r].status().message();
    ASSERT_TRUE(outcomes[r]->agreed);
    ASSERT_EQ(outcomes[r]->summaries.size(), static_cast<size_t>(kRanks));
    for (int32_t s = 0; s < kRanks; ++s) EXPECT_EQ(outcomes[r]->summaries[s], summaryOf(s, 1));
  }
  EXPECT_TRUE(empty());
}

TEST_P(RendezvousTest, AMissingSummaryAbandonsTheRoundForEveryRankAndKeepsFilesUntilAllFinish) {
  constexpr int32_t kRanks = 3;
  std::vector<Expected<RoundOutcome>> outcomes(kRanks, RoundOutcome{true, {}});
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Rendezvous> rendezvous = open(7, kRanks, milliseconds(2000));
      const Expected<bool> joined = rendezvous->join("same settings");
      EXPECT_TRUE(joined && *joined);
      // Rank 2 has nothing to publish (its rank is not known yet), and then stops without finishing.
      outcomes[r] = rendezvous->agree("k", 3, r == 2 ? -1 : r, summaryOf(r, 3));
      if (r != 2) rendezvous->finish();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int32_t r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(outcomes[r]) << outcomes[r].status().message();
    EXPECT_FALSE(outcomes[r]->agreed) << "rank " << r;
  }
  // Rank 2 never marked itself done: the outcomes and the done marks stay for the job to remove.
  EXPECT_FALSE(empty());
}

// Ranks arrive at random times with random timeouts, so in many rounds some ranks time out while
// others see every summary: whatever each rank gets, it is what every other rank got.
TEST_P(RendezvousTest, RanksThatTimeOutAndRanksThatCompleteTheRoundApplyTheSameOutcome) {
  constexpr int32_t kRanks = 4;
  constexpr uint64_t kRounds = 40;
  std::vector<std::vector<Expected<RoundOutcome>>> outcomes(kRanks);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 random(static_cast<uint32_t>(1234 + r));
      std::unique_ptr<Rendezvous> rendezvous = open(42, kRanks, milliseconds(1 + random() % 6));
      (void)rendezvous->join("same settings");  // may be abandoned too: only the rounds are judged
      for (uint64_t round = 0; round < kRounds; ++round) {
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 8000));
        outcomes[r].push_back(rendezvous->agree("k", round, r, summaryOf(r, round)));
      }
      rendezvous->finish();
    });
  }
  for (std::thread& thread : threads) thread.join();
  int agreed = 0, abandoned = 0;
  for (uint64_t round = 0; round < kRounds; ++round) {
    const Expected<RoundOutcome>& first = outcomes[0][round];
    ASSERT_TRUE(first) << first.status().message();
    for (int32_t r = 1; r < kRanks; ++r) {
      const Expected<RoundOutcome>& mine = outcomes[r][round];
      ASSERT_TRUE(mine) << mine.status().message();
      EXPECT_EQ(mine->agreed, first->agreed) << "round " << round << " rank " << r;
      EXPECT_EQ(mine->summaries, first->summaries) << "round " << round << " rank " << r;
    }
    (first->agreed ? agreed : abandoned)++;
  }
  // Both kinds of rounds happened, or the test proved nothing about the race.
  EXPECT_GT(agreed, 0);
  EXPECT_GT(abandoned, 0);
  EXPECT_TRUE(empty());
}

// A rank that does not join, or joins with other settings, keeps every rank from adapting.
TEST_P(RendezvousTest, EveryRankAdaptsOnlyWhenEveryRankJoinedWithTheSameSettings) {
  constexpr int32_t kRanks = 4;
  auto joinAll = [&](const std::function<std::optional<std::string>(int32_t)>& settings) {
    std::vector<Expected<bool>> joined(kRanks, false);
    std::vector<std::thread> threads;
    static uint64_t commId = 100;
    const uint64_t id = ++commId;
    for (int32_t r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        const std::optional<std::string> mine = settings(r);
        if (!mine) return;
        std::unique_ptr<Rendezvous> rendezvous = open(id, kRanks, milliseconds(300));
        joined[r] = rendezvous->join(*mine);
        rendezvous->finish();
      });
    }
    for (std::thread& thread : threads) thread.join();
    return joined;
  };
  for (const Expected<bool>& joined : joinAll([](int32_t) { return std::string("s"); })) {
    ASSERT_TRUE(joined) << joined.status().message();
    EXPECT_TRUE(*joined);
  }
  EXPECT_TRUE(empty());
  for (const Expected<bool>& joined : joinAll([](int32_t r) { return std::string(r == 1 ? "other" : "s"); })) {
    ASSERT_TRUE(joined) << joined.status().message();
    EXPECT_FALSE(*joined);
  }
  EXPECT_TRUE(empty());
  const std::vector<Expected<bool>> withoutRank3 =
      joinAll([](int32_t r) { return r == 3 ? std::nullopt : std::optional<std::string>("s"); });
  for (int32_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(withoutRank3[r]) << withoutRank3[r].status().message();
    EXPECT_FALSE(*withoutRank3[r]);
  }
}

// The residual case: the store goes away mid-job. The rank cannot know the outcome: an error.
TEST_P(RendezvousTest, ARankThatLosesTheStoreGetsAnError) {
  std::unique_ptr<Rendezvous> rendezvous = open(1, 2, milliseconds(20));
  ASSERT_TRUE(rendezvous);
  if (GetParam() == "tcp") {
    server_->stop();
    serving_.join();
    server_.reset();
  } else {
    fs::remove_all(directory_);
  }
  const Expected<RoundOutcome> outcome = rendezvous->agree("k", 0, 0, "s");
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.status().code(), ErrorCode::IoError) << outcome.status().message();
}

INSTANTIATE_TEST_SUITE_P(Stores, RendezvousTest, ::testing::Values("dir", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& store) { return store.param; });

TEST(RendezvousStore, AMissingDirectoryOrADeadStoreOrABadValueIsAnErrorAtOpen) {
  const fs::path gone = fs::temp_directory_path() / ("tuccl-rendezvous-gone-" + std::to_string(::getpid()));
  Expected<std::unique_ptr<RendezvousStore>> missing = openRendezvousStore("dir:" + gone.string(), milliseconds(100));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find(gone.string()), std::string::npos) << missing.status().message();
  // A port nobody listens at: the server's own, once it is gone.
  uint16_t port = 0;
  {
    Expected<std::unique_ptr<RendezvousServer>> server = RendezvousServer::listen("127.0.0.1", 0);
    ASSERT_TRUE(server);
    port = (*server)->port();
  }
  Expected<std::unique_ptr<RendezvousStore>> dead =
      openRendezvousStore("tcp:127.0.0.1:" + std::to_string(port), milliseconds(500));
  ASSERT_FALSE(dead);
  EXPECT_NE(dead.status().message().find("cannot connect"), std::string::npos) << dead.status().message();
  for (const char* bad : {"", "dir:", "tcp:", "tcp:host", "file:/tmp", "/tmp"}) {
    Expected<std::unique_ptr<RendezvousStore>> store = openRendezvousStore(bad, milliseconds(100));
    ASSERT_FALSE(store) << bad;
    EXPECT_EQ(store.status().code(), ErrorCode::InvalidArgument) << bad;
  }
}

TEST(RendezvousOutcome, RoundTripsAndReadsAnythingMalformedAsAbandoned) {
  const RoundOutcome agreed{true, {std::string("a\0b", 3), "", "ccc\n"}};
  const RoundOutcome back = decodeOutcome(encodeOutcome(agreed), 3);
  EXPECT_TRUE(back.agreed);
  EXPECT_EQ(back.summaries, agreed.summaries);
  EXPECT_FALSE(decodeOutcome(encodeOutcome(RoundOutcome{}), 3).agreed);
  const std::string bytes = encodeOutcome(agreed);
  EXPECT_FALSE(decodeOutcome(bytes, 2).agreed);                          // another rank count
  EXPECT_FALSE(decodeOutcome(bytes.substr(0, bytes.size() - 1), 3).agreed);  // cut short
  EXPECT_FALSE(decodeOutcome(bytes + "x", 3).agreed);                   // trailing bytes
  EXPECT_FALSE(decodeOutcome("", 3).agreed);
}

}  // namespace
}  // namespace tuccl
