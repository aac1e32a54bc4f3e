// A communicator of libtuccl (design.md "libtuccl"): the bootstrap among its ranks, a device,
// the staging segments every rank of the node maps, the plan cache, and the calls in issue order.
//
// Init (collective over the ranks): rendezvous; every rank reports its host, table hash,
// device kind and staging size, and all must agree (a mismatch is an init error on every rank,
// never a silent divergence); staging segments are created, exchanged and mapped; then the
// names are removed. A call: its arguments are converted and checked once (callOf;
// InvalidArgument with the reason), the plan cache decides it, its plan's rings are placed on
// first use, and the device enqueues the rank's kernel. A watchdog thread turns a peer's death into an
// abort of every running and future call (RemoteError) well before the timeout.
//
// Ending (finalize, for tucclCommDestroy) is local: this rank drains its own calls and leaves,
// waiting for no peer. It says goodbye on the bootstrap (the peers' watchdogs take its closing
// connections for an orderly leave), and what a peer may still touch while it finishes its own
// last calls — the CUDA staging its kernels write credits into, the inter-node proxy that carries
// their slices — stays with a reaper thread until those peers said their calls are done too
// (communicator.cc "Leaving").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adapt/runtime.h"
#include "backend/bootstrap.h"
#include "backend/device.h"
#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::backend {

/// Settings from the environment (README "Environment"); an error names the variable.
struct CommOptions {
  double timeoutSeconds = 300;           ///< TUCCL_TIMEOUT_S
  std::string device = "auto";           ///< TUCCL_DEVICE: auto, cpu, cuda
  int64_t stagingBytes = 64ll << 20;     ///< TUCCL_STAGING_BYTES: per rank (CUDA device: 256M unless set)
  bool stagingBytesSet = false;          ///< TUCCL_STAGING_BYTES was given
  int32_t stagingSlots = 4;              ///< TUCCL_STAGING_SLOTS: slots per ring
  int64_t chunkSize = 256 << 10;         ///< TUCCL_CHUNK_SIZE: slice bytes (set: beats the table; CUDA device: 1M unless set)
  bool chunkSizeForced = false;          ///< TUCCL_CHUNK_SIZE was given
  std::string algorithm;                 ///< TUCCL_ALGO: a built-in algorithm or a .resccl file (beats the table)
  int32_t channels = 0;                  ///< TUCCL_NCHANNELS (beats the table); 0: the table's or 1
  std::optional<Protocol> protocol;      ///< TUCCL_PROTO: LL, LL128 or Simple (beats the table)
  bool fuse = true;                      ///< TUCCL_FUSE: 0 lowers without fused primitives
  std::string interfaceName;             ///< TUCCL_SOCKET_IFNAME: the bootstrap's interface; empty: chosen
  std::string tablePath;                 ///< TUCCL_TUNER_TABLE: the tuning table file; empty: none
  std::string cacheDir;                  ///< TUCCL_CACHE_DIR (defaultCacheDir())
  AdaptSettings adapt;                   ///< TUCCL_ADAPT, TUCCL_ADAPT_FILE, ... (adaptive_runtime.h)
  std::string name;                      ///< tucclConfig_t::commName: said in the communicator's log lines
};
Expected<CommOptions> commOptionsFromEnvironment();

/// One send or receive of point-to-point (tucclSend / tucclRecv), checked: the bytes travel as
/// they are, whatever their datatype.
struct PeerCall {
  bool send = true;
  int32_t peer = 0;
  void* buffer = nullptr;  ///< the send buffer (read only) or the receive buffer
  int64_t bytes = 0;
};

class Communicator {
 public:
  static Expected<std::unique_ptr<Communicator>> create(const UniqueIdBytes& id, int32_t rank, int32_t nRanks,
                                                        const CommOptions& options, int cudaDevice);
  /// create() in two steps, so that another thread may stop an init in progress (cancelInit):
  /// make() checks the rank and size (InvalidArgument) and does nothing else; init() is the
  /// collective part. When init() fails the communicator stays, unusable: every call fails with
  /// the init's error (asyncError()) and finalize() frees nothing shared.
  static Expected<std::unique_ptr<Communicator>> make(int32_t rank, int32_t nRanks, const CommOptions& options);
  Status init(const UniqueIdBytes& id, int cudaDevice);
  /// Stops an init in progress, or the next one: its waits on the peers end with Aborted. Any
  /// thread; only before init() returned (afterwards abort()).
  void cancelInit();
  /// A communicator that was never made (a split whose exchange failed): unusable like one whose
  /// init failed with `why`.
  static std::unique_ptr<Communicator> failed(int32_t rank, int32_t nRanks, const CommOptions& options,
                                              const Status& why);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int32_t rank() const;
  int32_t nRanks() const;
  DeviceKind deviceKind() const;
  int deviceOrdinal() const;
  /// What it was made with (a split's children inherit it).
  const CommOptions& options() const;

