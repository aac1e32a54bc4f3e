// Primitive lowering: pipeline + TB allocation -> per-rank TB entry lists (ResCCL §4.3, §4.5).
#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "plan/plan_storage.h"
#include "plan/plan_validate.h"
#include "scheduler/lowering.h"

namespace tuccl {
namespace {

// ---- Fusion: a receive and the send of its result as one entry -----------------------------

// Per task: the send that forwards the value it wrote (-1: none) and whether that value is
// stored for nothing (no other task reads it and a later task overwrites all of it). One walk in
// pipeline order, which orders every slot's accesses as the DAG does.
struct Forwarding {
  std::vector<int32_t> forwardOf;
  std::vector<bool> deadStore;
};

Forwarding findForwarding(const Algorithm& algorithm, const Pipeline& pipeline) {
  const auto& ops = algorithm.ops;
  const SlotNumbering numbering(algorithm);
  std::vector<int32_t> definedBy(static_cast<size_t>(numbering.slotCount()), -1);
  const size_t n = ops.size();
  Forwarding result{std::vector<int32_t>(n, -1), std::vector<bool>(n, false)};
  std::vector<bool> readElsewhere(n, false);
  std::vector<int32_t> overwritten(n, 0);
  auto slotOf = [&](int32_t rank, BufferKind buffer, int32_t index) { return numbering.slot(rank, buffer, index); };
  for (int32_t t : pipeline.order) {
    const Operation& op = ops[t];
    // A remote send may forward the received value it reads: all its source slots hold the
    // value of one remote receive that wrote exactly them.
    int32_t forwards = -1;
    if (!op.isLocal()) {
      const int32_t first = definedBy[slotOf(op.srcRank, op.srcBuffer, op.srcIndex)];
      if (first >= 0 && result.forwardOf[first] < 0 && !ops[first].isLocal() && ops[first].dstRank == op.srcRank &&
          ops[first].count == op.count &&
          slotOf(ops[first].dstRank, ops[first].dstBuffer, ops[first].dstIndex) ==
              slotOf(op.srcRank, op.srcBuffer, op.srcIndex)) {
        forwards = first;
        for (int32_t c = 1; c < op.count && forwards >= 0; ++c) {
          if (definedBy[slotOf(op.srcRank, op.srcBuffer, op.srcIndex + c)] != first) forwards = -1;
        }
      }
    }
    auto read = [&](int32_t rank, BufferKind buffer, int32_t index) {
      for (int32_t c = 0; c < op.count; ++c) {
        const int32_t definer = definedBy[slotOf(rank, buffer, index + c)];
        if (definer >= 0 && definer != forwards) readElsewhere[definer] = true;
      }
    };
    read(op.srcRank, op.srcBuffer, op.srcIndex);
    if (op.kind == OpKind::Reduce) read(op.dstRank, op.dstBuffer, op.dstIndex);
    if (forwards >= 0) result.forwardOf[forwards] = t;
    for (int32_t c = 0; c < op.count; ++c) {
      int32_t& definer = definedBy[slotOf(op.dstRank, op.dstBuffer, op.dstIndex + c)];
      if (definer >= 0) ++overwritten[definer];
      definer = t;
    }
  }
  for (size_t t = 0; t < n; ++t) {
    result.deadStore[t] = result.forwardOf[t] >= 0 && !readElsewhere[t] && overwritten[t] == ops[t].count;
  }
  return result;
}

// What a TB serves: one receiving connection, one sending connection, or anything else.
enum class TbRole : uint8_t { Mixed, Receives, Sends };

// Only TBs that serve one connection fuse: a TB already serving several (state-based merging,
// a single TB) would run even more in series, and where its fused entries fall would follow
// each node's schedule, so ranks of one role would need kernels of their own.
std::vector<std::vector<TbRole>> classifyTbs(const Plan& plan) {
  std::vector<std::vector<TbRole>> roles(plan.ranks.size());
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      const bool receives = std::all_of(tb.entries.begin(), tb.entries.end(), [&](const PlanEntry& entry) {
        return isReceive(entry.kind) && entry.peer == tb.entries.front().peer;
      });
      const bool sends = std::all_of(tb.entries.begin(), tb.entries.end(), [&](const PlanEntry& entry) {
        return entry.kind == PrimitiveKind::Send && entry.peer == tb.entries.front().peer;
      });
      roles[rank.rank].push_back(tb.entries.empty() ? TbRole::Mixed
                                 : receives         ? TbRole::Receives
                                 : sends            ? TbRole::Sends
                                                    : TbRole::Mixed);
    }
  }
  return roles;
}

