// The socket network's wire formats (handshake.h).
#include "net/handshake.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tuccl::net {
namespace {

/// A further listener of a virtual device, compact: family (AF_INET or AF_INET6), port (network
/// order) and the host's 4 or 16 bytes.
struct CompactAddress {
  uint8_t family;
  uint8_t reserved;
  uint16_t port;
  uint8_t host[16];
};
static_assert(sizeof(CompactAddress) == 20);

/// The handle's layout inside NCCL's 128 bytes.
struct HandleLayout {
  uint64_t magic;
  uint64_t token;
  uint32_t addressLength;
  uint8_t address[sizeof(sockaddr_in6)];
  uintptr_t progress;
  uint32_t moreCount;  ///< further listeners (a virtual device's other members); 0 for one device
  CompactAddress more[kMaxHandleListeners - 1];
};
static_assert(sizeof(HandleLayout) <= kHandleBytes);

Status refused(const std::string& why) { return makeError(ErrorCode::InvalidArgument, why); }

CompactAddress compact(const transport::SocketAddress& address) {
  CompactAddress out{};
  out.family = static_cast<uint8_t>(address.family());
  if (address.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address.get());
    out.port = in->sin_port;
    std::memcpy(out.host, &in->sin_addr, 4);
  } else {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(address.get());
    out.port = in->sin6_port;
    std::memcpy(out.host, &in->sin6_addr, 16);
  }
  return out;
}

Expected<transport::SocketAddress> expand(const CompactAddress& in, size_t index) {
  transport::SocketAddress address;
  if (in.family == AF_INET) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = in.port;
    std::memcpy(&v4.sin_addr, in.host, 4);
    address = transport::SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&v4), sizeof v4);
  } else if (in.family == AF_INET6) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = in.port;
    std::memcpy(&v6.sin6_addr, in.host, 16);
    address = transport::SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&v6), sizeof v6);
  } else {
    return refused("the connection handle's listener " + std::to_string(index + 2) + " is neither IPv4 nor IPv6 (family " +
                   std::to_string(in.family) + ")");
  }
  if (address.port() == 0) return refused("the connection handle's listener " + std::to_string(index + 2) + " has no port");
  return address;
}

}  // namespace

// ---- Handle --------------------------------------------------------------------------------------

void writeHandle(void* handle, uint64_t token, const transport::SocketAddress& listener) {
  writeHandle(handle, token, std::span<const transport::SocketAddress>(&listener, 1));
}

void writeHandle(void* handle, uint64_t token, std::span<const transport::SocketAddress> listeners) {
  if (listeners.empty() || listeners.size() > static_cast<size_t>(kMaxHandleListeners))
    throw std::invalid_argument("a connection handle names 1 to " + std::to_string(kMaxHandleListeners) + " listeners");
  HandleLayout out{};
  out.magic = kHandleMagic;
  out.token = token;
  out.addressLength = std::min<uint32_t>(listeners[0].length(), sizeof out.address);
  std::memcpy(out.address, listeners[0].get(), out.addressLength);
  out.moreCount = static_cast<uint32_t>(listeners.size() - 1);
  for (size_t i = 1; i < listeners.size(); ++i) out.more[i - 1] = compact(listeners[i]);
  std::memset(handle, 0, kHandleBytes);
  std::memcpy(handle, &out, sizeof out);
}

Expected<ParsedHandle> parseHandle(const void* handle) {
  HandleLayout in;
  std::memcpy(&in, handle, sizeof in);
  if (in.magic != kHandleMagic) return refused("the connection handle is not one TuCCL's socket network wrote");
  // The address is copied into aligned storage before anything looks at its family.
  sockaddr_storage storage{};
  if (in.addressLength > sizeof in.address)
    return refused("the connection handle's address length " + std::to_string(in.addressLength) + " exceeds " +
                   std::to_string(sizeof in.address) + " bytes");
  std::memcpy(&storage, in.address, in.addressLength);
  const bool v4 = storage.ss_family == AF_INET && in.addressLength == sizeof(sockaddr_in);
  const bool v6 = storage.ss_family == AF_INET6 && in.addressLength == sizeof(sockaddr_in6);
  if (!v4 && !v6)
    return refused("the connection handle's address is neither IPv4 nor IPv6 (family " +
                   std::to_string(storage.ss_family) + ", " + std::to_string(in.addressLength) + " bytes)");
  ParsedHandle parsed;
  parsed.token = in.token;
  parsed.listener = transport::SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&storage), in.addressLength);
  if (parsed.listener.empty() || parsed.listener.port() == 0)
    return refused("the connection handle's address " + parsed.listener.toString() + " has no port");
  parsed.progress = in.progress;
  if (in.moreCount > static_cast<uint32_t>(kMaxHandleListeners - 1))
    return refused("the connection handle names " + std::to_string(in.moreCount) + " further listeners; at most " +
                   std::to_string(kMaxHandleListeners - 1) + " fit");
  for (uint32_t i = 0; i < in.moreCount; ++i) {
    Expected<transport::SocketAddress> more = expand(in.more[i], i);
    if (!more) return more.status();
    parsed.more.push_back(*more);
  }
  return parsed;
}

