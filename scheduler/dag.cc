#include "scheduler/dag.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "support/source_text.h"

namespace tuccl {

SlotNumbering::SlotNumbering(const Algorithm& algorithm) : algorithm_(&algorithm), nRanks_(algorithm.nRanks) {
  // Each rank's slots: the stored buffers back to back (a view of in-place storage has none).
  for (int b = 0; b < kBufferKinds; ++b) {
    const auto buffer = static_cast<BufferKind>(b);
    const bool stored = !algorithm.inPlace || buffer == BufferKind::Scratch ||
                        inPlaceStorage(algorithm, 0, buffer, 0).buffer == buffer;
    base_[b] = stored ? slotsPerRank_ : -1;
    if (stored) slotsPerRank_ += algorithm.chunks(buffer);
  }
}

int64_t SlotNumbering::slot(int32_t rank, BufferKind buffer, int32_t index) const {
  const StorageSlot storage = inPlaceStorage(*algorithm_, rank, buffer, index);
  return int64_t{rank} * slotsPerRank_ + base_[static_cast<int>(storage.buffer)] + storage.index;
}

namespace {

struct Access {
  int32_t step;
  int32_t task;
  bool write;
};

// CSR of `edges` (pred, succ): rows are successors listing their predecessors when `bySucc`, else
// predecessors listing their successors; each row sorted and unique.
void buildCsr(int32_t nTasks, const std::vector<std::pair<int32_t, int32_t>>& edges, bool bySucc,
              std::vector<int64_t>& begin, std::vector<int32_t>& items) {
  begin.assign(static_cast<size_t>(nTasks) + 1, 0);
  for (const auto& [p, s] : edges) ++begin[static_cast<size_t>(bySucc ? s : p) + 1];
  for (int32_t t = 0; t < nTasks; ++t) begin[t + 1] += begin[t];
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  items.assign(edges.size(), 0);
  for (const auto& [p, s] : edges) items[fill[bySucc ? s : p]++] = bySucc ? p : s;
  // Sort and deduplicate each row in place, compacting.
  int64_t out = 0;
  for (int32_t t = 0; t < nTasks; ++t) {
    const int64_t b = begin[t];
    const int64_t e = begin[t + 1];
    std::sort(items.begin() + b, items.begin() + e);
    begin[t] = out;
    for (int64_t i = b; i < e; ++i) {
      if (i > b && items[i] == items[i - 1]) continue;
      items[out++] = items[i];
    }
  }
  begin[nTasks] = out;
  items.resize(static_cast<size_t>(out));
  items.shrink_to_fit();
}

}  // namespace

Dag buildDependencyDag(const Algorithm& algorithm, const DagOptions& options) {
  if (Status problem = validateStructure(algorithm); !problem.ok()) {
    throw std::invalid_argument("the algorithm cannot be scheduled: " + problem.message());
  }
  if (algorithm.ops.size() >= static_cast<size_t>(INT32_MAX)) {
    throw std::invalid_argument("the algorithm has more than 2,147,483,646 operations, more than the scheduler takes");
  }
  Dag dag;
  const auto& ops = algorithm.ops;
  dag.nTasks = static_cast<int32_t>(ops.size());
  const SlotNumbering numbering(algorithm);

  // ---- Slot accesses, bucketed by slot (counting sort), then by step within a slot. ----------
  std::vector<int64_t> slotBegin(static_cast<size_t>(numbering.slotCount()) + 1, 0);
  for (const Operation& op : ops) {
    for (int32_t c = 0; c < op.count; ++c) {
      ++slotBegin[numbering.slot(op.srcRank, op.srcBuffer, op.srcIndex + c) + 1];
      ++slotBegin[numbering.slot(op.dstRank, op.dstBuffer, op.dstIndex + c) + 1];
    }
  }
  for (size_t s = 1; s < slotBegin.size(); ++s) slotBegin[s] += slotBegin[s - 1];
  std::vector<Access> accesses(static_cast<size_t>(slotBegin.back()));
  {
    std::vector<int64_t> fill(slotBegin.begin(), slotBegin.end() - 1);
    for (int32_t t = 0; t < dag.nTasks; ++t) {
      const Operation& op = ops[t];
      for (int32_t c = 0; c < op.count; ++c) {
        // A reduce reads its destination too; as a write it already orders against everything.
        accesses[fill[numbering.slot(op.srcRank, op.srcBuffer, op.srcIndex + c)]++] = {op.step, t, false};
        accesses[fill[numbering.slot(op.dstRank, op.dstBuffer, op.dstIndex + c)]++] = {op.step, t, true};
      }
    }
  }

  // ---- Data dependencies: last writers and readers since, step group by step group. ----------
  std::vector<std::pair<int32_t, int32_t>> edges;
  edges.reserve(accesses.size());
  std::vector<int32_t> lastWriters;
  std::vector<int32_t> readersSince;
  std::vector<int32_t> groupReaders;
  std::vector<int32_t> groupWriters;
  auto addEdge = [&](int32_t pred, int32_t succ) {
    if (pred != succ) edges.emplace_back(pred, succ);
  };
  for (size_t s = 0; s + 1 < slotBegin.size(); ++s) {
    auto first = accesses.begin() + slotBegin[s];
    auto last = accesses.begin() + slotBegin[s + 1];
    if (last - first < 2) continue;
    std::sort(first, last, [](const Access& a, const Access& b) {
      return a.step != b.step ? a.step < b.step : a.task < b.task;
    });
    lastWriters.clear();
    readersSince.clear();
    for (auto group = first; group != last;) {
      auto end = group;
      groupReaders.clear();
      groupWriters.clear();
      for (; end != last && end->step == group->step; ++end) (end->write ? groupWriters : groupReaders).push_back(end->task);
      for (int32_t r : groupReaders) {
        for (int32_t w : lastWriters) addEdge(w, r);
      }
      for (int32_t w : groupWriters) {
        for (int32_t x : lastWriters) addEdge(x, w);
        for (int32_t x : readersSince) addEdge(x, w);
      }
      if (!groupWriters.empty()) {
        lastWriters.swap(groupWriters);
        readersSince.swap(groupReaders);
      } else {
        readersSince.insert(readersSince.end(), groupReaders.begin(), groupReaders.end());
      }
      group = end;
    }
  }
  std::vector<Access>().swap(accesses);
  buildCsr(dag.nTasks, edges, /*bySucc=*/true, dag.predBegin, dag.preds);
  buildCsr(dag.nTasks, edges, /*bySucc=*/false, dag.succBegin, dag.succs);
  std::vector<std::pair<int32_t, int32_t>>().swap(edges);

  // ---- Communication dependencies: one id per distinct link key, ids in key order. -----------
  std::vector<uint64_t> keys(ops.size());
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const Operation& op = ops[t];
    keys[t] = options.linkKey ? options.linkKey(op)
                              : (static_cast<uint64_t>(static_cast<uint32_t>(op.srcRank)) << 32) |
                                    static_cast<uint32_t>(op.dstRank);
  }
  std::vector<uint64_t> distinct = keys;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const auto nLinks = static_cast<int32_t>(distinct.size());
  dag.linkOf.resize(ops.size());
  dag.links.assign(static_cast<size_t>(nLinks), DagLink{-1, -1});
  dag.linkTaskBegin.assign(static_cast<size_t>(nLinks) + 1, 0);
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const auto link = static_cast<int32_t>(std::lower_bound(distinct.begin(), distinct.end(), keys[t]) - distinct.begin());
    dag.linkOf[t] = link;
    if (dag.links[link].srcRank < 0) dag.links[link] = DagLink{ops[t].srcRank, ops[t].dstRank};
    ++dag.linkTaskBegin[link + 1];
  }
  for (int32_t l = 0; l < nLinks; ++l) dag.linkTaskBegin[l + 1] += dag.linkTaskBegin[l];
  dag.linkTasks.resize(ops.size());
  {
    std::vector<int64_t> fill(dag.linkTaskBegin.begin(), dag.linkTaskBegin.end() - 1);
    for (int32_t t = 0; t < dag.nTasks; ++t) dag.linkTasks[fill[dag.linkOf[t]]++] = t;
  }

  // ---- ChunkIds. -----------------------------------------------------------------------------
  dag.chunkOf.resize(ops.size());
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const Operation& op = ops[t];
    dag.chunkOf[t] = inPlaceStorage(algorithm, op.dstRank, op.dstBuffer, op.dstIndex).index;
    dag.nChunks = std::max(dag.nChunks, dag.chunkOf[t] + 1);
  }
  return dag;
}

}  // namespace tuccl
