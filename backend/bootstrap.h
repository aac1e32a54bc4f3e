// The bootstrap: how the ranks of a communicator find each other and exchange small messages
// over TCP before (and beside) any data path (design.md "libtuccl").
//
// The unique id (128 bytes, tucclUniqueId) carries the root's address (IPv4 or IPv6, port) and a
// random 64-bit magic. The root is a listener started by makeUniqueId (in the process that made
// the id; it serves one rendezvous and ends) or, with TUCCL_COMM_ID=host:port, by rank 0 inside
// connect(). Every rank opens its own listening socket, sends (magic, rank, nRanks, its address)
// to the root; the root answers every rank with the table of all addresses once all nRanks
// joined. Then each rank connects to its ring successor; allgather / broadcast / barrier run over
// the ring. A connection whose first message does not carry the magic is closed and logged, never
// accepted. Every wait is bounded by the timeout and by abort().
//
// Unique id layout (all other bytes zero):
//   [0]       version, 1
//   [1]       who runs the root: 0 the process that called makeUniqueId, 1 rank 0 (TUCCL_COMM_ID)
//   [2]       address family of the root: 4 or 6
//   [8..15]   the magic, little-endian
//   [16..43]  the root's sockaddr_in / sockaddr_in6 as the OS lays it out (port in network order)
//
// Interfaces: a rank listens on TUCCL_SOCKET_IFNAME's address when set (an interface name, or a
// prefix of one), else on the local address the routing table uses toward the root (loopback
// when the root is loopback). makeUniqueId's root advertises TUCCL_SOCKET_IFNAME's address, else
// the first up non-loopback IPv4 interface's, else 127.0.0.1, and listens on all addresses.
//
// Calls (allGather, broadcast, barrier, send, recv) are serialised: one at a time per bootstrap.
// abort() and peerLost() may be called from any thread at any time. After a failed call the
// bootstrap stays failed: every later call returns the same error (sendWithin, recvWithin and
// awaitNotes excepted: they fail alone).
//
// Leaving (a communicator destroyed on this rank, bootstrap.cc "Leaving"): leave() sends a
// goodbye on both ring connections before they close, so the neighbours' peerLost() takes the
// closing for an orderly leave, not a crash, and a neighbour's ring call that meets it fails
// saying that this rank left. A rank that ends without leave() (a crash, tucclCommAbort) is lost.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace tuccl::transport {
class AbortSignal;
}

