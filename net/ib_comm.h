// One direction of a verbs connection (the protocol: ib_protocol.h): its protection domain,
// completion queue, RC queue pairs, registered control block and request pools, and the data
// path — isend / irecv / iflush / test — on top of them. Created before the handshake (the QPs
// need numbers to exchange), connected with the peer's ConnectionInfo, then driven by one
// thread at a time (NCCL's proxy), never blocking.
//
// Failure: a work completion with an error, a failed post, or the peer's TCP socket closing
// while nothing completes for a second fails the comm; every unfinished request's test returns
// that error from then on. Destruction frees QPs, CQ, memory regions and PD, whatever the state.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/ib_devices.h"
#include "net/ib_protocol.h"
#include "net/ib_verbs.h"
#include "support/status.h"
#include "transport/socket.h"

namespace tuccl::net::ib {

/// What each end tells the other over TCP.
struct ConnectionInfo {
  uint64_t magic;
  uint64_t token;  ///< the listener's, from the handle
  uint32_t nQps;
  uint32_t mtu;  ///< ibv_mtu of the port
  uint32_t qpn[kMaxQpsPerConnection];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t linkLayer;
  uint8_t reserved0;
  uint32_t controlRkey;
  uint64_t controlAddress;
};
static_assert(sizeof(ConnectionInfo) == 120);

/// An mhandle: a registration and what memory it covers (TUCCL_NCCL_PTR_HOST or _CUDA).
struct MemoryRegion {
  ibv_mr* mr = nullptr;
  int type = 0;
};

class IbComm;

/// One isend, one (grouped) irecv, or one iflush.
struct IbRequest {
  enum class Kind : uint8_t { Send, Receive, Flush };
  IbComm* comm = nullptr;
  Kind kind = Kind::Send;
  bool inUse = false;
  uint32_t index = 0;  ///< in its pool
  int n = 0;
  int pending = 0;  ///< send / flush: signaled work requests not completed yet
  uint16_t writesOnQp[kMaxQpsPerConnection] = {};  ///< send: its share of each QP's send queue
  size_t size = 0;      ///< send: the message size
  uint64_t sequence = 0;  ///< receive: its sequence number
  int piecesExpected[kMaxRecvs] = {};  ///< receive: 0 until the first piece says how many
  int piecesArrived[kMaxRecvs] = {};
  ibv_mr* owned[kMaxRecvs] = {};  ///< registrations made for buffers passed without an mhandle
};

struct IbTestResult {
  bool done = false;
  int n = 0;
  size_t sizes[kMaxRecvs] = {};
};

struct IbCommOptions {
  int nQps = 1;          ///< TUCCL_/NCCL_IB_QPS_PER_CONNECTION (1..16; the sender's value counts)
  int timeout = 20;      ///< TUCCL_/NCCL_IB_TIMEOUT: 4.096 µs × 2^timeout per retry (1..31)
  int retryCount = 7;    ///< TUCCL_/NCCL_IB_RETRY_CNT (0..7)
  int serviceLevel = 0;  ///< TUCCL_/NCCL_IB_SL (0..15)
  int trafficClass = 0;  ///< TUCCL_/NCCL_IB_TC (0..255), overridden by init's config when ≥ 0
  bool flush = true;     ///< false with TUCCL_/NCCL_GDR_FLUSH_DISABLE=1
};
/// The options from the environment; `configTrafficClass` is init's (-1: none).
IbCommOptions ibCommOptionsFromEnv(int configTrafficClass);

class IbComm {
 public:
  /// PD, CQ, `options.nQps` QPs in INIT and the control block on `device`; nothing connected.
  static Expected<std::unique_ptr<IbComm>> create(const VerbsApi& api, const IbDevice& device, bool sending,
                                                  const IbCommOptions& options);
  ~IbComm();
  IbComm(const IbComm&) = delete;
  IbComm& operator=(const IbComm&) = delete;

  /// This end's half of the handshake.
  ConnectionInfo localInfo(uint64_t magic, uint64_t token) const;
  /// Posts the receive work requests and moves the QPs to RTS toward `remote`.
  Status connect(const ConnectionInfo& remote);
  /// Keeps the handshake's TCP socket: its closing tells that the peer went away.
  void keepSocket(transport::Socket socket) { socket_ = std::move(socket); }

