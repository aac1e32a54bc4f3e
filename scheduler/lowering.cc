// Primitive lowering: pipeline + TB allocation -> per-rank TB entry lists (ResCCL §4.3, §4.5).
#include <algorithm>
#include <stdexcept>

#include "scheduler/lowering.h"

namespace tuccl {
namespace {

// Where a task's share on one rank landed.
struct Placed {
  int32_t rank = -1;
  EntryRef ref;
};

struct SlotRange {
  int64_t first = 0;
  int64_t end = 0;  // exclusive; empty when first == end
  bool overlaps(const SlotRange& other) const { return first < other.end && other.first < end; }
};

}  // namespace

Plan lowerToPlan(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, const TbAllocation& allocation,
                 const PlanConfig& config) {
  const auto& ops = algorithm.ops;
  if (static_cast<int64_t>(ops.size()) != dag.nTasks || static_cast<int64_t>(pipeline.order.size()) != dag.nTasks ||
      allocation.recvConnectionOf.size() != ops.size()) {
    throw std::invalid_argument("lowering to a plan: the algorithm, DAG, pipeline and allocation disagree on the tasks");
  }
  Plan plan;
  plan.collective = algorithm.collective;
  plan.algorithm = algorithm.name;
  plan.sourceName = algorithm.sourceName;
  plan.nRanks = algorithm.nRanks;
  plan.root = hasRoot(algorithm.collective) ? algorithm.root : -1;
  plan.bufferChunks = algorithm.bufferChunks;
  plan.inPlace = algorithm.inPlace;
  plan.config = config;
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
  std::vector<Placed> sendSide(ops.size());
  std::vector<Placed> recvSide(ops.size());
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
    return Placed{c.rank, EntryRef{tb.id, static_cast<int32_t>(tb.entries.size()) - 1}};
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

  // ---- Dependencies: a DAG edge p -> t becomes, on every rank where the two tasks touch a
  // common slot, a dependency of t's entry there on p's entry there. ---------------------------
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
  auto entryOn = [&](int32_t t, int32_t rank) -> const Placed* {
    if (recvSide[t].rank == rank) return &recvSide[t];
    if (sendSide[t].rank == rank) return &sendSide[t];
    return nullptr;
  };
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (const Placed* side : {&sendSide[t], &recvSide[t]}) {
      if (side->rank < 0) continue;
      const SlotRange mine = slotsOn(t, side->rank);
      PlanEntry& entry = plan.ranks[side->rank].tbs[side->ref.tb].entries[side->ref.entry];
      for (int32_t p : dag.predecessors(t)) {
        const Placed* theirs = entryOn(p, side->rank);
        if (theirs == nullptr || !mine.overlaps(slotsOn(p, side->rank))) continue;
        if (theirs->ref.tb == side->ref.tb) continue;  // the TB runs its entries in order
        entry.deps.push_back(theirs->ref);
        plan.ranks[side->rank].tbs[theirs->ref.tb].entries[theirs->ref.entry].hasDependents = true;
      }
      std::sort(entry.deps.begin(), entry.deps.end());
      entry.deps.erase(std::unique(entry.deps.begin(), entry.deps.end()), entry.deps.end());
    }
  }

  // ---- TB peers. ------------------------------------------------------------------------------
  for (PlanRank& rank : plan.ranks) {
    for (PlanTb& tb : rank.tbs) {
      for (const PlanEntry& entry : tb.entries) {
        int32_t* peer = entry.kind == PrimitiveKind::Send ? &tb.sendPeer : isReceive(entry.kind) ? &tb.recvPeer : nullptr;
        if (peer == nullptr) continue;
        if (*peer == -1) {
          *peer = entry.peer;
        } else if (*peer != entry.peer) {
          *peer = -2;
        }
      }
    }
  }
  return plan;
}

}  // namespace tuccl
