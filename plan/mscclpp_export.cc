// Plan -> MSCCL++ execution plan JSON (mscclpp_export.h). The steps of the lowering:
//   1. transfers: every send paired with its receive (pairTransfers); each gets a landing area in
//      the receiver's scratch, after the plan's own scratch chunks, in pairing order;
//   2. lanes and channels: the transfers of a directed rank pair that one TB sends and one TB
//      receives form a lane; each lane is one channel on both ranks, listed in the same order on
//      both (all lanes of a rank pair sorted by (sender, receiver, send TB, receive TB)), so the
//      k-th channel from A to B meets the k-th from B to A;
//   3. dependencies: a plan entry's deps, minus those an earlier acquire of its TB implies, become
//      one semaphore per (producer TB, consumer TB): released after the producer entry, acquired
//      before the consumer entry (in both TBs in the same order, so counting suffices);
//   4. ops: per entry, contiguous pieces; a nop wherever an op depends on the ops since the last
//      nop (data hazards, data before a signal or release, a wait or acquire before data).
#include "plan/mscclpp_export.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "plan/export_calls.h"
#include "plan/plan_pairing.h"
#include "plan/plan_storage.h"
#include "plan/plan_validate.h"

namespace tuccl {

std::string_view mscclppChannelTypeName(MscclppChannelType type) {
  switch (type) {
    case MscclppChannelType::None: return "none";
    case MscclppChannelType::Memory: return "memory";
    case MscclppChannelType::Port: return "port";
  }
  return "none";
}

std::string_view mscclppOpName(MscclppOpCode code) {
  switch (code) {
    case MscclppOpCode::Nop: return "nop";
    case MscclppOpCode::Barrier: return "barrier";
    case MscclppOpCode::Signal: return "signal";
    case MscclppOpCode::Wait: return "wait";
    case MscclppOpCode::Put: return "put";
    case MscclppOpCode::Pwsf: return "pwsf";
    case MscclppOpCode::Copy: return "copy";
    case MscclppOpCode::Reduce: return "re";
    case MscclppOpCode::SemAcquire: return "sem_acquire";
    case MscclppOpCode::SemRelease: return "sem_release";
  }
  return "nop";
}

std::string MscclppLimitViolation::message() const {
  return where + ": " + limit + " is " + std::to_string(value) + ", the most is " + std::to_string(maximum);
}

namespace {

// execution_common.hpp
constexpr uint64_t kMaxOpsPerTb = 64;
constexpr uint64_t kMaxChannelsPerTb = 16;  // of each type
constexpr uint64_t kMaxChannelsPerOp = 8;
constexpr uint64_t kMaxLocalOperands = 2;
constexpr uint64_t kMaxRemoteOperands = 8;
constexpr uint64_t kMaxBarriers = 16;
constexpr uint64_t kMaxSemaphores = 16;
constexpr uint64_t kMaxOffset = std::numeric_limits<uint32_t>::max();

// ---- layout ------------------------------------------------------------------------------------

struct Layout {
  const Plan& plan;
  bool inPlace = true;