namespace tuccl::backend {

inline constexpr size_t kUniqueIdBytes = 128;
struct UniqueIdBytes {
  char bytes[kUniqueIdBytes] = {};
};

struct BootstrapOptions {
  double timeoutSeconds = 300;  ///< TUCCL_TIMEOUT_S: every wait gives up past it (ErrorCode::Timeout)
  /// Address to listen on for peers: empty picks the interface (TUCCL_SOCKET_IFNAME, else the
  /// address the root is reached by; loopback when the root is loopback).
  std::string interfaceName;
  /// When set, the bootstrap's abort signal (abort() raises it): its owner may stop a rendezvous
  /// still in progress from another thread (a communicator aborted during a non-blocking init).
  std::shared_ptr<transport::AbortSignal> cancel;
};

/// A fresh id: random magic, and a root listener on this process serving one rendezvous (a
/// detached thread, bounded by the timeout). With TUCCL_COMM_ID=host:port set in the
/// environment, no listener is started and the id is a function of that value (every process
/// computes the same one; the magic is a hash of the value and TUCCL_COMM_MAGIC when set).
Expected<UniqueIdBytes> makeUniqueId(const BootstrapOptions& options);
/// makeUniqueId as if TUCCL_COMM_ID were not set: always a fresh id with its own root listener on
/// an ephemeral port (tucclCommSplit and tucclCommShrink: every new communicator needs a
/// rendezvous of its own, while TUCCL_COMM_ID names the launch's one address).
Expected<UniqueIdBytes> makeFreshUniqueId(const BootstrapOptions& options);

/// The id every process of a launch computes from "host:port" (TUCCL_COMM_ID); InvalidArgument
/// naming the value when it does not parse.
Expected<UniqueIdBytes> uniqueIdFromAddress(const std::string& hostPort);

/// Human-readable form of an id ("127.0.0.1:41234 magic 0x1234..."), for logs.
std::string describeUniqueId(const UniqueIdBytes& id);

class Bootstrap {
 public:
  /// Rendezvous of rank `rank` of `nRanks` at the root named by `id`. When the id was made from
  /// TUCCL_COMM_ID (uniqueIdFromAddress), rank 0 also runs the root listener. Errors:
  /// InvalidArgument (bad rank/nRanks or id), Timeout, SystemError (socket failures, named),
  /// RemoteError (a peer disagreed on nRanks).
  static Expected<std::unique_ptr<Bootstrap>> connect(const UniqueIdBytes& id, int32_t rank, int32_t nRanks,
                                                      const BootstrapOptions& options);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int32_t rank() const;
  int32_t nRanks() const;
  /// Every rank contributes `bytes` (the same size on every rank); returns them by rank.
  Expected<std::vector<std::string>> allGather(const std::string& bytes);
  /// Rank `root`'s bytes on every rank.
  Expected<std::string> broadcast(const std::string& bytes, int32_t root);
  Status barrier();
  /// Point to point, in order per (peer, tag); both sides must call.
  Status send(int32_t peer, uint32_t tag, const std::string& bytes);
  Expected<std::string> recv(int32_t peer, uint32_t tag);
  /// send and recv bounded by `seconds` instead of the timeout, that leave the bootstrap usable
  /// when they fail and work after a failed ring call or leave(): a peer's end or absence fails
  /// only the exchange with it (the ranks that remain after tucclCommShrink's abort, goodbyes).
  Status sendWithin(int32_t peer, uint32_t tag, const std::string& bytes, double seconds);
  Expected<std::string> recvWithin(int32_t peer, uint32_t tag, double seconds);
  /// Waits for one message on (peer, tag) from each of `peers` (this rank excluded) until all
  /// came, `seconds` passed or abort(): answers those that came, by rank. A peer whose process
  /// ended — the connection this rank opened to it on `tag` (sendWithin) closed — is no longer
  /// waited for. Fails alone, like sendWithin.
  std::vector<std::pair<int32_t, std::string>> awaitNotes(const std::vector<int32_t>& peers, uint32_t tag,
                                                          double seconds);
  /// This rank leaves in order: a goodbye to both ring neighbours (bounded by a second; a
  /// neighbour already gone is skipped). Later calls fail, but for sendWithin, recvWithin and
  /// awaitNotes.
  void leave();

  /// Unblocks every current and future wait of this bootstrap (it then returns an error);
  /// callable from any thread.
  void abort();
  /// Whether a ring neighbour's connection closed without its goodbye (its process ended):
  /// non-blocking, used by the communicator's watchdog to fail calls early instead of waiting for
  /// the timeout. A neighbour that left (leave()) is not lost.
  bool peerLost();
  /// This rank's host: a hash of the host name and the boot id (equal for ranks on one machine),
  /// for grouping ranks into nodes.
  uint64_t hostHash() const;
  /// This rank's listening address as the other ranks reach it ("10.0.0.3:41234"; empty with one
  /// rank), for logs.
  std::string address() const;

 private:
  Bootstrap();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What a launcher put in the environment: rank, size, local rank and the rendezvous address.
struct LaunchEnvironment {
  int32_t rank = -1;
  int32_t nRanks = -1;
  int32_t localRank = -1;    ///< -1: unknown
  std::string commId;        ///< "host:port"
  std::string source;        ///< which launcher's variables were read ("tuccl-run", "mpirun", ...)
};

/// Reads, first found wins: TUCCL_RANK / TUCCL_NRANKS / TUCCL_LOCAL_RANK (tuccl-run);
/// OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI's mpirun); PMI_RANK / PMI_SIZE /
/// MPI_LOCALRANKID (MPICH, Hydra); SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID (srun); RANK /
/// WORLD_SIZE / LOCAL_RANK (torchrun). The local rank is optional. The address: TUCCL_COMM_ID,
/// else MASTER_ADDR and MASTER_PORT + 1 (torchrun itself listens on MASTER_PORT). An error names
/// the variable that is missing (NotFound: no rank variable, a size or an address missing) or
/// malformed (InvalidArgument: not an integer, out of range, not host:port).
Expected<LaunchEnvironment> readLaunchEnvironment();

}  // namespace tuccl::backend
