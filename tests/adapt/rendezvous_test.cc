// The rendezvous of the tuner's runtime phase (adapt/rendezvous.h) over both stores, a directory
// and the TCP store (adapt/rendezvous_server.h), with the ranks of a communicator as threads:
// every rank that gets an outcome of a round gets the same one — also when some ranks time out
// while others see every summary — and the names go at finish. The TCP store admits only clients
// that hold its secret, closes anything else within its hello time, and stops by itself once its
// ranks are done or it was idle for its idle time.
#include "adapt/rendezvous.h"

#include "adapt/rendezvous_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace tuccl {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr const char* kSecret = "the job's secret";

/// Writes `bytes` to `file` with `mode`; the file's path.
std::string writeFile(const fs::path& file, const std::string& bytes, mode_t mode = 0600) {
  fs::remove(file);
  std::ofstream(file) << bytes;
  ::chmod(file.c_str(), mode);
  return file.string();
}

/// A store on a free loopback port with `secret`; the caller serves it.
std::unique_ptr<RendezvousServer> listenWith(RendezvousServerOptions options) {
  Expected<std::unique_ptr<RendezvousServer>> server = RendezvousServer::listen(std::move(options));
  EXPECT_TRUE(server) << server.status().message();
  return server ? std::move(*server) : nullptr;
}

std::unique_ptr<RendezvousServer> listenWith(const std::string& secret) {
  RendezvousServerOptions options;
  options.secret = secret;
  return listenWith(std::move(options));
}

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
      secretFile_ = writeFile(directory_.string() + ".secret", std::string(kSecret) + "\n");
      server_ = listenWith(kSecret);
      ASSERT_TRUE(server_);
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
    if (!secretFile_.empty()) fs::remove(secretFile_);
  }
  std::string spec() const {
    return GetParam() == "tcp" ? "tcp:127.0.0.1:" + std::to_string(server_->port()) : "dir:" + directory_.string();
  }
  /// A rank's rendezvous: its own store (connection) like every plugin instance.
  std::unique_ptr<Rendezvous> open(uint64_t commId, int32_t nRanks, milliseconds timeout) const {
    Expected<std::unique_ptr<RendezvousStore>> store = openRendezvousStore(spec(), milliseconds(5000), secretFile_);
    EXPECT_TRUE(store) << store.status().message();
    return store ? std::make_unique<Rendezvous>(std::move(*store), commId, nRanks, timeout) : nullptr;
  }
  /// Whether the store holds nothing.
  bool empty() const { return GetParam() == "tcp" ? server_->size() == 0 : fs::is_empty(directory_); }

  fs::path directory_;
  std::string secretFile_;  ///< tcp: the store's secret, as the ranks read it
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
    std::unique_ptr<RendezvousServer> server = listenWith(kSecret);
    ASSERT_TRUE(server);
    port = server->port();
  }
  const std::string secret = writeFile(gone.string() + ".secret", kSecret);
  Expected<std::unique_ptr<RendezvousStore>> dead =
      openRendezvousStore("tcp:127.0.0.1:" + std::to_string(port), milliseconds(500), secret);
  fs::remove(secret);
  ASSERT_FALSE(dead);
  EXPECT_NE(dead.status().message().find("cannot connect"), std::string::npos) << dead.status().message();
  for (const char* bad : {"", "dir:", "tcp:", "tcp:host", "file:/tmp", "/tmp"}) {
    Expected<std::unique_ptr<RendezvousStore>> store = openRendezvousStore(bad, milliseconds(100));
    ASSERT_FALSE(store) << bad;
    EXPECT_EQ(store.status().code(), ErrorCode::InvalidArgument) << bad;
  }
}

/// A scratch directory of the test, removed with it.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : path_(fs::temp_directory_path() / ("tuccl-rendezvous-" + std::to_string(::getpid()) + "-" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Scratch() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

/// What `value` holds, or `otherwise` when it is an error.
template <typename T>
T valueOr(Expected<T> value, T otherwise) {
  return value ? std::move(*value) : std::move(otherwise);
}

/// The message of `secret`'s error, or "" when it is a secret.
std::string refusal(const Expected<std::string>& secret) { return secret ? std::string() : secret.status().message(); }

