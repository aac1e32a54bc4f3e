// The inter-node proxy (net_proxy.h).
#include "backend/net_proxy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "kernelgen/datatype.h"
#include "kernelgen/device/protocols.h"

namespace tuccl::backend {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kFrameMagic = 0x54754343'4c507278ULL;  // "TuCCLPrx"
constexpr int kSendFrames = 8;         // frame buffers per peer in flight
constexpr uint32_t kMaxFollowing = 8;  // slices sent as their own message, per frame

enum RecordKind : uint32_t { kSliceInline = 1, kSliceFollows = 2, kCredit = 3, kAbort = 4, kLines = 5 };

struct FrameHeader {
  uint64_t magic;
  uint32_t records;
  uint32_t bytes;  ///< of the whole frame
};
static_assert(sizeof(FrameHeader) == 16);

/// One record; an inline slice's payload follows it, padded to 8 bytes. kLines: a piece of an LL or
/// LL128 slice (`protocol`), inline, at `slotOffset`; `value` is nonzero on the slice's last piece.
struct Record {
  uint16_t kind;
  uint16_t protocol;    ///< kLines: dev::ProtocolId
  uint32_t bytes;       ///< the slice's bytes (kLines: the piece's)
  uint64_t slotOffset;  ///< in the receiver's segment
  uint64_t tagOffset;
  uint64_t flagOffset;  ///< posted (slices) or consumed (credits)
  uint64_t tag;
  uint64_t value;  ///< the flag's new value
};
static_assert(sizeof(Record) == 48);

size_t padded(size_t bytes) { return (bytes + 7) / 8 * 8; }

uint64_t loadAcquire(const char* address) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<char*>(address)))
      .load(std::memory_order_acquire);
}
void storeRelease(char* address, uint64_t value) {
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(address)).store(value, std::memory_order_release);
}

/// A ring this rank sends on to another host: its side lives in the shadow of the receiver.
struct OutRing {
  const char* shadow;
  int64_t stagingOffset, tagsOffset, postedOffset, slotBytes;
  int32_t nSlots;
  int32_t protocol = dev::kProtoSimple;
  uint64_t forwarded = 0;  ///< slices handed to the network
  int64_t piece = 0;       ///< LL / LL128: bytes of slice `forwarded` already framed
};

/// LL / LL128 slices travel as inline pieces of whole lines, at most this many bytes each.
constexpr int64_t kLinePieceBytes = kInlineSliceBytes;
static_assert(kLinePieceBytes % dev::kLLPairBytes == 0 && kLinePieceBytes % dev::kLL128LineBytes == 0);

// Writes the lines of an LL / LL128 piece into the receiver's slot as their kernels read them
// (kernelgen/device/protocols.h): an LL line is one 8-byte word, stored whole (release); an LL128
// line's 120 data bytes go first and its flag word last (release), so a reader that sees a line's
// new flag sees its new data.
void storeLines(char* slot, const char* lines, size_t bytes, int32_t protocol) {
  if (protocol == dev::kProtoLL) {
    for (size_t at = 0; at + 8 <= bytes; at += 8) {
      uint64_t word = 0;
      std::memcpy(&word, lines + at, 8);
      storeRelease(slot + at, word);
    }
    return;
  }
  constexpr auto line = static_cast<size_t>(dev::kLL128LineBytes);
  for (size_t at = 0; at + line <= bytes; at += line) {
    std::memcpy(slot + at, lines + at, line - 8);
    uint64_t flag = 0;
    std::memcpy(&flag, lines + at + line - 8, 8);
    storeRelease(slot + at + line - 8, flag);
  }
}

/// A ring this rank receives on from another host: the credits go back.
struct InRing {
  const char* consumed;  ///< in this rank's shadow of the sender's segment
  int64_t consumedOffset;
  const char* posted;  ///< in this rank's segment: the slices received
  int32_t nSlots;
  uint64_t credited = 0;
};

struct Outgoing {
  char* data;
  size_t bytes;
  void* mhandle;
  int frame;  ///< the frame buffer to free when sent; -1 for a slice
};

struct SentRequest {
  void* request;
  int frame;
};

struct Expected_ {
  void* request = nullptr;
  bool frame = true;  ///< a frame, else the slice of `record`
  Record record{};
};

