// Plan -> MSCCL algorithm XML (msccl_export.h). The steps of the lowering:
//   1. lanes: the transfers of a directed rank pair that one plan TB sends and one plan TB
//      receives form a lane; lanes become channels, so each MSCCL connection lives in one plan TB;
//   2. parts: each plan TB is cut into order-preserving parts with at most one send and one receive
//      connection of one lane each (one part when the plan TB already fits);
//   3. items: a part's entries, a receive fused with the send of the same data right after it;
//   4. dependencies: the plan's deps plus the plan-TB order the cut removed, minus those another
//      kept dependency implies (vector clocks over the parts of a rank);
//   5. steps: per replica, the items' pieces (contiguous runs of at most 71 chunks), nop steps
//      carrying all but the last dependency of an item, hasdep on every step waited for.
#include "plan/msccl_export.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "plan/export_calls.h"
#include "plan/plan_pairing.h"
#include "plan/plan_storage.h"
#include "plan/plan_validate.h"

namespace tuccl {

std::string_view mscclRuntimeName(MscclRuntime runtime) {
  switch (runtime) {
    case MscclRuntime::Msccl: return "msccl";
    case MscclRuntime::Executor: return "executor";
    case MscclRuntime::Rccl: return "rccl";
  }
  return "?";
}

std::optional<MscclRuntime> parseMscclRuntime(std::string_view name) {
  for (int i = 0; i < kMscclRuntimes; ++i) {
    const auto runtime = static_cast<MscclRuntime>(i);
    if (name == mscclRuntimeName(runtime)) return runtime;
  }
  if (name == "msccl-executor-nccl" || name == "msccl-executor") return MscclRuntime::Executor;
  return std::nullopt;
}

std::string MscclLimitViolation::message() const {
  return std::string(mscclRuntimeName(runtime)) + ": " + where + ": " + limit + " is " + std::to_string(value) +
         ", the most is " + std::to_string(maximum);
}

namespace {

constexpr int32_t kMaxCount = 71;     // MSCCL_MAX_COUNT: cnt < 72
constexpr int32_t kMaxChannels = 32;  // tb.chan < 32 (MAXCHANNELS)
constexpr int32_t kMaxTbsPerChannel = 32;  // MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL, per direction
constexpr int32_t kMaxElements = 4096;
constexpr int32_t kMaxChildren = 1024;
constexpr int32_t kMaxReplicas = 65536;
// maxBytes of an unbounded microsoft/msccl algorithm (its bound is exclusive, its default 128 MiB).
constexpr uint64_t kMscclUnboundedMaxBytes = uint64_t{1} << 62;

struct RuntimeLimits {
  int32_t stepsPerTb;
  int32_t tbsPerGpu;
};

// The reference's limits table (docs/msccl.md): MSCCL_MAX_NUM_STEPS and the TBs a GPU may run.
// RCCL's TB bound depends on its MAXCHANNELS, which it does not check: the executor's is assumed.
RuntimeLimits limitsOf(MscclRuntime runtime) {
  switch (runtime) {
    case MscclRuntime::Msccl: return {256, 216};
    case MscclRuntime::Executor: return {64, 1024};
    case MscclRuntime::Rccl: return {64, 1024};
  }
  return {64, 1024};
}

// ---- lanes -------------------------------------------------------------------------------------

struct Lanes {
  std::vector<std::vector<std::vector<int32_t>>> of;  // [rank][tb][entry]; -1 for local entries
  int32_t count = 1;
};

Expected<Lanes> assignLanes(const Plan& plan) {
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return transfers.status();
  Lanes lanes;
  for (const PlanRank& rank : plan.ranks) {
    auto& tbs = lanes.of.emplace_back();
    for (const PlanTb& tb : rank.tbs) tbs.emplace_back(tb.entries.size(), -1);
  }
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, int32_t> laneOfTbs;
  std::map<std::pair<int32_t, int32_t>, int32_t> lanesOfPair;
  for (const PlanTransfer& t : *transfers) {
    const auto key = std::make_tuple(t.srcRank, t.dstRank, t.send.tb, t.recv.tb);
    auto found = laneOfTbs.find(key);
    if (found == laneOfTbs.end()) found = laneOfTbs.emplace(key, lanesOfPair[{t.srcRank, t.dstRank}]++).first;
    lanes.of[t.srcRank][t.send.tb][t.send.entry] = found->second;
    lanes.of[t.dstRank][t.recv.tb][t.recv.entry] = found->second;
    lanes.count = std::max(lanes.count, found->second + 1);
  }
  return lanes;
}

// ---- slots and pieces --------------------------------------------------------------------------

struct Layout {
  const Plan& plan;
  bool inPlace = true;
  int32_t replicas = 1;

