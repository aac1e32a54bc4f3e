// The data path of a verbs connection (ib_comm.h, protocol in ib_protocol.h).
#include "net/ib_comm.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "net/net_env.h"
#include "tuccl/nccl_net.h"

namespace tuccl::net::ib {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr int kSendWrsWanted = 2048;  // per data QP; a 1 TiB message needs ≤ 1025 on one QP
constexpr int kCompletionsPerPoll = 32;

Status systemError(const std::string& what) {
  return makeError(ErrorCode::SystemError, what + ": " + std::strerror(errno != 0 ? errno : EIO));
}

size_t controlBytes() { return (sizeof(ControlBlock) + 4095) / 4096 * 4096; }

// The work requests of one message, linked into one chain per QP in the order they are appended.
class WriteChains {
 public:
  explicit WriteChains(size_t total) : wrs_(total), sges_(total) {}
  WriteChains(const WriteChains&) = delete;
  WriteChains& operator=(const WriteChains&) = delete;

  // The next work request, its scatter-gather entry attached, linked at the end of QP q's chain.
  ibv_send_wr& append(int q) {
    ibv_send_wr& wr = wrs_[used_];
    wr.sg_list = &sges_[used_];
    ++used_;
    if (tails_[q] != nullptr)
      tails_[q]->next = &wr;
    else
      heads_[q] = &wr;
    tails_[q] = &wr;
    return wr;
  }
  // The first work request of QP q's chain (nullptr: none).
  ibv_send_wr* head(int q) const { return heads_[q]; }

 private:
  std::vector<ibv_send_wr> wrs_;
  std::vector<ibv_sge> sges_;
  ibv_send_wr* heads_[kMaxQpsPerConnection] = {};
  ibv_send_wr* tails_[kMaxQpsPerConnection] = {};
  size_t used_ = 0;
};

// Appends the RDMA writes of one piece into `target` to its QP's chain; the last carries the
// immediate and is signaled.
void appendPieceWrites(WriteChains& chains, const Piece& piece, uint64_t wrId, char* data, uint32_t lkey,
                       const FifoSlot& target, size_t maxWriteBytes, uint32_t immediate) {
  const size_t count = writesForPiece(piece.size, maxWriteBytes);
  for (size_t w = 0; w < count; ++w) {
    const size_t offset = piece.offset + w * maxWriteBytes;
    const size_t length = std::min(maxWriteBytes, piece.offset + piece.size - offset);
    ibv_send_wr& wr = chains.append(piece.qp);
    wr.wr_id = wrId;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.num_sge = length > 0 ? 1 : 0;
    wr.sg_list->addr = reinterpret_cast<uintptr_t>(data + offset);
    wr.sg_list->length = static_cast<uint32_t>(length);
    wr.sg_list->lkey = lkey;
    wr.wr.rdma.remote_addr = target.address + offset;
    wr.wr.rdma.rkey = target.rkey;
    if (w + 1 == count) {
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = immediate;
      wr.send_flags = IBV_SEND_SIGNALED;
    }
  }
}

}  // namespace

IbCommOptions ibCommOptionsFromEnv(int configTrafficClass) {
  IbCommOptions options;
  options.nQps = std::clamp(envInt("TUCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION", 1), 1, kMaxQpsPerConnection);
  options.timeout = std::clamp(envInt("TUCCL_IB_TIMEOUT", "NCCL_IB_TIMEOUT", options.timeout), 1, 31);
  options.retryCount = std::clamp(envInt("TUCCL_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", options.retryCount), 0, 7);
  options.serviceLevel = std::clamp(envInt("TUCCL_IB_SL", "NCCL_IB_SL", options.serviceLevel), 0, 15);
  options.trafficClass = std::clamp(envInt("TUCCL_IB_TC", "NCCL_IB_TC", options.trafficClass), 0, 255);
  if (configTrafficClass >= 0) options.trafficClass = std::min(configTrafficClass, 255);
  options.flush = envInt("TUCCL_GDR_FLUSH_DISABLE", "NCCL_GDR_FLUSH_DISABLE", 0) == 0;
  return options;
}