struct Peer {
  int32_t rank = -1;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  std::unique_ptr<char[]> sendFrames;  // kSendFrames x kFrameBytes
  std::unique_ptr<char[]> recvFrame;   // kFrameBytes
  void* sendFramesMr = nullptr;
  void* shadowMr = nullptr;  // this rank's shadow of the peer's segment, on sendComm
  void* recvFrameMr = nullptr;
  void* ownMr = nullptr;  // this rank's segment, on recvComm
  std::vector<int> freeFrames;
  std::deque<Outgoing> outbox;
  std::vector<SentRequest> sent;
  std::deque<Expected_> toPost;
  std::deque<Expected_> posted;
  std::vector<OutRing> out;
  std::vector<InRing> in;
  bool abortSent = false;
};

}  // namespace

struct NetProxy::Impl {
  std::unique_ptr<NetApi> net;
  NetProxyOptions options;
  std::function<void(const Status&)> onError;
  std::string description;
  int dev = 0;
  std::map<int32_t, void*> listenComms;  // by peer, until its connection is accepted
  std::map<int32_t, Peer> peers;  // by rank: the ranks of other hosts

  std::mutex ringsMutex;
  std::vector<std::pair<PlanPlacement, int32_t>> pendingRings;  ///< with the plan's dev::ProtocolId

  /// What the CPU device's waiting TBs hold (hostPoll): whoever holds `mutex` runs the progress
  /// (the thread for each of its rounds, a TB when it is free); `impl` goes null when the proxy does.
  struct Poller {
    std::mutex mutex;
    Impl* impl = nullptr;
    std::atomic<int64_t> lastTbRound{0};  ///< steady-clock ticks of a TB's last round
    /// Whether TBs ran a round within kTbPollRecent of `now`: they are progressing the proxy.
    bool tbsPolling(Clock::time_point now) const {
      return now.time_since_epoch().count() - lastTbRound.load(std::memory_order_relaxed) <
             std::chrono::duration_cast<Clock::duration>(kTbPollRecent).count();
    }
  };
  std::shared_ptr<Poller> poller = std::make_shared<Poller>();
  std::optional<Status> unreported;  ///< a failure met in a TB's round: the thread reports it
  /// What the proxy did (under poller->mutex; summary()).
  struct Counts {
    uint64_t frames = 0, creditFrames = 0, slices = 0, tbRounds = 0, threadRounds = 0;
  } counts;

  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<bool> kicked{false};
  std::mutex wakeMutex;
  std::condition_variable wake;
  bool failed = false;

  char* own() const { return options.staging.bases[static_cast<size_t>(options.rank)]; }
  bool remote(int32_t r) const { return options.hostOf[static_cast<size_t>(r)] != options.hostOf[static_cast<size_t>(options.rank)]; }
  bool localAbort() const {
    return options.staging.abortWord != nullptr && std::atomic_ref<int32_t>(*options.staging.abortWord).load() != 0;
  }
  void raiseAbort() {
    if (options.staging.abortWord != nullptr) std::atomic_ref<int32_t>(*options.staging.abortWord).store(1);
  }
  /// The first failure: every TB stops (the abort word), and the thread reports it (outside the
  /// progress lock, never from a TB).
  void fail(const Status& status) {
    if (failed) return;
    failed = true;
    raiseAbort();
    unreported = status;
  }
  void wakeThread() {
    if (kicked.exchange(true, std::memory_order_acq_rel)) return;  // awake, or woken already
    std::lock_guard lock(wakeMutex);
    wake.notify_one();
  }
  /// One round over every peer (under poller->mutex): whether anything moved.
  bool round();
  static void tbRound(void* context);
  static void kernelEnded(void* context);

  /// `local`: this rank's state so far (an error still takes part in the exchanges).
  Status connectAll(Bootstrap& bootstrap, Status local);
  Status registerMemory(Peer& peer);
  void closeAll();
  void run();
  bool progress(Peer& peer);
  bool progressReceives(Peer& peer);
  /// After a failure: tells the peer, once, that this host stopped.
  void sendAbort(Peer& peer);
  Status applyFrame(Peer& peer, size_t bytes);
  Status completeSlice(const Record& record);
  bool buildFrames(Peer& peer);
  bool progressSends(Peer& peer);
  void mergeRings();
  bool inSegment(uint64_t offset, uint64_t bytes) const {
    return offset <= options.staging.segmentBytes && bytes <= options.staging.segmentBytes - offset;
  }
};

// ---- Setup ----------------------------------------------------------------------------------------

