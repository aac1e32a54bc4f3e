// The reference engine: the straightforward event loop over every (replica, rank, TB, entry),
// kept beside the engine of simulator.cc so tests and bench_sim_scaling can compare them. Both lay
// the plan out the same way (sim/plan_events.h); the run over it is this file's own.
#include "sim/reference_simulator.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>

#include "sim/plan_events.h"

namespace tuccl {

namespace {

constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kTimeToleranceUs = 1e-7;

struct Tb {
  int32_t entryBegin = 0;
  int32_t entryEnd = 0;
  std::vector<int32_t> groupEnd;  // exclusive end of each group of entries replayed per micro-batch
  int32_t group = 0;
  int32_t groupBegin = 0;
  int32_t slice = 0;
  int32_t offset = 0;
  bool busy = false;
  bool done = false;
  double activityStartUs = 0;
  int32_t entry() const { return groupBegin + offset; }
};

struct Buffer {  // a connection's credits
  int32_t inflight = 0;
  std::vector<int32_t> waiters;
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
  // Checks the plan against the network and the options, lays it out (plan_events.h) and builds
  // every table the run reads.
  void build();
  // Sets the protocol's costs, the chunk and micro-batch sizes and the launch latency.
  void sizeMicroBatches();
  // Every TB at its first entry, with the ends of its groups.
  void startTbs();
  // The resources, latency and rate cap of the path from rank to peer.
  // Replicas of the plan, one per channel.
  int32_t replicas() const { return std::max(1, plan_.config.nChannels); }
  double sliceBytes(int32_t slice) const {
    return std::min(result_.sliceBytes, std::max(0.0, result_.chunkBytes - slice * result_.sliceBytes));
  }
  void push(double timeUs, EventKind kind, int32_t a, int64_t b = 0) {
    events_.push(Event{timeUs, seq_++, kind, a, b});
  }
  void tryRun(int32_t tbIndex);
  void finishActivity(int32_t tbIndex);
  void wake(std::vector<int32_t>& waiters) {
    for (int32_t tb : waiters) pending_.push_back(tb);
    waiters.clear();
  }
  void startFlow(int32_t tbIndex);
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

  PlanEvents layout_;  // every replica's entries, TBs and connections
  std::vector<Tb> tbs_;
  std::vector<PathInfo> paths_;    // per route
  std::vector<Buffer> buffers_;    // per connection
  std::vector<int32_t> completed_;
  std::vector<int32_t> arrived_;
  std::vector<std::vector<int32_t>> waitOnEntry_;
  std::vector<std::vector<int32_t>> waitOnArrival_;
  std::vector<int32_t> pending_;
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

void Engine::startTbs() {
  for (const EventTb& layout : layout_.tbs) {
    Tb tb;
    tb.entryBegin = layout.entryBegin;
    tb.entryEnd = layout.entryEnd;
    for (int32_t id = tb.entryBegin; id < tb.entryEnd; ++id) {
      if (layout_.entries[id].groupEnd == id + 1) tb.groupEnd.push_back(id + 1);  // a group ends after it
    }
    tb.groupBegin = tb.entryBegin;
    if (tb.entryBegin == tb.entryEnd) tb.done = true;
    tbs_.push_back(std::move(tb));
    result_.tbs.push_back(SimTb{layout.replica, layout.rank, layout.plan->id});
  }
}

void Engine::build() {
  checkPlanFits(plan_, topology_.nRanks(), options_);
  sizeMicroBatches();
  layout_ = buildPlanEvents(plan_, split_, replicas());
  startTbs();
  paths_ = routePaths(layout_, topology_, options_.cost, plan_);
  buffers_.resize(layout_.connections.size());
  const size_t entries = layout_.entries.size();
  completed_.assign(entries, 0);
  arrived_.assign(entries, 0);
  waitOnEntry_.resize(entries);
  waitOnArrival_.resize(entries);
  result_.rankEndUs.assign(plan_.nRanks, result_.launchUs);
}

void Engine::tryRun(int32_t tbIndex) {
  Tb& tb = tbs_[tbIndex];
  if (tb.busy || tb.done) return;
  const int32_t id = tb.entry();
  const EventEntry& entry = layout_.entries[id];
  const int32_t slice = tb.slice;
  for (int64_t d = entry.depBegin; d < entry.depBegin + entry.depCount; ++d) {
    const int32_t waited = layout_.deps[d];
    if (completed_[waited] <= slice) {
      waitOnEntry_[waited].push_back(tbIndex);
      return;
    }
  }
  if (isReceive(entry.kind) && arrived_[id] <= slice) {
    waitOnArrival_[id].push_back(tbIndex);
    return;
  }
  if (entry.kind == PrimitiveKind::Send) {
    Buffer& buffer = buffers_[entry.connection];
    if (buffer.inflight >= result_.stagingSlots) {
      buffer.waiters.push_back(tbIndex);
      return;
    }
    ++buffer.inflight;
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
  const PathInfo& path = paths_[layout_.connections[entry.connection].route];
  const double wireBytes = entry.count * sliceBytes(tbs_[tbIndex].slice) / options_.cost.protocol(protocol_).efficiency;
  const int32_t flow = network_.start(nowUs_, path.resources, wireBytes, path.capGBps);
  if (flow >= static_cast<int32_t>(flowOwner_.size())) {
    flowOwner_.resize(flow + 1, -1);
    flowVersion_.resize(flow + 1, 0);
  }
  flowOwner_[flow] = tbIndex;
  ++flowVersion_[flow];
  ++result_.transfers;
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
  ++completed_[id];
  wake(waitOnEntry_[id]);
  if (entry.kind == PrimitiveKind::Send) {
    push(nowUs_ + paths_[layout_.connections[entry.connection].route].latencyUs, EventKind::Arrival, entry.pair);
  } else if (isReceive(entry.kind)) {
    Buffer& buffer = buffers_[entry.connection];
    --buffer.inflight;
    wake(buffer.waiters);
  }
  // Next position: the next entry of the group, then the next micro-batch, then the next group.
  tb.busy = false;
  const int32_t groupEnd = tb.groupEnd[tb.group];
  if (tb.groupBegin + tb.offset + 1 < groupEnd) {
    ++tb.offset;
  } else {
    tb.offset = 0;
    if (++tb.slice == result_.slices) {
      tb.slice = 0;
      tb.groupBegin = groupEnd;
      if (++tb.group == static_cast<int32_t>(tb.groupEnd.size())) {
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
      std::vector<int32_t> batch;
      batch.swap(pending_);
      for (int32_t tb : batch) tryRun(tb);
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
          ++arrived_[event.a];
          wake(waitOnArrival_[event.a]);
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
  result_.resources = network_.stats();
  return std::move(result_);
}

}  // namespace

Expected<SimResult> simulatePlanReference(const Plan& plan, const Network& network, const SimOptions& options) {
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
