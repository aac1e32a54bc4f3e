// The event engine (simulator.h's semantics; docs/simulator.md, "The engine at scale").
//
// Compared with the straightforward loop (reference_simulator.cc), which it must match:
//   - the nChannels replicas of the plan run on disjoint data with their own TBs, connections and
//     credits, and start together: they stay in lock step, so one replica is simulated and each of
//     its flows stands for nChannels identical flows (FlowNetwork copies): nChannels times fewer
//     entries, events and flows. (A trace records every replica's spans, so with recordTrace every
//     replica is simulated.)
//   - what the run changes lives in flat arrays indexed by entry, TB and connection, beside the
//     plan's layout (sim/plan_events.h, which both engines build their runs on); a TB waits on at
//     most one thing, so the waiters of an entry, an arrival or a connection are an intrusive FIFO
//     list through the TBs (the reference keeps a vector per entry); nothing is allocated per
//     event.
#include "sim/simulator.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <utility>

#include "sim/plan_events.h"

namespace tuccl {

namespace {

constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kTimeToleranceUs = 1e-7;

/// A FIFO of waiting TBs, linked through Engine::nextWaiter_.
struct WaitList {
  int32_t head = -1;
  int32_t tail = -1;
};

/// What the run changes per entry (its layout: PlanEvents::entries).
struct EntryState {
  int32_t completed = 0;  // micro-batches done
  int32_t arrived = 0;    // receive: micro-batches whose data arrived
  WaitList completionWaiters;
  WaitList arrivalWaiters;
};

struct Connection {  // (send TB, receive TB): its staging credits and its route
  int32_t inflight = 0;
  int32_t path = -1;
  double latencyUs = 0;  // the route's
  WaitList waiters;
};

struct Tb {  // its position in its entries (PlanEvents::tbs) and whether it runs
  int32_t groupBegin = 0;
  int32_t slice = 0;
  int32_t offset = 0;
  bool busy = false;
  bool done = false;
  double activityStartUs = 0;
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
  void sizeMicroBatches();
  void startTbs();
  void routeConnections();
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
  void tryRun(int32_t tbIndex);
  void finishActivity(int32_t tbIndex);
  void startFlow(int32_t tbIndex);
  void expandReplicas();
  [[noreturn]] void reportDeadlock() const;

  // A plan with fused entries runs as its unfused form (plan.h: unfusedPlan) in which each fused
  // entry's receive and send are one group, replayed slice by slice as the fused kernel runs them.
  SplitReceives split_;  // per rank, TB, entry: a fused entry's receive
  std::optional<Plan> unfused_;
  const Plan& plan_;
  const Network& topology_;
  const SimOptions& options_;
  Protocol protocol_ = Protocol::Simple;
  double syncUs_ = 0;
  double localGBps_ = 0;
  int32_t replicas_ = 1;  // the plan's nChannels
  int32_t copies_ = 1;    // replicas each simulated one stands for