// The receiving tasks whose forwarding pair may fuse: both entries in TBs that serve one
// connection, and the three chunks at one offset within the plan's chunk unit.
std::vector<int32_t> findFusionCandidates(const Algorithm& algorithm, const Forwarding& forwarding, const Plan& plan,
                                          const std::vector<PlacedEntry>& sendSide,
                                          const std::vector<PlacedEntry>& recvSide) {
  const auto& ops = algorithm.ops;
  // The kernels run a fused entry's two transfers over one slice geometry: the three chunks (the
  // peer's source, this rank's slots, the next peer's destination) must have one length.
  const int32_t unit = planChunkUnit(plan);
  auto storageIndex = [&](int32_t rank, BufferKind buffer, int32_t index) {
    return planStorage(plan, rank, buffer, index).index;
  };
  const std::vector<std::vector<TbRole>> roles = classifyTbs(plan);
  auto oneConnection = [&](const PlacedEntry& side, bool receiving) {
    return roles[side.rank][side.ref.tb] == (receiving ? TbRole::Receives : TbRole::Sends);
  };
  std::vector<int32_t> candidates;  // receiving tasks
  for (size_t t = 0; t < ops.size(); ++t) {
    const int32_t next = forwarding.forwardOf[t];
    if (next < 0 || unit <= 0) continue;
    if (!oneConnection(recvSide[t], true) || !oneConnection(sendSide[next], false)) continue;
    const Operation& in = ops[t];
    const Operation& out = ops[next];
    const int32_t residue = storageIndex(in.dstRank, in.dstBuffer, in.dstIndex) % unit;
    if (storageIndex(in.srcRank, in.srcBuffer, in.srcIndex) % unit != residue ||
        storageIndex(out.dstRank, out.dstBuffer, out.dstIndex) % unit != residue) {
      continue;
    }
    candidates.push_back(static_cast<int32_t>(t));
  }
  return candidates;
}

// Union-find over each rank's TBs: the TBs that forwarding pairs merge into one.
class TbUnion {
 public:
  // Every TB of the plan on its own.
  explicit TbUnion(const Plan& plan) : parent_(plan.ranks.size()) {
    for (const PlanRank& rank : plan.ranks) {
      parent_[rank.rank].resize(rank.tbs.size());
      for (size_t b = 0; b < rank.tbs.size(); ++b) parent_[rank.rank][b] = static_cast<int32_t>(b);
    }
  }

  // The representative of the TBs merged with `tb` on `rank`.
  int32_t root(int32_t rank, int32_t tb) {
    std::vector<int32_t>& p = parent_[rank];
    while (p[tb] != tb) tb = p[tb] = p[p[tb]];
    return tb;
  }

  // Starts over from separate TBs and merges, per receiving task in `pairs`, its receive's TB
  // with the TB of the send that forwards its value.
  void unite(const std::vector<int32_t>& pairs, const Forwarding& forwarding, const std::vector<PlacedEntry>& sendSide,
             const std::vector<PlacedEntry>& recvSide) {
    for (std::vector<int32_t>& p : parent_) std::iota(p.begin(), p.end(), 0);
    for (int32_t t : pairs) {
      const PlacedEntry& in = recvSide[t];
      const PlacedEntry& out = sendSide[forwarding.forwardOf[t]];
      const int32_t a = root(in.rank, in.ref.tb);
      const int32_t b = root(out.rank, out.ref.tb);
      if (a != b) parent_[in.rank][std::max(a, b)] = std::min(a, b);
    }
  }

 private:
  std::vector<std::vector<int32_t>> parent_;  // per rank, per TB
};