  /// ibv_reg_mr (host memory; GPU memory with a peer-memory module).
  Expected<MemoryRegion*> registerMemory(void* data, size_t size, int type);
  /// ibv_reg_dmabuf_mr of [offset, offset + size) of dma-buf `fd`, mapped at `data`.
  Expected<MemoryRegion*> registerDmabuf(void* data, size_t size, int type, uint64_t offset, int fd);
  Status deregister(MemoryRegion* region);

  /// NULL (retry later) until the receiver's matching receive has arrived or while queues are full.
  Expected<IbRequest*> postSend(void* data, size_t size, int tag, MemoryRegion* region);
  /// NULL when kFifoDepth receives are in flight.
  Expected<IbRequest*> postRecv(int n, void* const* data, const size_t* sizes, const int* tags,
                                MemoryRegion* const* regions);
  /// An RDMA read through a loopback QP that makes GPU-memory writes visible; NULL when nothing
  /// needs flushing (host memory, empty messages, flush disabled).
  Expected<IbRequest*> postFlush(int n, void* const* data, const int* sizes, MemoryRegion* const* regions);
  /// Progresses the comm; done (and the sizes) once `request` has completed, which frees it.
  Expected<IbTestResult> test(IbRequest* request);

 private:
  IbComm(const VerbsApi& api, const IbDevice& device, bool sending, const IbCommOptions& options);
  Status createResources();
  Expected<ibv_qp*> createQp(int sendWrs, int receiveWrs);
  Status moveToRts(ibv_qp* qp, uint32_t remoteQpn, const uint8_t* remoteGid, uint16_t remoteLid, ibv_mtu mtu);
  Status ensureFlushQp();
  Status postReceive(int qp);
  Status progress();
  Status handle(const ibv_wc& completion);
  Status fail(Status status);
  Status checkPeer();
  IbRequest* allocate(IbRequest::Kind kind);
  void release(IbRequest* request);
  Expected<ibv_mr*> temporaryRegistration(void* data, size_t size);

  /// How one message goes out: its pieces, the QP of the first, and its work requests per QP.
  struct SendShape {
    MessageSplit split;
    int firstQp = 0;
    size_t writes[kMaxQpsPerConnection] = {};
  };
  /// The free buffer posted with `tag` in the receiver's FIFO entry `entry` that holds `size` bytes.
  Expected<int> matchReceiveSlot(const FifoEntry& entry, int tag, size_t size);
  /// The pieces of a message of `size` bytes over the QPs, from the next QP in rotation.
  SendShape shapeSend(size_t size) const;
  /// Whether every QP's send queue has room for the message's work requests (false: retry later).
  Expected<bool> sendQueuesHaveRoom(const SendShape& shape, size_t size) const;
  /// The registration the writes read from: `region`'s, or a temporary one `request` owns.
  Expected<ibv_mr*> registerSendBuffer(IbRequest* request, void* data, size_t size, MemoryRegion* region);
  /// Chains and posts the message's RDMA writes into the receiver's buffer `slot` of `entry`.
  Status postSendWrites(IbRequest* request, const SendShape& shape, const FifoEntry& entry, int slot, void* data,
                        size_t size, ibv_mr* mr);

  const VerbsApi& api_;
  const IbDevice& device_;
  bool sending_;
  IbCommOptions options_;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qps_[kMaxQpsPerConnection] = {};
  ibv_qp* flushQp_ = nullptr;
  ControlBlock* control_ = nullptr;
  ibv_mr* controlMr_ = nullptr;
  transport::Socket socket_;
  int sendWrsPerQp_ = 0;
  size_t maxWriteBytes_ = kMaxWorkRequestBytes;
  uint64_t remoteControl_ = 0;
  uint32_t remoteControlRkey_ = 0;
  std::unique_ptr<IbRequest[]> sendRequests_;
  std::unique_ptr<IbRequest[]> recvRequests_;
  std::unique_ptr<IbRequest[]> flushRequests_;
  // sender
  uint64_t fifoArrived_ = 0;   ///< entries whose write-with-immediate completed
  uint64_t fifoConsumed_ = 0;  ///< entries whose buffers all have a send
  uint32_t slotsUsed_ = 0;     ///< buffers of entry fifoConsumed_ that have one
  uint64_t messagesSent_ = 0;  ///< rotates the first QP of each message
  int sendWrsInFlight_[kMaxQpsPerConnection] = {};
  // receiver
  uint64_t receivesPosted_ = 0;
  int fifoWritesInFlight_ = 0;
  // failure and liveness
  Status failure_;
  std::chrono::steady_clock::time_point lastProgress_;
  uint32_t idleTests_ = 0;
};

}  // namespace tuccl::net::ib
