// The event engine (simulator.h's semantics; docs/simulator.md, "The engine at scale").
//
// Compared with the straightforward loop (reference_simulator.cc), which it must match:
//   - the nChannels replicas of the plan run on disjoint data with their own TBs, connections and
//     credits, and start together: they stay in lock step, so one replica is simulated and each of
//     its flows stands for nChannels identical flows (FlowNetwork copies): nChannels times fewer
//     entries, events and flows. (A trace records every replica's spans, so with recordTrace every
//     replica is simulated.)
//   - state lives in flat arrays indexed by entry, TB and connection, an entry's in one cache
//     line; a TB waits on at most one thing, so the waiters of an entry, an arrival or a
//     connection are an intrusive FIFO list through the TBs (the reference keeps a vector per
//     entry); nothing is allocated per event;
//   - sends meet their receives through a counting sort by op, connections and routes through
//     hash maps, instead of ordered maps.
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "support/text_values.h"

namespace tuccl {

namespace {

constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kTimeToleranceUs = 1e-7;

/// A FIFO of waiting TBs, linked through Engine::nextWaiter_.
struct WaitList {
  int32_t head = -1;
  int32_t tail = -1;
};

/// Everything the engine reads and writes per entry, in one cache line.
struct alignas(64) Entry {
  int64_t depBegin = 0;  // into Engine::deps_
  int32_t depCount = 0;
  int32_t tb = 0;        // global TB index
  int32_t pair = -1;     // send <-> its receive (global entry ids)
  int32_t connection = -1;
  int32_t count = 1;
  int32_t groupEnd = 0;   // exclusive end of the group of entries replayed per micro-batch with it
  int32_t completed = 0;  // micro-batches done
  int32_t arrived = 0;    // receive: micro-batches whose data arrived
  WaitList completionWaiters;
  WaitList arrivalWaiters;
  PrimitiveKind kind = PrimitiveKind::Send;
};

struct PathInfo {
  std::vector<int32_t> resources;
  double latencyUs = 0;
  double capGBps = 0;
};

struct Connection {  // (send TB, receive TB): its staging credits and its route
  int32_t inflight = 0;
  int32_t path = -1;
  double latencyUs = 0;  // the route's
  WaitList waiters;
};

struct Tb {
  int32_t entryBegin = 0;
  int32_t entryEnd = 0;
  int32_t groupBegin = 0;
  int32_t slice = 0;
  int32_t offset = 0;
  int32_t rank = 0;
  bool busy = false;
  bool done = false;
  double activityStartUs = 0;
  const PlanTb* plan = nullptr;
  int32_t entry() const { return groupBegin + offset; }
};

enum class EventKind : uint8_t { FlowStart, FlowDone, Arrival, ActivityDone };

struct Event {
  double timeUs;
  int64_t seq;
  EventKind kind;
  int32_t a;
  int64_t b;
  bool operator>(const Event& other) const {
    return timeUs != other.timeUs ? timeUs > other.timeUs : seq > other.seq;
  }
};

class Engine {
 public:
  Engine(const Plan& plan, const Network& network, const SimOptions& options);
  SimResult run();

 private:
  void build();
  void buildTbs(int32_t simulated);
  void buildDependencies(int32_t simulated);
  void pairSendsAndReceives();
  int32_t connectionOf(int32_t sendTb, int32_t recvTb, int32_t rank, int32_t peer);
  double sliceBytes(int32_t slice) const {
    return std::min(result_.sliceBytes, std::max(0.0, result_.chunkBytes - slice * result_.sliceBytes));
  }
  void push(double timeUs, EventKind kind, int32_t a, int64_t b = 0) {
    events_.push(Event{timeUs, seq_++, kind, a, b});
  }
  void wait(WaitList& list, int32_t tb) {
    nextWaiter_[tb] = -1;
    if (list.tail < 0) {
      list.head = tb;
    } else {
      nextWaiter_[list.tail] = tb;
    }
    list.tail = tb;
  }
  void wake(WaitList& list) {
    for (int32_t tb = list.head; tb >= 0; tb = nextWaiter_[tb]) pending_.push_back(tb);
    list = WaitList{};
  }
  const PlanEntry& planEntry(int32_t id) const {
    const Tb& tb = tbs_[entries_[id].tb];
    return tb.plan->entries[id - tb.entryBegin];
  }
  void tryRun(int32_t tbIndex);
  void finishActivity(int32_t tbIndex);
  void startFlow(int32_t tbIndex);
  void expandReplicas();
  [[noreturn]] void reportDeadlock() const;

