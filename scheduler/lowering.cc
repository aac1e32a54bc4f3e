// Primitive lowering: pipeline + TB allocation -> per-rank TB entry lists (ResCCL §4.3, §4.5).
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "scheduler/lowering.h"

namespace tuccl {
namespace {

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
                 const PlanConfig& config) {
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

  addDataDependencies(algorithm, dag, sendSide, recvSide, plan);
  setTbPeers(plan);
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