// A merged TB is one receiving and one sending connection (a ring's or a chain's link): drops
// the pairs whose TBs would join more.
void keepPairsJoiningTwoTbs(const Plan& plan, TbUnion& tbs, const std::vector<PlacedEntry>& recvSide,
                            std::vector<int32_t>& candidates) {
  std::vector<std::vector<int32_t>> members(plan.ranks.size());
  for (const PlanRank& rank : plan.ranks) {
    members[rank.rank].assign(rank.tbs.size(), 0);
    for (size_t b = 0; b < rank.tbs.size(); ++b) ++members[rank.rank][tbs.root(rank.rank, static_cast<int32_t>(b))];
  }
  std::erase_if(candidates, [&](int32_t t) {
    const PlacedEntry& in = recvSide[t];
    return members[in.rank][tbs.root(in.rank, in.ref.tb)] != 2;
  });
}

// Every TB in one global order of the tasks. Where a sub-pipeline holds at most one task of a
// connection (task level) or one step (algorithm level): by sub-pipeline, then step, then
// operation. It keeps the DAG's order (dependencies go from smaller steps to larger ones) and
// each connection's pairing order (sub-pipeline, operation), and, unlike the pipeline's order
// within a sub-pipeline (chunk priorities, which differ between nodes), it is the same on
// ranks of one role: their fused kernels stay one. A stage (several steps, a connection's
// tasks in operation order) keeps the pipeline's order.
void sortInTaskOrder(PlanTb& tb, const Pipeline& pipeline, const std::vector<int32_t>& position) {
  if (pipeline.level == ExecutionLevel::Stage) {
    std::stable_sort(tb.entries.begin(), tb.entries.end(),
                     [&](const PlanEntry& x, const PlanEntry& y) { return position[x.op] < position[y.op]; });
  } else {
    std::stable_sort(tb.entries.begin(), tb.entries.end(), [](const PlanEntry& x, const PlanEntry& y) {
      return std::tie(x.subPipeline, x.step, x.op) < std::tie(y.subPipeline, y.step, y.op);
    });
  }
}

// Merges each rank's TBs as `tbs` joins them (entries in TB order, TBs renumbered in order of
// their first member), then sorts every merged TB in task order.
void mergeTbs(Plan& plan, TbUnion& tbs, const Pipeline& pipeline, size_t taskCount) {
  std::vector<int32_t> position(taskCount);
  for (size_t i = 0; i < pipeline.order.size(); ++i) position[pipeline.order[i]] = static_cast<int32_t>(i);
  for (PlanRank& rank : plan.ranks) {
    std::vector<int32_t> newId(rank.tbs.size(), -1);
    std::vector<PlanTb> merged;
    for (size_t b = 0; b < rank.tbs.size(); ++b) {
      const int32_t r = tbs.root(rank.rank, static_cast<int32_t>(b));
      if (newId[r] < 0) {
        newId[r] = static_cast<int32_t>(merged.size());
        merged.emplace_back().id = newId[r];
      }
      PlanTb& into = merged[newId[r]];
      for (PlanEntry& entry : rank.tbs[b].entries) into.entries.push_back(std::move(entry));
    }
    for (PlanTb& tb : merged) sortInTaskOrder(tb, pipeline, position);
    rank.tbs = std::move(merged);
  }
}

// What fusing within a TB needs to know: which receive each send forwards, and the DAG's order.
struct FusionRules {
  const Dag& dag;
  const Forwarding& forwarding;
  std::vector<int32_t> forwardedBy;  // send task -> receive task (-1: not fused)

  // Whether `task` depends on `on` in the DAG.
  bool dependsOn(int32_t task, int32_t on) const {
    const auto preds = dag.predecessors(task);
    return std::binary_search(preds.begin(), preds.end(), on);
  }
  // Whether `entry` (either of its tasks, if fused) depends on `task`.
  bool entryDependsOn(const PlanEntry& entry, int32_t task) const {
    return dependsOn(entry.op, task) || (isFused(entry.kind) && dependsOn(entry.next.op, task));
  }
  // Whether `task` depends on `entry` (either of its tasks, if fused).
  bool taskDependsOnEntry(int32_t task, const PlanEntry& entry) const {
    return dependsOn(task, entry.op) || (isFused(entry.kind) && dependsOn(task, entry.next.op));
  }
};