  // Where (rank, buffer, index) lives in the file: NCCL's in-place storage of an in-place plan,
  // in MSCCL's in-place spelling (AllGather in `o`, every other collective in `i`).
  StorageSlot slot(int32_t rank, BufferKind buffer, int32_t index, int32_t replica) const {
    StorageSlot s = planStorage(plan, rank, buffer, index);
    if (plan.inPlace && inPlace && s.buffer == BufferKind::Output && plan.collective != Collective::AllGather) {
      s.buffer = BufferKind::Input;
    }
    s.index = s.index * replicas + replica;
    return s;
  }
};

struct Piece {
  StorageSlot src;
  StorageSlot dst;
  int32_t count = 0;
};

// The chunks [0, count) read at (srcRank, srcBuffer, srcIndex + i) and written at (dstRank, ...),
// cut into runs contiguous on both sides of at most kMaxCount chunks. Both sides of a transfer cut
// alike, so their steps pair.
std::vector<Piece> cutPieces(const Layout& layout, const PlanEntry& entry, int32_t srcRank, int32_t dstRank,
                             int32_t replica) {
  std::vector<Piece> pieces;
  for (int32_t i = 0; i < entry.count; ++i) {
    const StorageSlot src = layout.slot(srcRank, entry.srcBuffer, entry.srcIndex + i, replica);
    const StorageSlot dst = layout.slot(dstRank, entry.dstBuffer, entry.dstIndex + i, replica);
    if (!pieces.empty()) {
      Piece& last = pieces.back();
      if (last.count < kMaxCount && last.src.buffer == src.buffer && last.src.index + last.count == src.index &&
          last.dst.buffer == dst.buffer && last.dst.index + last.count == dst.index) {
        ++last.count;
        continue;
      }
    }
    pieces.push_back({src, dst, 1});
  }
  return pieces;
}

MscclStep pieceStep(MscclStepType type, const Piece& piece) {
  MscclStep step;
  step.type = type;
  step.srcBuffer = piece.src.buffer;
  step.srcOffset = piece.src.index;
  step.dstBuffer = piece.dst.buffer;
  step.dstOffset = piece.dst.index;
  step.count = piece.count;
  return step;
}

// The steps of one plan entry on `rank`: the own side of each piece is local, the other side
// names the peer's chunks (unused by the runtimes, informative for readers).
std::vector<MscclStep> entrySteps(const Layout& layout, int32_t rank, const PlanEntry& entry, int32_t replica) {
  std::vector<MscclStep> steps;
  switch (entry.kind) {
    case PrimitiveKind::Send:
      for (const Piece& p : cutPieces(layout, entry, rank, entry.peer, replica)) steps.push_back(pieceStep(MscclStepType::Send, p));
      break;
    case PrimitiveKind::Recv:
      for (const Piece& p : cutPieces(layout, entry, entry.peer, rank, replica)) steps.push_back(pieceStep(MscclStepType::Recv, p));
      break;
    case PrimitiveKind::RecvReduceCopy:
      for (Piece p : cutPieces(layout, entry, entry.peer, rank, replica)) {
        p.src = p.dst;  // dst = dst op incoming
        steps.push_back(pieceStep(MscclStepType::RecvReduceCopy, p));
      }
      break;
    case PrimitiveKind::Copy:
      for (const Piece& p : cutPieces(layout, entry, rank, rank, replica)) steps.push_back(pieceStep(MscclStepType::Copy, p));
      break;
    case PrimitiveKind::Reduce:
      for (const Piece& p : cutPieces(layout, entry, rank, rank, replica)) steps.push_back(pieceStep(MscclStepType::Reduce, p));
      break;
    case PrimitiveKind::RecvCopySend:
    case PrimitiveKind::RecvReduceSend:
    case PrimitiveKind::RecvReduceCopySend:
      throw std::logic_error("MSCCL export: fused entries are split (unfusedPlan) before their steps are made");
  }
  return steps;
}

// A receive and the send right after it fused into rcs / rrcs: the send forwards exactly the
// chunks received, in the same pieces; empty when they do not fuse.
std::vector<MscclStep> fusedSteps(const Layout& layout, int32_t rank, const PlanEntry& receive, const PlanEntry& send,
                                  int32_t replica) {
  const std::vector<MscclStep> in = entrySteps(layout, rank, receive, replica);
  const std::vector<MscclStep> out = entrySteps(layout, rank, send, replica);
  if (in.size() != out.size()) return {};
  std::vector<MscclStep> fused;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].count != out[i].count || in[i].dstBuffer != out[i].srcBuffer || in[i].dstOffset != out[i].srcOffset) return {};
    MscclStep step = in[i];
    step.type = receive.kind == PrimitiveKind::Recv ? MscclStepType::RecvCopySend : MscclStepType::RecvReduceCopySend;
    step.srcBuffer = step.dstBuffer;
    step.srcOffset = step.dstOffset;
    fused.push_back(step);
  }
  return fused;
}