  // A plan with fused entries runs as its unfused form (plan.h: unfusedPlan) in which each fused
  // entry's receive and send are one group, replayed slice by slice as the fused kernel runs them.
  std::vector<std::vector<std::vector<bool>>> split_;  // per rank, TB, entry: a fused entry's receive
  std::optional<Plan> unfused_;
  const Plan& plan_;
  const Network& topology_;
  const SimOptions& options_;
  Protocol protocol_ = Protocol::Simple;
  double syncUs_ = 0;
  double localGBps_ = 0;
  int32_t replicas_ = 1;  // the plan's nChannels
  int32_t copies_ = 1;    // replicas each simulated one stands for

  std::vector<Entry> entries_;
  std::vector<int32_t> deps_;
  std::vector<Tb> tbs_;
  std::vector<int32_t> tbOffset_;  // (replica, rank) -> first global TB
  std::vector<PathInfo> paths_;
  std::vector<Connection> connections_;
  std::vector<int32_t> nextWaiter_;
  std::vector<int32_t> pending_;
  std::vector<int32_t> batch_;
  std::vector<int32_t> flowOwner_;
  std::vector<int64_t> flowVersion_;
  // Build only: connection ids by (send TB, receive TB), route ids by (rank, peer), and the last
  // connection found per sending TB.
  std::unordered_map<int64_t, int32_t> connectionIds_;
  std::unordered_map<int64_t, int32_t> pathIds_;
  std::vector<std::pair<int32_t, int32_t>> lastConnection_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t seq_ = 0;
  double nowUs_ = 0;
  int32_t tbsDone_ = 0;
  FlowNetwork network_;
  SimResult result_;
};

std::vector<double> capacitiesOf(const Network& network) {
  std::vector<double> capacities;
  for (const NetworkResource& resource : network.resources()) capacities.push_back(resource.capacityGBps);
  return capacities;
}

Engine::Engine(const Plan& plan, const Network& network, const SimOptions& options)
    : unfused_(hasFusedEntries(plan) ? std::optional<Plan>(unfusedPlan(plan, &split_)) : std::nullopt),
      plan_(unfused_ ? *unfused_ : plan),
      topology_(network),
      options_(options),
      network_(capacitiesOf(network), [model = options.cost](double z) { return contentionFactor(model, z); }) {}

void Engine::build() {
  if (plan_.nRanks != topology_.nRanks()) {
    throw std::invalid_argument("the plan has " + std::to_string(plan_.nRanks) + " ranks but the topology has " +
                                std::to_string(topology_.nRanks()) + " GPUs");
  }
  if (static_cast<int32_t>(plan_.ranks.size()) != plan_.nRanks)
    throw std::invalid_argument("the plan lists " + std::to_string(plan_.ranks.size()) + " ranks, not nRanks");
  for (const PlanRank& rank : plan_.ranks) {
    if (rank.rank < 0 || rank.rank >= plan_.nRanks)
      throw std::invalid_argument("the plan lists rank " + std::to_string(rank.rank) + ", out of range");
  }
  if (options_.messageBytes < 0) throw std::invalid_argument("the message size must not be negative");
  const CostModel& cost = options_.cost;
  protocol_ = plan_.config.protocol;
  syncUs_ = cost.syncOverheadUs;
  localGBps_ = cost.localGBps > 0 ? cost.localGBps : tbCapGBps(cost, protocol_, plan_.config.nThreads, false);
  const int32_t replicas = std::max(1, plan_.config.nChannels);
  const int32_t chunks = std::max({1, plan_.bufferChunks[0], plan_.bufferChunks[1]});
  if (plan_.config.chunkSize <= 0) throw std::invalid_argument("config.chunkSize must be positive");

  result_.messageBytes = options_.messageBytes;
  result_.chunkBytes = static_cast<double>(options_.messageBytes) / chunks / replicas;
  const double chunkSize = static_cast<double>(plan_.config.chunkSize);
  const double slices = std::max(1.0, std::ceil(result_.chunkBytes / chunkSize - 1e-9));
  if (slices > static_cast<double>(kMaxSimulatedSlices)) {
    // Every micro-batch is an event per entry: beyond this a run takes hours, not seconds.
    const auto smallest = static_cast<uint64_t>(std::ceil(result_.chunkBytes / static_cast<double>(kMaxSimulatedSlices)));
    throw std::invalid_argument("a chunk of " + formatBytesForPeople(static_cast<uint64_t>(result_.chunkBytes)) +
                                " in micro-batches of " + formatBytesForPeople(static_cast<uint64_t>(chunkSize)) +
                                " makes " + formatNumberForPeople(slices) + " micro-batches; the simulator takes at most " +
                                formatNumberForPeople(kMaxSimulatedSlices) + ": use a chunk size of at least " +
                                formatBytesForPeople(smallest) + " for a message of " +
                                formatBytesForPeople(static_cast<uint64_t>(options_.messageBytes)));
  }
  result_.slices = static_cast<int32_t>(slices);
  result_.sliceBytes = std::min(chunkSize, result_.chunkBytes);
  result_.stagingSlots = stagingSlots(cost, result_.sliceBytes);
  result_.launchUs = cost.protocol(protocol_).baseLatencyUs;

  replicas_ = replicas;
  copies_ = options_.recordTrace ? 1 : replicas;
  const int32_t simulated = replicas / copies_;
  buildTbs(simulated);
  buildDependencies(simulated);
  pairSendsAndReceives();
  nextWaiter_.assign(tbs_.size(), -1);
  connectionIds_ = {};
  pathIds_ = {};
  lastConnection_ = {};
  result_.rankEndUs.assign(plan_.nRanks, result_.launchUs);
}

// Flattens (replica, rank, TB, entry) into global ids and cuts every TB's entries into the groups
// replayed per micro-batch.
void Engine::buildTbs(int32_t simulated) {
  size_t entryCount = 0;
  size_t tbCount = 0;
  for (const PlanRank& rank : plan_.ranks) {
    tbCount += rank.tbs.size();
    for (const PlanTb& planTb : rank.tbs) entryCount += planTb.entries.size();
  }
  if (entryCount * simulated > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw std::invalid_argument("the plan has too many entries to simulate");
  entries_.reserve(entryCount * simulated);
  tbs_.reserve(tbCount * simulated);
  result_.tbs.reserve(tbCount * replicas_);
  tbOffset_.assign(static_cast<size_t>(simulated) * plan_.nRanks, 0);
  for (int32_t c = 0; c < simulated; ++c) {
    for (const PlanRank& rank : plan_.ranks) {
      tbOffset_[static_cast<size_t>(c) * plan_.nRanks + rank.rank] = static_cast<int32_t>(tbs_.size());
      for (const PlanTb& planTb : rank.tbs) {
        Tb tb;
        tb.entryBegin = static_cast<int32_t>(entries_.size());
        tb.rank = rank.rank;
        tb.plan = &planTb;
        result_.tbs.push_back(SimTb{c, rank.rank, planTb.id});
        for (const PlanEntry& planEntry : planTb.entries) {
          Entry entry;
          entry.kind = planEntry.kind;
          entry.tb = static_cast<int32_t>(tbs_.size());
          entry.count = planEntry.count;
          entries_.push_back(entry);
        }
        tb.entryEnd = static_cast<int32_t>(entries_.size());
        int32_t groupFirst = tb.entryBegin;
        for (size_t e = 0; e < planTb.entries.size(); ++e) {
          const bool last = e + 1 == planTb.entries.size();
          bool cut = true;
          if (!last && plan_.executionLevel == ExecutionLevel::Algorithm) cut = false;
          if (!last && plan_.executionLevel == ExecutionLevel::Stage)
            cut = planTb.entries[e].subPipeline != planTb.entries[e + 1].subPipeline;
          if (!split_.empty() && split_[rank.rank][&planTb - rank.tbs.data()][e]) cut = false;
          if (!cut) continue;
          const int32_t groupEnd = tb.entryBegin + static_cast<int32_t>(e) + 1;
          for (int32_t id = groupFirst; id < groupEnd; ++id) entries_[id].groupEnd = groupEnd;
          groupFirst = groupEnd;
        }
        tb.groupBegin = tb.entryBegin;
        if (tb.entryBegin == tb.entryEnd) tb.done = true;
        tbs_.push_back(tb);
      }
    }
  }
}

// Dependencies: entries of other TBs of the same rank and replica.
void Engine::buildDependencies(int32_t simulated) {
  for (int32_t c = 0; c < simulated; ++c) {
    for (const PlanRank& rank : plan_.ranks) {
      const int32_t firstTb = tbOffset_[static_cast<size_t>(c) * plan_.nRanks + rank.rank];
      for (size_t t = 0; t < rank.tbs.size(); ++t) {
        const Tb& tb = tbs_[firstTb + t];
        for (size_t e = 0; e < rank.tbs[t].entries.size(); ++e) {
          const PlanEntry& planEntry = rank.tbs[t].entries[e];
          Entry& entry = entries_[tb.entryBegin + e];
          entry.depBegin = static_cast<int64_t>(deps_.size());
          for (const EntryRef& dep : planEntry.deps) {
            if (dep.tb < 0 || dep.tb >= static_cast<int32_t>(rank.tbs.size()) || dep.entry < 0 ||
                dep.entry >= static_cast<int32_t>(rank.tbs[dep.tb].entries.size()))
              throw std::invalid_argument("rank " + std::to_string(rank.rank) + " has a dependency out of range");
            deps_.push_back(tbs_[firstTb + dep.tb].entryBegin + dep.entry);
          }
          entry.depCount = static_cast<int32_t>(static_cast<int64_t>(deps_.size()) - entry.depBegin);
        }
      }
    }
  }
}

// Every send meets the receive of the same op on its peer (same replica; the last such receive
// in entry order, as an ordered map keyed by (replica, rank, op) assigned in entry order keeps);
// each (send TB, receive TB) pair is one connection with its credits and its route.
void Engine::pairSendsAndReceives() {
  struct Receive {
    int32_t op;
    int32_t entry;
  };
  std::vector<Receive> receives;
  int64_t minOp = std::numeric_limits<int64_t>::max();
  int64_t maxOp = std::numeric_limits<int64_t>::min();
  for (int32_t id = 0; id < static_cast<int32_t>(entries_.size()); ++id) {
    if (!isReceive(entries_[id].kind)) continue;
    const int32_t op = planEntry(id).op;
    receives.push_back({op, id});
    minOp = std::min<int64_t>(minOp, op);
    maxOp = std::max<int64_t>(maxOp, op);
  }
  // Receives sorted by op, entry order kept within an op (a counting sort when the ops are dense).
  std::vector<int64_t> bucket;  // op - minOp -> first index into `receives` (dense case)
  if (!receives.empty() && maxOp - minOp <= 4 * static_cast<int64_t>(receives.size()) + 1024) {
    bucket.assign(static_cast<size_t>(maxOp - minOp + 2), 0);
    for (const Receive& receive : receives) ++bucket[receive.op - minOp + 1];
    for (size_t i = 1; i < bucket.size(); ++i) bucket[i] += bucket[i - 1];
    std::vector<Receive> sorted(receives.size());
    std::vector<int64_t> fill(bucket.begin(), bucket.end() - 1);
    for (const Receive& receive : receives) sorted[fill[receive.op - minOp]++] = receive;
    receives.swap(sorted);
  } else {
    std::stable_sort(receives.begin(), receives.end(), [](const Receive& a, const Receive& b) { return a.op < b.op; });
  }
  auto findReceive = [&](int32_t op, int32_t replica, int32_t rank) {
    size_t begin;
    size_t end;
    if (!bucket.empty()) {
      if (op < minOp || op > maxOp) return -1;
      begin = static_cast<size_t>(bucket[op - minOp]);
      end = static_cast<size_t>(bucket[op - minOp + 1]);
    } else {
      auto range = std::equal_range(receives.begin(), receives.end(), Receive{op, 0},
                                    [](const Receive& a, const Receive& b) { return a.op < b.op; });
      begin = static_cast<size_t>(range.first - receives.begin());
      end = static_cast<size_t>(range.second - receives.begin());
    }
    int32_t found = -1;
    for (size_t i = begin; i < end; ++i) {
      const int32_t id = receives[i].entry;
      const int32_t tb = entries_[id].tb;
      if (result_.tbs[tb].replica == replica && tbs_[tb].rank == rank) found = id;
    }
    return found;
  };
  for (int32_t id = 0; id < static_cast<int32_t>(entries_.size()); ++id) {
    Entry& entry = entries_[id];
    if (entry.kind != PrimitiveKind::Send) continue;
    const PlanEntry& send = planEntry(id);
    const SimTb& tb = result_.tbs[entry.tb];
    const int32_t receive = send.peer < 0 || send.peer >= plan_.nRanks ? -1 : findReceive(send.op, tb.replica, send.peer);
    if (receive < 0)
      throw std::invalid_argument("rank " + std::to_string(tb.rank) + " sends op " + std::to_string(send.op) +
                                  " to rank " + std::to_string(send.peer) + ", which has no matching receive");
    entry.pair = receive;
    entries_[receive].pair = id;
    entry.connection = entries_[receive].connection = connectionOf(entry.tb, entries_[receive].tb, tb.rank, send.peer);
  }
  for (int32_t id = 0; id < static_cast<int32_t>(entries_.size()); ++id) {
    if (isReceive(entries_[id].kind) && entries_[id].pair < 0)
      throw std::invalid_argument("a receive of op " + std::to_string(planEntry(id).op) + " has no matching send");
  }
}

int32_t Engine::connectionOf(int32_t sendTb, int32_t recvTb, int32_t rank, int32_t peer) {
  // Consecutive sends of a TB mostly use one connection: the last one found per TB answers first.
  if (lastConnection_.empty()) lastConnection_.assign(tbs_.size(), {-1, -1});
  std::pair<int32_t, int32_t>& last = lastConnection_[sendTb];
  if (last.first == recvTb) return last.second;
  const int64_t key = static_cast<int64_t>(sendTb) * static_cast<int64_t>(tbs_.size()) + recvTb;
  auto [it, added] = connectionIds_.try_emplace(key, static_cast<int32_t>(connections_.size()));
  last = {recvTb, it->second};
  if (!added) return it->second;
  Connection connection;
  auto [route, newRoute] =
      pathIds_.try_emplace(static_cast<int64_t>(rank) * plan_.nRanks + peer, static_cast<int32_t>(paths_.size()));
  connection.path = route->second;
  if (newRoute) {
    const NetworkPath& path = topology_.path(rank, peer);
    PathInfo info;
    info.resources = path.resources;
    info.latencyUs = path.alphaUs + options_.cost.protocol(protocol_).hopLatencyUs[static_cast<int>(path.hop)];
    // A flow never outruns its narrowest resource; keeping caps finite keeps Eq. 1's z finite.
    double narrowest = std::numeric_limits<double>::infinity();
    for (int32_t r : path.resources) narrowest = std::min(narrowest, topology_.resources()[r].capacityGBps);
    info.capGBps = std::min(tbCapGBps(options_.cost, protocol_, plan_.config.nThreads, path.network), narrowest);
    paths_.push_back(std::move(info));
  }
  connection.latencyUs = paths_[connection.path].latencyUs;
  connections_.push_back(connection);
  return it->second;
}

void Engine::tryRun(int32_t tbIndex) {
  Tb& tb = tbs_[tbIndex];
  if (tb.busy || tb.done) return;
  const int32_t id = tb.entry();
  Entry& entry = entries_[id];
  const int32_t slice = tb.slice;
  const int32_t* dep = deps_.data() + entry.depBegin;
  for (const int32_t* end = dep + entry.depCount; dep != end; ++dep) {
    Entry& waited = entries_[*dep];
    if (waited.completed <= slice) {
      wait(waited.completionWaiters, tbIndex);
      return;
    }
  }
  if (isReceive(entry.kind) && entry.arrived <= slice) {
    wait(entry.arrivalWaiters, tbIndex);
    return;
  }
  if (entry.kind == PrimitiveKind::Send) {
    Connection& connection = connections_[entry.connection];
    if (connection.inflight >= result_.stagingSlots) {
      wait(connection.waiters, tbIndex);
      return;
    }
    ++connection.inflight;
  }
  tb.busy = true;
  tb.activityStartUs = nowUs_;
  SimTb& stats = result_.tbs[tbIndex];
  if (stats.firstUs < 0) stats.firstUs = nowUs_;
  ++stats.invocations;
  if (entry.kind == PrimitiveKind::Send) {
    if (syncUs_ > 0) {
      push(nowUs_ + syncUs_, EventKind::FlowStart, tbIndex);
    } else {
      startFlow(tbIndex);
    }
    return;
  }
  double duration = syncUs_;
  if (entry.kind != PrimitiveKind::Recv) duration += entry.count * sliceBytes(slice) / (localGBps_ * kBytesPerUsPerGBps);
  push(nowUs_ + duration, EventKind::ActivityDone, tbIndex);
}

void Engine::startFlow(int32_t tbIndex) {
  const Entry& entry = entries_[tbs_[tbIndex].entry()];
  const PathInfo& path = paths_[connections_[entry.connection].path];
  const double wireBytes = entry.count * sliceBytes(tbs_[tbIndex].slice) / options_.cost.protocol(protocol_).efficiency;
  const int32_t flow = network_.start(nowUs_, path.resources, wireBytes, path.capGBps, copies_);
  if (flow >= static_cast<int32_t>(flowOwner_.size())) {
    flowOwner_.resize(flow + 1, -1);
    flowVersion_.resize(flow + 1, 0);
  }
  flowOwner_[flow] = tbIndex;
  ++flowVersion_[flow];
  result_.transfers += copies_;
}

void Engine::finishActivity(int32_t tbIndex) {
  Tb& tb = tbs_[tbIndex];
  const int32_t id = tb.entry();
  Entry& entry = entries_[id];
  SimTb& stats = result_.tbs[tbIndex];
  stats.busyUs += nowUs_ - tb.activityStartUs;
  stats.lastUs = nowUs_;
  if (options_.recordTrace) {
    if (static_cast<int64_t>(result_.trace.size()) < options_.maxTraceSpans) {
      const PlanEntry& planned = planEntry(id);
      result_.trace.push_back(
          TraceSpan{tbIndex, -1, tb.activityStartUs, nowUs_, entry.kind, planned.peer, planned.op, tb.slice});
    } else {
      result_.traceTruncated = true;
    }
  }
  ++entry.completed;
  wake(entry.completionWaiters);
  if (entry.kind == PrimitiveKind::Send) {
    push(nowUs_ + connections_[entry.connection].latencyUs, EventKind::Arrival, entry.pair);
  } else if (isReceive(entry.kind)) {
    Connection& connection = connections_[entry.connection];
    --connection.inflight;
    wake(connection.waiters);
  }
  // Next position: the next entry of the group, then the next micro-batch, then the next group.
  tb.busy = false;
  const int32_t groupEnd = entry.groupEnd;
  if (tb.groupBegin + tb.offset + 1 < groupEnd) {
    ++tb.offset;
  } else {
    tb.offset = 0;
    if (++tb.slice == result_.slices) {
      tb.slice = 0;
      tb.groupBegin = groupEnd;
      if (groupEnd == tb.entryEnd) {
        tb.done = true;
        ++tbsDone_;
        result_.rankEndUs[stats.rank] = std::max(result_.rankEndUs[stats.rank], nowUs_);
        return;
      }
    }
  }
  pending_.push_back(tbIndex);
}

void Engine::reportDeadlock() const {
  for (size_t t = 0; t < tbs_.size(); ++t) {
    const Tb& tb = tbs_[t];
    if (tb.done) continue;
    const PlanEntry& entry = planEntry(tb.entry());
    const SimTb& stats = result_.tbs[t];
    throw std::runtime_error("simulation deadlock at " + std::to_string(nowUs_) + " us: rank " +
                             std::to_string(stats.rank) + " TB " + std::to_string(stats.tb) + " (replica " +
                             std::to_string(stats.replica) + ") waits in " + std::string(primitiveName(entry.kind)) +
                             " of op " + std::to_string(entry.op) + ", micro-batch " + std::to_string(tb.slice));
  }
  throw std::runtime_error("simulation deadlock");
}

// The simulated replica stands for every replica: their TBs ran the same timeline.
void Engine::expandReplicas() {
  if (copies_ == 1) return;
  const size_t perReplica = result_.tbs.size();
  for (int32_t c = 1; c < copies_; ++c) {
    for (size_t t = 0; t < perReplica; ++t) {
      SimTb tb = result_.tbs[t];
      tb.replica = c;
      result_.tbs.push_back(tb);
    }
  }
}

SimResult Engine::run() {
  build();
  if (options_.recordTrace) {
    network_.onBusyInterval = [this](int32_t resource, double begin, double end) {
      if (static_cast<int64_t>(result_.trace.size()) < options_.maxTraceSpans) {
        TraceSpan span;
        span.resource = resource;
        span.beginUs = begin;
        span.endUs = end;
        result_.trace.push_back(span);
      } else {
        result_.traceTruncated = true;
      }
    };
  }
  nowUs_ = result_.launchUs;
  for (size_t t = 0; t < tbs_.size(); ++t) {
    if (tbs_[t].done) {
      ++tbsDone_;
    } else {
      pending_.push_back(static_cast<int32_t>(t));
    }
  }
  double lastUs = result_.launchUs;
  while (true) {
    // Let every TB that may have become ready try to run at the current time.
    while (!pending_.empty()) {
      batch_.clear();
      batch_.swap(pending_);
      for (int32_t tb : batch_) tryRun(tb);
    }
    for (const FlowNetwork::Change& change : network_.settle(nowUs_)) {
      push(change.finishUs, EventKind::FlowDone, change.flow, ++flowVersion_[change.flow]);
    }
    if (events_.empty()) break;
    nowUs_ = events_.top().timeUs;
    while (!events_.empty() && events_.top().timeUs <= nowUs_ + kTimeToleranceUs) {
      const Event event = events_.top();
      events_.pop();
      ++result_.events;
      switch (event.kind) {
        case EventKind::FlowStart:
          startFlow(event.a);
          break;
        case EventKind::FlowDone: {
          if (flowVersion_[event.a] != event.b || flowOwner_[event.a] < 0) break;  // superseded
          const int32_t tb = flowOwner_[event.a];
          flowOwner_[event.a] = -1;
          network_.finish(event.a, nowUs_);
          finishActivity(tb);
          break;
        }
        case EventKind::Arrival:
          ++entries_[event.a].arrived;
          wake(entries_[event.a].arrivalWaiters);
          break;
        case EventKind::ActivityDone:
          finishActivity(event.a);
          break;
      }
      lastUs = nowUs_;
    }
  }
  if (tbsDone_ != static_cast<int32_t>(tbs_.size())) reportDeadlock();
  result_.timeUs = lastUs;
  for (const SimTb& tb : result_.tbs) {
    if (tb.lastUs > result_.rankEndUs[tb.rank]) result_.rankEndUs[tb.rank] = tb.lastUs;
  }
  expandReplicas();
  result_.resources = network_.stats();
  return std::move(result_);
}

}  // namespace

Expected<SimResult> simulatePlan(const Plan& plan, const Network& network, const SimOptions& options) {
  // The engine unwinds with std::invalid_argument (a plan that does not fit) or
  // std::runtime_error (a deadlock); both stop here.
  try {
    Engine engine(plan, network, options);
    return engine.run();
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidArgument, error.what());
  } catch (const std::runtime_error& error) {
    return makeError(ErrorCode::InvalidInput, error.what());
  }
}

}  // namespace tuccl