TEST(RendezvousSecret, IsReadOnlyFromANonEmptyFileOnlyItsOwnerCanUse) {
  Scratch scratch("secret-read");
  EXPECT_EQ(valueOr(readRendezvousSecret(writeFile(scratch / "ok", "s3cret\n")), std::string()), "s3cret");
  EXPECT_EQ(valueOr(readRendezvousSecret(writeFile(scratch / "read-only", "s3cret", 0400)), std::string()), "s3cret");
  const std::string missing = (scratch / "missing").string();
  EXPECT_NE(refusal(readRendezvousSecret(missing)).find("cannot read the secret file " + missing + ": No such file"),
            std::string::npos)
      << refusal(readRendezvousSecret(missing));
  EXPECT_NE(refusal(readRendezvousSecret(writeFile(scratch / "empty", " \n\n"))).find("is empty"), std::string::npos);
  for (mode_t open : {0644, 0640, 0604, 0620, 0700 | 0001}) {
    const std::string file = writeFile(scratch / "open", "s3cret", open);
    const std::string why = refusal(readRendezvousSecret(file));
    EXPECT_NE(why.find("the secret file " + file + " is open to other users (mode 0"), std::string::npos) << why;
  }
  fs::create_directory(scratch / "directory");
  ::chmod((scratch / "directory").c_str(), 0700);
  EXPECT_NE(refusal(readRendezvousSecret((scratch / "directory").string())).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(refusal(readRendezvousSecret(writeFile(scratch / "long", std::string(kStoreMaxSecret + 1, 'x'))))
                .find("more than 1024 bytes"),
            std::string::npos);
}

TEST(RendezvousSecret, IsMadeRandomAndWrittenToANewFileOnlyItsOwnerCanRead) {
  Scratch scratch("secret-write");
  const Expected<std::string> first = makeRendezvousSecret(), second = makeRendezvousSecret();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos) << *first;
  EXPECT_NE(*first, *second);
  const std::string file = (scratch / "secret").string();
  const mode_t umask = ::umask(0777);  // even a umask that takes everything away leaves 0600
  const Status written = writeRendezvousSecret(file, *first);
  ::umask(umask);
  ASSERT_TRUE(written) << written.message();
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(valueOr(readRendezvousSecret(file), std::string()), *first);
  // Never over an existing file.
  const Status again = writeRendezvousSecret(file, *second);
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find(file + " exists already"), std::string::npos) << again.message();
  EXPECT_EQ(valueOr(readRendezvousSecret(file), std::string()), *first);
}

/// What a raw connection to the store got: the bytes the store sent before it closed the
/// connection, and how long after connecting it closed it.
struct Closed {
  std::string reply;
  double seconds = 0;
};

/// Connects to the store at `port`, sends `bytes` and waits (20 s at most) for the store to close
/// the connection; nullopt when it did not.
std::optional<Closed> closedAfterSending(uint16_t port, const std::string& bytes) {
  const auto started = std::chrono::steady_clock::now();
  const transport::WaitLimits limits{transport::deadlineAfter(20)};
  Expected<transport::SocketAddress> address = transport::resolveHostPort("127.0.0.1:" + std::to_string(port));
  Expected<transport::Socket> socket = address ? transport::connectTo(*address, limits) : address.status();
  if (!socket) return std::nullopt;
  if (!bytes.empty() && !transport::sendAll(*socket, bytes.data(), bytes.size(), limits)) return std::nullopt;
  Closed closed;
  for (char byte = 0;;) {
    const Status got = transport::recvAll(*socket, &byte, 1, limits);
    if (!got && got.code() != ErrorCode::RemoteError) return std::nullopt;
    if (!got) break;
    closed.reply += byte;
  }
  closed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return closed;
}

/// A hello carrying `secret` (rendezvous_store.h's wire format).
std::string helloWith(const std::string& secret) {
  std::string hello(kStoreHelloMagic, sizeof(kStoreHelloMagic));
  putUint32(hello, static_cast<uint32_t>(secret.size()));
  return hello + secret;
}

/// A store that tells its refusals, serving on a thread.
struct ServedStore {
  explicit ServedStore(RendezvousServerOptions options) {
    options.report = [this](const std::string& line) {
      std::lock_guard lock(mutex);
      reported.push_back(line);
    };
    server = listenWith(std::move(options));
    if (server) ending = std::async(std::launch::async, [this] { return server->serve(); });
  }
  ~ServedStore() {
    if (!server) return;
    server->stop();
    if (ending.valid()) ending.wait();
  }
  std::string spec() const { return "tcp:127.0.0.1:" + std::to_string(server->port()); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex);
    return reported;
  }
  /// Whether serve() returned within `seconds`.
  bool endsWithin(double seconds) {
    return ending.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  }

  std::unique_ptr<RendezvousServer> server;
  std::future<ServeEnd> ending;
  std::mutex mutex;
  std::vector<std::string> reported;
};

RendezvousServerOptions optionsWith(const std::string& secret) {
  RendezvousServerOptions options;
  options.secret = secret;
  return options;
}