// ---- parts and items ---------------------------------------------------------------------------

/// A position in a rank's parts: (part, item).
struct ItemRef {
  int32_t part = 0;
  int32_t item = 0;
  friend bool operator==(const ItemRef&, const ItemRef&) = default;
};

struct Item {
  std::vector<int32_t> entries;  // entry indices in the part's plan TB: one, or a receive and its send
  std::vector<ItemRef> deps;     // after reduction: the items that must be done first
};

struct Part {
  int32_t planTb = -1;  // -1: the out-of-place prologue
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  int32_t lane = 0;
  std::vector<Item> items;
};

struct RankParts {
  std::vector<Part> parts;
  std::vector<std::vector<ItemRef>> itemOf;  // [plan tb][entry]
  int32_t prologue = -1;                     // the prologue's part, or -1
};

// The part of every entry of one plan TB (step 2).
std::vector<int32_t> partOfEntries(const PlanTb& tb, const std::vector<int32_t>& lanes, std::vector<Part>& parts) {
  std::map<std::tuple<int32_t, bool, int32_t>, int32_t> partOfConnection;  // (lane, send?, peer)
  std::map<std::pair<int32_t, bool>, int32_t> usedOfLane;                   // connections per (lane, send?)
  std::map<int32_t, std::vector<int32_t>> partsOfLane;
  const int32_t firstPart = static_cast<int32_t>(parts.size());
  std::vector<int32_t> partOf(tb.entries.size(), -1);
  for (size_t e = 0; e < tb.entries.size(); ++e) {
    const PlanEntry& entry = tb.entries[e];
    if (isLocal(entry.kind)) continue;
    const bool send = entry.kind == PrimitiveKind::Send;
    const auto key = std::make_tuple(lanes[e], send, entry.peer);
    auto found = partOfConnection.find(key);
    if (found == partOfConnection.end()) {
      const int32_t index = usedOfLane[{lanes[e], send}]++;
      std::vector<int32_t>& laneParts = partsOfLane[lanes[e]];
      if (index == static_cast<int32_t>(laneParts.size())) {
        laneParts.push_back(static_cast<int32_t>(parts.size()));
        parts.push_back(Part{tb.id, -1, -1, lanes[e], {}});
      }
      Part& part = parts[laneParts[index]];
      (send ? part.sendPeer : part.recvPeer) = entry.peer;
      found = partOfConnection.emplace(key, laneParts[index]).first;
    }
    partOf[e] = found->second;
  }
  if (static_cast<int32_t>(parts.size()) == firstPart) parts.push_back(Part{tb.id, -1, -1, 0, {}});
  // Local entries go with the entry before them (the first ones with the first remote entry).
  int32_t current = -1;
  for (int32_t p : partOf) {
    if (p >= 0) {
      current = p;
      break;
    }
  }
  if (current < 0) current = firstPart;
  for (int32_t& p : partOf) {
    if (p < 0) p = current;
    current = p;
  }
  return partOf;
}

