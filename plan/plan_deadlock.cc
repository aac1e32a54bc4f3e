// checkPlanDeadlockFree: the wait-for graph of a plan must be acyclic (plan_validate.h).
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan_pairing.h"
#include "plan/plan_validate.h"

namespace tuccl {
namespace {

// The wait-for graph: entries numbered globally, each mapped to the node (representative entry)
// it runs in, and the edges "node after waits for node before".
struct WaitForGraph {
  std::vector<std::vector<int64_t>> tbBase;  // per rank, per TB: the number of its first entry
  int64_t total = 0;                         // entries in the plan
  std::vector<int64_t> node;                 // per entry: the representative of its node
  std::vector<std::pair<int64_t, int64_t>> edges;

  // The global number of an entry of a rank.
  int64_t id(int32_t rank, EntryRef ref) const { return tbBase[rank][ref.tb] + ref.entry; }

  // Records that `after` waits for `before`; a node waits for nothing in it.
  void waits(int64_t before, int64_t after) {
    if (node[before] != node[after]) edges.emplace_back(node[before], node[after]);
  }
};

// Numbers every entry of the plan, rank by rank and TB by TB; each entry starts as its own node.
WaitForGraph numberEntries(const Plan& plan) {
  WaitForGraph graph;
  graph.tbBase.resize(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (const PlanTb& tb : plan.ranks[r].tbs) {
      graph.tbBase[r].push_back(graph.total);
      graph.total += static_cast<int64_t>(tb.entries.size());
    }
  }
  graph.node.resize(static_cast<size_t>(graph.total));
  std::iota(graph.node.begin(), graph.node.end(), 0);
  return graph;
}

// Rendezvous: a send and its receive are one node of the graph; a chain of fused entries
// forwarding one slice is one node (union-find). Buffered plans keep every entry its own node.
void mergeRendezvousNodes(WaitForGraph& graph, const std::vector<PlanTransfer>& transfers, bool buffered) {
  std::vector<int64_t>& node = graph.node;
  auto find = [&](int64_t v) {
    while (node[v] != v) v = node[v] = node[node[v]];
    return v;
  };
  if (!buffered) {
    for (const PlanTransfer& t : transfers) {
      const int64_t a = find(graph.id(t.dstRank, t.recv));
      const int64_t b = find(graph.id(t.srcRank, t.send));
      if (a != b) node[std::max(a, b)] = std::min(a, b);
    }
  }
  for (int64_t v = 0; v < graph.total; ++v) node[v] = find(v);
}

// A node runs its entries together: two of one TB (a fused chain coming back to a TB it left)
// never can — the TB runs them one after the other.
Status checkNodesRunTogether(const Plan& plan, const WaitForGraph& graph) {
  std::vector<int64_t> tbOfNode(static_cast<size_t>(graph.total), -1);
  int64_t tbIndex = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b, ++tbIndex) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        int64_t& owner = tbOfNode[graph.node[graph.tbBase[r][b] + static_cast<int64_t>(e)]];
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
  return {};
}

// Buffered: the receive waits for the send; the send of a connection's chunk c waits for the
// receive of chunk c - slots (its slot's credit). Transfers come per connection, in order.
void addCreditEdges(const Plan& plan, const std::vector<PlanTransfer>& all, int64_t slots, WaitForGraph& graph) {
  auto sendEntry = [&](const PlanTransfer& t) -> const PlanEntry& {
    return plan.ranks[t.srcRank].tbs[t.send.tb].entries[t.send.entry];
  };
  for (size_t first = 0; first < all.size();) {
    size_t last = first;
    while (last < all.size() && all[last].srcRank == all[first].srcRank && all[last].dstRank == all[first].dstRank)
      ++last;
    std::vector<int64_t> chunksEnd;  // per transfer of the connection: the end of its chunks
    for (size_t k = first; k < last; ++k) {
      const PlanTransfer& t = all[k];
      chunksEnd.push_back((chunksEnd.empty() ? 0 : chunksEnd.back()) + sendEntry(t).count);
      const int64_t send = graph.id(t.srcRank, t.send);
      graph.waits(send, graph.id(t.dstRank, t.recv));
      const int64_t credit = chunksEnd.back() - 1 - slots;  // the chunk whose receive frees the last slot
      if (credit < 0) continue;
      const size_t holder = static_cast<size_t>(
          std::upper_bound(chunksEnd.begin(), chunksEnd.end(), credit) - chunksEnd.begin());
      graph.waits(graph.id(all[first + holder].dstRank, all[first + holder].recv), send);
    }
    first = last;
  }
}

// Wait-for edges between nodes: the previous entry of the TB, and the deps.
void addTbOrderAndDepEdges(const Plan& plan, WaitForGraph& graph) {
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        const int64_t here = graph.tbBase[r][b] + static_cast<int64_t>(e);
        if (e > 0) graph.waits(here - 1, here);
        for (const EntryRef& dep : entries[e].deps) graph.waits(graph.tbBase[r][dep.tb] + dep.entry, here);
      }
    }
  }
}

