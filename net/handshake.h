// The socket network's wire formats and their checks, as pure functions over bytes: the handle
// listen() writes for NCCL to ship to the peer, the hello that opens every socket of a
// connection, and the header of every message on the control socket. Used by socket_net.cc /
// socket_comm.cc and by the handshake fuzzer (fuzz/net_handshake_fuzzer.cc); nothing here does I/O.
//
// In:  bytes a peer sent (or NCCL passed on from a peer), which may be anything.
// Out: the fields, or a Status saying why the bytes are refused — never a crash, never a read
//      outside the bytes given.
//
//   handle (≤ 128 B)   magic "TuCCLNet", the listener's random token, the length and bytes of its
//                      sockaddr (IPv4 or IPv6), and the sender's connect progress (a pointer the
//                      sender keeps in its own copy of the handle, as NCCL's transports do; a
//                      listener writes 0 there); then, for a virtual device (NIC fusion), the
//                      count and addresses of its other members' listeners (family, port and
//                      host bytes, 20 B each; 0 for a physical device)
//   hello (32 B)       magic "TuCCLHel", token, the sender's connection nonce, the socket's index
//                      (0: control, 1..nData: data), nData, nThreads
//   header (16 B)      magic "TuMs", tag, size
// Integers are in the host's byte order: both ends run TuCCL on the same architecture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "support/status.h"
#include "transport/socket.h"

namespace tuccl::net {

inline constexpr uint64_t kHandleMagic = 0x54754343'4c4e6574ULL;  // "TuCCLNet"
inline constexpr uint64_t kHelloMagic = 0x54754343'4c48656cULL;   // "TuCCLHel"
inline constexpr uint32_t kMessageMagic = 0x54754d73;             // "TuMs"
inline constexpr size_t kHandleBytes = 128;                        // NCCL_NET_HANDLE_MAXSIZE
inline constexpr int kMaxThreads = 16;                              // helper threads per connection
inline constexpr int kMaxSockets = 64;                              // data sockets per connection

// ---- Handle --------------------------------------------------------------------------------------

/// The listeners a handle can name: a virtual device's members (one listener each) fit 128 bytes
/// up to this many.
inline constexpr int kMaxHandleListeners = 4;

/// A handle's fields once checked.
struct ParsedHandle {
  uint64_t token = 0;
  transport::SocketAddress listener;  ///< an IPv4 or IPv6 address with a port
  /// A virtual device's other members' listeners, in member order (empty: a physical device).
  std::vector<transport::SocketAddress> more;
  uintptr_t progress = 0;             ///< the sender's connect progress; 0 in a fresh handle
};

/// Fills the kHandleBytes of `handle`: the listener's token and address, no progress.
void writeHandle(void* handle, uint64_t token, const transport::SocketAddress& listener);
/// The same for the 1 to kMaxHandleListeners listeners of a virtual device's members (all share
/// the token). std::invalid_argument for none or too many.
void writeHandle(void* handle, uint64_t token, std::span<const transport::SocketAddress> listeners);
/// Reads kHandleBytes at `handle`; InvalidArgument when the magic is wrong, the address length
/// does not fit, an address is neither IPv4 nor IPv6 of the length given, a port is 0, or the
/// count of further listeners exceeds kMaxHandleListeners - 1.
Expected<ParsedHandle> parseHandle(const void* handle);
/// Records the sender's connect progress in its copy of the handle.
void storeProgress(void* handle, uintptr_t progress);

// ---- Hello ---------------------------------------------------------------------------------------

struct Hello {
  uint64_t magic = 0;
  uint64_t token = 0;  ///< the listener's, from the handle
  uint64_t nonce = 0;  ///< the sender's, the same on all sockets of one connection
  uint16_t index = 0;  ///< 0: control, 1..nData: data
  uint16_t nData = 0;
  uint16_t nThreads = 0;
  uint16_t reserved = 0;
};
static_assert(sizeof(Hello) == 32);

Hello makeHello(uint64_t token, uint64_t nonce, int index, int nData, int nThreads);

/// A hello arriving in pieces: receive into unread(), then received(n).
class HelloReader {
 public:
  std::span<std::byte> unread();
  void received(size_t bytes);  ///< at most unread().size()
  /// Copies as much of `bytes` as the hello still lacks; the count taken.
  size_t feed(std::span<const std::byte> bytes);
  bool complete() const { return done_ == sizeof(Hello); }
  const Hello& hello() const { return hello_; }

 private:
  Hello hello_{};
  size_t done_ = 0;
};

/// The listener's side of one connection being assembled from the hellos of its sockets: the
/// first acceptable hello fixes the nonce and the counts; every other must match them and take a
/// free index. The sockets themselves stay with the caller, placed at the index place() returns.
class HelloBoard {
 public:
  explicit HelloBoard(uint64_t token) : token_(token) {}

  /// The index for the socket whose hello this is, or InvalidArgument saying why it is refused
  /// (not TuCCL's, another listener's, counts out of range, another connection's, a taken index).
  Expected<int> place(const Hello& hello);
  /// Every socket of the connection has been placed.
  bool complete() const { return !placed_.empty() && count_ == placed_.size(); }
  /// Sockets of the connection (1 + nData) once a first hello was placed, else 0.
  size_t sockets() const { return placed_.size(); }
  int nThreads() const { return nThreads_; }
  uint64_t token() const { return token_; }
  /// Starts over for the next connection (after complete()).
  void reset();

 private:
  uint64_t token_;
  uint64_t nonce_ = 0;
  int nThreads_ = 1;
  std::vector<bool> placed_;
  size_t count_ = 0;
};

/// Why a hello is unacceptable on its own (magic, token, counts, index), or Ok.
Status checkHello(const Hello& hello, uint64_t token);

// ---- Message header ------------------------------------------------------------------------------

struct MessageHeader {
  uint32_t magic = 0;
  int32_t tag = 0;
  uint64_t size = 0;
};
static_assert(sizeof(MessageHeader) == 16);

MessageHeader makeHeader(int tag, uint64_t size);

/// One buffer of a posted (grouped) receive, as matching sees it.
struct PostedBuffer {
  int tag = 0;
  size_t capacity = 0;
  bool matched = false;  ///< already filled by an earlier message of the same receive
};

/// The buffer a message header goes to: the first unmatched buffer with its tag. RemoteError when
/// the header lacks the magic (the stream is corrupt); InvalidInput when no unmatched buffer has
/// the tag, or when the message is larger than the buffer ("message truncated").
Expected<int> matchHeader(const MessageHeader& header, std::span<const PostedBuffer> posted);

}  // namespace tuccl::net