// Steps 2 and 3 for one rank: the parts, their items (fusing where the pieces allow) and where
// every entry went.
RankParts buildParts(const Layout& layout, const PlanRank& rank, const Lanes& lanes, const MscclExportOptions& options) {
  RankParts result;
  for (const PlanTb& tb : rank.tbs) {
    const std::vector<int32_t> partOf = partOfEntries(tb, lanes.of[rank.rank][tb.id], result.parts);
    std::vector<ItemRef>& itemOf = result.itemOf.emplace_back(tb.entries.size());
    for (size_t e = 0; e < tb.entries.size(); ++e) {
      Part& part = result.parts[partOf[e]];
      const PlanEntry& entry = tb.entries[e];
      const bool fuses = options.fuse && e > 0 && entry.kind == PrimitiveKind::Send && entry.deps.empty() &&
                         partOf[e - 1] == partOf[e] && isReceive(tb.entries[e - 1].kind) &&
                         part.items.back().entries.size() == 1 &&
                         !fusedSteps(layout, rank.rank, tb.entries[e - 1], entry, 0).empty();
      if (fuses) {
        part.items.back().entries.push_back(static_cast<int32_t>(e));
      } else {
        part.items.push_back(Item{{static_cast<int32_t>(e)}, {}});
      }
      itemOf[e] = {partOf[e], static_cast<int32_t>(part.items.size()) - 1};
    }
  }
  return result;
}

// ---- dependencies ------------------------------------------------------------------------------

// Every item's dependencies before reduction (step 4): the plan's deps, and the entry before it in
// its plan TB when that went to another part; the out-of-place prologue before every part.
std::vector<std::vector<std::vector<ItemRef>>> rawDependencies(const PlanRank& rank, const RankParts& rp) {
  std::vector<std::vector<std::vector<ItemRef>>> deps(rp.parts.size());
  for (size_t p = 0; p < rp.parts.size(); ++p) {
    const Part& part = rp.parts[p];
    deps[p].resize(part.items.size());
    if (rp.prologue >= 0 && static_cast<int32_t>(p) != rp.prologue && !part.items.empty()) {
      deps[p][0].push_back({rp.prologue, 0});
    }
    if (part.planTb < 0) continue;
    const PlanTb& tb = rank.tbs[part.planTb];
    for (size_t i = 0; i < part.items.size(); ++i) {
      const ItemRef self{static_cast<int32_t>(p), static_cast<int32_t>(i)};
      auto add = [&](ItemRef target) {
        if (target.part != self.part) deps[p][i].push_back(target);
      };
      for (int32_t e : part.items[i].entries) {
        for (const EntryRef& dep : tb.entries[e].deps) add(rp.itemOf[dep.tb][dep.entry]);
        if (e > 0) add(rp.itemOf[part.planTb][e - 1]);
      }
    }
  }
  return deps;
}

using Clock = std::vector<int32_t>;  // per part: the last item known done (-1: none)

