// checkPlanRaceFree: entries of one rank touching a common chunk must be ordered (plan_validate.h).
#include <algorithm>
#include <string>
#include <vector>

#include "plan/plan_pairing.h"
#include "plan/plan_storage.h"
#include "plan/plan_validate.h"

namespace tuccl {
namespace {

std::string describe(const Plan& plan, int32_t rank, int32_t tb, int32_t entry) {
  const PlanEntry& e = plan.ranks[rank].tbs[tb].entries[entry];
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + " entry " + std::to_string(entry) + " (" +
         std::string(primitiveName(e.kind)) + ", op " + std::to_string(e.op) + ")";
}

// One entry's access to its own rank's storage.
struct Access {
  int32_t tb, entry;
  int32_t buffer;
  int64_t first, end;
  bool write;
};

std::vector<Access> accessesOf(const Plan& plan, const PlanRank& rank) {
  std::vector<Access> accesses;
  for (const PlanTb& tb : rank.tbs) {
    for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
      const PlanEntry& entry = tb.entries[e];
      auto add = [&](BufferKind buffer, int32_t index, bool write) {
        const StorageSlot slot = planStorage(plan, rank.rank, buffer, index);
        accesses.push_back(Access{tb.id, e, static_cast<int32_t>(slot.buffer), slot.index, slot.index + entry.count, write});
      };
      if (!isReceive(entry.kind)) add(entry.srcBuffer, entry.srcIndex, false);
      if (entry.kind != PrimitiveKind::Send) add(entry.dstBuffer, entry.dstIndex, true);
    }
  }
  return accesses;
}

}  // namespace

Status checkPlanRaceFree(const Plan& plan) {
  // Global numbering of entries.
  std::vector<std::vector<int64_t>> base(plan.ranks.size());
  int64_t n = 0;
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      base[rank.rank].push_back(n);
      n += static_cast<int64_t>(tb.entries.size());
    }
  }
  auto id = [&](int32_t rank, int32_t tb, int32_t entry) { return base[rank][tb] + entry; };
  std::vector<std::vector<int64_t>> succ(static_cast<size_t>(n));
  std::vector<int32_t> indegree(static_cast<size_t>(n), 0);
  auto edge = [&](int64_t from, int64_t to) {
    succ[from].push_back(to);
    ++indegree[to];
  };
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
        if (e > 0) edge(id(rank.rank, tb.id, e - 1), id(rank.rank, tb.id, e));
        for (const EntryRef& dep : tb.entries[e].deps) edge(id(rank.rank, dep.tb, dep.entry), id(rank.rank, tb.id, e));
      }
    }
  }
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return transfers.status();
  for (const PlanTransfer& t : *transfers) {
    edge(id(t.srcRank, t.send.tb, t.send.entry), id(t.dstRank, t.recv.tb, t.recv.entry));
  }
  // Topological order, then descendants as bitsets in reverse order.
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) order.push_back(v);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (int64_t w : succ[order[i]]) {
      if (--indegree[w] == 0) order.push_back(w);
    }
  }
  if (static_cast<int64_t>(order.size()) != n) {
    return makeError(ErrorCode::InvalidInput, "the plan's ordering relation has a cycle");
  }
  const int64_t words = (n + 63) / 64;
  std::vector<uint64_t> reach(static_cast<size_t>(n * words), 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    uint64_t* mine = &reach[*it * words];
    for (int64_t w : succ[*it]) {
      mine[w / 64] |= uint64_t{1} << (w % 64);
      const uint64_t* theirs = &reach[w * words];
      for (int64_t i = 0; i < words; ++i) mine[i] |= theirs[i];
    }
  }
  auto reaches = [&](int64_t from, int64_t to) { return (reach[from * words + to / 64] >> (to % 64)) & 1u; };

  for (const PlanRank& rank : plan.ranks) {
    const std::vector<Access> accesses = accessesOf(plan, rank);
    for (size_t i = 0; i < accesses.size(); ++i) {
      for (size_t j = i + 1; j < accesses.size(); ++j) {
        const Access& a = accesses[i];
        const Access& b = accesses[j];
        if (a.tb == b.tb || a.buffer != b.buffer || !(a.write || b.write)) continue;
        if (a.end <= b.first || b.end <= a.first) continue;
        const int64_t x = id(rank.rank, a.tb, a.entry);
        const int64_t y = id(rank.rank, b.tb, b.entry);
        if (reaches(x, y) || reaches(y, x)) continue;
        return makeError(ErrorCode::InvalidInput,
                         "race on rank " + std::to_string(rank.rank) + ": " + describe(plan, rank.rank, a.tb, a.entry) +
                             " and " + describe(plan, rank.rank, b.tb, b.entry) + " touch " +
                             std::string(bufferName(static_cast<BufferKind>(a.buffer))) + " chunk " +
                             std::to_string(std::max(a.first, b.first)) + " (one writes it) but nothing orders them");
      }
    }
  }
  return {};
}

}  // namespace tuccl