// The place of `receiveTask`'s receive before place `e` of the TB, if it is there.
std::optional<size_t> findReceiveBefore(const std::vector<PlanEntry>& entries, const std::vector<bool>& gone, size_t e,
                                        int32_t receiveTask) {
  for (size_t r = e; r-- > 0;) {
    if (gone[r]) continue;
    const PlanEntry& entry = entries[r];
    if (entry.op == receiveTask && (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy)) {
      return r;
    }
  }
  return std::nullopt;
}

// The receive at r moves down past the entries before the first that stops it, the send at e up
// past those after the last that stops it; they meet where both can reach. Returns the place
// the fused entry goes right after, or nothing when they cannot meet.
std::optional<size_t> findMeetingPlace(const std::vector<PlanEntry>& entries, const std::vector<bool>& gone, size_t r,
                                       size_t e, const FusionRules& rules) {
  const PlanEntry& send = entries[e];
  const PlanEntry& receive = entries[r];
  size_t receiveStop = e;  // the first entry the receive cannot pass
  size_t sendStop = r;     // the last entry the send cannot pass
  for (size_t k = r + 1; k < e; ++k) {
    if (gone[k]) continue;
    const PlanEntry& between = entries[k];
    if (receiveStop == e && ((isReceive(between.kind) && between.peer == receive.peer) ||
                             rules.entryDependsOn(between, receive.op))) {
      receiveStop = k;
    }
    if ((isSending(between.kind) && sendSideOf(between).peer == send.peer) ||
        rules.taskDependsOnEntry(send.op, between)) {
      sendStop = k;
    }
  }
  if (sendStop >= receiveStop) return std::nullopt;
  return receiveStop - 1;
}

// The receive and the send of its value as one fused entry; `storeValue`: the received value is
// also stored.
PlanEntry makeFusedEntry(const PlanEntry& receive, const PlanEntry& send, bool storeValue) {
  PlanEntry fused = receive;
  fused.kind = fusedKind(receive.kind, storeValue);
  fused.next.peer = send.peer;
  fused.next.dstBuffer = send.dstBuffer;
  fused.next.dstIndex = send.dstIndex;
  fused.next.step = send.step;
  fused.next.op = send.op;
  fused.next.subPipeline = send.subPipeline;
  fused.next.loc = send.loc;
  return fused;
}

// Fuses within one TB: the send moves up to its receive, or else the receive down to its send,
// when nothing between stops it — the other entries keep their order, so each connection's
// sends and receives keep theirs. Returns whether anything was fused.
bool fuseWithinTb(std::vector<PlanEntry>& entries, const FusionRules& rules) {
  // A fused send's place is marked gone and dropped at the end: no erase per pair (a ring of
  // n ranks fuses 2n entries of one TB).
  std::vector<bool> gone(entries.size(), false);
  bool fusedAny = false;
  for (size_t e = 0; e < entries.size(); ++e) {
    if (gone[e] || entries[e].kind != PrimitiveKind::Send || rules.forwardedBy[entries[e].op] < 0) continue;
    const int32_t receiveTask = rules.forwardedBy[entries[e].op];
    const std::optional<size_t> found = findReceiveBefore(entries, gone, e, receiveTask);
    if (!found) continue;  // the receive is not before the send in this TB
    const size_t r = *found;
    const std::optional<size_t> meetAt = findMeetingPlace(entries, gone, r, e, rules);
    if (!meetAt) continue;
    const size_t meet = *meetAt;  // the fused entry goes right after entries[meet]
    PlanEntry fused = makeFusedEntry(entries[r], entries[e], !rules.forwarding.deadStore[receiveTask]);
    // entries (r, meet] move up one place, the fused entry takes place meet, and the send's
    // place goes.
    for (size_t k = r; k < meet; ++k) {
      entries[k] = std::move(entries[k + 1]);
      gone[k] = gone[k + 1];
    }
    entries[meet] = std::move(fused);
    gone[meet] = false;
    gone[e] = true;
    fusedAny = true;
  }
  size_t kept = 0;
  for (size_t e = 0; e < entries.size(); ++e) {
    if (!gone[e]) entries[kept++] = std::move(entries[e]);
  }
  entries.resize(kept);
  return fusedAny;
}

