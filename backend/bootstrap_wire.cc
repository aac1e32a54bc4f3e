// The bootstrap's wire format (bootstrap_wire.h).
#include "backend/bootstrap_wire.h"

#include <sys/socket.h>

#include <cstdio>
#include <cstring>

namespace tuccl::backend::wire {

using transport::SocketAddress;

namespace {

constexpr uint8_t kIdVersion = 1;
constexpr size_t kIdMagicOffset = 8;
constexpr size_t kIdAddressOffset = 16;
constexpr int kMaxRefusalsLogged = 8;

void putLittleEndian(char* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t getLittleEndian(const char* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return value;
}

uint64_t magicOf(std::string_view bytes) { return bytes.size() >= 8 ? getLittleEndian(bytes.data(), 8) : 0; }

}  // namespace

// ---- Writer / Reader -----------------------------------------------------------------------------

Writer& Writer::u32(uint32_t value) {
  char out[4];
  putLittleEndian(out, value, 4);
  data_.append(out, 4);
  return *this;
}

Writer& Writer::u64(uint64_t value) {
  char out[8];
  putLittleEndian(out, value, 8);
  data_.append(out, 8);
  return *this;
}

Writer& Writer::address(const SocketAddress& value) {
  char out[kAddressBytes] = {};
  out[0] = static_cast<char>(value.length());
  std::memcpy(out + 1, value.get(), value.length());
  data_.append(out, kAddressBytes);
  return *this;
}

Writer& Writer::bytes(std::string_view value) {
  data_.append(value);
  return *this;
}

std::string_view Reader::take(size_t bytes) {
  if (!ok_ || data_.size() < bytes) {
    ok_ = false;
    return {};
  }
  std::string_view taken = data_.substr(0, bytes);
  data_.remove_prefix(bytes);
  return taken;
}

uint32_t Reader::u32() {
  std::string_view in = take(4);
  return in.empty() ? 0 : static_cast<uint32_t>(getLittleEndian(in.data(), 4));
}

uint64_t Reader::u64() {
  std::string_view in = take(8);
  return in.empty() ? 0 : getLittleEndian(in.data(), 8);
}

SocketAddress Reader::address() {
  std::string_view in = take(kAddressBytes);
  if (in.empty()) return {};
  const auto length = static_cast<socklen_t>(static_cast<uint8_t>(in[0]));
  sockaddr_storage storage{};
  std::memcpy(&storage, in.data() + 1, std::min<size_t>(length, kAddressBytes - 1));
  SocketAddress address = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&storage), length);
  if (address.empty()) ok_ = false;
  return address;
}

// ---- The unique id -------------------------------------------------------------------------------

UniqueIdBytes encodeUniqueId(const DecodedId& id) {
  UniqueIdBytes bytes;
  bytes.bytes[0] = static_cast<char>(kIdVersion);
  bytes.bytes[1] = static_cast<char>(id.rootHost);
  bytes.bytes[2] = static_cast<char>(id.root.family() == AF_INET6 ? 6 : 4);
  putLittleEndian(bytes.bytes + kIdMagicOffset, id.magic, 8);
  std::memcpy(bytes.bytes + kIdAddressOffset, id.root.get(), id.root.length());
  return bytes;
}

Expected<DecodedId> decodeUniqueId(const UniqueIdBytes& bytes) {
  const auto version = static_cast<uint8_t>(bytes.bytes[0]);
  if (version != kIdVersion)
    return makeError(ErrorCode::InvalidArgument, "not a TuCCL unique id (version byte " + std::to_string(version) +
                                                     ", expected " + std::to_string(kIdVersion) + ")");
  const auto rootHost = static_cast<uint8_t>(bytes.bytes[1]);
  const auto family = static_cast<uint8_t>(bytes.bytes[2]);
  sockaddr_storage storage{};
  std::memcpy(&storage, bytes.bytes + kIdAddressOffset, sizeof(sockaddr_in6));
  const socklen_t length = family == 6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  DecodedId id;
  id.rootHost = static_cast<RootHost>(rootHost);
  id.magic = getLittleEndian(bytes.bytes + kIdMagicOffset, 8);
  id.root = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&storage), length);
  const int expectedFamily = family == 6 ? AF_INET6 : AF_INET;
  if (rootHost > 1 || (family != 4 && family != 6) || id.root.empty() || id.root.family() != expectedFamily ||
      id.root.port() == 0)
    return makeError(ErrorCode::InvalidArgument, "not a TuCCL unique id (malformed root address)");
  return id;
}