  // NCCL's in-place storage of an in-place plan, in the in-place spelling (AllGather in the
  // output, every other collective in the input); the buffer itself otherwise.
  StorageSlot slot(int32_t rank, BufferKind buffer, int32_t index) const {
    StorageSlot s = planStorage(plan, rank, buffer, index);
    if (plan.inPlace && inPlace && s.buffer == BufferKind::Output && plan.collective != Collective::AllGather) {
      s.buffer = BufferKind::Input;
    }
    return s;
  }
};

struct Piece {
  StorageSlot src;
  StorageSlot dst;
  int32_t count = 0;
};

// Chunks [0, count) read at src(i) and written at dst(i), cut into runs contiguous on both sides.
template <typename Src, typename Dst>
std::vector<Piece> cutPieces(int32_t count, Src src, Dst dst) {
  std::vector<Piece> pieces;
  for (int32_t i = 0; i < count; ++i) {
    const StorageSlot s = src(i);
    const StorageSlot d = dst(i);
    if (!pieces.empty()) {
      Piece& last = pieces.back();
      if (last.src.buffer == s.buffer && last.src.index + last.count == s.index && last.dst.buffer == d.buffer &&
          last.dst.index + last.count == d.index) {
        ++last.count;
        continue;
      }
    }
    pieces.push_back({s, d, 1});
  }
  return pieces;
}

MscclppBufferRef localRef(StorageSlot slot, int32_t count) { return {slot.buffer, -1, slot.index, count}; }

// ---- transfers, lanes, channels ----------------------------------------------------------------

struct TransferInfo {
  int32_t landing = 0;  // first scratch chunk of the landing area on the receiver
  int32_t lane = 0;     // global lane id
};

struct Lane {
  int32_t src = 0;
  int32_t dst = 0;
  int32_t sendTb = 0;
  int32_t recvTb = 0;
  MscclppChannelType type = MscclppChannelType::Memory;
  int32_t srcChannel = 0;  // global channel index (of `type`) on src
  int32_t dstChannel = 0;
};

struct Wiring {
  std::vector<Lane> lanes;
  // [rank][tb][entry] -> transfer info of a send or receive entry
  std::vector<std::vector<std::vector<TransferInfo>>> of;
  std::vector<int32_t> landingChunks;  // per rank
  std::vector<std::vector<int32_t>> memoryPeers, portPeers;
  std::vector<std::vector<int32_t>> remoteBufferOf;  // [rank][peer] -> remote buffer id, -1
  std::vector<std::vector<MscclppRemoteBuffer>> remoteBuffers;
};

MscclppChannelType channelBetween(int32_t a, int32_t b, int32_t ranksPerNode) {
  if (ranksPerNode <= 0) return MscclppChannelType::Memory;
  return a / ranksPerNode == b / ranksPerNode ? MscclppChannelType::Memory : MscclppChannelType::Port;
}

Expected<Wiring> wire(const Plan& plan, int32_t ranksPerNode) {
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return makeError(ErrorCode::InvalidInput, transfers.status().message());
  const auto n = static_cast<size_t>(plan.nRanks);
  Wiring w;
  for (const PlanRank& rank : plan.ranks) {
    auto& tbs = w.of.emplace_back();
    for (const PlanTb& tb : rank.tbs) tbs.resize(tbs.size() + 1, std::vector<TransferInfo>(tb.entries.size()));
  }
  w.landingChunks.assign(n, plan.bufferChunks[static_cast<int>(BufferKind::Scratch)]);
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, int32_t> laneOf;
  for (const PlanTransfer& t : *transfers) {
    const auto key = std::make_tuple(t.srcRank, t.dstRank, t.send.tb, t.recv.tb);
    laneOf.emplace(key, 0);
  }
  // Lanes in key order: sorted by (sender, receiver, send TB, receive TB).
  for (auto& [key, id] : laneOf) {
    id = static_cast<int32_t>(w.lanes.size());
    const auto [src, dst, sendTb, recvTb] = key;
    w.lanes.push_back({src, dst, sendTb, recvTb, channelBetween(src, dst, ranksPerNode), 0, 0});
  }
  for (const PlanTransfer& t : *transfers) {
    const int32_t lane = laneOf.at(std::make_tuple(t.srcRank, t.dstRank, t.send.tb, t.recv.tb));
    const int32_t count = plan.ranks[t.dstRank].tbs[t.recv.tb].entries[t.recv.entry].count;
    const TransferInfo info{w.landingChunks[t.dstRank], lane};
    w.landingChunks[t.dstRank] += count;
    w.of[t.srcRank][t.send.tb][t.send.entry] = info;
    w.of[t.dstRank][t.recv.tb][t.recv.entry] = info;
  }
  // Channels: per rank, peers ascending, the lanes of the pair in lane order (the same on both).
  w.memoryPeers.resize(n);
  w.portPeers.resize(n);
  for (size_t r = 0; r < n; ++r) {
    for (size_t q = 0; q < n; ++q) {
      for (Lane& lane : w.lanes) {
        const bool mine = static_cast<size_t>(lane.src) == r && static_cast<size_t>(lane.dst) == q;
        const bool theirs = static_cast<size_t>(lane.src) == q && static_cast<size_t>(lane.dst) == r;
        if (!mine && !theirs) continue;
        auto& peers = lane.type == MscclppChannelType::Memory ? w.memoryPeers[r] : w.portPeers[r];
        (mine ? lane.srcChannel : lane.dstChannel) = static_cast<int32_t>(peers.size());
        peers.push_back(static_cast<int32_t>(q));
      }
    }
  }
  // Remote buffers: the scratch of every peer a rank sends to, peers ascending.
  w.remoteBufferOf.assign(n, std::vector<int32_t>(n, -1));
  w.remoteBuffers.resize(n);
  for (const Lane& lane : w.lanes) w.remoteBufferOf[lane.src][lane.dst] = 0;
  for (size_t r = 0; r < n; ++r) {
    for (size_t q = 0; q < n; ++q) {
      if (w.remoteBufferOf[r][q] < 0) continue;
      w.remoteBufferOf[r][q] = static_cast<int32_t>(w.remoteBuffers[r].size());
      w.remoteBuffers[r].push_back({static_cast<int32_t>(q), BufferKind::Scratch,
                                    channelBetween(static_cast<int32_t>(r), static_cast<int32_t>(q), ranksPerNode)});
    }
  }
  return w;
}

// ---- dependencies ------------------------------------------------------------------------------

struct Semaphores {
  int32_t count = 0;
  // [tb][entry] -> semaphores to acquire before / release after the entry
  std::vector<std::vector<std::vector<int32_t>>> acquire, release;
};

Semaphores assignSemaphores(const PlanRank& rank) {
  Semaphores s;
  for (const PlanTb& tb : rank.tbs) {
    s.acquire.emplace_back(tb.entries.size());
    s.release.emplace_back(tb.entries.size());
  }
  std::map<std::pair<int32_t, int32_t>, int32_t> semaphoreOf;  // (producer tb, consumer tb)
  for (size_t c = 0; c < rank.tbs.size(); ++c) {
    std::map<int32_t, int32_t> seen;  // producer tb -> the latest entry this TB acquired
    for (size_t e = 0; e < rank.tbs[c].entries.size(); ++e) {
      std::map<int32_t, int32_t> latest;
      for (const EntryRef& d : rank.tbs[c].entries[e].deps) latest[d.tb] = std::max(latest[d.tb], d.entry);
      for (const auto& [producer, entry] : latest) {
        const auto found = seen.find(producer);
        if (found != seen.end() && found->second >= entry) continue;  // implied by an earlier acquire
        seen[producer] = entry;
        const auto key = std::make_pair(producer, static_cast<int32_t>(c));
        auto sem = semaphoreOf.find(key);
        if (sem == semaphoreOf.end()) sem = semaphoreOf.emplace(key, s.count++).first;
        s.acquire[c][e].push_back(sem->second);
        s.release[producer][entry].push_back(sem->second);
      }
    }
  }
  return s;
}

// ---- ops ---------------------------------------------------------------------------------------

struct Range {
  BufferKind buffer;
  int64_t begin;
  int64_t end;
  bool overlaps(const Range& o) const { return buffer == o.buffer && begin < o.end && o.begin < end; }
};

bool isData(MscclppOpCode code) {
  return code == MscclppOpCode::Put || code == MscclppOpCode::Pwsf || code == MscclppOpCode::Copy ||
         code == MscclppOpCode::Reduce;
}

// Appends ops to a thread block, with a nop wherever an op depends on an op since the last nop.
class TbBuilder {
 public:
  explicit TbBuilder(MscclppThreadBlock& tb) : tb_(tb) {}