IbComm::IbComm(const VerbsApi& api, const IbDevice& device, bool sending, const IbCommOptions& options)
    : api_(api), device_(device), sending_(sending), options_(options), lastProgress_(Clock::now()) {}

Expected<std::unique_ptr<IbComm>> IbComm::create(const VerbsApi& api, const IbDevice& device, bool sending,
                                                 const IbCommOptions& options) {
  std::unique_ptr<IbComm> comm(new IbComm(api, device, sending, options));
  Status created = comm->createResources();
  if (!created) return created;  // the destructor frees what was made
  return comm;
}

Status IbComm::createResources() {
  const int nQps = options_.nQps;
  sendRequests_ = std::make_unique<IbRequest[]>(kMaxSendsInFlight);
  recvRequests_ = std::make_unique<IbRequest[]>(kFifoDepth);
  flushRequests_ = std::make_unique<IbRequest[]>(kFifoDepth);
  for (uint32_t i = 0; i < kMaxSendsInFlight; ++i) sendRequests_[i] = IbRequest{this, IbRequest::Kind::Send, false, i};
  for (uint32_t i = 0; i < kFifoDepth; ++i) {
    recvRequests_[i] = IbRequest{this, IbRequest::Kind::Receive, false, i};
    flushRequests_[i] = IbRequest{this, IbRequest::Kind::Flush, false, i};
  }
  if (device_.maxMessageBytes > 0) maxWriteBytes_ = std::min<size_t>(kMaxWorkRequestBytes, device_.maxMessageBytes);
  errno = 0;
  pd_ = api_.allocPd(device_.context);
  if (pd_ == nullptr) return systemError("cannot allocate a protection domain on " + device_.displayName);
  sendWrsPerQp_ = sending_ ? std::min(kSendWrsWanted, std::max(device_.maxQpWr, 64)) : kFifoDepth;
  const int receiveWrs = kReceivesPerQp;
  const int cqe = std::min(std::max(device_.maxCqe, 256),
                           nQps * (std::min(sendWrsPerQp_, kMaxSendsInFlight) + receiveWrs) + 2 * kFifoDepth + 16);
  cq_ = api_.createCq(device_.context, cqe, nullptr, nullptr, 0);
  if (cq_ == nullptr) return systemError("cannot create a completion queue of " + std::to_string(cqe) + " entries");
  for (int q = 0; q < nQps; ++q) {
    Expected<ibv_qp*> qp = createQp(sendWrsPerQp_, receiveWrs);
    if (!qp) return qp.status();
    qps_[q] = *qp;
  }
  void* block = std::aligned_alloc(4096, controlBytes());
  if (block == nullptr) return makeError(ErrorCode::ResourceExhausted, "cannot allocate the control block");
  std::memset(block, 0, controlBytes());
  control_ = static_cast<ControlBlock*>(block);
  controlMr_ = api_.regMr(pd_, control_, controlBytes(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (controlMr_ == nullptr) return systemError("cannot register the control block");
  return {};
}

Expected<ibv_qp*> IbComm::createQp(int sendWrs, int receiveWrs) {
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<uint32_t>(sendWrs);
  init.cap.max_recv_wr = static_cast<uint32_t>(receiveWrs);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  errno = 0;
  ibv_qp* qp = api_.createQp(pd_, &init);
  if (qp == nullptr) return systemError("cannot create a queue pair on " + device_.displayName);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(device_.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (const int error = api_.modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      error != 0) {
    errno = error;
    Status status = systemError("cannot move a queue pair to INIT");
    (void)api_.destroyQp(qp);
    return status;
  }
  return qp;
}

IbComm::~IbComm() {
  for (ibv_qp*& qp : qps_)
    if (qp != nullptr) (void)api_.destroyQp(qp);
  if (flushQp_ != nullptr) (void)api_.destroyQp(flushQp_);
  if (cq_ != nullptr) (void)api_.destroyCq(cq_);
  if (controlMr_ != nullptr) (void)api_.deregMr(controlMr_);
  std::free(control_);
  for (auto* pool : {&sendRequests_, &recvRequests_}) {
    if (*pool == nullptr) continue;
    const int size = pool == &sendRequests_ ? kMaxSendsInFlight : kFifoDepth;
    for (int i = 0; i < size; ++i)
      for (ibv_mr*& mr : (*pool)[i].owned)
        if (mr != nullptr) (void)api_.deregMr(mr);
  }
  if (pd_ != nullptr) (void)api_.deallocPd(pd_);  // EBUSY if the caller kept registrations: theirs to free
}

ConnectionInfo IbComm::localInfo(uint64_t magic, uint64_t token) const {
  ConnectionInfo info{};
  info.magic = magic;
  info.token = token;
  info.nQps = static_cast<uint32_t>(options_.nQps);
  info.mtu = static_cast<uint32_t>(device_.mtu);
  for (int q = 0; q < options_.nQps; ++q) info.qpn[q] = qps_[q]->qp_num;
  std::memcpy(info.gid, device_.gid.raw, sizeof info.gid);
  info.lid = device_.lid;
  info.linkLayer = device_.linkLayer;
  info.controlAddress = reinterpret_cast<uintptr_t>(control_);
  info.controlRkey = controlMr_->rkey;
  return info;
}

Status IbComm::moveToRts(ibv_qp* qp, uint32_t remoteQpn, const uint8_t* remoteGid, uint16_t remoteLid, ibv_mtu mtu) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = mtu;
  attr.dest_qp_num = remoteQpn;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = remoteLid;
  attr.ah_attr.sl = static_cast<uint8_t>(options_.serviceLevel);
  attr.ah_attr.port_num = static_cast<uint8_t>(device_.port);
  if (device_.linkLayer == IBV_LINK_LAYER_ETHERNET || remoteLid == 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remoteGid, 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gidIndex);
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = static_cast<uint8_t>(options_.trafficClass);
  }
  if (const int error = api_.modifyQp(qp, &attr,
                                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      error != 0) {
    errno = error;
    return systemError("cannot move a queue pair to RTR on " + device_.displayName);
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = static_cast<uint8_t>(options_.timeout);
  attr.retry_cnt = static_cast<uint8_t>(options_.retryCount);
  attr.rnr_retry = 7;
  attr.sq_psn = 0;
  attr.max_rd_atomic = 1;
  if (const int error = api_.modifyQp(qp, &attr,
                                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      error != 0) {
    errno = error;
    return systemError("cannot move a queue pair to RTS on " + device_.displayName);
  }
  return {};
}

Status IbComm::postReceive(int qp) {
  ibv_recv_wr wr{};
  wr.wr_id = workId(WorkKind::Receive, qp, 0);
  wr.num_sge = 0;  // writes with immediate consume a receive but place no data through it
  ibv_recv_wr* bad = nullptr;
  const int error = ibv_post_recv(qps_[qp], &wr, &bad);
  if (error != 0) {
    errno = error;
    return systemError("cannot post a receive work request");
  }
  return {};
}

Status IbComm::connect(const ConnectionInfo& remote) {
  if (remote.nQps != static_cast<uint32_t>(options_.nQps))
    return makeError(ErrorCode::RemoteError, "the peer has " + std::to_string(remote.nQps) + " queue pairs, this end " +
                                                 std::to_string(options_.nQps));
  const ibv_mtu mtu = static_cast<ibv_mtu>(std::min<uint32_t>(remote.mtu, static_cast<uint32_t>(device_.mtu)));
  for (int q = 0; q < options_.nQps; ++q) {
    for (int i = 0; i < kReceivesPerQp; ++i) {
      Status posted = postReceive(q);
      if (!posted) return posted;
    }
    Status ready = moveToRts(qps_[q], remote.qpn[q], remote.gid, remote.lid, mtu);
    if (!ready) return ready;
  }
  remoteControl_ = remote.controlAddress;
  remoteControlRkey_ = remote.controlRkey;
  lastProgress_ = Clock::now();
  return {};
}

// ---- Memory registration -------------------------------------------------------------------------

Expected<MemoryRegion*> IbComm::registerMemory(void* data, size_t size, int type) {
  if (type != TUCCL_NCCL_PTR_HOST && !(type == TUCCL_NCCL_PTR_CUDA && (device_.ptrSupport & TUCCL_NCCL_PTR_CUDA) != 0))
    return makeError(ErrorCode::Unsupported, "regMr of memory type " + std::to_string(type) + " on " +
                                                 device_.displayName + " (no GPU peer-memory module loaded)");
  errno = 0;
  ibv_mr* mr = api_.regMr(pd_, data, size, kAccess);
  if (mr == nullptr) return systemError("ibv_reg_mr of " + std::to_string(size) + " bytes failed");
  return new MemoryRegion{mr, type};
}

Expected<MemoryRegion*> IbComm::registerDmabuf(void* data, size_t size, int type, uint64_t offset, int fd) {
  if (api_.regDmabufMr == nullptr || (device_.ptrSupport & TUCCL_NCCL_PTR_DMABUF) == 0)
    return makeError(ErrorCode::Unsupported, "regMrDmaBuf: " + device_.displayName + " has no dma-buf support");
  errno = 0;
  ibv_mr* mr = api_.regDmabufMr(pd_, offset, size, reinterpret_cast<uintptr_t>(data), fd, kAccess);
  if (mr == nullptr) return systemError("ibv_reg_dmabuf_mr of " + std::to_string(size) + " bytes failed");
  return new MemoryRegion{mr, type};
}

Status IbComm::deregister(MemoryRegion* region) {
  if (region == nullptr) return {};
  const int error = api_.deregMr(region->mr);
  delete region;
  if (error != 0) {
    errno = error;
    return systemError("ibv_dereg_mr failed");
  }
  return {};
}

Expected<ibv_mr*> IbComm::temporaryRegistration(void* data, size_t size) {
  errno = 0;
  ibv_mr* mr = api_.regMr(pd_, data, size, kAccess);
  if (mr == nullptr) return systemError("ibv_reg_mr of an unregistered buffer of " + std::to_string(size) + " bytes failed");
  return mr;
}

// ---- Requests -------------------------------------------------------------------------------------

IbRequest* IbComm::allocate(IbRequest::Kind kind) {
  IbRequest* pool = kind == IbRequest::Kind::Send      ? sendRequests_.get()
                    : kind == IbRequest::Kind::Receive ? recvRequests_.get()
                                                       : flushRequests_.get();
  const int size = kind == IbRequest::Kind::Send ? kMaxSendsInFlight : kFifoDepth;
  for (int i = 0; i < size; ++i) {
    IbRequest& request = pool[i];
    if (request.inUse) continue;
    const uint32_t index = request.index;
    request = IbRequest{this, kind, true, index};
    return &request;
  }
  return nullptr;
}

void IbComm::release(IbRequest* request) {
  for (ibv_mr*& mr : request->owned)
    if (mr != nullptr) {
      (void)api_.deregMr(mr);
      mr = nullptr;
    }
  request->inUse = false;
}

Status IbComm::fail(Status status) {
  if (failure_) failure_ = status;
  return failure_;
}

Expected<int> IbComm::matchReceiveSlot(const FifoEntry& entry, int tag, size_t size) {
  if (entry.sequence != fifoConsumed_ || entry.n == 0 || entry.n > kMaxRecvs || entry.request >= kFifoDepth)
    return fail(makeError(ErrorCode::Internal, "the receiver's FIFO entry " + std::to_string(fifoConsumed_) + " is malformed"));
  int slot = -1;
  for (uint32_t i = 0; i < entry.n && slot < 0; ++i)
    if ((slotsUsed_ & (1u << i)) == 0 && entry.slots[i].tag == tag) slot = static_cast<int>(i);
  if (slot < 0)
    return fail(makeError(ErrorCode::InvalidInput, "isend with tag " + std::to_string(tag) +
                                                       ": the receiver's posted receive has no free buffer with that tag"));
  const FifoSlot& target = entry.slots[slot];
  if (size > target.capacity)
    return fail(makeError(ErrorCode::InvalidInput, "message truncated: " + std::to_string(size) + " bytes sent, " +
                                                       std::to_string(target.capacity) + " posted"));
  return slot;
}

IbComm::SendShape IbComm::shapeSend(size_t size) const {
  const int nQps = options_.nQps;
  SendShape shape;
  shape.split = splitMessage(size, nQps);
  shape.firstQp = static_cast<int>(messagesSent_ % static_cast<uint64_t>(nQps));
  for (int k = 0; k < shape.split.pieces; ++k) {
    const Piece piece = pieceOf(shape.split, size, k, shape.firstQp, nQps);
    shape.writes[piece.qp] += writesForPiece(piece.size, maxWriteBytes_) + (k == 0 ? 1 : 0);  // + the size record
  }
  return shape;
}

Expected<bool> IbComm::sendQueuesHaveRoom(const SendShape& shape, size_t size) const {
  for (int q = 0; q < options_.nQps; ++q) {
    if (shape.writes[q] > static_cast<size_t>(sendWrsPerQp_))
      return makeError(ErrorCode::InvalidArgument, "a message of " + std::to_string(size) +
                                                       " bytes needs more work requests than a queue pair holds");
    if (static_cast<size_t>(sendWrsInFlight_[q]) + shape.writes[q] > static_cast<size_t>(sendWrsPerQp_)) return false;
  }
  return true;
}

Expected<ibv_mr*> IbComm::registerSendBuffer(IbRequest* request, void* data, size_t size, MemoryRegion* region) {
  ibv_mr* mr = region != nullptr ? region->mr : nullptr;
  if (size > 0 && mr == nullptr) {
    Expected<ibv_mr*> registered = temporaryRegistration(data, size);
    if (!registered) {
      release(request);
      return registered.status();
    }
    mr = request->owned[0] = *registered;
  }
  return mr;
}

Status IbComm::postSendWrites(IbRequest* request, const SendShape& shape, const FifoEntry& entry, int slot, void* data,
                              size_t size, ibv_mr* mr) {
  const int nQps = options_.nQps;
  const FifoSlot& target = entry.slots[slot];
  const uint32_t immediate = htonl(encodeImmediate(
      {entry.request, static_cast<uint32_t>(slot), static_cast<uint32_t>(shape.split.pieces), static_cast<uint32_t>(entry.sequence & 0xffff)}));
  // One chain per QP: [size record,] the piece's writes, the last with immediate and signaled.
  size_t total = 0;
  for (int q = 0; q < nQps; ++q) total += shape.writes[q];
  WriteChains chains(total);
  for (int k = 0; k < shape.split.pieces; ++k) {
    const Piece piece = pieceOf(shape.split, size, k, shape.firstQp, nQps);
    if (k == 0) {
      ibv_send_wr& record = chains.append(piece.qp);
      record.wr_id = workId(WorkKind::SendData, piece.qp, request->index);
      record.opcode = IBV_WR_RDMA_WRITE;
      record.sg_list->addr = reinterpret_cast<uintptr_t>(&control_->sizeOut[request->index]);
      record.sg_list->length = sizeof(uint64_t);
      record.sg_list->lkey = controlMr_->lkey;
      record.num_sge = 1;
      record.wr.rdma.remote_addr = remoteControl_ + sizeRecordOffset(entry.request, static_cast<uint32_t>(slot));
      record.wr.rdma.rkey = remoteControlRkey_;
    }
    appendPieceWrites(chains, piece, workId(WorkKind::SendData, piece.qp, request->index), static_cast<char*>(data),
                      mr != nullptr ? mr->lkey : 0, target, maxWriteBytes_, immediate);
  }
  for (int q = 0; q < nQps; ++q) {
    if (chains.head(q) == nullptr) continue;
    ibv_send_wr* bad = nullptr;
    const int error = ibv_post_send(qps_[q], chains.head(q), &bad);
    if (error != 0) {
      errno = error;
      // Earlier QPs may carry part of the message: the comm cannot recover from that.
      release(request);
      return fail(systemError("cannot post RDMA writes on " + device_.displayName));
    }
    sendWrsInFlight_[q] += static_cast<int>(shape.writes[q]);
    request->writesOnQp[q] = static_cast<uint16_t>(shape.writes[q]);
  }
  return {};
}

Expected<IbRequest*> IbComm::postSend(void* data, size_t size, int tag, MemoryRegion* region) {
  if (!sending_) return makeError(ErrorCode::Internal, "isend on a receiving comm");
  Status progressed = progress();
  if (!progressed) return progressed;
  if (fifoConsumed_ == fifoArrived_) return static_cast<IbRequest*>(nullptr);  // no receive posted yet
  const FifoEntry& entry = control_->fifo[fifoPosition(fifoConsumed_)];
  Expected<int> slot = matchReceiveSlot(entry, tag, size);
  if (!slot) return slot.status();
  const SendShape shape = shapeSend(size);
  Expected<bool> room = sendQueuesHaveRoom(shape, size);
  if (!room) return room.status();
  if (!*room) return static_cast<IbRequest*>(nullptr);
  IbRequest* request = allocate(IbRequest::Kind::Send);
  if (request == nullptr) return request;
  Expected<ibv_mr*> mr = registerSendBuffer(request, data, size, region);
  if (!mr) return mr.status();
  control_->sizeOut[request->index] = size;
  if (Status posted = postSendWrites(request, shape, entry, *slot, data, size, *mr); !posted) return posted;
  request->n = 1;
  request->size = size;
  request->pending = shape.split.pieces;
  ++messagesSent_;
  slotsUsed_ |= 1u << *slot;
  if (std::popcount(slotsUsed_) == static_cast<int>(entry.n)) {
    ++fifoConsumed_;
    slotsUsed_ = 0;
  }
  return request;
}

Expected<IbRequest*> IbComm::postRecv(int n, void* const* data, const size_t* sizes, const int* tags,
                                      MemoryRegion* const* regions) {
  if (sending_) return makeError(ErrorCode::Internal, "irecv on a sending comm");
  if (n < 1 || n > kMaxRecvs)
    return makeError(ErrorCode::Internal, "irecv of " + std::to_string(n) + " buffers (1.." + std::to_string(kMaxRecvs) +
                                              " supported)");
  Status progressed = progress();
  if (!progressed) return progressed;
  if (fifoWritesInFlight_ >= kFifoDepth) return static_cast<IbRequest*>(nullptr);
  IbRequest* request = allocate(IbRequest::Kind::Receive);
  if (request == nullptr) return request;
  const uint64_t sequence = receivesPosted_;
  FifoEntry& entry = control_->fifo[fifoPosition(sequence)];
  for (int i = 0; i < n; ++i) {
    ibv_mr* mr = regions != nullptr && regions[i] != nullptr ? regions[i]->mr : nullptr;
    if (sizes[i] > 0 && mr == nullptr) {
      Expected<ibv_mr*> registered = temporaryRegistration(data[i], sizes[i]);
      if (!registered) {
        release(request);
        return registered.status();
      }
      mr = request->owned[i] = *registered;
    }
    entry.slots[i] = FifoSlot{reinterpret_cast<uintptr_t>(data[i]), sizes[i], mr != nullptr ? mr->rkey : 0, tags[i]};
    control_->sizes[request->index][i] = 0;
  }
  entry.sequence = sequence;
  entry.n = static_cast<uint32_t>(n);
  entry.request = request->index;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&entry), sizeof(FifoEntry), controlMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = workId(WorkKind::FifoWrite, 0, static_cast<uint32_t>(fifoPosition(sequence)));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(static_cast<uint32_t>(sequence));
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remoteControl_ + fifoEntryOffset(sequence);
  wr.wr.rdma.rkey = remoteControlRkey_;
  ibv_send_wr* bad = nullptr;
  const int error = ibv_post_send(qps_[0], &wr, &bad);
  if (error != 0) {
    errno = error;
    release(request);
    return fail(systemError("cannot post the receive's FIFO entry on " + device_.displayName));
  }
  ++fifoWritesInFlight_;
  ++receivesPosted_;
  request->n = n;
  request->sequence = sequence;
  return request;
}

// ---- Flush ---------------------------------------------------------------------------------------

Status IbComm::ensureFlushQp() {
  if (flushQp_ != nullptr) return {};
  Expected<ibv_qp*> qp = createQp(kFifoDepth, 1);
  if (!qp) return qp.status();
  flushQp_ = *qp;
  Status ready = moveToRts(flushQp_, flushQp_->qp_num, device_.gid.raw, device_.lid, device_.mtu);
  if (!ready) {
    (void)api_.destroyQp(flushQp_);
    flushQp_ = nullptr;
  }
  return ready;
}

Expected<IbRequest*> IbComm::postFlush(int n, void* const* data, const int* sizes, MemoryRegion* const* regions) {
  if (sending_) return makeError(ErrorCode::Internal, "iflush on a sending comm");
  if (!options_.flush || regions == nullptr) return static_cast<IbRequest*>(nullptr);
  int last = -1;
  for (int i = 0; i < n && i < kMaxRecvs; ++i)
    if (sizes[i] > 0 && regions[i] != nullptr && regions[i]->type != TUCCL_NCCL_PTR_HOST) last = i;
  if (last < 0) return static_cast<IbRequest*>(nullptr);  // host memory is coherent: nothing to flush
  Status ready = ensureFlushQp();
  if (!ready) return fail(ready);
  IbRequest* request = allocate(IbRequest::Kind::Flush);
  if (request == nullptr) return makeError(ErrorCode::Internal, "more than " + std::to_string(kFifoDepth) + " flushes in flight");
  // A one-byte RDMA read of the last buffer through the loopback QP: the NIC completes it only
  // after its earlier PCIe writes into that GPU memory are visible (NCCL's GDR flush).
  ibv_sge sge{reinterpret_cast<uintptr_t>(&control_->flushTarget), 1, controlMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = workId(WorkKind::Flush, 0, request->index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data[last]);
  wr.wr.rdma.rkey = regions[last]->mr->rkey;
  ibv_send_wr* bad = nullptr;
  const int error = ibv_post_send(flushQp_, &wr, &bad);
  if (error != 0) {
    errno = error;
    release(request);
    return fail(systemError("cannot post the flush read"));
  }
  request->n = n;
  request->pending = 1;
  return request;
}

// ---- Progress -------------------------------------------------------------------------------------

Status IbComm::handle(const ibv_wc& completion) {
  if (completion.status != IBV_WC_SUCCESS)
    return makeError(ErrorCode::RemoteError, std::string("a work request on ") + device_.displayName +
                                                 " failed: " + api_.wcStatusName(completion.status) + " (vendor error " +
                                                 std::to_string(completion.vendor_err) + ")");
  const uint64_t id = completion.wr_id;
  const int qp = workQp(id);
  switch (workKind(id)) {
    case WorkKind::Receive: {
      if (qp >= options_.nQps) return makeError(ErrorCode::Internal, "a receive completion of an unknown queue pair");
      Status reposted = postReceive(qp);
      if (!reposted) return reposted;
      const uint32_t word = ntohl(completion.imm_data);
      if (sending_) {
        if (word != static_cast<uint32_t>(fifoArrived_))
          return makeError(ErrorCode::Internal, "FIFO entry " + std::to_string(word) + " arrived, " +
                                                    std::to_string(static_cast<uint32_t>(fifoArrived_)) + " expected");
        ++fifoArrived_;
        return {};
      }
      const Immediate immediate = decodeImmediate(word);
      IbRequest* request = immediate.request < kFifoDepth ? &recvRequests_[immediate.request] : nullptr;
      if (request == nullptr || !request->inUse || static_cast<int>(immediate.slot) >= request->n ||
          immediate.sequence16 != (request->sequence & 0xffff) || static_cast<int>(immediate.pieces) > options_.nQps)
        return makeError(ErrorCode::Internal, "a data write that matches no posted receive");
      request->piecesExpected[immediate.slot] = static_cast<int>(immediate.pieces);
      ++request->piecesArrived[immediate.slot];
      return {};
    }
    case WorkKind::SendData: {
      const uint32_t index = workIndex(id);
      if (index >= kMaxSendsInFlight || !sendRequests_[index].inUse || qp >= options_.nQps)
        return makeError(ErrorCode::Internal, "a send completion of no request");
      IbRequest& request = sendRequests_[index];
      sendWrsInFlight_[qp] -= request.writesOnQp[qp];
      request.writesOnQp[qp] = 0;
      --request.pending;
      return {};
    }
    case WorkKind::FifoWrite: --fifoWritesInFlight_; return {};
    case WorkKind::Flush: {
      const uint32_t index = workIndex(id);
      if (index >= kFifoDepth || !flushRequests_[index].inUse) return makeError(ErrorCode::Internal, "a flush completion of no request");
      --flushRequests_[index].pending;
      return {};
    }
  }
  return makeError(ErrorCode::Internal, "a completion of an unknown kind");
}

Status IbComm::progress() {
  if (!failure_) return failure_;
  ibv_wc completions[kCompletionsPerPoll];
  for (;;) {
    const int count = ibv_poll_cq(cq_, kCompletionsPerPoll, completions);
    if (count < 0) return fail(makeError(ErrorCode::SystemError, "polling the completion queue failed"));
    if (count == 0) return {};
    lastProgress_ = Clock::now();
    idleTests_ = 0;
    for (int i = 0; i < count; ++i) {
      Status handled = handle(completions[i]);
      if (!handled) return fail(handled);
    }
    if (count < kCompletionsPerPoll) return {};
  }
}

Status IbComm::checkPeer() {
  // Only after a quiet second: a peer that closes right after its last write may still have
  // completions on their way to this CQ.
  if (++idleTests_ % 64 != 0 || !socket_.valid()) return {};
  if (Clock::now() - lastProgress_ < std::chrono::seconds(1)) return {};
  if (transport::connectionClosed(socket_))
    return fail(makeError(ErrorCode::RemoteError, "the peer closed the connection with requests in flight"));
  return {};
}

Expected<IbTestResult> IbComm::test(IbRequest* request) {
  if (request == nullptr || request->comm != this || !request->inUse)
    return makeError(ErrorCode::Internal, "test of a request that is not in flight");
  Status progressed = progress();
  bool done = false;
  if (request->kind == IbRequest::Kind::Receive) {
    done = true;
    for (int i = 0; i < request->n; ++i)
      done = done && request->piecesExpected[i] > 0 && request->piecesArrived[i] == request->piecesExpected[i];
  } else {
    done = request->pending == 0;
  }
  if (!done) {
    if (!progressed) return progressed;
    Status alive = checkPeer();
    if (!alive) return alive;
    return IbTestResult{};
  }
  IbTestResult result;
  result.done = true;
  // A send reports its size, a receive each buffer's; a flush none (NCCL passes no sizes for it).
  result.n = request->kind == IbRequest::Kind::Send ? 1 : request->kind == IbRequest::Kind::Receive ? request->n : 0;
  if (request->kind == IbRequest::Kind::Send) result.sizes[0] = request->size;
  if (request->kind == IbRequest::Kind::Receive)
    for (int i = 0; i < request->n; ++i) result.sizes[i] = static_cast<size_t>(control_->sizes[request->index][i]);
  release(request);
  return result;
}

}  // namespace tuccl::net::ib
