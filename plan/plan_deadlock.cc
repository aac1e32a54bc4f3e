// checkPlanDeadlockFree: the wait-for graph of a plan must be acyclic (plan_validate.h).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "plan/plan_pairing.h"
#include "plan/plan_validate.h"

namespace tuccl {

Status checkPlanDeadlockFree(const Plan& plan) {
  // Global entry numbering.
  std::vector<std::vector<int64_t>> tbBase(plan.ranks.size());
  int64_t total = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (const PlanTb& tb : plan.ranks[r].tbs) {
      tbBase[r].push_back(total);
      total += static_cast<int64_t>(tb.entries.size());
    }
  }
  auto id = [&](int32_t rank, EntryRef ref) { return tbBase[rank][ref.tb] + ref.entry; };
  std::vector<int64_t> node(static_cast<size_t>(total));
  std::iota(node.begin(), node.end(), 0);
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return transfers.status();
  std::vector<std::pair<int64_t, int64_t>> edges;
  const int64_t ahead = plan.config.sendAhead;
  // A plan with fused entries that replays all its entries per micro-batch: an entry moves one
  // slice per round and a send, fused or not, needs a free slot of its ring, not its receiver —
  // buffered, with the slots every ring has (minStagingSlots). At task or stage level an entry
  // would need all its micro-batches buffered: a fused chain there is one rendezvous node.
  const bool slicePerRound = plan.executionLevel == ExecutionLevel::Algorithm && hasFusedEntries(plan);
  auto sendEntry = [&](const PlanTransfer& t) -> const PlanEntry& {
    return plan.ranks[t.srcRank].tbs[t.send.tb].entries[t.send.entry];
  };
  const bool buffered = ahead > 0 || slicePerRound;
  // Rendezvous: a send and its receive are one node of the graph; a chain of fused entries
  // forwarding one slice is one node (union-find).
  auto find = [&](int64_t v) {
    while (node[v] != v) v = node[v] = node[node[v]];
    return v;
  };
  if (!buffered) {
    for (const PlanTransfer& t : *transfers) {
      const int64_t a = find(id(t.dstRank, t.recv));
      const int64_t b = find(id(t.srcRank, t.send));
      if (a != b) node[std::max(a, b)] = std::min(a, b);
    }
  }
  for (int64_t v = 0; v < total; ++v) node[v] = find(v);
  // A node runs its entries together: two of one TB (a fused chain coming back to a TB it left)
  // never can — the TB runs them one after the other.
  {
    std::vector<int64_t> tbOfNode(static_cast<size_t>(total), -1);
    int64_t tbIndex = 0;
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b, ++tbIndex) {
        const auto& entries = plan.ranks[r].tbs[b].entries;
        for (size_t e = 0; e < entries.size(); ++e) {
          int64_t& owner = tbOfNode[node[tbBase[r][b] + static_cast<int64_t>(e)]];
          if (owner == tbIndex) {
            return makeError(ErrorCode::InvalidInput,
                             "deadlock: rank " + std::to_string(r) + " tb " + std::to_string(b) + " entry " +
                                 std::to_string(e) + " (" + std::string(primitiveName(entries[e].kind)) + " of op " +
                                 std::to_string(entries[e].op) +
                                 ") must run together with an earlier entry of its TB (a fused chain comes back "
                                 "to it at task level)");
          }
          owner = tbIndex;
        }
      }
    }
  }
  auto waits = [&](int64_t before, int64_t after) {
    if (node[before] != node[after]) edges.emplace_back(node[before], node[after]);  // a node waits for nothing in it
  };
  // Buffered: the receive waits for the send; the send of a connection's chunk c waits for the
  // receive of chunk c - ahead (its slot's credit). Transfers come per connection, in order.
  const int64_t slots = std::max<int64_t>(ahead, minStagingSlots(plan));
  const std::vector<PlanTransfer>& all = *transfers;
  for (size_t first = 0; buffered && first < all.size();) {
    size_t last = first;
    while (last < all.size() && all[last].srcRank == all[first].srcRank && all[last].dstRank == all[first].dstRank)
      ++last;
    std::vector<int64_t> chunksEnd;  // per transfer of the connection: the end of its chunks
    for (size_t k = first; k < last; ++k) {
      const PlanTransfer& t = all[k];
      chunksEnd.push_back((chunksEnd.empty() ? 0 : chunksEnd.back()) + sendEntry(t).count);
      const int64_t send = id(t.srcRank, t.send);
      waits(send, id(t.dstRank, t.recv));
      const int64_t credit = chunksEnd.back() - 1 - slots;  // the chunk whose receive frees the last slot
      if (credit < 0) continue;
      const size_t holder = static_cast<size_t>(
          std::upper_bound(chunksEnd.begin(), chunksEnd.end(), credit) - chunksEnd.begin());
      waits(id(all[first + holder].dstRank, all[first + holder].recv), send);
    }
    first = last;
  }

  // Wait-for edges between nodes: the previous entry of the TB, and the deps.
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        const int64_t here = tbBase[r][b] + static_cast<int64_t>(e);
        if (e > 0) waits(here - 1, here);
        for (const EntryRef& dep : entries[e].deps) waits(tbBase[r][dep.tb] + dep.entry, here);
      }
    }
  }
  std::vector<int64_t> begin(static_cast<size_t>(total) + 1, 0);
  std::vector<int64_t> indegree(static_cast<size_t>(total), 0);
  for (const auto& [from, to] : edges) {
    ++begin[from + 1];
    ++indegree[to];
  }
  for (int64_t i = 0; i < total; ++i) begin[i + 1] += begin[i];
  std::vector<int64_t> targets(edges.size());
  {
    std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& [from, to] : edges) targets[fill[from]++] = to;
  }
  // Kahn's algorithm over the nodes that are representatives.
  std::vector<int64_t> queue;
  int64_t nodes = 0;
  for (int64_t i = 0; i < total; ++i) {
    if (node[i] != i) continue;
    ++nodes;
    if (indegree[i] == 0) queue.push_back(i);
  }
  int64_t done = 0;
  while (!queue.empty()) {
    const int64_t n = queue.back();
    queue.pop_back();
    ++done;
    for (int64_t i = begin[n]; i < begin[n + 1]; ++i) {
      if (--indegree[targets[i]] == 0) queue.push_back(targets[i]);
    }
  }
  if (done == nodes) return {};
  // Name the first stuck entry.
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        if (indegree[node[tbBase[r][b] + static_cast<int64_t>(e)]] > 0) {
          return makeError(ErrorCode::InvalidInput, "deadlock: rank " + std::to_string(r) + " tb " + std::to_string(b) +
                                                        " entry " + std::to_string(e) + " (" +
                                                        std::string(primitiveName(entries[e].kind)) + " of op " +
                                                        std::to_string(entries[e].op) + ") waits in a cycle");
        }
      }
    }
  }
  return makeError(ErrorCode::InvalidInput, "deadlock");
}

}  // namespace tuccl
