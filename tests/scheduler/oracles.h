// Independent oracles for the scheduler tests: brute force over pairs of operations and a
// random-order symbolic execution of a plan, none of which uses the scheduler's own indexes.
#pragma once

#include <cstdint>
#include <algorithm>
#include <map>
#include <tuple>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lang/algorithm.h"
#include "plan/plan.h"

namespace tuccl::testing {

// Storage cell of chunk `index` of `buffer` on `rank`, computed straight from inPlaceStorage.
struct Cell {
  int32_t rank;
  int32_t buffer;
  int32_t index;
  friend auto operator<=>(const Cell&, const Cell&) = default;
};
inline Cell cellOf(const Algorithm& a, int32_t rank, BufferKind buffer, int32_t index) {
  const StorageSlot s = inPlaceStorage(a, rank, buffer, index);
  return Cell{rank, static_cast<int32_t>(s.buffer), s.index};
}

// Every pair (i, j) of operations with steps si < sj that touch a common cell, at least one of
// them writing it. O(n^2): small algorithms only.
inline std::vector<std::pair<int32_t, int32_t>> conflictingPairs(const Algorithm& a) {
  auto cells = [&](const Operation& op, bool write) {
    std::vector<Cell> out;
    for (int32_t c = 0; c < op.count; ++c) {
      out.push_back(write ? cellOf(a, op.dstRank, op.dstBuffer, op.dstIndex + c) : cellOf(a, op.srcRank, op.srcBuffer, op.srcIndex + c));
    }
    return out;
  };
  std::vector<std::pair<int32_t, int32_t>> pairs;
  const auto n = static_cast<int32_t>(a.ops.size());
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = 0; j < n; ++j) {
      if (a.ops[i].step >= a.ops[j].step) continue;
      bool conflict = false;
      for (bool wi : {false, true}) {
        for (bool wj : {false, true}) {
          if (!wi && !wj) continue;
          for (const Cell& x : cells(a.ops[i], wi))
            for (const Cell& y : cells(a.ops[j], wj)) conflict = conflict || x == y;
        }
      }
      if (conflict) pairs.emplace_back(i, j);
    }
  }
  return pairs;
}

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using Memory = std::map<Cell, uint64_t>;

// Every cell starts with a distinct pseudo-random value; reduce is addition mod 2^64.
inline Memory initialMemory(const Algorithm& a) {
  Memory memory;
  for (int32_t r = 0; r < a.nRanks; ++r)
    for (int b = 0; b < kBufferKinds; ++b)
      for (int32_t i = 0; i < a.bufferChunks[b]; ++i) {
        const Cell cell = cellOf(a, r, static_cast<BufferKind>(b), i);
        memory.emplace(cell, mix((static_cast<uint64_t>(cell.rank) << 40) ^ (static_cast<uint64_t>(cell.buffer) << 32) ^ cell.index));
      }
  return memory;
}

inline void apply(const Algorithm& a, const Operation& op, Memory& memory) {
  std::vector<uint64_t> values;
  for (int32_t c = 0; c < op.count; ++c) values.push_back(memory[cellOf(a, op.srcRank, op.srcBuffer, op.srcIndex + c)]);
  for (int32_t c = 0; c < op.count; ++c) {
    uint64_t& out = memory[cellOf(a, op.dstRank, op.dstBuffer, op.dstIndex + c)];
    out = op.kind == OpKind::Reduce ? out + values[c] : values[c];
  }
}

// The algorithm's meaning: operations in step order (ties in op order; a step's operations are
// independent in a race-free algorithm).
inline Memory runInStepOrder(const Algorithm& a) {
  Memory memory = initialMemory(a);
  std::vector<int32_t> order(a.ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return a.ops[x].step < a.ops[y].step; });
  for (int32_t i : order) apply(a, a.ops[i], memory);
  return memory;
}