Status NetProxy::Impl::connectAll(Bootstrap& bootstrap, Status local) {
  const auto nRanks = static_cast<int32_t>(options.hostOf.size());
  const int32_t rank = options.rank;
  constexpr size_t kHandle = TUCCL_NCCL_NET_HANDLE_MAXSIZE;
  Expected<int> nDev = local ? net->devices() : Expected<int>(0);
  if (local && !nDev) local = nDev.status();
  if (local && *nDev < 1) {
    local = makeError(ErrorCode::Unsupported, "net plugin " + net->name() + " (" + net->origin() + ") has no device");
  }
  // The rank's index on its host picks the device, so a host's ranks spread over its NICs.
  int32_t localIndex = 0;
  for (int32_t r = 0; r < rank; ++r) localIndex += remote(r) ? 0 : 1;
  int32_t remotePeers = 0;
  std::vector<bool> hosts(static_cast<size_t>(nRanks), false);
  for (int32_t r = 0; r < nRanks; ++r) {
    if (!remote(r)) continue;
    ++remotePeers;
    hosts[static_cast<size_t>(options.hostOf[static_cast<size_t>(r)])] = true;
    Peer& peer = peers[r];
    peer.rank = r;
    peer.sendFrames = std::make_unique<char[]>(kSendFrames * kFrameBytes);
    peer.recvFrame = std::make_unique<char[]>(kFrameBytes);
    for (int f = kSendFrames - 1; f >= 0; --f) peer.freeFrames.push_back(f);
  }
  // One listener per remote peer, as NCCL's own net transport does: every plugin supports it, and
  // the connection a listener accepts is known to come from its peer. Handle slot p of this
  // rank's contribution is for rank p.
  std::string handles(1 + static_cast<size_t>(nRanks) * kHandle, '\0');
  if (local) {
    dev = localIndex % *nDev;
    Expected<NetDeviceInfo> info = net->properties(dev);
    if (info) {
      const auto otherHosts = std::count(hosts.begin(), hosts.end(), true);
      description = "net plugin " + net->name() + " (" + net->origin() + "), device " + std::to_string(dev) + " " +
                    info->name + (info->speedMbps > 0 ? " " + std::to_string(info->speedMbps) + " Mbps" : "") +
                    ", " + std::to_string(remotePeers) + " peer rank(s) on " + std::to_string(otherHosts) +
                    " other host(s)";
    } else {
      local = info.status();
    }
    for (auto& [r, peer] : peers) {
      if (!local) break;
      Expected<void*> listening = net->listen(dev, handles.data() + 1 + static_cast<size_t>(r) * kHandle);
      if (!listening) {
        local = listening.status();
        break;
      }
      listenComms[r] = *listening;
    }
  }
  handles[0] = local ? '1' : '0';
  Expected<std::vector<std::string>> gathered = bootstrap.allGather(handles);
  if (!gathered) return gathered.status();
  if (!local) return local;
  for (int32_t r = 0; r < nRanks; ++r) {
    if ((*gathered)[static_cast<size_t>(r)][0] != '1') {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " could not listen on its net plugin");
    }
  }

  std::map<int32_t, std::string> connecting;  // the peer's handle for this rank (connect updates it)
  for (auto& [r, peer] : peers) connecting[r] = (*gathered)[static_cast<size_t>(r)].substr(1 + static_cast<size_t>(rank) * kHandle, kHandle);
  size_t accepted = 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeoutSeconds));
  while (!connecting.empty() || accepted < peers.size()) {
    if (Clock::now() > deadline || bootstrap.peerLost()) {
      return makeError(ErrorCode::Timeout, "net plugin " + net->name() + ": connecting to the ranks of other hosts "
                                           "did not finish (" + std::to_string(peers.size() - connecting.size()) +
                                           " connected, " + std::to_string(accepted) + " accepted of " +
                                           std::to_string(peers.size()) + ")");
    }
    bool busy = false;
    for (auto it = connecting.begin(); it != connecting.end();) {
      Expected<void*> comm = net->connect(dev, it->second.data());
      if (!comm) {
        return makeError(comm.status().code(), "connecting to rank " + std::to_string(it->first) + ": " +
                                                   comm.status().message());
      }
      if (*comm == nullptr) {
        ++it;
        continue;
      }
      peers[it->first].sendComm = *comm;
      busy = true;
      it = connecting.erase(it);
    }
    for (auto& [r, peer] : peers) {
      if (peer.recvComm != nullptr) continue;
      Expected<void*> comm = net->accept(listenComms[r]);
      if (!comm) {
        return makeError(comm.status().code(), "accepting from rank " + std::to_string(r) + ": " +
                                                   comm.status().message());
      }
      if (*comm == nullptr) continue;
      peer.recvComm = *comm;
      ++accepted;
      busy = true;
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (auto& [r, listening] : listenComms) (void)net->closeListen(listening);
  listenComms.clear();
  for (auto& [r, peer] : peers) {
    if (Status status = registerMemory(peer); !status) return status;
    peer.toPost.push_back(Expected_{});  // the first frame
  }
  return {};
}

Status NetProxy::Impl::registerMemory(Peer& peer) {
  const size_t bytes = options.staging.segmentBytes;
  Expected<void*> frames = net->regMr(peer.sendComm, peer.sendFrames.get(), kSendFrames * kFrameBytes);
  if (!frames) return frames.status();
  peer.sendFramesMr = *frames;
  Expected<void*> frame = net->regMr(peer.recvComm, peer.recvFrame.get(), kFrameBytes);
  if (!frame) return frame.status();
  peer.recvFrameMr = *frame;
  Expected<void*> shadow = net->regMr(peer.sendComm, options.staging.bases[static_cast<size_t>(peer.rank)], bytes);
  if (!shadow) return shadow.status();
  peer.shadowMr = *shadow;
  Expected<void*> own = net->regMr(peer.recvComm, this->own(), bytes);
  if (!own) return own.status();
  peer.ownMr = *own;
  return {};
}

void NetProxy::Impl::closeAll() {
  for (auto& [r, peer] : peers) {
    if (peer.sendComm != nullptr) {
      if (peer.shadowMr != nullptr) (void)net->deregMr(peer.sendComm, peer.shadowMr);
      if (peer.sendFramesMr != nullptr) (void)net->deregMr(peer.sendComm, peer.sendFramesMr);
      (void)net->closeSend(peer.sendComm);
    }
    if (peer.recvComm != nullptr) {
      if (peer.ownMr != nullptr) (void)net->deregMr(peer.recvComm, peer.ownMr);
      if (peer.recvFrameMr != nullptr) (void)net->deregMr(peer.recvComm, peer.recvFrameMr);
      (void)net->closeRecv(peer.recvComm);
    }
  }
  peers.clear();
  for (auto& [r, listening] : listenComms) (void)net->closeListen(listening);
  listenComms.clear();
}

// ---- The thread -----------------------------------------------------------------------------------

void NetProxy::Impl::mergeRings() {
  std::vector<std::pair<PlanPlacement, int32_t>> added;
  {
    std::lock_guard lock(ringsMutex);
    added.swap(pendingRings);
  }
  const int32_t rank = options.rank;
  for (const auto& [placement, protocol] : added) {
    for (const RingPlacement& ring : placement.rings) {
      if (ring.srcRank == rank && remote(ring.dstRank)) {
        peers[ring.dstRank].out.push_back(OutRing{options.staging.bases[static_cast<size_t>(ring.dstRank)],
                                                  ring.stagingInDst, ring.tagsInDst, ring.postedInDst, ring.slotBytes,
                                                  ring.nSlots, protocol});
      } else if (ring.dstRank == rank && remote(ring.srcRank)) {
        peers[ring.srcRank].in.push_back(
            InRing{options.staging.bases[static_cast<size_t>(ring.srcRank)] + ring.consumedInSrc, ring.consumedInSrc,
                   own() + ring.postedInDst, ring.nSlots});
      }
    }
  }
}

bool NetProxy::Impl::round() {
  mergeRings();
  bool busy = false;
  if (!failed) {
    for (auto& [r, peer] : peers) {
      busy = progress(peer) || busy;
      if (failed) break;
    }
  }
  if (failed) {
    for (auto& [r, peer] : peers) sendAbort(peer);
  }
  return busy;
}

void NetProxy::Impl::tbRound(void* context) {
  auto* poller = static_cast<Poller*>(context);
  std::unique_lock lock(poller->mutex, std::try_to_lock);
  if (!lock.owns_lock() || poller->impl == nullptr) return;
  Impl& self = *poller->impl;
  if (self.stop.load(std::memory_order_relaxed)) return;
  poller->lastTbRound.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  ++self.counts.tbRounds;
  (void)self.round();
  if (self.unreported) self.wakeThread();
}

void NetProxy::Impl::kernelEnded(void* context) {
  auto* poller = static_cast<Poller*>(context);
  std::lock_guard lock(poller->mutex);
  Impl* self = poller->impl;
  if (self == nullptr || self->stop.load(std::memory_order_relaxed)) return;
  // What the kernel posted last goes out now; the thread takes over only what the network has
  // not taken yet (a send in flight, a frame waiting for one), and reports a failure.
  for (int rounds = 0; rounds < 4; ++rounds) {
    ++self->counts.tbRounds;
    if (!self->round()) break;
  }
  bool pending = self->unreported.has_value();
  for (const auto& [r, peer] : self->peers) pending = pending || !peer.outbox.empty() || !peer.sent.empty();
  if (pending) {
    poller->lastTbRound.store(0, std::memory_order_relaxed);
    self->wakeThread();
  }
}

void NetProxy::Impl::run() {
  Clock::time_point lastActive = Clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    bool busy = false;
    std::optional<Status> report;
    {
      std::lock_guard lock(poller->mutex);
      ++counts.threadRounds;
      busy = round();
      report.swap(unreported);
    }
    if (report && onError) onError(*report);
    const Clock::time_point now = Clock::now();
    if (busy || kicked.exchange(false, std::memory_order_acq_rel)) lastActive = now;
    // While the kernel's TBs move the frames, or once idle, the thread looks again when kicked (a
    // launch, a kernel's end) or after kIdleWait.
    if (!poller->tbsPolling(now) && now - lastActive < kSpinIdle) {
      std::this_thread::yield();
    } else {
      std::unique_lock lock(wakeMutex);
      wake.wait_for(lock, kIdleWait, [this] { return kicked.load() || stop.load(); });
    }
  }
}