TEST(RendezvousServer, AdmitsOnlyClientsThatHoldItsSecret) {
  Scratch scratch("admit");
  RendezvousServerOptions options = optionsWith(kSecret);
  options.helloSeconds = 0.5;
  ServedStore store(std::move(options));
  ASSERT_TRUE(store.server);
  // Without a secret the client does not even connect; with a wrong one the store refuses it.
  Expected<std::unique_ptr<RendezvousStore>> none = openRendezvousStore(store.spec(), milliseconds(5000));
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("no secret file was given (TUCCL_ADAPT_SECRET_FILE)"), std::string::npos)
      << none.status().message();
  Expected<std::unique_ptr<RendezvousStore>> wrong =
      openRendezvousStore(store.spec(), milliseconds(5000), writeFile(scratch / "wrong", "another job's secret"));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("refused this rank's secret"), std::string::npos)
      << wrong.status().message();
  Expected<std::unique_ptr<RendezvousStore>> right =
      openRendezvousStore(store.spec(), milliseconds(5000), writeFile(scratch / "right", std::string(kSecret) + "\n"));
  ASSERT_TRUE(right) << right.status().message();
  ASSERT_TRUE(valueOr((*right)->create("name", "bytes"), false));
  EXPECT_EQ(valueOr((*right)->read("name"), std::string()), "bytes");
  // Whatever else connects is closed, within the hello time (plus scheduling).
  const std::string secret = kSecret;
  for (const std::string& bytes : {std::string(), std::string("R\1\0\0\0\0\0\0\0n", 10), helloWith(""),
                                   helloWith(secret.substr(0, secret.size() - 1)), helloWith(secret + "!"),
                                   helloWith(secret).substr(0, 14), std::string(64, 'x')}) {
    const std::optional<Closed> closed = closedAfterSending(store.server->port(), bytes);
    ASSERT_TRUE(closed) << "sent " << bytes.size() << " bytes";
    EXPECT_LT(closed->seconds, 5.0);
    // A hello with a wrong secret hears so; anything else hears nothing.
    const bool wrongSecret = bytes.size() >= 12 && bytes.size() == 12 + getUint32(
        reinterpret_cast<const unsigned char*>(bytes.data()) + 8) && bytes.compare(0, 8, kStoreHelloMagic, 8) == 0;
    EXPECT_EQ(closed->reply, wrongSecret ? std::string("X\0\0\0\0", 5) : std::string()) << bytes.size();
  }
  EXPECT_EQ(store.server->refused(), 8u);
  // One line for the one peer host, however many of its connections were refused.
  const std::vector<std::string> lines = store.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("refused a connection from 127.0.0.1:", 0), 0u) << lines[0];
  // The admitted client was served all along.
  EXPECT_EQ(valueOr((*right)->read("name"), std::string()), "bytes");
}

TEST(RendezvousServer, NeedsASecret) {
  Expected<std::unique_ptr<RendezvousServer>> server = RendezvousServer::listen(RendezvousServerOptions{});
  ASSERT_FALSE(server);
  EXPECT_EQ(server.status().code(), ErrorCode::InvalidArgument);
}

TEST(RendezvousServer, StopsOnceItsRanksSaidHelloAndAllClosed) {
  Scratch scratch("ranks");
  RendezvousServerOptions options = optionsWith(kSecret);
  options.ranks = 2;
  ServedStore store(std::move(options));
  ASSERT_TRUE(store.server);
  const std::string right = writeFile(scratch / "right", kSecret), wrong = writeFile(scratch / "wrong", "guess");
  EXPECT_FALSE(store.endsWithin(0.3)) << "stopped before any rank came";
  Expected<std::unique_ptr<RendezvousStore>> first = openRendezvousStore(store.spec(), milliseconds(5000), right);
  ASSERT_TRUE(first) << first.status().message();
  ASSERT_FALSE(openRendezvousStore(store.spec(), milliseconds(5000), wrong));  // counts for nothing
  first->reset();
  EXPECT_FALSE(store.endsWithin(0.5)) << "stopped after one of its two ranks";
  Expected<std::unique_ptr<RendezvousStore>> second = openRendezvousStore(store.spec(), milliseconds(5000), right);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_TRUE(valueOr((*second)->create("name", "bytes"), false));
  EXPECT_FALSE(store.endsWithin(0.3)) << "stopped while a rank was connected";
  second->reset();
  ASSERT_TRUE(store.endsWithin(10));
  EXPECT_EQ(store.ending.get(), ServeEnd::RanksDone);
  EXPECT_EQ(store.server->size(), 1u);
}

TEST(RendezvousServer, StopsAfterItsIdleTimeWithNoConnection) {
  Scratch scratch("idle");
  RendezvousServerOptions options = optionsWith(kSecret);
  options.idleSeconds = 1.0;
  ServedStore store(std::move(options));
  ASSERT_TRUE(store.server);
  Expected<std::unique_ptr<RendezvousStore>> rank =
      openRendezvousStore(store.spec(), milliseconds(5000), writeFile(scratch / "secret", kSecret));
  ASSERT_TRUE(rank) << rank.status().message();
  EXPECT_FALSE(store.endsWithin(2.0)) << "stopped while a rank was connected";
  rank->reset();
  ASSERT_TRUE(store.endsWithin(10));
  EXPECT_EQ(store.ending.get(), ServeEnd::Idle);
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
