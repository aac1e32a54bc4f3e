// Kernel layout and the static race check (kernel_layout.h).
#include "kernelgen/kernel_layout.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

namespace tuccl {
namespace {

bool isRecv(PrimitiveKind kind) { return kind == PrimitiveKind::Recv || kind == PrimitiveKind::RecvReduceCopy; }

int32_t chunksPerUnitOf(const Plan& plan, Collective kind) {
  const auto& b = plan.bufferChunks;
  switch (kind) {
    case Collective::AllGather: return b[static_cast<int>(BufferKind::Input)];
    case Collective::ReduceScatter: return b[static_cast<int>(BufferKind::Output)];
    case Collective::AllToAll: return plan.nRanks > 0 ? b[static_cast<int>(BufferKind::Input)] / plan.nRanks : 0;
    default: return b[static_cast<int>(BufferKind::Input)];
  }
}

std::string describe(const Plan& plan, int32_t rank, int32_t tb, int32_t entry) {
  const PlanEntry& e = plan.ranks[rank].tbs[tb].entries[entry];
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + " entry " + std::to_string(entry) + " (" +
         std::string(primitiveName(e.kind)) + ", op " + std::to_string(e.op) + ")";
}

}  // namespace

KernelLayout layoutKernels(const Plan& plan) {
  KernelLayout layout;
  auto kind = parseCollective(plan.collective);
  if (!kind) throw std::invalid_argument("kernelgen: unknown collective '" + plan.collective + "'");
  layout.collective = *kind;
  layout.chunksPerUnit = chunksPerUnitOf(plan, *kind);
  if (layout.chunksPerUnit <= 0) throw std::invalid_argument("kernelgen: the plan has no chunks");
  layout.entries.resize(plan.ranks.size());
  layout.progressCounters.assign(plan.ranks.size(), 0);

  using Key = std::tuple<int32_t, int32_t, int32_t, int32_t>;  // subPipeline, op, tb, entry
  std::map<std::pair<int32_t, int32_t>, std::vector<Key>> sends, recvs;  // (src, dst) -> entries
  for (const PlanRank& rank : plan.ranks) {
    auto& rankEntries = layout.entries[rank.rank];
    rankEntries.resize(rank.tbs.size());
    for (const PlanTb& tb : rank.tbs) {
      rankEntries[tb.id].resize(tb.entries.size());
      for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
        const PlanEntry& entry = tb.entries[e];
        if (entry.hasDependents) rankEntries[tb.id][e].progress = layout.progressCounters[rank.rank]++;
        const Key key{entry.subPipeline, entry.op, tb.id, e};
        if (entry.kind == PrimitiveKind::Send) sends[{rank.rank, entry.peer}].push_back(key);
        if (isRecv(entry.kind)) recvs[{entry.peer, rank.rank}].push_back(key);
      }
    }
  }
  std::map<Key, int32_t> ringOf;  // (src rank, src tb, dst rank, dst tb) -> ring id; Key reused as 4 ints
  for (auto& [pair, list] : sends) {
    auto other = recvs.find(pair);
    if (other == recvs.end() || other->second.size() != list.size()) {
      throw std::invalid_argument("kernelgen: the sends of rank " + std::to_string(pair.first) + " to rank " +
                                  std::to_string(pair.second) + " and its receives do not pair up");
    }
    std::vector<Key>& mine = list;
    std::vector<Key>& theirs = other->second;
    std::sort(mine.begin(), mine.end());
    std::sort(theirs.begin(), theirs.end());
    for (size_t i = 0; i < mine.size(); ++i) {
      const auto [sp, sop, stb, se] = mine[i];
      const auto [rp, rop, rtb, re] = theirs[i];
      const Key ringKey{pair.first, stb, pair.second, rtb};
      auto [it, inserted] = ringOf.try_emplace(ringKey, static_cast<int32_t>(layout.rings.size()));
      if (inserted) layout.rings.push_back(RingInfo{pair.first, stb, pair.second, rtb, 0});
      ++layout.rings[it->second].messages;
      EntryLayout& s = layout.entries[pair.first][stb][se];
      EntryLayout& r = layout.entries[pair.second][rtb][re];
      s.ring = r.ring = it->second;
      s.peer = EntryRef{rtb, re};
      r.peer = EntryRef{stb, se};
    }
  }
  for (auto& [pair, list] : recvs) {
    if (!sends.contains(pair)) {
      throw std::invalid_argument("kernelgen: rank " + std::to_string(pair.second) + " receives from rank " +
                                  std::to_string(pair.first) + ", which never sends to it");
    }
  }
  return layout;
}