// Keeps the dependencies no other one (nor the part's previous item) implies, and returns the
// item's clock.
Clock reduceDependencies(std::vector<ItemRef>& deps, const Clock& previous, const std::vector<std::vector<Clock>>& clocks) {
  std::map<int32_t, int32_t> latest;  // per part, the latest item waited for
  for (const ItemRef& d : deps) latest[d.part] = std::max(latest[d.part], d.item);
  std::vector<ItemRef> candidates;
  for (const auto& [part, item] : latest) {
    if (previous[part] < item) candidates.push_back({part, item});
  }
  deps.clear();
  for (const ItemRef& d : candidates) {
    bool implied = false;
    for (const ItemRef& other : candidates) {
      if (!(other == d) && clocks[other.part][other.item][d.part] >= d.item) implied = true;
    }
    if (!implied) deps.push_back(d);
  }
  Clock clock = previous;
  for (const ItemRef& d : deps) {
    const Clock& of = clocks[d.part][d.item];
    for (size_t q = 0; q < clock.size(); ++q) clock[q] = std::max(clock[q], of[q]);
  }
  return clock;
}

// Step 4 for one rank: runs the items in a dependency order, computing vector clocks.
Status resolveDependencies(const PlanRank& rank, RankParts& rp) {
  std::vector<std::vector<std::vector<ItemRef>>> deps = rawDependencies(rank, rp);
  const size_t nParts = rp.parts.size();
  std::vector<std::vector<Clock>> clocks(nParts);
  std::vector<size_t> next(nParts, 0);
  size_t remaining = 0;
  for (const Part& part : rp.parts) remaining += part.items.size();
  while (remaining > 0) {
    bool progress = false;
    for (size_t p = 0; p < nParts; ++p) {
      while (next[p] < rp.parts[p].items.size()) {
        std::vector<ItemRef>& itemDeps = deps[p][next[p]];
        const bool ready = std::all_of(itemDeps.begin(), itemDeps.end(),
                                       [&](const ItemRef& d) { return static_cast<int32_t>(next[d.part]) > d.item; });
        if (!ready) break;
        const Clock previous = next[p] == 0 ? Clock(nParts, -1) : clocks[p].back();
        Clock clock = reduceDependencies(itemDeps, previous, clocks);
        clock[p] = static_cast<int32_t>(next[p]);
        clocks[p].push_back(std::move(clock));
        rp.parts[p].items[next[p]].deps = itemDeps;
        ++next[p];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      return makeError(ErrorCode::InvalidInput, "rank " + std::to_string(rank.rank) +
                                                    ": the plan's dependencies and TB order form a cycle");
    }
  }
  return {};
}

// ---- steps -------------------------------------------------------------------------------------

std::vector<MscclStep> itemSteps(const Layout& layout, const PlanRank& rank, const Part& part, const Item& item,
                                 int32_t replica) {
  if (part.planTb < 0) {  // the prologue: the whole input into the in-place storage of the output
    const Plan& plan = layout.plan;
    const int32_t chunks = plan.bufferChunks[static_cast<int>(BufferKind::Input)] * layout.replicas;
    const int32_t first = plan.collective == Collective::AllGather ? rank.rank * chunks : 0;
    std::vector<MscclStep> steps;
    for (int32_t begin = 0; begin < chunks; begin += kMaxCount) {
      const int32_t count = std::min(kMaxCount, chunks - begin);
      steps.push_back(pieceStep(MscclStepType::Copy, {{BufferKind::Input, begin}, {BufferKind::Output, first + begin}, count}));
    }
    return steps;
  }
  const PlanTb& tb = rank.tbs[part.planTb];
  if (item.entries.size() == 2) {
    return fusedSteps(layout, rank.rank, tb.entries[item.entries[0]], tb.entries[item.entries[1]], replica);
  }
  return entrySteps(layout, rank.rank, tb.entries[item.entries[0]], replica);
}

// Step 5 for one rank: every part becomes one TB per replica (ids replica * parts + part; the
// prologue, shared by the replicas, comes last).
std::vector<MscclTb> emitTbs(const Layout& layout, const PlanRank& rank, const RankParts& rp, int32_t nLanes) {
  const int32_t nParts = static_cast<int32_t>(rp.parts.size());
  const int32_t perReplica = rp.prologue >= 0 ? nParts - 1 : nParts;
  auto tbId = [&](int32_t part, int32_t replica) {
    return part == rp.prologue ? perReplica * layout.replicas : replica * perReplica + part;
  };
  // Steps of each item, and where each item's steps end (the same in every replica).
  std::vector<std::vector<int32_t>> lastStep(nParts);
  std::vector<MscclTb> tbs(static_cast<size_t>(perReplica * layout.replicas + (rp.prologue >= 0 ? 1 : 0)));
  for (int32_t replica = 0; replica < layout.replicas; ++replica) {
    for (int32_t p = 0; p < nParts; ++p) {
      if (p == rp.prologue && replica > 0) continue;
      const Part& part = rp.parts[p];
      MscclTb& tb = tbs[tbId(p, replica)];
      tb.id = tbId(p, replica);
      tb.sendPeer = part.sendPeer;
      tb.recvPeer = part.recvPeer;
      tb.channel = p == rp.prologue ? 0 : replica * nLanes + part.lane;
      lastStep[p].clear();
      for (const Item& item : part.items) {
        std::vector<MscclStep> steps = itemSteps(layout, rank, part, item, replica);
        for (size_t d = 0; d < item.deps.size(); ++d) {
          MscclStep& carrier = d + 1 < item.deps.size() ? tb.steps.emplace_back() : steps.front();
          carrier.depTb = item.deps[d].part;  // resolved below, when every part's steps are known
          carrier.depStep = item.deps[d].item;
        }
        tb.steps.insert(tb.steps.end(), steps.begin(), steps.end());
        lastStep[p].push_back(static_cast<int32_t>(tb.steps.size()) - 1);
      }
    }
    // Resolve (part, item) into (tb, step) and mark the steps waited for.
    for (int32_t p = 0; p < nParts; ++p) {
      if (p == rp.prologue && replica > 0) continue;
      for (MscclStep& step : tbs[tbId(p, replica)].steps) {
        if (step.depTb < 0) continue;
        const int32_t part = step.depTb;
        const int32_t item = step.depStep;
        step.depTb = tbId(part, replica);
        step.depStep = lastStep[part][item];
        tbs[step.depTb].steps[step.depStep].hasDependents = true;
      }
    }
  }
  return tbs;
}

Status checkOptions(const Plan& plan, const MscclExportOptions& options) {
  if (options.replicas < 0 || options.replicas > kMaxReplicas) {
    return makeError(ErrorCode::InvalidArgument, "replicas " + std::to_string(options.replicas) + " is not in [0, " +
                                                     std::to_string(kMaxReplicas) + "] (0: the plan's nChannels)");
  }
  return checkExportedCalls(plan, options.inPlace, options.minBytes, options.maxBytes);
}

std::string xmlName(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 63)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                       c == '-' || c == '.' || c == '+';
    out += plain ? c : '_';
  }
  return out.empty() ? "tuccl" : out;
}