// Where every task's entries are now.
void recordEntryPlaces(const Plan& plan, std::vector<PlacedEntry>& sendSide, std::vector<PlacedEntry>& recvSide) {
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (size_t e = 0; e < tb.entries.size(); ++e) {
        const PlanEntry& entry = tb.entries[e];
        const PlacedEntry here{rank.rank, EntryRef{tb.id, static_cast<int32_t>(e)}};
        if (isReceive(entry.kind) || isLocal(entry.kind)) recvSide[entry.op] = here;
        if (isSending(entry.kind)) sendSide[sendSideOf(entry).op] = here;
      }
    }
  }
}

// Fuses forwarding pairs in a plan whose entries are placed but have no dependencies yet: the
// TBs of a receive and of the send of its result merge, the receive moves down and the send up
// until they meet (past entries that neither depend on them nor use their connections) and the
// two become one fused entry. sendSide / recvSide follow the entries. Returns whether anything
// was fused.
bool fuseForwarding(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, Plan& plan,
                    std::vector<PlacedEntry>& sendSide, std::vector<PlacedEntry>& recvSide) {
  const size_t taskCount = algorithm.ops.size();
  const Forwarding forwarding = findForwarding(algorithm, pipeline);
  std::vector<int32_t> candidates = findFusionCandidates(algorithm, forwarding, plan, sendSide, recvSide);
  if (candidates.empty()) return false;
  TbUnion tbs(plan);
  tbs.unite(candidates, forwarding, sendSide, recvSide);
  keepPairsJoiningTwoTbs(plan, tbs, recvSide, candidates);
  if (candidates.empty()) return false;
  tbs.unite(candidates, forwarding, sendSide, recvSide);
  mergeTbs(plan, tbs, pipeline, taskCount);
  FusionRules rules{dag, forwarding, std::vector<int32_t>(taskCount, -1)};
  for (int32_t t : candidates) rules.forwardedBy[forwarding.forwardOf[t]] = t;
  bool fusedAny = false;
  for (PlanRank& rank : plan.ranks) {
    for (PlanTb& tb : rank.tbs) {
      if (fuseWithinTb(tb.entries, rules)) fusedAny = true;
    }
  }
  recordEntryPlaces(plan, sendSide, recvSide);
  return fusedAny;
}

// Single TB with buffered sends (config.sendAhead > 0): each TB's entries step by step, a step's
// sends before its receives, else in pipeline order. Returns the new place of every entry, or
// nothing when a task would come before a task it depends on in the same TB.
std::optional<std::vector<std::vector<std::vector<int32_t>>>> sendsFirstOrder(const Dag& dag, const Plan& plan,
                                                                             const std::vector<PlacedEntry>& sendSide,
                                                                             const std::vector<PlacedEntry>& recvSide) {
  std::vector<std::vector<std::vector<int32_t>>> moved(plan.ranks.size());
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      std::vector<int32_t> order(tb.entries.size());
      for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int32_t>(e);
      auto key = [&](int32_t e) { return std::make_pair(tb.entries[e].step, isReceive(tb.entries[e].kind)); };
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
      std::vector<int32_t> place(order.size());
      for (size_t i = 0; i < order.size(); ++i) place[order[i]] = static_cast<int32_t>(i);
      moved[rank.rank].push_back(std::move(place));
    }
  }
  auto placeOf = [&](const PlacedEntry& side) { return moved[side.rank][side.ref.tb][side.ref.entry]; };
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (const PlacedEntry* side : {&sendSide[t], &recvSide[t]}) {
      if (side->rank < 0) continue;
      for (int32_t p : dag.predecessors(t)) {
        for (const PlacedEntry* before : {&sendSide[p], &recvSide[p]}) {
          if (before->rank == side->rank && before->ref.tb == side->ref.tb && placeOf(*before) > placeOf(*side)) {
            return std::nullopt;
          }
        }
      }
    }
  }
  return moved;
}

}  // namespace