// Runs the plan with every TB a cursor, in a random order: an entry may run when it is at the head
// of its TB and its deps have run; a send runs together with its receive (the k-th send and k-th
// receive of a connection in (subPipeline, op) order), both at the heads of their TBs. Entries are
// atomic: this checks the plan's dependencies, not per-slice pipelining. Returns the memory, or an
// error when no entry can run (a deadlock).
inline std::pair<Memory, std::string> runPlanRandomly(const Algorithm& a, const Plan& plan, uint64_t seed) {
  Memory memory = initialMemory(a);
  std::mt19937_64 random(seed);
  struct Ref {
    int32_t rank, tb, entry;
  };
  std::vector<std::vector<std::vector<bool>>> done(plan.ranks.size());
  std::vector<std::vector<size_t>> head(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    head[r].assign(plan.ranks[r].tbs.size(), 0);
    for (const PlanTb& tb : plan.ranks[r].tbs) done[r].emplace_back(tb.entries.size(), false);
  }
  // Partner of each send / recv entry.
  std::map<std::tuple<int32_t, int32_t, int32_t>, Ref> partner;
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<std::pair<int32_t, int32_t>, Ref>>> sends, recvs;
  for (const PlanRank& rank : plan.ranks)
    for (const PlanTb& tb : rank.tbs)
      for (size_t e = 0; e < tb.entries.size(); ++e) {
        const PlanEntry& entry = tb.entries[e];
        const Ref ref{rank.rank, tb.id, static_cast<int32_t>(e)};
        if (entry.kind == PrimitiveKind::Send) sends[{rank.rank, entry.peer}].push_back({{entry.subPipeline, entry.op}, ref});
        if (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy)
          recvs[{entry.peer, rank.rank}].push_back({{entry.subPipeline, entry.op}, ref});
      }
  auto byKey = [](const auto& x, const auto& y) { return x.first < y.first; };
  for (auto& [connection, list] : sends) {
    auto& other = recvs[connection];
    if (other.size() != list.size()) return {memory, "unpaired connection"};
    std::sort(list.begin(), list.end(), byKey);
    std::sort(other.begin(), other.end(), byKey);
    for (size_t i = 0; i < list.size(); ++i) {
      partner[{list[i].second.rank, list[i].second.tb, list[i].second.entry}] = other[i].second;
      partner[{other[i].second.rank, other[i].second.tb, other[i].second.entry}] = list[i].second;
    }
  }
  auto entryAt = [&](const Ref& ref) -> const PlanEntry& { return plan.ranks[ref.rank].tbs[ref.tb].entries[ref.entry]; };
  auto atHeadWithDeps = [&](const Ref& ref) {
    if (head[ref.rank][ref.tb] != static_cast<size_t>(ref.entry)) return false;
    for (const EntryRef& dep : entryAt(ref).deps)
      if (!done[ref.rank][dep.tb][dep.entry]) return false;
    return true;
  };
  int64_t remaining = 0;
  for (const PlanRank& rank : plan.ranks)
    for (const PlanTb& tb : rank.tbs) remaining += static_cast<int64_t>(tb.entries.size());
  while (remaining > 0) {
    std::vector<Ref> runnable;
    for (const PlanRank& rank : plan.ranks)
      for (const PlanTb& tb : rank.tbs) {
        if (head[rank.rank][tb.id] >= tb.entries.size()) continue;
        const Ref ref{rank.rank, tb.id, static_cast<int32_t>(head[rank.rank][tb.id])};
        if (!atHeadWithDeps(ref)) continue;
        const PlanEntry& entry = entryAt(ref);
        if (entry.kind != PrimitiveKind::Copy && entry.kind != PrimitiveKind::Reduce && !atHeadWithDeps(partner.at({ref.rank, ref.tb, ref.entry})))
          continue;
        runnable.push_back(ref);
      }
    if (runnable.empty()) return {memory, "deadlock with " + std::to_string(remaining) + " entries left"};
    const Ref ref = runnable[random() % runnable.size()];
    const PlanEntry& entry = entryAt(ref);
    // The data movement as the plan states it (not the algorithm's op).
    Operation op;
    const bool sending = entry.kind == PrimitiveKind::Send;
    op.srcRank = sending ? ref.rank : entry.peer;
    op.dstRank = sending ? entry.peer : ref.rank;
    op.srcBuffer = entry.srcBuffer;
    op.srcIndex = entry.srcIndex;
    op.dstBuffer = entry.dstBuffer;
    op.dstIndex = entry.dstIndex;
    op.count = entry.count;
    op.kind = entry.kind == PrimitiveKind::Reduce || entry.kind == PrimitiveKind::RecvReduceCopy ? OpKind::Reduce : OpKind::Copy;
    if (sending) {
      const PlanEntry& receive = entryAt(partner.at({ref.rank, ref.tb, ref.entry}));
      op.kind = receive.kind == PrimitiveKind::RecvReduceCopy ? OpKind::Reduce : OpKind::Copy;
    }
    apply(a, op, memory);
    std::vector<Ref> finished{ref};
    if (entry.kind != PrimitiveKind::Copy && entry.kind != PrimitiveKind::Reduce) finished.push_back(partner.at({ref.rank, ref.tb, ref.entry}));
    for (const Ref& f : finished) {
      done[f.rank][f.tb][f.entry] = true;
      ++head[f.rank][f.tb];
      --remaining;
    }
  }
  return {memory, ""};
}

}  // namespace tuccl::testing
