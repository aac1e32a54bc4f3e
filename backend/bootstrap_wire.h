// The bootstrap's wire format and its rendezvous root (internal to bootstrap*.cc).
//
// Every message starts with the 64-bit magic of the unique id. Integers are little-endian;
// an address is one length byte and the sockaddr bytes, padded to kAddressBytes.
//
//   hello     rank -> root      magic, kind Hello, rank, nRanks, hostHash, listening address
//   answer    root -> rank      magic, ErrorCode, payload length, payload: for each rank its
//                               hostHash and address (ok), or the error message (not ok)
//   preamble  rank -> rank      magic, kind Ring | PointToPoint, sender's rank, tag; first on
//                               every connection between ranks
//   message   on a connection   magic, operation, argument (root or tag), payload length, payload
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/bootstrap.h"
#include "support/status.h"
#include "transport/socket.h"

namespace tuccl::backend::wire {

enum class Kind : uint32_t { Hello = 1, Ring = 2, PointToPoint = 3 };
enum class Operation : uint32_t { AllGather = 1, Broadcast = 2, PointToPoint = 3, Barrier = 4 };

inline constexpr size_t kAddressBytes = 1 + sizeof(sockaddr_in6);
inline constexpr size_t kHelloBytes = 8 + 4 + 4 + 4 + 8 + kAddressBytes;
inline constexpr size_t kAnswerHeaderBytes = 8 + 4 + 8;
inline constexpr size_t kPreambleBytes = 8 + 4 + 4 + 4;
inline constexpr size_t kMessageHeaderBytes = 8 + 4 + 4 + 8;
/// The largest payload a peer may announce; more means a corrupt stream.
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 32;

class Writer {
 public:
  Writer& u32(uint32_t value);
  Writer& u64(uint64_t value);
  Writer& address(const transport::SocketAddress& value);
  Writer& bytes(std::string_view value);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

/// Reads what a Writer wrote; past the end, values are zero and ok() turns false.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  uint32_t u32();
  uint64_t u64();
  transport::SocketAddress address();
  bool ok() const { return ok_; }

 private:
  std::string_view take(size_t bytes);
  std::string_view data_;
  bool ok_ = true;
};

// ---- The unique id -------------------------------------------------------------------------------

enum class RootHost : uint8_t { IdMaker = 0, RankZero = 1 };

struct DecodedId {
  RootHost rootHost = RootHost::IdMaker;
  uint64_t magic = 0;
  transport::SocketAddress root;
};

UniqueIdBytes encodeUniqueId(const DecodedId& id);
/// InvalidArgument when the bytes are not a TuCCL unique id of this version.
Expected<DecodedId> decodeUniqueId(const UniqueIdBytes& bytes);

// ---- Messages ------------------------------------------------------------------------------------

struct Hello {
  int32_t rank = 0;
  int32_t nRanks = 0;
  uint64_t hostHash = 0;
  transport::SocketAddress address;
};
std::string encodeHello(uint64_t magic, const Hello& hello);
/// `bytes` holds kHelloBytes whose magic was checked; nullopt when the kind is not Hello.
std::optional<Hello> decodeHello(std::string_view bytes);

struct Peer {
  uint64_t hostHash = 0;
  transport::SocketAddress address;
};
/// An answer: the table of every rank's host and address, or an error.
std::string encodeAnswer(uint64_t magic, const std::vector<Peer>& peers);
std::string encodeAnswer(uint64_t magic, const Status& failure);

struct Preamble {
  Kind kind = Kind::Ring;
  int32_t rank = 0;
  uint32_t tag = 0;
};
std::string encodePreamble(uint64_t magic, const Preamble& preamble);
Preamble decodePreamble(std::string_view bytes);

struct MessageHeader {
  uint64_t magic = 0;
  Operation operation = Operation::AllGather;
  uint32_t argument = 0;
  uint64_t length = 0;
};
std::string encodeMessageHeader(const MessageHeader& header);
MessageHeader decodeMessageHeader(std::string_view bytes);

// ---- Connections that have not introduced themselves yet ------------------------------------------

/// Logs refused connections to stderr, each once, and at most a few per listener.
class RefusalLog {
 public:
  explicit RefusalLog(std::string listener) : listener_(std::move(listener)) {}
  void refuse(const transport::Socket& socket, const std::string& reason);

 private:
  std::string listener_;
  int logged_ = 0;
};

/// An accepted connection whose first `size` bytes (starting with the magic) are still arriving.
struct PendingConnection {
  transport::Socket socket;
  std::string received;
};

enum class PendingState { Incomplete, Complete, Dropped };

/// Reads what arrived on `pending`, up to `size` bytes. Dropped when the peer closed or sent a
/// wrong magic (refused: logged, socket closed).
PendingState readPending(PendingConnection& pending, size_t size, uint64_t magic, RefusalLog& log);
/// Accepts every connection waiting on `listener` into `pending`.
Status acceptWaiting(const transport::Socket& listener, std::vector<PendingConnection>& pending);

/// Writes "tuccl bootstrap: <message>" to stderr (no logger dependency: the root thread may run
/// while the process exits).
void logBootstrap(const std::string& message);

/// "2 s", "0.5 s".
std::string secondsText(double seconds);

// ---- The rendezvous root -------------------------------------------------------------------------

struct RootJob {
  transport::Socket listener;
  uint64_t magic = 0;
  int32_t nRanks = -1;  ///< -1: taken from the first rank that joins
  transport::Deadline deadline;
  double timeoutSeconds = 0;
  std::string where;  ///< the address the ranks use, for messages
  std::shared_ptr<transport::AbortSignal> abort;  ///< may be null
};

/// Serves one rendezvous: collects every rank's hello, then answers each with the table of all
/// ranks (or with the error that ended it: a timeout naming the missing ranks, a disagreement).
/// Owns everything it touches, so it may run on a detached thread.
void serveRendezvous(RootJob job);

}  // namespace tuccl::backend::wire
