// The stores a rendezvous (rendezvous.h) keeps its round files in: names mapped to bytes, where a
// name is created once and never changes until it is removed.
//
//   dir:<path>        files in a directory every rank can reach (a shared file system across
//                     nodes): a name appears complete (written under a temporary name, then
//                     link()ed, which fails when the name exists)
//   tcp:<host>:<port> a tuccl-adapt-store process the job starts (rendezvous_server.h); one
//                     connection per communicator; every request waits at most the timeout
//
// In:  a TUCCL_ADAPT_RENDEZVOUS value. Out: a store, or an error naming the value and why (a
// directory that does not exist, a store nobody answers at).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "support/status.h"

namespace tuccl {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  /// Stores `bytes` under `name` unless the name exists; whether this call stored them.
  virtual Expected<bool> create(const std::string& name, const std::string& bytes) = 0;
  /// What `name` holds; NotFound when it does not exist.
  virtual Expected<std::string> read(const std::string& name) = 0;
  /// Removes `name` (nothing when it does not exist).
  virtual void remove(const std::string& name) = 0;
  /// Removes every name that starts with `prefix`.
  virtual void removePrefix(const std::string& prefix) = 0;
  /// "dir:/path" or "tcp:host:port", for logs.
  virtual std::string describe() const = 0;
};

/// The store a TUCCL_ADAPT_RENDEZVOUS value names, checked usable now (the directory exists and
/// is writable; the TCP store answers within `timeout`). InvalidArgument for a malformed value.
Expected<std::unique_ptr<RendezvousStore>> openRendezvousStore(const std::string& spec,
                                                                std::chrono::milliseconds timeout);

// ---- the TCP store's wire format (shared with rendezvous_server.h) ------------------------------
// A request: op (1 byte: 'C' create, 'R' read, 'D' remove, 'P' remove prefix), name length and
// value length (4 bytes each, little-endian), name, value. A reply: status (1 byte: 'Y' created,
// 'N' existed, 'V' value follows, 'F' not found, 'K' done), value length (4 bytes), value.
inline constexpr uint32_t kStoreMaxName = 4096;
inline constexpr uint32_t kStoreMaxValue = 16u << 20;

/// The 4-byte little-endian lengths of the wire format.
void putUint32(std::string& out, uint32_t value);
uint32_t getUint32(const unsigned char* in);

}  // namespace tuccl