  PlanEvents layout_;  // the simulated replicas' entries, TBs and connections
  std::vector<EntryState> entryStates_;
  std::vector<Tb> tbs_;
  std::vector<PathInfo> paths_;  // per route
  std::vector<Connection> connections_;
  std::vector<int32_t> nextWaiter_;
  std::vector<int32_t> pending_;
  std::vector<int32_t> batch_;
  std::vector<int32_t> flowOwner_;
  std::vector<int64_t> flowVersion_;
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
  checkPlanFits(plan_, topology_.nRanks(), options_);
  sizeMicroBatches();
  replicas_ = std::max(1, plan_.config.nChannels);
  copies_ = options_.recordTrace ? 1 : replicas_;
  layout_ = buildPlanEvents(plan_, split_, replicas_ / copies_);
  startTbs();
  routeConnections();
  entryStates_.assign(layout_.entries.size(), EntryState{});
  nextWaiter_.assign(tbs_.size(), -1);
  result_.rankEndUs.assign(plan_.nRanks, result_.launchUs);
}

// The protocol's costs, the micro-batches (plan_events.h: cutMessage), the credits and the launch.
void Engine::sizeMicroBatches() {
  const CostModel& cost = options_.cost;
  protocol_ = plan_.config.protocol;
  syncUs_ = cost.syncOverheadUs;
  localGBps_ = cost.localGBps > 0 ? cost.localGBps : tbCapGBps(cost, protocol_, plan_.config.nThreads, false);
  const MessageCut cut = cutMessage(plan_, options_.messageBytes);
  result_.messageBytes = options_.messageBytes;
  result_.chunkBytes = cut.chunkBytes;
  result_.slices = cut.slices;
  result_.sliceBytes = cut.sliceBytes;
  result_.stagingSlots = stagingSlots(cost, result_.sliceBytes);
  result_.launchUs = cost.protocol(protocol_).baseLatencyUs;
}

// Every simulated TB at its first entry; an empty one is done.
void Engine::startTbs() {
  tbs_.reserve(layout_.tbs.size());
  result_.tbs.reserve(layout_.tbs.size() * copies_);
  for (const EventTb& layout : layout_.tbs) {
    Tb tb;
    tb.groupBegin = layout.entryBegin;
    tb.done = layout.entryBegin == layout.entryEnd;
    tbs_.push_back(tb);
    result_.tbs.push_back(SimTb{layout.replica, layout.rank, layout.plan->id});
  }
}

// Every connection's credits and its route's path.
void Engine::routeConnections() {
  paths_ = routePaths(layout_, topology_, options_.cost, plan_);
  for (const EventConnection& layout : layout_.connections) {
    Connection connection;
    connection.path = layout.route;
    connection.latencyUs = paths_[layout.route].latencyUs;
    connections_.push_back(connection);
  }
}

void Engine::tryRun(int32_t tbIndex) {
  Tb& tb = tbs_[tbIndex];
  if (tb.busy || tb.done) return;
  const int32_t id = tb.entry();
  const EventEntry& entry = layout_.entries[id];
  const int32_t slice = tb.slice;
  const int32_t* dep = layout_.deps.data() + entry.depBegin;
  for (const int32_t* end = dep + entry.depCount; dep != end; ++dep) {
    EntryState& waited = entryStates_[*dep];
    if (waited.completed <= slice) {
      wait(waited.completionWaiters, tbIndex);
      return;
    }
  }
  if (isReceive(entry.kind) && entryStates_[id].arrived <= slice) {
    wait(entryStates_[id].arrivalWaiters, tbIndex);
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
  const EventEntry& entry = layout_.entries[tbs_[tbIndex].entry()];
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
  const EventEntry& entry = layout_.entries[id];
  SimTb& stats = result_.tbs[tbIndex];
  stats.busyUs += nowUs_ - tb.activityStartUs;
  stats.lastUs = nowUs_;
  if (options_.recordTrace) {
    if (static_cast<int64_t>(result_.trace.size()) < options_.maxTraceSpans) {
      const PlanEntry& planned = layout_.planEntry(id);
      result_.trace.push_back(
          TraceSpan{tbIndex, -1, tb.activityStartUs, nowUs_, entry.kind, planned.peer, planned.op, tb.slice});
    } else {
      result_.traceTruncated = true;
    }
  }
  ++entryStates_[id].completed;
  wake(entryStates_[id].completionWaiters);
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
      if (groupEnd == layout_.tbs[tbIndex].entryEnd) {
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
    const PlanEntry& entry = layout_.planEntry(tb.entry());
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
          ++entryStates_[event.a].arrived;
          wake(entryStates_[event.a].arrivalWaiters);
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
    SimOptions at = options;
    at.cost = costModelForMessage(options.cost, options.messageBytes);
    Engine engine(plan, network, at);
    return engine.run();
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidArgument, error.what());
  } catch (const std::runtime_error& error) {
    return makeError(ErrorCode::InvalidInput, error.what());
  }
}

}  // namespace tuccl