char bufferLetter(BufferKind buffer) {
  switch (buffer) {
    case BufferKind::Input: return 'i';
    case BufferKind::Output: return 'o';
    case BufferKind::Scratch: return 's';
  }
  return 'i';
}

// The `coll` spelling of each runtime's parser (executor and RCCL: "reducescatter").
std::string_view collName(Collective collective, MscclRuntime runtime) {
  switch (collective) {
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return runtime == MscclRuntime::Msccl ? "reduce_scatter" : "reducescatter";
    case Collective::AllReduce: return "allreduce";
    case Collective::AllToAll: return "alltoall";
  }
  return "custom";
}

}  // namespace

Expected<MscclAlgorithm> lowerToMsccl(const Plan& fusedPlan, const MscclExportOptions& options) {
  if (Status status = checkOptions(fusedPlan, options); !status) return status;
  if (Status status = validatePlan(fusedPlan); !status) return makeError(ErrorCode::InvalidInput, status.message());
  // MSCCL steps are sends and receives of one task each; a fused entry is written as its receive
  // and its send, which options.fuse joins again into rcs / rrcs steps.
  const Plan plan = unfusedPlan(fusedPlan);
  Expected<Lanes> lanes = assignLanes(plan);
  if (!lanes) return makeError(ErrorCode::InvalidInput, lanes.status().message());
  const Layout layout{plan, options.inPlace, options.replicas > 0 ? options.replicas : std::max(1, plan.config.nChannels)};
  MscclAlgorithm algorithm;
  algorithm.name = xmlName(plan.algorithm);
  algorithm.collective = plan.collective;
  algorithm.protocol = plan.config.protocol;
  algorithm.nChannels = layout.replicas * lanes->count;
  const auto chunks = [&](BufferKind b) { return plan.bufferChunks[static_cast<int>(b)] * layout.replicas; };
  algorithm.nChunksPerLoop = std::max(chunks(BufferKind::Input), chunks(BufferKind::Output));
  const int32_t threads = plan.config.nThreads;
  algorithm.nThreads = threads > 0 && threads <= 1024 && threads % 32 == 0 ? threads : 0;
  algorithm.inPlace = options.inPlace;
  algorithm.minBytes = options.minBytes;
  algorithm.maxBytes = options.maxBytes;
  for (const PlanRank& rank : plan.ranks) {
    RankParts parts = buildParts(layout, rank, *lanes, options);
    if (plan.inPlace && !options.inPlace) {
      parts.prologue = static_cast<int32_t>(parts.parts.size());
      parts.parts.push_back(Part{-1, -1, -1, 0, {Item{}}});
    }
    if (Status status = resolveDependencies(rank, parts); !status) return status;
    MscclGpu& gpu = algorithm.gpus.emplace_back();
    gpu.id = rank.rank;
    gpu.inputChunks = chunks(BufferKind::Input);
    gpu.outputChunks = chunks(BufferKind::Output);
    gpu.scratchChunks = chunks(BufferKind::Scratch);
    gpu.tbs = emitTbs(layout, rank, parts, lanes->count);
  }
  return algorithm;
}