Plan lowerToPlan(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, const TbAllocation& allocation,
                 const PlanConfig& config, bool fuse) {
  const auto& ops = algorithm.ops;
  if (static_cast<int64_t>(ops.size()) != dag.nTasks || static_cast<int64_t>(pipeline.order.size()) != dag.nTasks ||
      allocation.recvConnectionOf.size() != ops.size()) {
    throw std::invalid_argument("lowering to a plan: the algorithm, DAG, pipeline and allocation disagree on the tasks");
  }
  Plan plan = planFromAlgorithm(algorithm, config);
  plan.scheduler = pipeline.scheduler;
  plan.executionLevel = pipeline.level;
  plan.tbAllocation = allocation.policy;
  plan.subPipelines = pipeline.subPipelineCount();
  plan.ranks.resize(static_cast<size_t>(algorithm.nRanks));
  for (int32_t r = 0; r < algorithm.nRanks; ++r) {
    plan.ranks[r].rank = r;
    plan.ranks[r].tbs.resize(static_cast<size_t>(allocation.tbCount[r]));
    for (int32_t tb = 0; tb < allocation.tbCount[r]; ++tb) plan.ranks[r].tbs[tb].id = tb;
  }

  // ---- Entries in pipeline order. -------------------------------------------------------------
  std::vector<PlacedEntry> sendSide(ops.size());
  std::vector<PlacedEntry> recvSide(ops.size());
  auto place = [&](int32_t connection, PrimitiveKind kind, int32_t peer, int32_t t) {
    const Connection& c = allocation.connections[connection];
    PlanTb& tb = plan.ranks[c.rank].tbs[allocation.tbOfConnection[connection]];
    const Operation& op = ops[t];
    PlanEntry entry;
    entry.kind = kind;
    entry.peer = peer;
    entry.srcBuffer = op.srcBuffer;
    entry.srcIndex = op.srcIndex;
    entry.dstBuffer = op.dstBuffer;
    entry.dstIndex = op.dstIndex;
    entry.count = op.count;
    entry.step = op.step;
    entry.op = t;
    entry.subPipeline = pipeline.subPipelineOf[t];
    entry.loc = op.loc;
    tb.entries.push_back(std::move(entry));
    return PlacedEntry{c.rank, EntryRef{tb.id, static_cast<int32_t>(tb.entries.size()) - 1}};
  };
  for (int32_t t : pipeline.order) {
    const Operation& op = ops[t];
    if (op.isLocal()) {
      recvSide[t] = place(allocation.recvConnectionOf[t], op.kind == OpKind::Reduce ? PrimitiveKind::Reduce : PrimitiveKind::Copy,
                          op.srcRank, t);
    } else {
      sendSide[t] = place(allocation.sendConnectionOf[t], PrimitiveKind::Send, op.dstRank, t);
      recvSide[t] = place(allocation.recvConnectionOf[t],
                          op.kind == OpKind::Reduce ? PrimitiveKind::RecvReduceCopy : PrimitiveKind::Recv, op.srcRank, t);
    }
  }

  if (plan.config.sendAhead > 0) {
    const auto moved = allocation.policy == TbPolicy::Single ? sendsFirstOrder(dag, plan, sendSide, recvSide)
                                                            : std::nullopt;
    if (moved) {
      for (PlanRank& rank : plan.ranks) {
        for (size_t b = 0; b < rank.tbs.size(); ++b) {
          std::vector<PlanEntry> entries(rank.tbs[b].entries.size());
          for (size_t e = 0; e < entries.size(); ++e) entries[(*moved)[rank.rank][b][e]] = std::move(rank.tbs[b].entries[e]);
          rank.tbs[b].entries = std::move(entries);
        }
      }
      for (std::vector<PlacedEntry>* sides : {&sendSide, &recvSide}) {
        for (PlacedEntry& side : *sides) {
          if (side.rank >= 0) side.ref.entry = (*moved)[side.rank][side.ref.tb][side.ref.entry];
        }
      }
    } else {
      plan.config.sendAhead = 0;  // the pipeline's order: rendezvous
    }
  }

  // A buffered single-TB order (sends first, for small calls) stays as it is.
  const bool fused = fuse && plan.config.sendAhead == 0 && fuseForwarding(algorithm, dag, pipeline, plan, sendSide, recvSide);
  addDataDependencies(algorithm, dag, sendSide, recvSide, plan);
  setTbPeers(plan);
  // Stage level replays a TB's entries of one sub-pipeline per micro-batch; a fused entry sends a
  // task of a later sub-pipeline from its receive's stage, so the sender's and the receiver's
  // slices would interleave differently: a fused stage-level plan replays whole TBs instead.
  if (fused && plan.executionLevel == ExecutionLevel::Stage) plan.executionLevel = ExecutionLevel::Algorithm;
  if (fused && !checkPlanDeadlockFree(plan)) {
    // A fused chain that comes back to a TB it left (a ring's chunk returns to the rank that sent
    // it) cannot run entry by entry: the TBs replay their entries per micro-batch instead, as
    // NCCL's ring loop does, and a fused send then needs a free slot, not the whole entry buffered.
    plan.executionLevel = ExecutionLevel::Algorithm;
    if (!checkPlanDeadlockFree(plan)) return lowerToPlan(algorithm, dag, pipeline, allocation, config, false);
  }
  return plan;
}