bool NetProxy::Impl::progress(Peer& peer) {
  bool busy = progressReceives(peer);
  if (failed) return busy;
  busy = buildFrames(peer) || busy;
  return progressSends(peer) || busy;
}

Status NetProxy::Impl::completeSlice(const Record& record) {
  char* base = own();
  std::memcpy(base + record.tagOffset, &record.tag, sizeof(record.tag));
  storeRelease(base + record.flagOffset, record.value);
  return {};
}

Status NetProxy::Impl::applyFrame(Peer& peer, size_t bytes) {
  const char* frame = peer.recvFrame.get();
  FrameHeader header{};
  if (bytes >= sizeof(header)) std::memcpy(&header, frame, sizeof(header));
  if (header.magic != kFrameMagic || header.bytes != bytes) {
    return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent a malformed frame");
  }
  size_t at = sizeof(header);
  char* base = own();
  for (uint32_t i = 0; i < header.records; ++i) {
    Record record{};
    if (at + sizeof(record) > bytes) {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent a truncated frame");
    }
    std::memcpy(&record, frame + at, sizeof(record));
    at += sizeof(record);
    const bool flagOk = inSegment(record.flagOffset, 8) && record.flagOffset % 8 == 0;
    switch (record.kind) {
      case kSliceInline:
      case kSliceFollows: {
        if (!flagOk || !inSegment(record.slotOffset, record.bytes) || !inSegment(record.tagOffset, 8)) {
          return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent a slice outside the staging");
        }
        if (record.kind == kSliceFollows) {
          peer.toPost.push_back(Expected_{nullptr, false, record});
          break;
        }
        if (at + padded(record.bytes) > bytes) {
          return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent a truncated slice");
        }
        std::memcpy(base + record.slotOffset, frame + at, record.bytes);
        at += padded(record.bytes);
        (void)completeSlice(record);
        break;
      }
      case kLines: {
        const size_t line = record.protocol == dev::kProtoLL ? 8 : static_cast<size_t>(dev::kLL128LineBytes);
        if ((record.protocol != dev::kProtoLL && record.protocol != dev::kProtoLL128) || !flagOk ||
            !inSegment(record.slotOffset, record.bytes) || !inSegment(record.tagOffset, 8) || record.bytes % line != 0 ||
            record.slotOffset % 8 != 0) {
          return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent lines outside the staging");
        }
        if (at + padded(record.bytes) > bytes) {
          return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent truncated lines");
        }
        // The tag before the lines: a receiver that sees a line's flag checks the slot's tag.
        std::memcpy(base + record.tagOffset, &record.tag, sizeof(record.tag));
        storeLines(base + record.slotOffset, frame + at, record.bytes, record.protocol);
        at += padded(record.bytes);
        if (record.value != 0) storeRelease(base + record.flagOffset, record.value);
        break;
      }
      case kCredit:
        if (!flagOk) return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent a bad credit");
        storeRelease(base + record.flagOffset, record.value);
        break;
      case kAbort:
        raiseAbort();
        return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) +
                                                     " (another host) stopped the communicator: a call failed or was aborted there");
      default:
        return makeError(ErrorCode::RemoteError, "rank " + std::to_string(peer.rank) + " sent an unknown record");
    }
  }
  peer.toPost.push_back(Expected_{});  // the next frame
  return {};
}