  /// The C API's arguments of a call on this communicator as the runtime's call, converted and
  /// checked once: `dataType` a tucclDataType_t, `op` a tucclRedOp_t (read by the reducing
  /// collectives: a built-in one, or a live PreMulSum operator of this communicator made for
  /// `dataType`), `root` by Broadcast and Reduce; NCCL's in-place condition for this rank.
  /// InvalidArgument with the reason when they are bad.
  Expected<CollectiveCall> callOf(Collective collective, const void* sendbuff, void* recvbuff, size_t count,
                                  int dataType, int op, int root) const;
  /// A send (`send`) or receive of `count` elements of `dataType` (any NCCL datatype, fp8
  /// included) with `peer`, checked: InvalidArgument with the reason.
  Expected<PeerCall> peerCallOf(bool send, const void* buffer, size_t count, int dataType, int peer) const;
  /// Bytes of `count` elements of `dataType` (InvalidArgument: an unknown type, or an overflow).
  Expected<size_t> blockBytes(size_t count, int dataType) const;
  /// A PreMulSum operator of this communicator (tucclRedOpCreatePreMulSum): a reduction that sums
  /// scalar * input over the ranks, for calls of `dataType`. `scalar` points at one element of it:
  /// read now when `hostResidence`, else kept and read by every call when it runs (device memory;
  /// on the CPU device, host memory). Numbered from tucclNumOps like NCCL's; a number is never
  /// handed out twice. InvalidArgument: a bad datatype; ResourceExhausted: numbers ran out.
  Expected<int> createPreMulSum(const void* scalar, int dataType, bool hostResidence);
  /// Forgets a PreMulSum operator (InvalidArgument: not a live one of this communicator). Calls
  /// already issued with it are not affected.
  Status destroyOp(int op);
  /// Enqueues sends and receives to run together, one TB each (a group's, or one call's): every
  /// one moves through the staging ring of its pair of ranks, so their order does not matter.
  /// Those with this rank itself pair up in order and are copies.
  Status enqueuePeers(const std::vector<PeerCall>& calls, tucclStream_t stream);
  /// Enqueues a call callOf made (the NULL stream on the CPU device: runs): the plan cache decides
  /// it (one table lookup), the runtime phase chooses its configuration group, its plan is placed,
  /// and the device launches it.
  Status enqueue(const CollectiveCall& call, tucclStream_t stream);
  /// Every rank's `bytes` at `send` into `recv` (rank r's at r * bytes), over the bootstrap.
  Status hostAllGather(const void* send, void* recv, size_t bytes);
  /// A message to / from one rank over the bootstrap, bounded by the timeout, that works while
  /// the communicator's calls fail and involves no other rank (tucclCommShrink's abort mode: the
  /// ranks that remain talk without the excluded ones).
  Status hostSend(int32_t peer, const std::string& bytes);
  Expected<std::string> hostRecv(int32_t peer);
  /// Stops every running and future call (Aborted with `reason`) but keeps the bootstrap for
  /// hostSend / hostRecv (tucclCommShrink's abort mode).
  void abortCalls(const std::string& reason);
  /// Waits for this rank's outstanding calls (bounded by the timeout: Timeout); later calls fail
  /// with Unsupported "finalized" (tucclCommFinalize). Local.
  Status drain();
  /// tucclCommDestroy's part, local (it waits for no peer): drain(); rank 0 writes what the
  /// runtime phase learnt; this rank leaves (a goodbye on the bootstrap), and what its peers may
  /// still touch goes to a reaper thread that frees it once they are done too (bounded by the
  /// timeout; the process waits for reapers at exit). Then the object holds nothing shared.
  Status finalize();
  /// Stops every running and future call; callable from any thread.
  void abort(const std::string& reason);
  /// Ok, or the error that ended an asynchronous call (or the abort, or the init); after drain(),
  /// Unsupported "finalized" when there was none.
  Status asyncError() const;
  /// Ok, or the error that ended an asynchronous call, the abort or the init (drain() aside).
  Status failure() const;

 private:
  Communicator();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tuccl::backend