void addDataDependencies(const Algorithm& algorithm, const Dag& dag, const std::vector<PlacedEntry>& sendSide,
                         const std::vector<PlacedEntry>& recvSide, Plan& plan) {
  const auto& ops = algorithm.ops;
  struct SlotRange {
    int64_t first = 0;
    int64_t end = 0;  // exclusive; empty when first == end
    bool overlaps(const SlotRange& other) const { return first < other.end && other.first < end; }
  };
  const SlotNumbering numbering(algorithm);
  auto slotsOn = [&](int32_t t, int32_t rank) {
    const Operation& op = ops[t];
    SlotRange range;
    auto add = [&](int32_t r, BufferKind buffer, int32_t index) {
      if (r != rank) return;
      const int64_t first = numbering.slot(r, buffer, index);
      if (range.first == range.end) {
        range = {first, first + op.count};
      } else {
        range = {std::min(range.first, first), std::max(range.end, first + op.count)};
      }
    };
    add(op.srcRank, op.srcBuffer, op.srcIndex);
    add(op.dstRank, op.dstBuffer, op.dstIndex);
    return range;
  };
  auto entryOn = [&](int32_t t, int32_t rank) -> const PlacedEntry* {
    if (recvSide[t].rank == rank) return &recvSide[t];
    if (sendSide[t].rank == rank) return &sendSide[t];
    return nullptr;
  };
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (const PlacedEntry* side : {&sendSide[t], &recvSide[t]}) {
      if (side->rank < 0) continue;
      const SlotRange mine = slotsOn(t, side->rank);
      PlanEntry& entry = plan.ranks[side->rank].tbs[side->ref.tb].entries[side->ref.entry];
      for (int32_t p : dag.predecessors(t)) {
        const PlacedEntry* theirs = entryOn(p, side->rank);
        if (theirs == nullptr || !mine.overlaps(slotsOn(p, side->rank))) continue;
        if (theirs->ref.tb == side->ref.tb) continue;  // the TB runs its entries in order
        entry.deps.push_back(theirs->ref);
        plan.ranks[side->rank].tbs[theirs->ref.tb].entries[theirs->ref.entry].hasDependents = true;
      }
      std::sort(entry.deps.begin(), entry.deps.end());
      entry.deps.erase(std::unique(entry.deps.begin(), entry.deps.end()), entry.deps.end());
    }
  }
}

void setTbPeers(Plan& plan) {
  for (PlanRank& rank : plan.ranks) {
    for (PlanTb& tb : rank.tbs) {
      auto note = [](int32_t& peer, int32_t value) { peer = peer == -1 || peer == value ? value : -2; };
      for (const PlanEntry& entry : tb.entries) {
        if (isSending(entry.kind)) note(tb.sendPeer, sendSideOf(entry).peer);
        if (isReceive(entry.kind)) note(tb.recvPeer, entry.peer);
      }
    }
  }
}

Plan planFromAlgorithm(const Algorithm& algorithm, const PlanConfig& config) {
  Plan plan;
  plan.collective = algorithm.collective;
  plan.algorithm = algorithm.name;
  plan.sourceName = algorithm.sourceName;
  plan.nRanks = algorithm.nRanks;
  plan.root = hasRoot(algorithm.collective) ? algorithm.root : -1;
  plan.bufferChunks = algorithm.bufferChunks;
  plan.inPlace = algorithm.inPlace;
  plan.config = config;
  return plan;
}

}  // namespace tuccl