bool NetProxy::Impl::progressReceives(Peer& peer) {
  bool busy = false;
  for (;;) {
    // Post in order; a plugin with no free request slot takes the rest later.
    while (!peer.toPost.empty()) {
      Expected_& next = peer.toPost.front();
      Expected<void*> request =
          next.frame ? net->irecv(peer.recvComm, peer.recvFrame.get(), kFrameBytes, 0, peer.recvFrameMr)
                     : net->irecv(peer.recvComm, own() + next.record.slotOffset, next.record.bytes, 0, peer.ownMr);
      if (!request) {
        fail(request.status());
        return true;
      }
      if (*request == nullptr) break;
      next.request = *request;
      peer.posted.push_back(next);
      peer.toPost.pop_front();
      busy = true;
    }
    // Complete in order (the wire is a FIFO); a frame queues receives, which are posted first.
    bool frameApplied = false;
    while (!peer.posted.empty() && !frameApplied) {
      size_t size = 0;
      Expected<bool> done = net->test(peer.posted.front().request, &size);
      if (!done) {
        fail(makeError(done.status().code(), "receiving from rank " + std::to_string(peer.rank) + ": " +
                                                 done.status().message()));
        return true;
      }
      if (!*done) break;
      busy = true;
      const Expected_ finished = peer.posted.front();
      peer.posted.pop_front();
      Status applied = finished.frame ? applyFrame(peer, size) : completeSlice(finished.record);
      if (!applied) {
        fail(applied);
        return true;
      }
      frameApplied = finished.frame;
    }
    if (!frameApplied) return busy;
  }
}

