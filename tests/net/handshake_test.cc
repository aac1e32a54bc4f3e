// The socket network's wire formats (net/handshake.h): handles, hellos and message headers from
// well-formed and hostile peers; then the fuzzer's corpus (fuzz/corpus_net/) and deterministic
// mutants of it through the fuzzer's own checks (tests/net/handshake_exercise.h).
#include "net/handshake.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "tests/net/handshake_exercise.h"

namespace tuccl::net {
namespace {

using transport::SocketAddress;

// Byte offsets of the handle's fields (handshake.h): magic 0, token 8, address length 16,
// address 20, progress 48.
constexpr size_t kLengthAt = 16;
constexpr size_t kAddressAt = 20;

SocketAddress v4(const char* host, uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, host, &address.sin_addr);
  return SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&address), sizeof address);
}

SocketAddress v6(const char* host, uint16_t port) {
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_port = htons(port);
  inet_pton(AF_INET6, host, &address.sin6_addr);
  return SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&address), sizeof address);
}

std::array<unsigned char, kHandleBytes> handleFor(uint64_t token, const SocketAddress& address) {
  std::array<unsigned char, kHandleBytes> handle;
  handle.fill(0xAB);  // writeHandle clears all of it
  writeHandle(handle.data(), token, address);
  return handle;
}

TEST(Handle, RoundTripsIpv4AndIpv6) {
  for (const SocketAddress& address : {v4("10.1.2.3", 40000), v6("fd00::2", 1234)}) {
    auto handle = handleFor(0xfeedULL, address);
    Expected<ParsedHandle> parsed = parseHandle(handle.data());
    ASSERT_TRUE(parsed) << parsed.status().message();
    EXPECT_EQ(parsed->token, 0xfeedULL);
    EXPECT_EQ(parsed->listener.toString(), address.toString());
    EXPECT_EQ(parsed->progress, 0u);
    EXPECT_TRUE(std::all_of(handle.begin() + 56, handle.end(), [](unsigned char b) { return b == 0; }));
    storeProgress(handle.data(), 0x1234);
    parsed = parseHandle(handle.data());
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->progress, 0x1234u);
    EXPECT_EQ(parsed->listener.toString(), address.toString());
  }
}

TEST(Handle, RefusesWhatTuCCLDidNotWrite) {
  auto handle = handleFor(1, v4("127.0.0.1", 5555));
  auto wrongMagic = handle;
  wrongMagic[0] ^= 1;
  EXPECT_FALSE(parseHandle(wrongMagic.data()));

  auto tooLong = handle;
  tooLong[kLengthAt] = 200;
  Expected<ParsedHandle> parsed = parseHandle(tooLong.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("exceeds"), std::string::npos) << parsed.status().message();

  auto familyMismatch = handle;
  familyMismatch[kLengthAt] = sizeof(sockaddr_in6);  // IPv4 family, IPv6 length
  parsed = parseHandle(familyMismatch.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("neither IPv4 nor IPv6"), std::string::npos);

  auto unixFamily = handle;
  unixFamily[kAddressAt] = AF_UNIX;
  EXPECT_FALSE(parseHandle(unixFamily.data()));

  auto noPort = handle;
  noPort[kAddressAt + 2] = noPort[kAddressAt + 3] = 0;
  parsed = parseHandle(noPort.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("no port"), std::string::npos);

  std::array<unsigned char, kHandleBytes> zeros{};
  EXPECT_FALSE(parseHandle(zeros.data()));
}

// A virtual device's handle: the first listener where a physical device's is, the others after
// the progress field (count at byte 56, then 20 bytes each); progress stays where it was.
TEST(Handle, NamesEveryListenerOfAVirtualDevice) {
  const std::vector<SocketAddress> listeners = {v4("10.1.2.3", 40000), v6("fd00::2", 1234), v4("10.9.8.7", 7),
                                                v6("fe80::1", 65535)};
  for (size_t n = 1; n <= listeners.size(); ++n) {
    std::array<unsigned char, kHandleBytes> handle;
    handle.fill(0xAB);
    writeHandle(handle.data(), 0xbeefULL, std::span<const SocketAddress>(listeners.data(), n));
    storeProgress(handle.data(), 0x42);
    Expected<ParsedHandle> parsed = parseHandle(handle.data());
    ASSERT_TRUE(parsed) << parsed.status().message();
    EXPECT_EQ(parsed->token, 0xbeefULL);
    EXPECT_EQ(parsed->progress, 0x42u);
    EXPECT_EQ(parsed->listener.toString(), listeners[0].toString());
    ASSERT_EQ(parsed->more.size(), n - 1);
    for (size_t i = 1; i < n; ++i) EXPECT_EQ(parsed->more[i - 1].toString(), listeners[i].toString());
  }
  EXPECT_THROW(writeHandle(nullptr, 1, std::span<const SocketAddress>()), std::invalid_argument);
  std::vector<SocketAddress> five(5, v4("10.0.0.1", 1));
  std::array<unsigned char, kHandleBytes> handle{};
  EXPECT_THROW(writeHandle(handle.data(), 1, five), std::invalid_argument);
}