StorageSlot planStorage(const Plan& plan, const KernelLayout& layout, int32_t rank, BufferKind buffer, int32_t index) {
  if (!plan.inPlace || buffer == BufferKind::Scratch) return {buffer, index};
  const int32_t k = layout.chunksPerUnit;
  switch (layout.collective) {
    case Collective::AllGather:
      if (buffer == BufferKind::Input) return {BufferKind::Output, rank * k + index};
      return {BufferKind::Output, index};
    case Collective::ReduceScatter:
      if (buffer == BufferKind::Output) return {BufferKind::Input, rank * k + index};
      return {BufferKind::Input, index};
    default:
      return {BufferKind::Output, index};
  }
}

std::optional<std::string> checkPlanRaceFree(const Plan& plan, const KernelLayout& layout) {
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
        const PlanEntry& entry = tb.entries[e];
        if (e > 0) edge(id(rank.rank, tb.id, e - 1), id(rank.rank, tb.id, e));
        for (const EntryRef& dep : entry.deps) edge(id(rank.rank, dep.tb, dep.entry), id(rank.rank, tb.id, e));
        if (entry.kind == PrimitiveKind::Send) {
          const EntryRef peer = layout.at(rank.rank, tb.id, e).peer;
          edge(id(rank.rank, tb.id, e), id(entry.peer, peer.tb, peer.entry));
        }
      }
    }
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
  if (static_cast<int64_t>(order.size()) != n) return std::string("the plan's ordering relation has a cycle");
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

  // Accesses of each entry to its own rank's storage.
  struct Access {
    int32_t tb, entry;
    int32_t buffer;
    int64_t first, end;
    bool write;
  };
  for (const PlanRank& rank : plan.ranks) {
    std::vector<Access> accesses;
    for (const PlanTb& tb : rank.tbs) {
      for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
        const PlanEntry& entry = tb.entries[e];
        auto add = [&](BufferKind buffer, int32_t index, bool write) {
          const StorageSlot slot = planStorage(plan, layout, rank.rank, buffer, index);
          accesses.push_back(Access{tb.id, e, static_cast<int32_t>(slot.buffer), slot.index, slot.index + entry.count, write});
        };
        if (entry.kind == PrimitiveKind::Send || entry.kind == PrimitiveKind::Copy ||
            entry.kind == PrimitiveKind::Reduce) {
          add(entry.srcBuffer, entry.srcIndex, false);
        }
        if (entry.kind != PrimitiveKind::Send) add(entry.dstBuffer, entry.dstIndex, true);
      }
    }
    for (size_t i = 0; i < accesses.size(); ++i) {
      for (size_t j = i + 1; j < accesses.size(); ++j) {
        const Access& a = accesses[i];
        const Access& b = accesses[j];
        if (a.tb == b.tb || a.buffer != b.buffer || !(a.write || b.write)) continue;
        if (a.end <= b.first || b.end <= a.first) continue;
        const int64_t x = id(rank.rank, a.tb, a.entry);
        const int64_t y = id(rank.rank, b.tb, b.entry);
        if (reaches(x, y) || reaches(y, x)) continue;
        return "race on rank " + std::to_string(rank.rank) + ": " + describe(plan, rank.rank, a.tb, a.entry) + " and " +
               describe(plan, rank.rank, b.tb, b.entry) + " touch " +
               std::string(bufferName(static_cast<BufferKind>(a.buffer))) + " chunk " +
               std::to_string(std::max(a.first, b.first)) + " (one writes it) but nothing orders them";
      }
    }
  }
  return std::nullopt;
}

}  // namespace tuccl