// ---- Messages ------------------------------------------------------------------------------------

std::string encodeHello(uint64_t magic, const Hello& hello) {
  Writer out;
  out.u64(magic).u32(static_cast<uint32_t>(Kind::Hello)).u32(static_cast<uint32_t>(hello.rank));
  out.u32(static_cast<uint32_t>(hello.nRanks)).u64(hello.hostHash).address(hello.address);
  return out.data();
}

std::optional<Hello> decodeHello(std::string_view bytes) {
  Reader in(bytes);
  in.u64();
  const uint32_t kind = in.u32();
  Hello hello;
  hello.rank = static_cast<int32_t>(in.u32());
  hello.nRanks = static_cast<int32_t>(in.u32());
  hello.hostHash = in.u64();
  hello.address = in.address();
  if (!in.ok() || kind != static_cast<uint32_t>(Kind::Hello)) return std::nullopt;
  return hello;
}

std::string encodeAnswer(uint64_t magic, const std::vector<Peer>& peers) {
  Writer payload;
  for (const Peer& peer : peers) payload.u64(peer.hostHash).address(peer.address);
  Writer out;
  out.u64(magic).u32(static_cast<uint32_t>(ErrorCode::Ok)).u64(payload.data().size()).bytes(payload.data());
  return out.data();
}

std::string encodeAnswer(uint64_t magic, const Status& failure) {
  Writer out;
  out.u64(magic).u32(static_cast<uint32_t>(failure.code())).u64(failure.message().size()).bytes(failure.message());
  return out.data();
}

std::string encodePreamble(uint64_t magic, const Preamble& preamble) {
  Writer out;
  out.u64(magic).u32(static_cast<uint32_t>(preamble.kind)).u32(static_cast<uint32_t>(preamble.rank)).u32(preamble.tag);
  return out.data();
}

Preamble decodePreamble(std::string_view bytes) {
  Reader in(bytes);
  in.u64();
  Preamble preamble;
  preamble.kind = static_cast<Kind>(in.u32());
  preamble.rank = static_cast<int32_t>(in.u32());
  preamble.tag = in.u32();
  return preamble;
}

std::string encodeMessageHeader(const MessageHeader& header) {
  Writer out;
  out.u64(header.magic).u32(static_cast<uint32_t>(header.operation)).u32(header.argument).u64(header.length);
  return out.data();
}

MessageHeader decodeMessageHeader(std::string_view bytes) {
  Reader in(bytes);
  MessageHeader header;
  header.magic = in.u64();
  header.operation = static_cast<Operation>(in.u32());
  header.argument = in.u32();
  header.length = in.u64();
  return header;
}

// ---- Pending connections -------------------------------------------------------------------------

void logBootstrap(const std::string& message) { std::fprintf(stderr, "tuccl bootstrap: %s\n", message.c_str()); }

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

void RefusalLog::refuse(const transport::Socket& socket, const std::string& reason) {
  if (logged_ >= kMaxRefusalsLogged) return;
  Expected<SocketAddress> peer = socket.peerAddress();
  std::string message = "refused a connection from " + (peer ? peer->toString() : std::string("an unknown peer")) +
                        " to " + listener_ + ": " + reason;
  if (++logged_ == kMaxRefusalsLogged) message += " (further refusals here are not logged)";
  logBootstrap(message);
}

PendingState readPending(PendingConnection& pending, size_t size, uint64_t magic, RefusalLog& log) {
  const size_t had = pending.received.size();
  pending.received.resize(size);
  Expected<size_t> got = transport::recvAvailable(pending.socket, pending.received.data() + had, size - had);
  pending.received.resize(had + (got ? *got : 0));
  if (!got) return PendingState::Dropped;
  if (pending.received.size() >= 8 && magicOf(pending.received) != magic) {
    log.refuse(pending.socket, "wrong magic (another job's rank, or not a TuCCL bootstrap peer)");
    pending.socket.close();
    return PendingState::Dropped;
  }
  return pending.received.size() == size ? PendingState::Complete : PendingState::Incomplete;
}

Status acceptWaiting(const transport::Socket& listener, std::vector<PendingConnection>& pending) {
  while (true) {
    Expected<transport::Socket> accepted = transport::acceptOne(listener, {transport::Clock::now(), -1});
    if (!accepted) return accepted.status().code() == ErrorCode::Timeout ? Status() : accepted.status();
    pending.push_back(PendingConnection{std::move(accepted).value(), {}});
  }
}

}  // namespace tuccl::backend::wire