  void add(MscclppOp op) {
    std::vector<Range> reads, writes;
    for (const MscclppBufferRef& r : op.src) {
      if (r.bufferId < 0) reads.push_back({r.buffer, r.index, r.index + r.size});
    }
    for (const MscclppBufferRef& r : op.dst) {
      if (r.bufferId < 0) writes.push_back({r.buffer, r.index, r.index + r.size});
    }
    const bool data = isData(op.code);
    const bool publishes = op.code == MscclppOpCode::Signal || op.code == MscclppOpCode::SemRelease;
    bool hazard = (data && syncSince_) || (publishes && dataSince_);
    for (const Range& w : writes) {
      for (const Range& o : reads_) hazard = hazard || w.overlaps(o);
      for (const Range& o : writes_) hazard = hazard || w.overlaps(o);
    }
    for (const Range& r : reads) {
      for (const Range& o : writes_) hazard = hazard || r.overlaps(o);
    }
    if (op.code == MscclppOpCode::Barrier || op.code == MscclppOpCode::Nop) hazard = false;
    if (hazard) {
      tb_.ops.push_back(MscclppOp{});
      reset();
    }
    if (op.code == MscclppOpCode::Barrier || op.code == MscclppOpCode::Nop) reset();
    syncSince_ = syncSince_ || op.code == MscclppOpCode::Wait || op.code == MscclppOpCode::SemAcquire;
    dataSince_ = dataSince_ || data;
    reads_.insert(reads_.end(), reads.begin(), reads.end());
    writes_.insert(writes_.end(), writes.begin(), writes.end());
    tb_.ops.push_back(std::move(op));
  }