void NetProxy::Impl::sendAbort(Peer& peer) {
  if (peer.abortSent || peer.freeFrames.empty() || peer.sendComm == nullptr) return;
  peer.abortSent = true;
  char* frame = peer.sendFrames.get() + static_cast<size_t>(peer.freeFrames.back()) * kFrameBytes;
  const FrameHeader header{kFrameMagic, 1, static_cast<uint32_t>(sizeof(FrameHeader) + sizeof(Record))};
  const Record record{kAbort, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(frame, &header, sizeof(header));
  std::memcpy(frame + sizeof(header), &record, sizeof(record));
  // Best effort: the connection may be what failed. The request ends with the connection.
  (void)net->isend(peer.sendComm, frame, header.bytes, 0, peer.sendFramesMr);
}

bool NetProxy::Impl::buildFrames(Peer& peer) {
  bool busy = false;
  const bool abortNow = !peer.abortSent && localAbort();
  for (;;) {
    if (peer.freeFrames.empty()) return busy;
    const int frameIndex = peer.freeFrames.back();
    char* frame = peer.sendFrames.get() + static_cast<size_t>(frameIndex) * kFrameBytes;
    size_t at = sizeof(FrameHeader);
    uint32_t records = 0, credits = 0;
    uint32_t following = 0;
    uint64_t slicesFramed = 0;
    std::vector<Outgoing> slices;
    bool full = false;
    auto add = [&](const Record& record, const char* payload) {
      std::memcpy(frame + at, &record, sizeof(record));
      at += sizeof(record);
      if (payload != nullptr) {
        std::memcpy(frame + at, payload, record.bytes);
        at += padded(record.bytes);
      }
      ++records;
    };
    if (abortNow && !peer.abortSent) {
      add(Record{kAbort, 0, 0, 0, 0, 0, 0, 0}, nullptr);
      peer.abortSent = true;
    }
    for (OutRing& ring : peer.out) {
      const uint64_t posted = loadAcquire(ring.shadow + ring.postedOffset);
      while (ring.forwarded < posted && !full) {
        const uint64_t k = ring.forwarded;
        const auto slot = static_cast<int64_t>(k % static_cast<uint64_t>(ring.nSlots));
        uint64_t tag = 0, bytes = 0;
        std::memcpy(&tag, ring.shadow + ring.tagsOffset + slot * 8, 8);
        std::memcpy(&bytes, ring.shadow + ring.tagsOffset + (ring.nSlots + slot) * 8, 8);
        if (bytes > static_cast<uint64_t>(ring.slotBytes)) {
          fail(makeError(ErrorCode::Internal, "a slice of " + std::to_string(bytes) + " bytes in a ring of " +
                                                  std::to_string(ring.slotBytes) + "-byte slots"));
          return true;
        }
        const int64_t slotOffset = ring.stagingOffset + slot * ring.slotBytes;
        if (ring.protocol != dev::kProtoSimple) {
          // Whole lines, inline, a piece at a time; `posted` rises with the last piece.
          const int64_t piece = std::min<int64_t>(kLinePieceBytes, static_cast<int64_t>(bytes) - ring.piece);
          const bool last = ring.piece + piece >= static_cast<int64_t>(bytes);
          if (at + sizeof(Record) + padded(static_cast<size_t>(piece)) > kFrameBytes) {
            full = true;
            break;
          }
          const Record lines{kLines, static_cast<uint16_t>(ring.protocol), static_cast<uint32_t>(piece),
                             static_cast<uint64_t>(slotOffset + ring.piece),
                             static_cast<uint64_t>(ring.tagsOffset + slot * 8), static_cast<uint64_t>(ring.postedOffset),
                             tag, last ? k + 1 : 0};
          add(lines, ring.shadow + slotOffset + ring.piece);
          ring.piece = last ? 0 : ring.piece + piece;
          if (last) ring.forwarded = k + 1;
          slicesFramed += last ? 1 : 0;
          continue;
        }
        Record record{kSliceInline, 0, static_cast<uint32_t>(bytes), static_cast<uint64_t>(slotOffset),
                      static_cast<uint64_t>(ring.tagsOffset + slot * 8), static_cast<uint64_t>(ring.postedOffset),
                      tag, k + 1};
        if (bytes <= kInlineSliceBytes) {
          if (at + sizeof(Record) + padded(bytes) > kFrameBytes) {
            full = true;
            break;
          }
          add(record, ring.shadow + slotOffset);
        } else {
          if (following == kMaxFollowing || at + sizeof(Record) > kFrameBytes) {
            full = true;
            break;
          }
          record.kind = kSliceFollows;
          add(record, nullptr);
          ++following;
          slices.push_back(Outgoing{const_cast<char*>(ring.shadow) + slotOffset, bytes, peer.shadowMr, -1});
        }
        ring.forwarded = k + 1;
        ++slicesFramed;
      }
      if (full) break;
    }
    // Credits ride on the frames that go anyway. One goes alone only when the sender may be
    // waiting for it: every slot of its ring holds a slice it has not been credited for.
    bool creditsDue = records > 0;
    for (const InRing& ring : peer.in) {
      creditsDue = creditsDue || (loadAcquire(ring.consumed) > ring.credited &&
                                  loadAcquire(ring.posted) >= ring.credited + static_cast<uint64_t>(ring.nSlots));
    }
    for (InRing& ring : peer.in) {
      if (!creditsDue) break;
      if (at + sizeof(Record) > kFrameBytes) {
        full = true;
        break;
      }
      const uint64_t consumed = loadAcquire(ring.consumed);
      if (consumed <= ring.credited) continue;
      add(Record{kCredit, 0, 0, 0, 0, static_cast<uint64_t>(ring.consumedOffset), 0, consumed}, nullptr);
      ++credits;
      ring.credited = consumed;
    }
    if (records == 0) return busy;
    ++counts.frames;
    if (records == credits) ++counts.creditFrames;
    counts.slices += slicesFramed;
    const FrameHeader header{kFrameMagic, records, static_cast<uint32_t>(at)};
    std::memcpy(frame, &header, sizeof(header));
    peer.freeFrames.pop_back();
    peer.outbox.push_back(Outgoing{frame, at, peer.sendFramesMr, frameIndex});
    for (const Outgoing& slice : slices) peer.outbox.push_back(slice);
    busy = true;
    if (!full) return busy;
  }
}

bool NetProxy::Impl::progressSends(Peer& peer) {
  bool busy = false;
  while (!peer.outbox.empty()) {
    const Outgoing& next = peer.outbox.front();
    Expected<void*> request = net->isend(peer.sendComm, next.data, next.bytes, 0, next.mhandle);
    if (!request) {
      fail(makeError(request.status().code(), "sending to rank " + std::to_string(peer.rank) + ": " +
                                                  request.status().message()));
      return true;
    }
    if (*request == nullptr) break;
    peer.sent.push_back(SentRequest{*request, next.frame});
    peer.outbox.pop_front();
    busy = true;
  }
  for (size_t i = 0; i < peer.sent.size();) {
    Expected<bool> done = net->test(peer.sent[i].request, nullptr);
    if (!done) {
      fail(makeError(done.status().code(), "sending to rank " + std::to_string(peer.rank) + ": " +
                                               done.status().message()));
      return true;
    }
    if (!*done) {
      ++i;
      continue;
    }
    if (peer.sent[i].frame >= 0) peer.freeFrames.push_back(peer.sent[i].frame);
    peer.sent.erase(peer.sent.begin() + static_cast<std::ptrdiff_t>(i));
    busy = true;
  }
  return busy;
}

// ---- NetProxy -------------------------------------------------------------------------------------

NetProxy::NetProxy() : impl_(std::make_unique<Impl>()) { impl_->poller->impl = impl_.get(); }

NetProxy::~NetProxy() {
  stop();
  {
    std::lock_guard lock(impl_->poller->mutex);  // no TB runs a round from here on
    impl_->poller->impl = nullptr;
  }
  if (impl_->net) impl_->closeAll();
}

HostPoll NetProxy::hostPoll() const { return HostPoll{&Impl::tbRound, &Impl::kernelEnded, impl_->poller}; }

void NetProxy::stop() {
  impl_->stop.store(true);
  {
    std::lock_guard lock(impl_->wakeMutex);
    impl_->wake.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

Expected<std::unique_ptr<NetProxy>> NetProxy::start(Expected<std::unique_ptr<NetApi>> net,
                                                    const NetProxyOptions& options, Bootstrap& bootstrap,
                                                    std::function<void(const Status&)> onError) {
  std::unique_ptr<NetProxy> proxy(new NetProxy());
  Impl& s = *proxy->impl_;
  s.options = options;
  s.onError = std::move(onError);
  Status local = net ? Status() : net.status();
  if (net) s.net = std::move(*net);
  if (local && (s.options.staging.bases.size() != s.options.hostOf.size() || s.options.staging.segmentBytes == 0)) {
    local = makeError(ErrorCode::Internal, "inter-node proxy: the staging is not in host memory");
  }
  Status connected = s.connectAll(bootstrap, local);
  // Every rank connected (or failed) before any starts moving data.
  Expected<std::vector<std::string>> verdicts = bootstrap.allGather(std::string(1, connected ? '1' : '0'));
  if (!connected) return connected;
  if (!verdicts) return verdicts.status();
  for (size_t r = 0; r < verdicts->size(); ++r) {
    if ((*verdicts)[r] != "1") {
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + " could not connect to the ranks of other hosts");
    }
  }
  try {
    s.thread = std::thread([&s] { s.run(); });
  } catch (const std::system_error& error) {
    return makeError(ErrorCode::SystemError, std::string("cannot start the inter-node proxy thread: ") + error.what());
  }
  return proxy;
}

void NetProxy::kick() {
  if (impl_->poller->tbsPolling(Clock::now())) return;  // the CPU device's TBs run the rounds
  impl_->wakeThread();
}

void NetProxy::addRings(const PlanPlacement& placement, Protocol protocol) {
  std::lock_guard lock(impl_->ringsMutex);
  impl_->pendingRings.emplace_back(placement, deviceProtocol(protocol));
}

const std::string& NetProxy::description() const { return impl_->description; }

std::string NetProxy::summary() const {
  Impl::Counts c;
  {
    std::lock_guard lock(impl_->poller->mutex);
    c = impl_->counts;
  }
  const uint64_t rounds = c.tbRounds + c.threadRounds;
  return std::to_string(c.slices) + " slices in " + std::to_string(c.frames) + " frames (" +
         std::to_string(c.creditFrames) + " carrying credits alone); " + std::to_string(c.tbRounds) + " of " +
         std::to_string(rounds) + " rounds run by waiting TBs";
}

}  // namespace tuccl::backend