std::vector<MscclLimitViolation> checkMscclLimits(const MscclAlgorithm& algorithm, MscclRuntime runtime) {
  const RuntimeLimits limits = limitsOf(runtime);
  std::vector<MscclLimitViolation> violations;
  auto check = [&](const std::string& limit, const std::string& where, int64_t value, int64_t maximum) {
    if (value > maximum) violations.push_back({runtime, limit, where, value, maximum});
  };
  int64_t elements = 1 + static_cast<int64_t>(algorithm.gpus.size());
  check("channels", "algo", algorithm.nChannels, kMaxChannels);
  check("gpus (children of algo)", "algo", static_cast<int64_t>(algorithm.gpus.size()), kMaxChildren);
  for (const MscclGpu& gpu : algorithm.gpus) {
    const std::string at = "gpu " + std::to_string(gpu.id);
    check("tbs per gpu", at, static_cast<int64_t>(gpu.tbs.size()), std::min(limits.tbsPerGpu, kMaxChildren));
    std::map<int32_t, std::pair<int64_t, int64_t>> peersOfChannel;  // channel -> (send tbs, recv tbs)
    for (const MscclTb& tb : gpu.tbs) {
      const std::string tbAt = at + " tb " + std::to_string(tb.id);
      elements += 1 + static_cast<int64_t>(tb.steps.size());
      check("steps per tb", tbAt, static_cast<int64_t>(tb.steps.size()), std::min(limits.stepsPerTb, kMaxChildren));
      check("channel", tbAt, tb.channel, kMaxChannels - 1);
      if (tb.sendPeer >= 0) ++peersOfChannel[tb.channel].first;
      if (tb.recvPeer >= 0) ++peersOfChannel[tb.channel].second;
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        check("cnt", tbAt + " step " + std::to_string(s), tb.steps[s].count, kMaxCount);
      }
    }
    for (const auto& [channel, peers] : peersOfChannel) {
      const std::string chAt = at + " channel " + std::to_string(channel);
      check("tbs with a send peer per channel", chAt, peers.first, kMaxTbsPerChannel);
      check("tbs with a recv peer per channel", chAt, peers.second, kMaxTbsPerChannel);
    }
  }
  check("elements per file", "algo", elements, kMaxElements);
  return violations;
}

