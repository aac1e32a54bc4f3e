// Static deadlock check of a plan: the wait-for graph must be acyclic.
#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "scheduler/plan.h"

namespace tuccl {

std::optional<std::string> checkPlanDeadlockFree(const Plan& plan) {
  // Global entry numbering.
  std::vector<std::vector<int64_t>> tbBase(plan.ranks.size());
  int64_t total = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (const PlanTb& tb : plan.ranks[r].tbs) {
      tbBase[r].push_back(total);
      total += static_cast<int64_t>(tb.entries.size());
    }
  }
  // A send and its receive are one node of the graph (rendezvous): the receive's node is the
  // send's. Pairing per connection as in validatePlan.
  std::vector<int64_t> node(static_cast<size_t>(total));
  std::iota(node.begin(), node.end(), 0);
  using Item = std::pair<std::pair<int32_t, int32_t>, int64_t>;  // (subPipeline, op), global id
  std::map<std::pair<int32_t, int32_t>, std::vector<Item>> sends;
  std::map<std::pair<int32_t, int32_t>, std::vector<Item>> recvs;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        const PlanEntry& entry = entries[e];
        const Item item{{entry.subPipeline, entry.op}, tbBase[r][b] + static_cast<int64_t>(e)};
        const auto rank = static_cast<int32_t>(r);
        if (entry.kind == PrimitiveKind::Send) sends[{rank, entry.peer}].push_back(item);
        if (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy) recvs[{entry.peer, rank}].push_back(item);
      }
    }
  }
  for (auto& [connection, list] : sends) {
    auto& other = recvs[connection];
    if (other.size() != list.size()) return std::string("sends and receives do not pair up");
    std::sort(list.begin(), list.end());
    std::sort(other.begin(), other.end());
    for (size_t i = 0; i < list.size(); ++i) node[other[i].second] = list[i].second;
  }

  // Wait-for edges between nodes: the previous entry of the TB, and the deps.
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        const int64_t self = node[tbBase[r][b] + static_cast<int64_t>(e)];
        if (e > 0) edges.emplace_back(node[tbBase[r][b] + static_cast<int64_t>(e) - 1], self);
        for (const EntryRef& dep : entries[e].deps) edges.emplace_back(node[tbBase[r][dep.tb] + dep.entry], self);
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
  if (done == nodes) return std::nullopt;
  // Name the first stuck entry.
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (size_t b = 0; b < plan.ranks[r].tbs.size(); ++b) {
      const auto& entries = plan.ranks[r].tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        if (indegree[node[tbBase[r][b] + static_cast<int64_t>(e)]] > 0) {
          return "deadlock: rank " + std::to_string(r) + " tb " + std::to_string(b) + " entry " + std::to_string(e) + " (" +
                 std::string(primitiveName(entries[e].kind)) + " of op " + std::to_string(entries[e].op) +
                 ") waits in a cycle";
        }
      }
    }
  }
  return std::string("deadlock");
}

}  // namespace tuccl
