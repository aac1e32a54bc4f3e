#include "synth/sketch_schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace tuccl::sketch_synth {
namespace {

struct Pending {
  int32_t commodity = 0;
  int32_t from = 0;
  int32_t to = 0;
  double priority = 0;  // cost of the edge plus the costliest path below its receiver
};

// Costliest path below every rank of one commodity's tree.
std::vector<double> remainingBelow(const LogicalGraph& graph, const Route& parent, int32_t source) {
  std::vector<int32_t> order = treeOrder(parent, source);
  std::vector<double> below(graph.nRanks, 0.0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // children before their parents
    int32_t v = *it;
    int32_t u = parent[v];
    if (u < 0) continue;
    double through = graph.edges[graph.edgeBetween(u, v)].costUs + below[v];
    below[u] = std::max(below[u], through);
  }
  return below;
}

// The sends waiting on every logical edge, most urgent first.
std::vector<std::vector<Pending>> pendingByEdge(const OrderingInput& input) {
  const LogicalGraph& graph = *input.graph;
  std::vector<std::vector<Pending>> pending(graph.edges.size());
  for (size_t c = 0; c < input.routes->size(); ++c) {
    const Route& parent = (*input.routes)[c];
    std::vector<double> below = remainingBelow(graph, parent, (*input.sources)[c]);
    for (int32_t v = 0; v < graph.nRanks; ++v) {
      if (parent[v] < 0) continue;
      int32_t e = graph.edgeBetween(parent[v], v);
      pending[e].push_back({static_cast<int32_t>(c), parent[v], v, graph.edges[e].costUs + below[v]});
    }
  }
  for (std::vector<Pending>& list : pending) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Pending& a, const Pending& b) { return a.priority > b.priority; });
  }
  return pending;
}

class Orderer {
 public:
  explicit Orderer(const OrderingInput& input)
      : input_(input), pending_(pendingByEdge(input)), readyAt_(input.routes->size()) {
    for (size_t c = 0; c < readyAt_.size(); ++c) readyAt_[c][(*input.sources)[c]] = 0;
    for (const std::vector<Pending>& list : pending_) left_ += list.size();
  }

  std::vector<ScheduledSend> run() {
    for (int32_t step = 0; left_ > 0; ++step) {
      std::vector<ScheduledSend> arrivals;
      usedSenders_.clear();
      for (std::vector<Pending>& list : pending_) scheduleEdge(list, step, arrivals);
      for (const ScheduledSend& send : arrivals) readyAt_[send.commodity][send.to] = step + 1;
      scheduled_.insert(scheduled_.end(), arrivals.begin(), arrivals.end());
    }
    return scheduled_;
  }

 private:
  bool ready(const Pending& send, int32_t step) const {
    auto it = readyAt_[send.commodity].find(send.from);
    if (it == readyAt_[send.commodity].end() || it->second > step) return false;
    return !input_.oneChildPerStep || !usedSenders_.contains({send.commodity, send.from});
  }

  void take(std::vector<Pending>& list, size_t at, int32_t step, std::vector<ScheduledSend>& arrivals) {
    const Pending& send = list[at];
    arrivals.push_back({send.commodity, send.from, send.to, step});
    usedSenders_.insert({send.commodity, send.from});
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(at));
    --left_;
  }

  // The most urgent ready send, then every ready send whose slots continue the run at either end.
  void scheduleEdge(std::vector<Pending>& list, int32_t step, std::vector<ScheduledSend>& arrivals) {
    auto first = std::find_if(list.begin(), list.end(), [&](const Pending& p) { return ready(p, step); });
    if (first == list.end()) return;
    auto [lowSrc, lowDst] = input_.endpoints(first->commodity, first->from, first->to);
    Slot highSrc = lowSrc, highDst = lowDst;
    take(list, static_cast<size_t>(first - list.begin()), step, arrivals);
    for (bool grown = true; grown;) {
      grown = false;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!ready(list[i], step)) continue;
        auto [src, dst] = input_.endpoints(list[i].commodity, list[i].from, list[i].to);
        auto follows = [](Slot a, Slot b, int32_t by) { return a.buffer == b.buffer && a.index == b.index + by; };
        bool above = follows(src, highSrc, 1) && follows(dst, highDst, 1);
        bool below = follows(src, lowSrc, -1) && follows(dst, lowDst, -1);
        if (!above && !below) continue;
        if (above) highSrc = src, highDst = dst;
        if (below) lowSrc = src, lowDst = dst;
        take(list, i, step, arrivals);
        grown = true;
        break;
      }
    }
  }

  const OrderingInput& input_;
  std::vector<std::vector<Pending>> pending_;
  std::vector<std::map<int32_t, int32_t>> readyAt_;  // per commodity: rank -> first step it can send
  std::set<std::pair<int32_t, int32_t>> usedSenders_;  // (commodity, rank) that sent this step
  std::vector<ScheduledSend> scheduled_;
  size_t left_ = 0;
};

}  // namespace

std::vector<ScheduledSend> orderSends(const OrderingInput& input) { return Orderer(input).run(); }

std::vector<Operation> mergeContiguous(std::vector<Operation> ops) {
  auto key = [](const Operation& op) {
    return std::make_tuple(op.step, op.srcRank, op.dstRank, op.kind, op.srcBuffer, op.dstBuffer, op.srcIndex,
                           op.dstIndex);
  };
  std::sort(ops.begin(), ops.end(), [&](const Operation& a, const Operation& b) { return key(a) < key(b); });
  std::vector<Operation> merged;
  for (const Operation& op : ops) {
    if (!merged.empty()) {
      Operation& last = merged.back();
      bool sameLink = last.step == op.step && last.srcRank == op.srcRank && last.dstRank == op.dstRank &&
                      last.kind == op.kind && last.srcBuffer == op.srcBuffer && last.dstBuffer == op.dstBuffer;
      if (sameLink && last.srcIndex + last.count == op.srcIndex && last.dstIndex + last.count == op.dstIndex) {
        last.count += op.count;
        continue;
      }
    }
    merged.push_back(op);
  }
  return merged;
}

}  // namespace tuccl::sketch_synth