std::string writeMscclXml(const MscclAlgorithm& algorithm, MscclRuntime runtime) {
  std::ostringstream out;
  uint64_t maxBytes = algorithm.maxBytes;
  if (runtime == MscclRuntime::Msccl) maxBytes = maxBytes == 0 ? kMscclUnboundedMaxBytes : maxBytes + 1;  // exclusive
  out << "<algo name=\"" << xmlName(algorithm.name) << "\" proto=\"" << protocolName(algorithm.protocol)
      << "\" nchannels=\"" << algorithm.nChannels << "\" nchunksperloop=\"" << algorithm.nChunksPerLoop
      << "\" ngpus=\"" << algorithm.gpus.size() << "\" coll=\"" << collName(algorithm.collective, runtime)
      << "\" inplace=\"" << (algorithm.inPlace ? 1 : 0) << "\" outofplace=\"" << (algorithm.inPlace ? 0 : 1)
      << "\" minBytes=\"" << algorithm.minBytes << "\" maxBytes=\"" << maxBytes << "\"";
  if (algorithm.nThreads > 0) out << " nthreads=\"" << algorithm.nThreads << "\"";
  out << ">\n";
  for (const MscclGpu& gpu : algorithm.gpus) {
    out << "  <gpu id=\"" << gpu.id << "\" i_chunks=\"" << gpu.inputChunks << "\" o_chunks=\"" << gpu.outputChunks
        << "\" s_chunks=\"" << gpu.scratchChunks << "\">\n";
    for (const MscclTb& tb : gpu.tbs) {
      out << "    <tb id=\"" << tb.id << "\" send=\"" << tb.sendPeer << "\" recv=\"" << tb.recvPeer << "\" chan=\""
          << tb.channel << "\">\n";
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const MscclStep& step = tb.steps[s];
        out << "      <step s=\"" << s << "\" type=\"" << mscclStepTypeName(step.type) << "\" srcbuf=\""
            << bufferLetter(step.srcBuffer) << "\" srcoff=\"" << step.srcOffset << "\" dstbuf=\""
            << bufferLetter(step.dstBuffer) << "\" dstoff=\"" << step.dstOffset << "\" cnt=\"" << step.count
            << "\" depid=\"" << step.depTb << "\" deps=\"" << step.depStep << "\" hasdep=\""
            << (step.hasDependents ? 1 : 0) << "\"/>\n";
      }
      out << "    </tb>\n";
    }
    out << "  </gpu>\n";
  }
  out << "</algo>\n";
  return out.str();
}

Expected<std::string> exportMscclXml(const Plan& plan, const MscclExportOptions& options) {
  Expected<MscclAlgorithm> algorithm = lowerToMsccl(plan, options);
  if (!algorithm) return algorithm.status();
  const std::vector<MscclLimitViolation> violations = checkMscclLimits(*algorithm, options.runtime);
  if (!violations.empty()) {
    std::string message = "the MSCCL algorithm exceeds " + std::to_string(violations.size()) + " limit" +
                          (violations.size() > 1 ? "s" : "") + " of " + std::string(mscclRuntimeName(options.runtime)) + ":";
    for (const MscclLimitViolation& v : violations) message += "\n  " + v.message();
    return makeError(ErrorCode::ResourceExhausted, message);
  }
  return writeMscclXml(*algorithm, options.runtime);
}

}  // namespace tuccl