TEST(Handle, RefusesABadFurtherListener) {
  const std::vector<SocketAddress> two = {v4("10.1.2.3", 40000), v4("10.1.2.4", 40001)};
  std::array<unsigned char, kHandleBytes> handle{};
  writeHandle(handle.data(), 1, two);
  constexpr size_t kCountAt = 56, kFirstMoreAt = 60;
  auto tooMany = handle;
  tooMany[kCountAt] = 4;
  Expected<ParsedHandle> parsed = parseHandle(tooMany.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("at most 3 fit"), std::string::npos) << parsed.status().message();
  auto badFamily = handle;
  badFamily[kFirstMoreAt] = AF_UNIX;
  parsed = parseHandle(badFamily.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("listener 2 is neither IPv4 nor IPv6"), std::string::npos)
      << parsed.status().message();
  auto noPort = handle;
  noPort[kFirstMoreAt + 2] = noPort[kFirstMoreAt + 3] = 0;
  parsed = parseHandle(noPort.data());
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.status().message().find("listener 2 has no port"), std::string::npos) << parsed.status().message();
}

TEST(HelloReader, AssemblesAHelloFromPieces) {
  const Hello sent = makeHello(7, 99, 3, 4, 2);
  const auto* bytes = reinterpret_cast<const std::byte*>(&sent);
  HelloReader reader;
  for (size_t i = 0; i < sizeof(Hello); ++i) {
    EXPECT_FALSE(reader.complete());
    EXPECT_EQ(reader.unread().size(), sizeof(Hello) - i);
    EXPECT_EQ(reader.feed(std::span<const std::byte>(bytes + i, 1)), 1u);
  }
  ASSERT_TRUE(reader.complete());
  EXPECT_EQ(reader.feed(std::span<const std::byte>(bytes, 5)), 0u);  // takes nothing more
  EXPECT_EQ(std::memcmp(&reader.hello(), &sent, sizeof sent), 0);

  HelloReader bulk;
  std::vector<std::byte> more(bytes, bytes + sizeof(Hello));
  more.resize(100, std::byte{0x42});
  EXPECT_EQ(bulk.feed(more), sizeof(Hello));
  EXPECT_TRUE(bulk.complete());
  EXPECT_EQ(bulk.hello().index, 3);
  EXPECT_EQ(bulk.hello().nData, 4);
  EXPECT_EQ(bulk.hello().nThreads, 2);
}

TEST(HelloBoard, PlacesEverySocketOfAConnectionInAnyOrder) {
  HelloBoard board(42);
  const int order[] = {3, 0, 4, 2, 1};
  for (int k = 0; k < 5; ++k) {
    EXPECT_FALSE(board.complete());
    Expected<int> index = board.place(makeHello(42, 1000, order[k], 4, 2));
    ASSERT_TRUE(index) << index.status().message();
    EXPECT_EQ(*index, order[k]);
    EXPECT_EQ(board.sockets(), 5u);
  }
  EXPECT_TRUE(board.complete());
  EXPECT_EQ(board.nThreads(), 2);
  board.reset();
  EXPECT_FALSE(board.complete());
  EXPECT_EQ(board.sockets(), 0u);
  // The next connection may have other counts and another nonce.
  ASSERT_TRUE(board.place(makeHello(42, 2000, 1, 1, 1)));
  ASSERT_TRUE(board.place(makeHello(42, 2000, 0, 1, 1)));
  EXPECT_TRUE(board.complete());
  EXPECT_EQ(board.nThreads(), 1);
}