// Kahn's algorithm over the nodes that are representatives. Returns each node's in-degree left
// over: all zero when the graph is acyclic, above zero on the nodes a cycle holds up.
std::vector<int64_t> remainingIndegrees(const WaitForGraph& graph) {
  const int64_t total = graph.total;
  std::vector<int64_t> begin(static_cast<size_t>(total) + 1, 0);
  std::vector<int64_t> indegree(static_cast<size_t>(total), 0);
  for (const auto& [from, to] : graph.edges) {
    ++begin[from + 1];
    ++indegree[to];
  }
  for (int64_t i = 0; i < total; ++i) begin[i + 1] += begin[i];
  std::vector<int64_t> targets(graph.edges.size());
  {
    std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& [from, to] : graph.edges) targets[fill[from]++] = to;
  }
  std::vector<int64_t> queue;
  for (int64_t i = 0; i < total; ++i) {
    if (graph.node[i] == i && indegree[i] == 0) queue.push_back(i);
  }
  while (!queue.empty()) {
    const int64_t n = queue.back();
    queue.pop_back();
    for (int64_t i = begin[n]; i < begin[n + 1]; ++i) {
      if (--indegree[targets[i]] == 0) queue.push_back(targets[i]);
    }
  }
  return indegree;
}

// Names the first entry whose node a cycle holds up.
Status nameStuckEntry(const Plan& plan, const WaitForGraph& graph, const std::vector<int64_t>& indegree) {
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        if (indegree[graph.node[graph.tbBase[r][b] + static_cast<int64_t>(e)]] > 0) {
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

}  // namespace

Status checkPlanDeadlockFree(const Plan& plan) {
  WaitForGraph graph = numberEntries(plan);
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return transfers.status();
  const int64_t ahead = plan.config.sendAhead;
  // A plan with fused entries that replays all its entries per micro-batch: an entry moves one
  // slice per round and a send, fused or not, needs a free slot of its ring, not its receiver —
  // buffered, with the slots every ring has (minStagingSlots). At task or stage level an entry
  // would need all its micro-batches buffered: a fused chain there is one rendezvous node.
  const bool slicePerRound = plan.executionLevel == ExecutionLevel::Algorithm && hasFusedEntries(plan);
  const bool buffered = ahead > 0 || slicePerRound;
  mergeRendezvousNodes(graph, *transfers, buffered);
  if (Status together = checkNodesRunTogether(plan, graph); !together) return together;
  if (buffered) addCreditEdges(plan, *transfers, std::max<int64_t>(ahead, minStagingSlots(plan)), graph);
  addTbOrderAndDepEdges(plan, graph);
  const std::vector<int64_t> indegree = remainingIndegrees(graph);
  if (std::all_of(indegree.begin(), indegree.end(), [](int64_t d) { return d == 0; })) return {};
  return nameStuckEntry(plan, graph, indegree);
}

}  // namespace tuccl