void storeProgress(void* handle, uintptr_t progress) {
  std::memcpy(static_cast<char*>(handle) + offsetof(HandleLayout, progress), &progress, sizeof progress);
}

// ---- Hello ---------------------------------------------------------------------------------------

Hello makeHello(uint64_t token, uint64_t nonce, int index, int nData, int nThreads) {
  return Hello{kHelloMagic, token, nonce, static_cast<uint16_t>(index), static_cast<uint16_t>(nData),
               static_cast<uint16_t>(nThreads), 0};
}

std::span<std::byte> HelloReader::unread() {
  return {reinterpret_cast<std::byte*>(&hello_) + done_, sizeof(Hello) - done_};
}

void HelloReader::received(size_t bytes) { done_ += std::min(bytes, sizeof(Hello) - done_); }

size_t HelloReader::feed(std::span<const std::byte> bytes) {
  const size_t taken = std::min(bytes.size(), sizeof(Hello) - done_);
  if (taken > 0) std::memcpy(unread().data(), bytes.data(), taken);
  received(taken);
  return taken;
}

Status checkHello(const Hello& hello, uint64_t token) {
  if (hello.magic != kHelloMagic) return refused("its handshake is not TuCCL's");
  if (hello.token != token) return refused("its handshake is for another listener");
  if (hello.nData < 1 || hello.nData > kMaxSockets || hello.nThreads < 1 || hello.nThreads > kMaxThreads ||
      hello.nThreads > hello.nData)
    return refused("its handshake announces " + std::to_string(hello.nData) + " data sockets and " +
                   std::to_string(hello.nThreads) + " threads (1.." + std::to_string(kMaxSockets) + " sockets, 1.." +
                   std::to_string(kMaxThreads) + " threads, no more threads than sockets)");
  if (hello.index > hello.nData)
    return refused("its handshake names socket " + std::to_string(hello.index) + " of " +
                   std::to_string(hello.nData + 1));
  return {};
}

Expected<int> HelloBoard::place(const Hello& hello) {
  if (Status valid = checkHello(hello, token_); !valid) return valid;
  if (placed_.empty()) {
    placed_.assign(static_cast<size_t>(hello.nData) + 1, false);
    nonce_ = hello.nonce;
    nThreads_ = hello.nThreads;
  } else if (hello.nonce != nonce_) {
    return refused("its handshake belongs to another connection than the one being accepted");
  } else if (placed_.size() != static_cast<size_t>(hello.nData) + 1 || hello.nThreads != nThreads_) {
    return refused("its handshake disagrees with the connection's other sockets on the counts");
  }
  if (placed_[hello.index]) return refused("its handshake repeats socket " + std::to_string(hello.index));
  placed_[hello.index] = true;
  ++count_;
  return static_cast<int>(hello.index);
}

void HelloBoard::reset() {
  placed_.clear();
  count_ = 0;
  nonce_ = 0;
  nThreads_ = 1;
}

// ---- Message header ------------------------------------------------------------------------------

MessageHeader makeHeader(int tag, uint64_t size) { return MessageHeader{kMessageMagic, tag, size}; }

Expected<int> matchHeader(const MessageHeader& header, std::span<const PostedBuffer> posted) {
  if (header.magic != kMessageMagic)
    return makeError(ErrorCode::RemoteError, "a message header without TuCCL's magic: the stream is corrupt");
  for (size_t i = 0; i < posted.size(); ++i) {
    if (posted[i].matched || posted[i].tag != header.tag) continue;
    if (header.size > posted[i].capacity)
      return makeError(ErrorCode::InvalidInput, "message truncated: " + std::to_string(header.size) + " bytes sent, " +
                                                    std::to_string(posted[i].capacity) + " posted");
    return static_cast<int>(i);
  }
  return makeError(ErrorCode::InvalidInput,
                   "a message with tag " + std::to_string(header.tag) + " matches none of the posted receive's buffers");
}

}  // namespace tuccl::net
