// The stores a rendezvous (rendezvous.h) keeps its round files in: names mapped to bytes, where a
// name is created once and never changes until it is removed.
//
//   dir:<path>        files in a directory every rank can reach (a shared file system across
//                     nodes): a name appears complete (written under a temporary name, then
//                     link()ed, which fails when the name exists)
//   tcp:<host>:<port> a tuccl-adapt-store process the job starts (rendezvous_server.h); one
//                     connection per communicator, admitted by the store's secret (the hello
//                     below); every request waits at most the timeout
//
// In:  a TUCCL_ADAPT_RENDEZVOUS value and, for tcp:, the file holding the store's secret
//      (TUCCL_ADAPT_SECRET_FILE). Out: a store, or an error naming the value and why (a directory
//      that does not exist, a store nobody answers at, a secret the store refused).
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
/// is writable; the TCP store admitted this rank's secret, read from `secretFile`, within
/// `timeout`). InvalidArgument for a malformed value; a tcp: store without a secret file is an
/// error before any connection.
Expected<std::unique_ptr<RendezvousStore>> openRendezvousStore(const std::string& spec,
                                                                std::chrono::milliseconds timeout,
                                                                const std::string& secretFile = {});

/// The secret of a TCP store kept in `file`: its bytes without trailing whitespace (so a final
/// newline does not count), 1 to kStoreMaxSecret of them. Refused, naming the file and why, when
/// it cannot be read, is not a regular file, is empty, or grants any permission to its group or to
/// other users (mode & 077: only its owner may read it, e.g. 0600 or 0400).
Expected<std::string> readRendezvousSecret(const std::string& file);

// ---- the TCP store's wire format (shared with rendezvous_server.h) ------------------------------
// A connection opens with the client's hello: the 8 bytes kStoreHelloMagic, the secret's length
// (4 bytes, little-endian) and the secret. The store answers 'H' (admitted) in the reply format
// below, or 'X' (wrong secret) and closes; it closes without a word a connection whose first bytes
// are no hello, or whose hello is not complete within its hello time.
// Then requests: op (1 byte: 'C' create, 'R' read, 'D' remove, 'P' remove prefix), name length and
// value length (4 bytes each, little-endian), name, value. A reply: status (1 byte: 'Y' created,
// 'N' existed, 'V' value follows, 'F' not found, 'K' done), value length (4 bytes), value.
inline constexpr char kStoreHelloMagic[8] = {'T', 'u', 'C', 'C', 'L', 'a', 's', '1'};
inline constexpr uint32_t kStoreMaxSecret = 1024;
inline constexpr uint32_t kStoreMaxName = 4096;
inline constexpr uint32_t kStoreMaxValue = 16u << 20;

/// The 4-byte little-endian lengths of the wire format.
void putUint32(std::string& out, uint32_t value);
uint32_t getUint32(const unsigned char* in);

}  // namespace tuccl