  // The thread block's local index of a global channel (remote buffer) id, added on first use.
  int32_t channel(MscclppChannelType type, int32_t global) {
    return localIndex(type == MscclppChannelType::Memory ? tb_.memoryChannels : tb_.portChannels, global);
  }
  int32_t buffer(MscclppChannelType type, int32_t global) {
    return localIndex(type == MscclppChannelType::Memory ? tb_.memoryBuffers : tb_.portBuffers, global);
  }

 private:
  static int32_t localIndex(std::vector<int32_t>& list, int32_t global) {
    const auto found = std::find(list.begin(), list.end(), global);
    if (found != list.end()) return static_cast<int32_t>(found - list.begin());
    list.push_back(global);
    return static_cast<int32_t>(list.size()) - 1;
  }
  void reset() {
    syncSince_ = dataSince_ = false;
    reads_.clear();
    writes_.clear();
  }

  MscclppThreadBlock& tb_;
  bool syncSince_ = false;
  bool dataSince_ = false;
  std::vector<Range> reads_, writes_;
};

MscclppOp semaphoreOp(MscclppOpCode code, const std::vector<int32_t>& ids) {
  MscclppOp op;
  op.code = code;
  op.semaphoreIds = ids;
  return op;
}

// The ops of one plan entry.
void emitEntry(const Layout& layout, const Wiring& w, int32_t rank, const PlanEntry& entry, const TransferInfo& info,
               TbBuilder& tb) {
  const auto own = [&](BufferKind buffer, int32_t index) { return layout.slot(rank, buffer, index); };
  switch (entry.kind) {
    case PrimitiveKind::Send: {
      const Lane& lane = w.lanes[info.lane];
      const int32_t channel = tb.channel(lane.type, lane.srcChannel);
      const int32_t buffer = tb.buffer(lane.type, w.remoteBufferOf[rank][entry.peer]);
      const std::vector<Piece> pieces = cutPieces(
          entry.count, [&](int32_t i) { return own(entry.srcBuffer, entry.srcIndex + i); },
          [&](int32_t i) { return StorageSlot{BufferKind::Scratch, info.landing + i}; });
      for (size_t p = 0; p < pieces.size(); ++p) {
        MscclppOp op;
        const bool last = p + 1 == pieces.size();
        op.code = lane.type == MscclppChannelType::Port && last ? MscclppOpCode::Pwsf : MscclppOpCode::Put;
        op.channelType = lane.type;
        op.channelIds = {channel};
        op.src = {localRef(pieces[p].src, pieces[p].count)};
        op.dst = {{BufferKind::Scratch, buffer, pieces[p].dst.index, pieces[p].count}};
        tb.add(std::move(op));
      }
      if (lane.type == MscclppChannelType::Memory) {
        MscclppOp signal;
        signal.code = MscclppOpCode::Signal;
        signal.channelType = lane.type;
        signal.channelIds = {channel};
        tb.add(std::move(signal));
      }
      return;
    }
    case PrimitiveKind::Recv:
    case PrimitiveKind::RecvReduceCopy: {
      const Lane& lane = w.lanes[info.lane];
      MscclppOp wait;
      wait.code = MscclppOpCode::Wait;
      wait.channelType = lane.type;
      wait.channelIds = {tb.channel(lane.type, lane.dstChannel)};
      tb.add(std::move(wait));
      const std::vector<Piece> pieces = cutPieces(
          entry.count, [&](int32_t i) { return StorageSlot{BufferKind::Scratch, info.landing + i}; },
          [&](int32_t i) { return own(entry.dstBuffer, entry.dstIndex + i); });
      for (const Piece& piece : pieces) {
        MscclppOp op;
        op.dst = {localRef(piece.dst, piece.count)};
        if (entry.kind == PrimitiveKind::Recv) {
          op.code = MscclppOpCode::Copy;
          op.src = {localRef(piece.src, piece.count)};
        } else {
          op.code = MscclppOpCode::Reduce;
          op.src = {localRef(piece.dst, piece.count), localRef(piece.src, piece.count)};
        }
        tb.add(std::move(op));
      }
      return;
    }
    case PrimitiveKind::RecvCopySend:
    case PrimitiveKind::RecvReduceSend:
    case PrimitiveKind::RecvReduceCopySend:
      throw std::logic_error("MSCCL++ export: fused entries are split (unfusedPlan) before their operations are made");
    case PrimitiveKind::Copy:
    case PrimitiveKind::Reduce: {
      const std::vector<Piece> pieces = cutPieces(
          entry.count, [&](int32_t i) { return own(entry.srcBuffer, entry.srcIndex + i); },
          [&](int32_t i) { return own(entry.dstBuffer, entry.dstIndex + i); });
      for (const Piece& piece : pieces) {
        MscclppOp op;
        op.dst = {localRef(piece.dst, piece.count)};
        if (entry.kind == PrimitiveKind::Copy) {
          op.code = MscclppOpCode::Copy;
          op.src = {localRef(piece.src, piece.count)};
        } else {  // dst = dst op src
          op.code = MscclppOpCode::Reduce;
          op.src = {localRef(piece.dst, piece.count), localRef(piece.src, piece.count)};
        }
        tb.add(std::move(op));
      }
      return;
    }
  }
}

// The out-of-place prologue of an in-place plan: thread block 0 copies the input into the in-place
// storage of the output, and a barrier holds every thread block until it is done.
void emitPrologue(const Plan& plan, int32_t rank, std::vector<MscclppThreadBlock>& tbs) {
  const int32_t chunks = plan.bufferChunks[static_cast<int>(BufferKind::Input)];
  const int32_t first = plan.collective == Collective::AllGather ? rank * chunks : 0;
  MscclppOp copy;
  copy.code = MscclppOpCode::Copy;
  copy.src = {{BufferKind::Input, -1, 0, chunks}};
  copy.dst = {{BufferKind::Output, -1, first, chunks}};
  tbs[0].ops.push_back(copy);
  if (tbs.size() < 2) {
    tbs[0].ops.push_back(MscclppOp{});  // a nop: what follows may read the copy
    return;
  }
  for (MscclppThreadBlock& tb : tbs) {
    MscclppOp barrier;
    barrier.code = MscclppOpCode::Barrier;
    barrier.barrierId = 0;
    barrier.numThreadblocks = static_cast<int32_t>(tbs.size());
    tb.ops.push_back(barrier);
  }
}

Status checkOptions(const Plan& plan, const MscclppExportOptions& options) {
  if (options.ranksPerNode < 0 || (options.ranksPerNode > 0 && plan.nRanks % options.ranksPerNode != 0)) {
    return makeError(ErrorCode::InvalidArgument, "ranksPerNode " + std::to_string(options.ranksPerNode) +
                                                     " does not divide the plan's " + std::to_string(plan.nRanks) +
                                                     " ranks (0: one node)");
  }
  if (options.bufferAlignment <= 0) {
    return makeError(ErrorCode::InvalidArgument,
                     "bufferAlignment " + std::to_string(options.bufferAlignment) + " is not positive");
  }
  return checkExportedCalls(plan, options.inPlace, options.minBytes, options.maxBytes);
}

// Chunks of the message: the output for AllGather, the input otherwise.
int32_t messageChunks(const MscclppPlan& p, const MscclppGpu& gpu) {
  return p.collective == Collective::AllGather ? gpu.outputChunks : gpu.inputChunks;
}

// The largest message whose every buffer keeps byte offsets within 32 bits, in alignment units.
uint64_t largestMessage(const MscclppPlan& p) {
  uint64_t best = std::numeric_limits<uint64_t>::max();
  for (const MscclppGpu& gpu : p.gpus) {
    const auto biggest = static_cast<uint64_t>(std::max({gpu.inputChunks, gpu.outputChunks, gpu.scratchChunks, 1}));
    const auto align = static_cast<uint64_t>(std::max(1, p.bufferAlignment));
    const uint64_t chunkBytes = kMaxOffset / biggest / align * align;
    best = std::min(best, chunkBytes * static_cast<uint64_t>(std::max(1, messageChunks(p, gpu))));
  }
  return best;
}

std::string jsonName(const std::string& name) { return name.empty() ? "tuccl" : name; }

char bufferLetter(BufferKind buffer) {
  switch (buffer) {
    case BufferKind::Input: return 'i';
    case BufferKind::Output: return 'o';
    case BufferKind::Scratch: return 's';
  }
  return 'i';
}

// The `collective` spelling of the DSL.
std::string_view collectiveKey(Collective collective) {
  switch (collective) {
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllReduce: return "allreduce";
    case Collective::AllToAll: return "alltoall";
  }
  return "allreduce";
}

// ---- limits ------------------------------------------------------------------------------------

using Check = std::function<void(const std::string& limit, const std::string& where, uint64_t value, uint64_t maximum)>;

void checkThreadBlock(const MscclppThreadBlock& tb, const std::string& gpuAt, std::set<int32_t>& barriers,
                      const Check& check) {
  const std::string at = gpuAt + " tb " + std::to_string(tb.id);
  check("ops per thread block", at, tb.ops.size(), kMaxOpsPerTb);  // no pipeline ops: the list is all
  check("memory channels per thread block", at, tb.memoryChannels.size(), kMaxChannelsPerTb);
  check("port channels per thread block", at, tb.portChannels.size(), kMaxChannelsPerTb);
  for (size_t o = 0; o < tb.ops.size(); ++o) {
    const MscclppOp& op = tb.ops[o];
    const std::string opAt = at + " op " + std::to_string(o);
    check("channels per op", opAt, op.channelIds.size(), kMaxChannelsPerOp);
    for (const auto* list : {&op.src, &op.dst}) {
      const auto remote = static_cast<uint64_t>(
          std::count_if(list->begin(), list->end(), [](const MscclppBufferRef& r) { return r.bufferId >= 0; }));
      check("local operands per list", opAt, list->size() - remote, kMaxLocalOperands);
      check("remote operands per list", opAt, remote, kMaxRemoteOperands);
    }
    if (op.code == MscclppOpCode::Barrier) {
      barriers.insert(op.barrierId);
      check("barrier id", opAt, static_cast<uint64_t>(std::max(0, op.barrierId)), kMaxBarriers - 1);
    }
  }
}

// Byte offsets are uint32: every buffer must stay below 4 GiB at the largest message.
void checkOffsets(const MscclppPlan& plan, const MscclppGpu& gpu, const std::string& at, const Check& check) {
  const uint64_t message = std::max(plan.maxMessageSize, plan.minMessageSize);
  const auto chunks = static_cast<uint64_t>(std::max(1, messageChunks(plan, gpu)));
  const uint64_t chunkBytes = message / chunks + (message % chunks != 0 ? 1 : 0);
  for (const auto& [name, count] : {std::pair<const char*, int32_t>{"input", gpu.inputChunks},
                                    {"output", gpu.outputChunks}, {"scratch", gpu.scratchChunks}}) {
    const auto chunksOf = static_cast<uint64_t>(std::max(0, count));
    const uint64_t bytes = chunkBytes != 0 && chunksOf > std::numeric_limits<uint64_t>::max() / chunkBytes
                               ? std::numeric_limits<uint64_t>::max()
                               : chunksOf * chunkBytes;
    check(std::string(name) + " bytes at the largest message", at, bytes, kMaxOffset);
  }
}

// ---- writer ------------------------------------------------------------------------------------

using Json = nlohmann::ordered_json;

Json refJson(const MscclppBufferRef& r) {
  Json j;
  if (r.bufferId >= 0) {
    j["buffer_id"] = r.bufferId;
  } else {
    j["type"] = std::string(1, bufferLetter(r.buffer));
  }
  j["index"] = r.index;
  j["size"] = r.size;
  return j;
}

Json opJson(const MscclppOp& op) {
  Json o;
  o["name"] = mscclppOpName(op.code);
  if (op.channelType != MscclppChannelType::None) {
    o["channel_type"] = mscclppChannelTypeName(op.channelType);
    o["channel_ids"] = op.channelIds;
  }
  if (!op.src.empty()) {
    o["src_buff"] = Json::array();
    for (const MscclppBufferRef& r : op.src) o["src_buff"].push_back(refJson(r));
  }
  if (!op.dst.empty()) {
    o["dst_buff"] = Json::array();
    for (const MscclppBufferRef& r : op.dst) o["dst_buff"].push_back(refJson(r));
  }
  if (op.code == MscclppOpCode::Reduce) o["reduce_op"] = "sum";  // written by the DSL, not read
  if (op.code == MscclppOpCode::Barrier) {
    o["barrier_id"] = op.barrierId;
    o["num_threadblocks"] = op.numThreadblocks;
  }
  if (!op.semaphoreIds.empty()) o["semaphore_ids"] = op.semaphoreIds;
  return o;
}

// One entry per channel type in use: {key: type, listKey: ids}.
Json perType(const char* key, const char* listKey, const std::vector<int32_t>& memory,
             const std::vector<int32_t>& port) {
  Json list = Json::array();
  if (!memory.empty()) list.push_back({{key, "memory"}, {listKey, memory}});
  if (!port.empty()) list.push_back({{key, "port"}, {listKey, port}});
  return list;
}

Json threadBlockJson(const MscclppThreadBlock& tb) {
  Json t;
  t["id"] = tb.id;
  t["ops"] = Json::array();
  for (const MscclppOp& op : tb.ops) t["ops"].push_back(opJson(op));
  t["channels"] = perType("channel_type", "channel_ids", tb.memoryChannels, tb.portChannels);
  t["remote_buffer_refs"] = perType("access_channel_type", "remote_buffer_ids", tb.memoryBuffers, tb.portBuffers);
  return t;
}

Json gpuJson(const MscclppGpu& gpu) {
  Json g;
  g["id"] = gpu.id;
  g["input_chunks"] = gpu.inputChunks;
  g["output_chunks"] = gpu.outputChunks;
  g["scratch_chunks"] = gpu.scratchChunks;
  g["channels"] = perType("channel_type", "connected_to", gpu.memoryPeers, gpu.portPeers);
  g["remote_buffers"] = Json::array();
  for (const MscclppRemoteBuffer& b : gpu.remoteBuffers) {
    g["remote_buffers"].push_back({{"rank", b.rank},
                                   {"type", std::string(1, bufferLetter(b.buffer))},
                                   {"access_channel_types", Json::array({mscclppChannelTypeName(b.access)})}});
  }
  g["threadblocks"] = Json::array();
  for (const MscclppThreadBlock& tb : gpu.threadBlocks) g["threadblocks"].push_back(threadBlockJson(tb));
  g["semaphores"] = Json::array();
  for (int32_t s = 0; s < gpu.semaphores; ++s) g["semaphores"].push_back({{"init_value", 0}});
  return g;
}

}  // namespace

Expected<MscclppPlan> lowerToMscclpp(const Plan& fusedPlan, const MscclppExportOptions& options) {
  if (Status status = checkOptions(fusedPlan, options); !status) return status;
  if (Status status = validatePlan(fusedPlan); !status) return makeError(ErrorCode::InvalidInput, status.message());
  // The MSCCL++ operations here are per transfer: a fused entry is written as its receive and send.
  const Plan plan = unfusedPlan(fusedPlan);
  Expected<Wiring> wiring = wire(plan, options.ranksPerNode);
  if (!wiring) return wiring.status();
  const Wiring& w = *wiring;
  const Layout layout{plan, options.inPlace};
  MscclppPlan out;
  out.name = jsonName(plan.algorithm);
  out.collective = plan.collective;
  out.inPlace = options.inPlace;
  out.numThreadsPerBlock = plan.config.nThreads > 0 && plan.config.nThreads <= 1024 ? plan.config.nThreads : 1024;
  out.bufferAlignment = options.bufferAlignment;
  out.minMessageSize = options.minBytes;
  for (const PlanRank& rank : plan.ranks) {
    MscclppGpu& gpu = out.gpus.emplace_back();
    gpu.id = rank.rank;
    gpu.inputChunks = plan.bufferChunks[static_cast<int>(BufferKind::Input)];
    gpu.outputChunks = plan.bufferChunks[static_cast<int>(BufferKind::Output)];
    gpu.scratchChunks = w.landingChunks[rank.rank];
    gpu.memoryPeers = w.memoryPeers[rank.rank];
    gpu.portPeers = w.portPeers[rank.rank];
    gpu.remoteBuffers = w.remoteBuffers[rank.rank];
    const Semaphores sems = assignSemaphores(rank);
    gpu.semaphores = sems.count;
    gpu.threadBlocks.resize(std::max<size_t>(1, rank.tbs.size()));
    for (size_t t = 0; t < gpu.threadBlocks.size(); ++t) gpu.threadBlocks[t].id = static_cast<int32_t>(t);
    if (plan.inPlace && !options.inPlace) emitPrologue(plan, rank.rank, gpu.threadBlocks);
    for (size_t t = 0; t < rank.tbs.size(); ++t) {
      TbBuilder builder(gpu.threadBlocks[t]);
      for (size_t e = 0; e < rank.tbs[t].entries.size(); ++e) {
        if (!sems.acquire[t][e].empty()) builder.add(semaphoreOp(MscclppOpCode::SemAcquire, sems.acquire[t][e]));
        emitEntry(layout, w, rank.rank, rank.tbs[t].entries[e], w.of[rank.rank][t][e], builder);
        if (!sems.release[t][e].empty()) builder.add(semaphoreOp(MscclppOpCode::SemRelease, sems.release[t][e]));
      }
    }
  }
  out.maxMessageSize = options.maxBytes != 0 ? options.maxBytes : largestMessage(out);
  return out;
}

std::vector<MscclppLimitViolation> checkMscclppLimits(const MscclppPlan& plan) {
  std::vector<MscclppLimitViolation> violations;
  const Check check = [&](const std::string& limit, const std::string& where, uint64_t value, uint64_t maximum) {
    if (value > maximum) violations.push_back({limit, where, value, maximum});
  };
  for (const MscclppGpu& gpu : plan.gpus) {
    const std::string at = "gpu " + std::to_string(gpu.id);
    std::set<int32_t> barriers;
    for (const MscclppThreadBlock& tb : gpu.threadBlocks) checkThreadBlock(tb, at, barriers, check);
    check("barriers", at, barriers.size(), kMaxBarriers);
    check("semaphores", at, static_cast<uint64_t>(gpu.semaphores), kMaxSemaphores);
    checkOffsets(plan, gpu, at, check);
  }
  return violations;
}

std::string writeMscclppJson(const MscclppPlan& plan) {
  Json doc;
  doc["name"] = plan.name;
  doc["collective"] = collectiveKey(plan.collective);
  doc["protocol"] = "Simple";
  doc["inplace"] = plan.inPlace;
  doc["reuse_resources"] = false;
  doc["use_double_scratch_buffer"] = false;
  doc["buffer_alignment"] = plan.bufferAlignment;
  doc["num_threads_per_block"] = plan.numThreadsPerBlock;
  doc["min_message_size"] = plan.minMessageSize;
  doc["max_message_size"] = plan.maxMessageSize;
  doc["gpus"] = Json::array();
  for (const MscclppGpu& gpu : plan.gpus) doc["gpus"].push_back(gpuJson(gpu));
  return doc.dump(2) + "\n";
}

Expected<std::string> exportMscclppJson(const Plan& plan, const MscclppExportOptions& options) {
  Expected<MscclppPlan> lowered = lowerToMscclpp(plan, options);
  if (!lowered) return lowered.status();
  const std::vector<MscclppLimitViolation> violations = checkMscclppLimits(*lowered);
  if (!violations.empty()) {
    std::string message = "the MSCCL++ execution plan exceeds " + std::to_string(violations.size()) + " limit" +
                          (violations.size() > 1 ? "s" : "") + " of the executor:";
    for (const MscclppLimitViolation& v : violations) message += "\n  " + v.message();
    return makeError(ErrorCode::ResourceExhausted, message);
  }
  return writeMscclppJson(*lowered);
}

}  // namespace tuccl