TEST(HelloBoard, RefusesForeignAndInconsistentHellos) {
  HelloBoard board(42);
  Hello wrongMagic = makeHello(42, 1, 0, 2, 1);
  wrongMagic.magic ^= 1;
  EXPECT_FALSE(board.place(wrongMagic));
  EXPECT_FALSE(board.place(makeHello(43, 1, 0, 2, 1)));  // another listener's token
  EXPECT_FALSE(board.place(makeHello(42, 1, 0, 0, 1)));  // no data socket
  EXPECT_FALSE(board.place(makeHello(42, 1, 0, kMaxSockets + 1, 1)));
  EXPECT_FALSE(board.place(makeHello(42, 1, 0, 2, 0)));  // no thread
  EXPECT_FALSE(board.place(makeHello(42, 1, 0, 2, 3)));  // more threads than sockets
  EXPECT_FALSE(board.place(makeHello(42, 1, 3, 2, 1)));  // index beyond nData
  EXPECT_EQ(board.sockets(), 0u) << "a refused hello must not start a connection";

  ASSERT_TRUE(board.place(makeHello(42, 1, 0, 2, 1)));
  Expected<int> refused = board.place(makeHello(42, 1, 0, 2, 1));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("repeats socket 0"), std::string::npos);
  EXPECT_FALSE(board.place(makeHello(42, 2, 1, 2, 1)));  // another connection's nonce
  EXPECT_FALSE(board.place(makeHello(42, 1, 1, 3, 1)));  // disagrees on nData
  EXPECT_FALSE(board.place(makeHello(42, 1, 1, 2, 2)));  // disagrees on nThreads
  EXPECT_FALSE(board.complete());
  ASSERT_TRUE(board.place(makeHello(42, 1, 2, 2, 1)));
  ASSERT_TRUE(board.place(makeHello(42, 1, 1, 2, 1)));
  EXPECT_TRUE(board.complete());
}

TEST(MessageHeader, MatchesTheFirstUnmatchedBufferWithItsTag) {
  const PostedBuffer posted[] = {{30, 1000, false}, {10, 500, true}, {10, 800, false}, {20, 0, false}};
  Expected<int> slot = matchHeader(makeHeader(10, 800), posted);
  ASSERT_TRUE(slot) << slot.status().message();
  EXPECT_EQ(*slot, 2);
  slot = matchHeader(makeHeader(20, 0), posted);
  ASSERT_TRUE(slot);
  EXPECT_EQ(*slot, 3);

  slot = matchHeader(makeHeader(10, 801), posted);
  ASSERT_FALSE(slot);
  EXPECT_EQ(slot.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(slot.status().message().find("message truncated: 801 bytes sent, 800 posted"), std::string::npos);

  slot = matchHeader(makeHeader(40, 1), posted);
  ASSERT_FALSE(slot);
  EXPECT_NE(slot.status().message().find("tag 40"), std::string::npos);

  MessageHeader corrupt = makeHeader(30, 1);
  corrupt.magic = 0;
  slot = matchHeader(corrupt, posted);
  ASSERT_FALSE(slot);
  EXPECT_EQ(slot.status().code(), ErrorCode::RemoteError);
}

/// The kept corpus, in file-name order.
std::vector<std::vector<std::byte>> corpus() {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(TUCCL_SOURCE_DIR "/fuzz/corpus_net")) {
    paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::vector<std::byte>> inputs;
  for (const std::filesystem::path& path : paths) {
    std::ifstream file(path, std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    std::vector<std::byte> input(bytes.size());
    std::memcpy(input.data(), bytes.data(), bytes.size());
    inputs.push_back(std::move(input));
  }
  return inputs;
}

TEST(HandshakeCorpus, EveryKeptInputHoldsTheFuzzersInvariants) {
  const auto inputs = corpus();
  ASSERT_GE(inputs.size(), 10u);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(testing::exerciseHandshake(inputs[i]), "") << "input " << i;
}

// What libFuzzer does, in small and repeatable: flip, overwrite, insert, erase and splice bytes of
// the kept inputs, 30,000 mutants from a fixed seed.
TEST(HandshakeCorpus, DeterministicMutantsHoldTheFuzzersInvariants) {
  const auto inputs = corpus();
  ASSERT_FALSE(inputs.empty());
  std::mt19937_64 random(20240611);
  for (int round = 0; round < 30000; ++round) {
    std::vector<std::byte> input = inputs[random() % inputs.size()];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = input.empty() ? 0 : random() % input.size();
      switch (random() % 5) {
        case 0:
          if (!input.empty()) input[at] ^= std::byte{static_cast<unsigned char>(1u << (random() % 8))};
          break;
        case 1:
          if (!input.empty()) input[at] = std::byte{static_cast<unsigned char>(random())};
          break;
        case 2: input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), std::byte{static_cast<unsigned char>(random())}); break;
        case 3:
          if (!input.empty()) input.erase(input.begin() + static_cast<std::ptrdiff_t>(at));
          break;
        default: {
          const auto& other = inputs[random() % inputs.size()];
          const size_t from = other.empty() ? 0 : random() % other.size();
          input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), other.begin() + static_cast<std::ptrdiff_t>(from),
                       other.end());
          break;
        }
      }
    }
    const std::string broken = testing::exerciseHandshake(input);
    ASSERT_EQ(broken, "") << "mutant " << round;
  }
}

}  // namespace
}  // namespace tuccl::net
