// Drives net/handshake.h with arbitrary bytes and checks what must hold whatever the bytes say.
// Shared by the libFuzzer target (fuzz/net_handshake_fuzzer.cc) and handshake_test's replay of
// the corpus (fuzz/corpus_net/) and of its deterministic mutants.
//
// Input: the first byte picks the format (its value mod 3), the rest feeds it:
//   0  handle   the next 128 bytes (zero-padded) are a handle from a peer
//   1  hellos   8 bytes of the listener's token, then records [socket (1 B) | n (1 B) | n bytes]:
//               the bytes arrive on that socket (mod 8); a socket whose 32-byte hello is complete
//               is judged by the listener's board and replaced by a fresh one
//   2  header   16 bytes of a message header, then a posted receive: 1 byte (mod 8, + 1) buffers,
//               each a 4-byte tag, a 4-byte capacity and a 1-byte "already matched"
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "net/handshake.h"

namespace tuccl::net::testing {

/// Takes bytes off the front of the input; past the end it yields zeros.
class ByteTaker {
 public:
  explicit ByteTaker(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool empty() const { return bytes_.empty(); }
  void take(void* out, size_t n) {
    const size_t have = std::min(n, bytes_.size());
    if (have > 0) std::memcpy(out, bytes_.data(), have);
    std::memset(static_cast<char*>(out) + have, 0, n - have);
    bytes_ = bytes_.subspan(have);
  }
  template <typename T>
  T take() {
    T value{};
    take(&value, sizeof value);
    return value;
  }
  std::span<const std::byte> takeSpan(size_t n) {
    const std::span<const std::byte> piece = bytes_.first(std::min(n, bytes_.size()));
    bytes_ = bytes_.subspan(piece.size());
    return piece;
  }

 private:
  std::span<const std::byte> bytes_;
};

inline std::string exerciseHandle(ByteTaker& in) {
  std::array<std::byte, kHandleBytes> handle{};
  in.take(handle.data(), handle.size());
  Expected<ParsedHandle> parsed = parseHandle(handle.data());
  if (!parsed) return parsed.status().message().empty() ? "a refused handle without a reason" : "";
  const transport::SocketAddress& listener = parsed->listener;
  if (listener.family() != AF_INET && listener.family() != AF_INET6) return "a handle accepted with a foreign family";
  if (listener.port() == 0) return "a handle accepted without a port";
  if (parsed->more.size() >= static_cast<size_t>(kMaxHandleListeners)) return "a handle accepted with too many listeners";
  for (const transport::SocketAddress& more : parsed->more) {
    if (more.family() != AF_INET && more.family() != AF_INET6) return "a further listener accepted with a foreign family";
    if (more.port() == 0) return "a further listener accepted without a port";
  }
  // What the listener would write for the same token and addresses reads back the same.
  std::vector<transport::SocketAddress> all{listener};
  all.insert(all.end(), parsed->more.begin(), parsed->more.end());
  std::array<std::byte, kHandleBytes> rewritten{};
  writeHandle(rewritten.data(), parsed->token, all);
  Expected<ParsedHandle> again = parseHandle(rewritten.data());
  if (!again || again->token != parsed->token || again->progress != 0 || again->listener.length() != listener.length() ||
      std::memcmp(again->listener.get(), listener.get(), listener.length()) != 0 ||
      again->more.size() != parsed->more.size())
    return "a written handle does not read back";
  for (size_t i = 0; i < parsed->more.size(); ++i) {
    if (again->more[i].toString() != parsed->more[i].toString()) return "a further listener does not read back";
  }
  storeProgress(rewritten.data(), parsed->progress | 1);
  Expected<ParsedHandle> progressed = parseHandle(rewritten.data());
  if (!progressed || progressed->progress != (parsed->progress | 1) || progressed->token != parsed->token)
    return "the stored progress does not read back";
  return "";
}

inline std::string exerciseHellos(ByteTaker& in) {
  const uint64_t token = in.take<uint64_t>();
  HelloBoard board(token);
  std::array<HelloReader, 8> readers;
  std::array<std::vector<std::byte>, 8> arrived;
  std::vector<bool> indices;
  size_t placed = 0;
  while (!in.empty()) {
    const size_t socket = in.take<uint8_t>() % readers.size();
    const std::span<const std::byte> piece = in.takeSpan(in.take<uint8_t>());
    const size_t taken = readers[socket].feed(piece);
    if (taken > piece.size() || taken > sizeof(Hello)) return "a reader took more than it was given";
    arrived[socket].insert(arrived[socket].end(), piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(taken));
    if (!readers[socket].complete()) {
      if (taken < piece.size()) return "an incomplete reader left bytes";
      continue;
    }
    const Hello hello = readers[socket].hello();
    if (arrived[socket].size() != sizeof(Hello) || std::memcmp(&hello, arrived[socket].data(), sizeof hello) != 0)
      return "a hello differs from the bytes that made it";
    readers[socket] = HelloReader();
    arrived[socket].clear();
    const bool wellFormed = checkHello(hello, token).ok();
    const size_t before = board.sockets();
    Expected<int> index = board.place(hello);
    if (!index) {
      if (index.status().message().empty()) return "a refused hello without a reason";
      if (board.sockets() != before) return "a refused hello changed the connection";
      continue;
    }
    if (!wellFormed) return "a hello the check refuses was placed";
    if (board.sockets() != static_cast<size_t>(hello.nData) + 1) return "the connection's size is not the hello's";
    if (before == 0) indices.assign(board.sockets(), false);
    if (*index < 0 || static_cast<size_t>(*index) >= indices.size() || indices[static_cast<size_t>(*index)])
      return "a socket index placed twice or out of range";
    indices[static_cast<size_t>(*index)] = true;
    ++placed;
    if (board.complete() != (placed == indices.size())) return "the connection's completeness is wrong";
    if (board.complete()) {
      board.reset();
      placed = 0;
      indices.clear();
      if (board.sockets() != 0 || board.complete()) return "a reset connection is not empty";
    }
  }
  return "";
}

inline std::string exerciseHeader(ByteTaker& in) {
  const MessageHeader header = in.take<MessageHeader>();
  const int n = in.take<uint8_t>() % 8 + 1;
  std::vector<PostedBuffer> posted(static_cast<size_t>(n));
  for (PostedBuffer& buffer : posted) {
    buffer.tag = in.take<int32_t>();
    buffer.capacity = in.take<uint32_t>();
    buffer.matched = in.take<uint8_t>() % 2 == 1;
  }
  int first = -1;  // the buffer the header must go to
  for (int i = 0; i < n && first < 0; ++i)
    if (!posted[static_cast<size_t>(i)].matched && posted[static_cast<size_t>(i)].tag == header.tag) first = i;
  Expected<int> slot = matchHeader(header, posted);
  if (header.magic != kMessageMagic)
    return !slot && slot.status().code() == ErrorCode::RemoteError ? "" : "a header without the magic was matched";
  if (first < 0) return !slot && slot.status().code() == ErrorCode::InvalidInput ? "" : "a header matched a foreign tag";
  if (header.size > posted[static_cast<size_t>(first)].capacity)
    return !slot && slot.status().message().starts_with("message truncated") ? "" : "a truncation went unreported";
  return slot && *slot == first ? "" : "a header went to the wrong buffer";
}

/// The first broken invariant, or "" when the input was handled as it must be.
inline std::string exerciseHandshake(std::span<const std::byte> input) {
  ByteTaker in(input);
  switch (in.take<uint8_t>() % 3) {
    case 0: return exerciseHandle(in);
    case 1: return exerciseHellos(in);
    default: return exerciseHeader(in);
  }
}

}  // namespace tuccl::net::testing
