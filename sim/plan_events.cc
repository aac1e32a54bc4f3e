// The layout of a plan's events (plan_events.h): flatten, link the dependencies, pair the sends.
#include "sim/plan_events.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "support/text_values.h"

namespace tuccl {

namespace {

/// The first global TB of each (replica, rank).
using FirstTbs = std::vector<int32_t>;

void reserveEvents(const Plan& plan, int32_t replicas, PlanEvents& events) {
  size_t entryCount = 0;
  size_t tbCount = 0;
  for (const PlanRank& rank : plan.ranks) {
    tbCount += rank.tbs.size();
    for (const PlanTb& planTb : rank.tbs) entryCount += planTb.entries.size();
  }
  if (entryCount * replicas > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw std::invalid_argument("the plan has too many entries to simulate");
  events.entries.reserve(entryCount * replicas);
  events.tbs.reserve(tbCount * replicas);
}

// Ends a group of entries replayed per micro-batch where the plan's execution level cuts the TB
// (task: after every entry; algorithm: after the last; stage: where the sub-pipeline changes),
// never between the two halves of a split fused entry.
void cutGroups(const Plan& plan, const SplitReceives& split, const PlanRank& rank, size_t t, EventTb& tb,
               std::vector<EventEntry>& entries) {
  const PlanTb& planTb = rank.tbs[t];
  int32_t groupFirst = tb.entryBegin;
  for (size_t e = 0; e < planTb.entries.size(); ++e) {
    const bool last = e + 1 == planTb.entries.size();
    bool cut = true;
    if (!last && plan.executionLevel == ExecutionLevel::Algorithm) cut = false;
    if (!last && plan.executionLevel == ExecutionLevel::Stage)
      cut = planTb.entries[e].subPipeline != planTb.entries[e + 1].subPipeline;
    if (!split.empty() && split[rank.rank][t][e]) cut = false;
    if (!cut) continue;
    const int32_t groupEnd = tb.entryBegin + static_cast<int32_t>(e) + 1;
    for (int32_t id = groupFirst; id < groupEnd; ++id) entries[id].groupEnd = groupEnd;
    groupFirst = groupEnd;
  }
}

// Flattens (replica, rank, TB, entry) into global entries and TBs.
FirstTbs flattenEntries(const Plan& plan, const SplitReceives& split, int32_t replicas, PlanEvents& events) {
  reserveEvents(plan, replicas, events);
  FirstTbs firstTb(static_cast<size_t>(replicas) * plan.nRanks, 0);
  for (int32_t c = 0; c < replicas; ++c) {
    for (const PlanRank& rank : plan.ranks) {
      firstTb[static_cast<size_t>(c) * plan.nRanks + rank.rank] = static_cast<int32_t>(events.tbs.size());
      for (size_t t = 0; t < rank.tbs.size(); ++t) {
        EventTb tb{c, rank.rank, static_cast<int32_t>(events.entries.size()), 0, &rank.tbs[t]};
        for (const PlanEntry& planEntry : rank.tbs[t].entries) {
          EventEntry entry;
          entry.kind = planEntry.kind;
          entry.tb = static_cast<int32_t>(events.tbs.size());
          entry.count = planEntry.count;
          events.entries.push_back(entry);
        }
        tb.entryEnd = static_cast<int32_t>(events.entries.size());
        cutGroups(plan, split, rank, t, tb, events.entries);
        events.tbs.push_back(tb);
      }
    }
  }
  return firstTb;
}

// Dependencies: entries of other TBs of the same rank and replica.
void linkDependencies(const Plan& plan, int32_t replicas, const FirstTbs& firstTb, PlanEvents& events) {
  for (int32_t c = 0; c < replicas; ++c) {
    for (const PlanRank& rank : plan.ranks) {
      const int32_t first = firstTb[static_cast<size_t>(c) * plan.nRanks + rank.rank];
      for (size_t t = 0; t < rank.tbs.size(); ++t) {
        const int32_t entryBegin = events.tbs[first + t].entryBegin;
        for (size_t e = 0; e < rank.tbs[t].entries.size(); ++e) {
          EventEntry& entry = events.entries[entryBegin + e];
          entry.depBegin = static_cast<int64_t>(events.deps.size());
          for (const EntryRef& dep : rank.tbs[t].entries[e].deps) {
            if (dep.tb < 0 || dep.tb >= static_cast<int32_t>(rank.tbs.size()) || dep.entry < 0 ||
                dep.entry >= static_cast<int32_t>(rank.tbs[dep.tb].entries.size()))
              throw std::invalid_argument("rank " + std::to_string(rank.rank) + " has a dependency out of range");
            events.deps.push_back(events.tbs[first + dep.tb].entryBegin + dep.entry);
          }
          entry.depCount = static_cast<int32_t>(static_cast<int64_t>(events.deps.size()) - entry.depBegin);
        }
      }
    }
  }
}

/// The receives sorted by op, entry order kept within an op: a counting sort when the ops are
/// dense, else a stable sort searched by binary search.
class ReceivesByOp {
 public:
  explicit ReceivesByOp(const PlanEvents& events) : events_(events) {
    for (int32_t id = 0; id < static_cast<int32_t>(events.entries.size()); ++id) {
      if (!isReceive(events.entries[id].kind)) continue;
      const int32_t op = events.planEntry(id).op;
      receives_.push_back({op, id});
      minOp_ = std::min<int64_t>(minOp_, op);
      maxOp_ = std::max<int64_t>(maxOp_, op);
    }
    if (!receives_.empty() && maxOp_ - minOp_ <= 4 * static_cast<int64_t>(receives_.size()) + 1024) {
      countingSort();
    } else {
      std::stable_sort(receives_.begin(), receives_.end(), byOp);
    }
  }

  /// The last receive of `op` on `rank` in `replica`, in entry order; -1 when there is none.
  int32_t find(int32_t op, int32_t replica, int32_t rank) const {
    const auto [begin, end] = rangeOf(op);
    int32_t found = -1;
    for (size_t i = begin; i < end; ++i) {
      const EventTb& tb = events_.tbs[events_.entries[receives_[i].entry].tb];
      if (tb.replica == replica && tb.rank == rank) found = receives_[i].entry;
    }
    return found;
  }

 private:
  struct Receive {
    int32_t op;
    int32_t entry;
  };
  static bool byOp(const Receive& a, const Receive& b) { return a.op < b.op; }

  void countingSort() {
    bucket_.assign(static_cast<size_t>(maxOp_ - minOp_ + 2), 0);
    for (const Receive& receive : receives_) ++bucket_[receive.op - minOp_ + 1];
    for (size_t i = 1; i < bucket_.size(); ++i) bucket_[i] += bucket_[i - 1];
    std::vector<Receive> sorted(receives_.size());
    std::vector<int64_t> fill(bucket_.begin(), bucket_.end() - 1);
    for (const Receive& receive : receives_) sorted[fill[receive.op - minOp_]++] = receive;
    receives_.swap(sorted);
  }

  std::pair<size_t, size_t> rangeOf(int32_t op) const {
    if (!bucket_.empty()) {
      if (op < minOp_ || op > maxOp_) return {0, 0};
      return {static_cast<size_t>(bucket_[op - minOp_]), static_cast<size_t>(bucket_[op - minOp_ + 1])};
    }
    auto range = std::equal_range(receives_.begin(), receives_.end(), Receive{op, 0}, byOp);
    return {static_cast<size_t>(range.first - receives_.begin()), static_cast<size_t>(range.second - receives_.begin())};
  }

  const PlanEvents& events_;
  std::vector<Receive> receives_;
  std::vector<int64_t> bucket_;  // dense case: op - minOp_ -> first index into receives_
  int64_t minOp_ = std::numeric_limits<int64_t>::max();
  int64_t maxOp_ = std::numeric_limits<int64_t>::min();
};

/// Numbers connections by (send TB, receive TB) and routes by (rank, peer) as they are first met.
class ConnectionNumbering {
 public:
  ConnectionNumbering(const Plan& plan, PlanEvents& events)
      : nRanks_(plan.nRanks), events_(events), lastConnection_(events.tbs.size(), {-1, -1}) {}

  int32_t connectionOf(int32_t sendTb, int32_t recvTb, int32_t rank, int32_t peer) {
    // Consecutive sends of a TB mostly use one connection: the last one found per TB answers first.
    std::pair<int32_t, int32_t>& last = lastConnection_[sendTb];
    if (last.first == recvTb) return last.second;
    const int64_t key = static_cast<int64_t>(sendTb) * static_cast<int64_t>(events_.tbs.size()) + recvTb;
    auto [it, added] = connectionIds_.try_emplace(key, static_cast<int32_t>(events_.connections.size()));
    last = {recvTb, it->second};
    if (!added) return it->second;
    auto [route, newRoute] =
        routeIds_.try_emplace(static_cast<int64_t>(rank) * nRanks_ + peer, static_cast<int32_t>(events_.routes.size()));
    if (newRoute) events_.routes.push_back({rank, peer});
    events_.connections.push_back({sendTb, recvTb, route->second});
    return it->second;
  }

 private:
  int32_t nRanks_;
  PlanEvents& events_;
  std::vector<std::pair<int32_t, int32_t>> lastConnection_;  // per send TB: (receive TB, connection)
  std::unordered_map<int64_t, int32_t> connectionIds_;
  std::unordered_map<int64_t, int32_t> routeIds_;
};

// Every send meets the receive of the same op on its peer (same replica; the last such receive
// in entry order); each (send TB, receive TB) pair is one connection.
void pairSendsAndReceives(const Plan& plan, PlanEvents& events) {
  const ReceivesByOp receives(events);
  ConnectionNumbering numbering(plan, events);
  for (int32_t id = 0; id < static_cast<int32_t>(events.entries.size()); ++id) {
    EventEntry& entry = events.entries[id];
    if (entry.kind != PrimitiveKind::Send) continue;
    const PlanEntry& send = events.planEntry(id);
    const EventTb& tb = events.tbs[entry.tb];
    const int32_t receive = send.peer < 0 || send.peer >= plan.nRanks ? -1 : receives.find(send.op, tb.replica, send.peer);
    if (receive < 0)
      throw std::invalid_argument("rank " + std::to_string(tb.rank) + " sends op " + std::to_string(send.op) +
                                  " to rank " + std::to_string(send.peer) + ", which has no matching receive");
    EventEntry& matched = events.entries[receive];
    entry.pair = receive;
    matched.pair = id;
    entry.connection = matched.connection = numbering.connectionOf(entry.tb, matched.tb, tb.rank, send.peer);
  }
  for (int32_t id = 0; id < static_cast<int32_t>(events.entries.size()); ++id) {
    if (isReceive(events.entries[id].kind) && events.entries[id].pair < 0)
      throw std::invalid_argument("a receive of op " + std::to_string(events.planEntry(id).op) + " has no matching send");
  }
}

}  // namespace

void checkPlanFits(const Plan& plan, int32_t gpus, const SimOptions& options) {
  if (plan.nRanks != gpus) {
    throw std::invalid_argument("the plan has " + std::to_string(plan.nRanks) + " ranks but the topology has " +
                                std::to_string(gpus) + " GPUs");
  }
  if (static_cast<int32_t>(plan.ranks.size()) != plan.nRanks)
    throw std::invalid_argument("the plan lists " + std::to_string(plan.ranks.size()) + " ranks, not nRanks");
  for (const PlanRank& rank : plan.ranks) {
    if (rank.rank < 0 || rank.rank >= plan.nRanks)
      throw std::invalid_argument("the plan lists rank " + std::to_string(rank.rank) + ", out of range");
  }
  if (options.messageBytes < 0) throw std::invalid_argument("the message size must not be negative");
}

MessageCut cutMessage(const Plan& plan, int64_t messageBytes) {
  const int32_t replicas = std::max(1, plan.config.nChannels);
  const int32_t chunks = std::max({1, plan.bufferChunks[0], plan.bufferChunks[1]});
  if (plan.config.chunkSize <= 0) throw std::invalid_argument("config.chunkSize must be positive");
  MessageCut cut;
  cut.chunkBytes = static_cast<double>(messageBytes) / chunks / replicas;
  const double chunkSize = static_cast<double>(plan.config.chunkSize);
  const double slices = std::max(1.0, std::ceil(cut.chunkBytes / chunkSize - 1e-9));
  if (slices > static_cast<double>(kMaxSimulatedSlices)) {
    // Every micro-batch is an event per entry: beyond this a run takes hours, not seconds.
    const auto smallest = static_cast<uint64_t>(std::ceil(cut.chunkBytes / static_cast<double>(kMaxSimulatedSlices)));
    throw std::invalid_argument("a chunk of " + formatBytesForPeople(static_cast<uint64_t>(cut.chunkBytes)) +
                                " in micro-batches of " + formatBytesForPeople(static_cast<uint64_t>(chunkSize)) +
                                " makes " + formatNumberForPeople(slices) + " micro-batches; the simulator takes at most " +
                                formatNumberForPeople(kMaxSimulatedSlices) + ": use a chunk size of at least " +
                                formatBytesForPeople(smallest) + " for a message of " +
                                formatBytesForPeople(static_cast<uint64_t>(messageBytes)));
  }
  cut.slices = static_cast<int32_t>(slices);
  cut.sliceBytes = std::min(chunkSize, cut.chunkBytes);
  return cut;
}

PlanEvents buildPlanEvents(const Plan& plan, const SplitReceives& split, int32_t replicas) {
  PlanEvents events;
  const FirstTbs firstTb = flattenEntries(plan, split, replicas, events);
  linkDependencies(plan, replicas, firstTb, events);
  pairSendsAndReceives(plan, events);
  return events;
}

std::vector<PathInfo> routePaths(const PlanEvents& events, const Network& network, const CostModel& cost,
                                 const Plan& plan) {
  const Protocol protocol = plan.config.protocol;
  std::vector<PathInfo> paths;
  paths.reserve(events.routes.size());
  for (const EventRoute& route : events.routes) {
    const NetworkPath& path = network.path(route.rank, route.peer);
    PathInfo info;
    info.resources = path.resources;
    info.latencyUs = path.alphaUs + cost.protocol(protocol).hopLatencyUs[static_cast<int>(path.hop)];
    double narrowest = std::numeric_limits<double>::infinity();
    for (int32_t r : path.resources) narrowest = std::min(narrowest, network.resources()[r].capacityGBps);
    info.capGBps = std::min(tbCapGBps(cost, protocol, plan.config.nThreads, path.network), narrowest);
    paths.push_back(std::move(info));
  }
  return paths;
}

}  // namespace tuccl
