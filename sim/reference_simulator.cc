// The reference engine: the straightforward event loop over every (replica, rank, TB, entry),
// kept beside the engine of simulator.cc so tests and bench_sim_scaling can compare them.
#include "sim/reference_simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <map>
#include <queue>
#include <stdexcept>

#include "support/text_values.h"

namespace tuccl {

namespace {

constexpr double kBytesPerUsPerGBps = 1e3;
constexpr double kTimeToleranceUs = 1e-7;

struct Entry {
  PrimitiveKind kind = PrimitiveKind::Send;
  int32_t tb = 0;      // global TB index
  int32_t peer = 0;
  int32_t op = 0;
  int32_t count = 1;
  int32_t pair = -1;   // send <-> its receive (global entry ids)
  int32_t buffer = -1; // credit buffer of the connection (send and receive)
  int32_t path = -1;   // send: index into paths
  int64_t depBegin = 0;
  int64_t depEnd = 0;
};

struct PathInfo {
  std::vector<int32_t> resources;
  double latencyUs = 0;
  double capGBps = 0;
};

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

struct Buffer {
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
  // Checks the plan against the network and the options, then builds every table the run reads.
  void build();
  // Throws when the plan's ranks disagree with the network's or the message size is negative.
  void checkPlanFitsTopology() const;
  // Sets the protocol's costs, the chunk and micro-batch sizes and the launch latency.
  void sizeMicroBatches();
  // Flattens (replica, rank, TB, entry) into global entries and TBs; returns each TB's first entry.
  std::vector<std::vector<int32_t>> flattenEntries();
  // Ends a group of entries replayed per micro-batch where the plan's execution level cuts the TB.
  void cutGroups(const PlanRank& rank, const PlanTb& planTb, Tb& tb) const;
  // (replica, rank, op) -> the global id of its receive.
  using ReceiveIndex = std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t>;
  // Resolves every entry's deps (same rank, same replica) to global ids; returns the receives.
  ReceiveIndex linkDependencies(const std::vector<std::vector<int32_t>>& tbBase);
  // Pairs every send with its receive, giving each connection a credit buffer and a path.
  void pairSends(const ReceiveIndex& receiveOf);
  // The resources, latency and rate cap of the path from rank to peer.
  PathInfo pathInfo(int32_t rank, int32_t peer) const;
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
  std::vector<std::vector<std::vector<bool>>> split_;  // per rank, TB, entry: a fused entry's receive
  std::optional<Plan> unfused_;
  const Plan& plan_;
  const Network& topology_;
  const SimOptions& options_;
  Protocol protocol_ = Protocol::Simple;
  double syncUs_ = 0;
  double localGBps_ = 0;

  std::vector<Entry> entries_;
  std::vector<int32_t> deps_;
  std::vector<Tb> tbs_;
  std::vector<PathInfo> paths_;
  std::vector<Buffer> buffers_;
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

void Engine::checkPlanFitsTopology() const {
  if (plan_.nRanks != topology_.nRanks()) {
    throw std::invalid_argument("the plan has " + std::to_string(plan_.nRanks) + " ranks but the topology has " +
                                std::to_string(topology_.nRanks()) + " GPUs");
  }
  if (static_cast<int32_t>(plan_.ranks.size()) != plan_.nRanks)
    throw std::invalid_argument("the plan lists " + std::to_string(plan_.ranks.size()) + " ranks, not nRanks");
  if (options_.messageBytes < 0) throw std::invalid_argument("the message size must not be negative");
}

void Engine::sizeMicroBatches() {
  const CostModel& cost = options_.cost;
  protocol_ = plan_.config.protocol;
  syncUs_ = cost.syncOverheadUs;
  localGBps_ = cost.localGBps > 0 ? cost.localGBps : tbCapGBps(cost, protocol_, plan_.config.nThreads, false);
  const int32_t chunks = std::max({1, plan_.bufferChunks[0], plan_.bufferChunks[1]});
  if (plan_.config.chunkSize <= 0) throw std::invalid_argument("config.chunkSize must be positive");

  result_.messageBytes = options_.messageBytes;
  result_.chunkBytes = static_cast<double>(options_.messageBytes) / chunks / replicas();
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
}

std::vector<std::vector<int32_t>> Engine::flattenEntries() {
  std::vector<std::vector<int32_t>> tbBase(replicas() * plan_.nRanks);  // first global entry of each TB
  for (int32_t c = 0; c < replicas(); ++c) {
    for (const PlanRank& rank : plan_.ranks) {
      auto& bases = tbBase[c * plan_.nRanks + rank.rank];
      for (const PlanTb& planTb : rank.tbs) {
        bases.push_back(static_cast<int32_t>(entries_.size()));
        Tb tb;
        tb.entryBegin = static_cast<int32_t>(entries_.size());
        result_.tbs.push_back(SimTb{c, rank.rank, planTb.id});
        for (const PlanEntry& planEntry : planTb.entries) {
          Entry entry;
          entry.kind = planEntry.kind;
          entry.tb = static_cast<int32_t>(tbs_.size());
          entry.peer = planEntry.peer;
          entry.op = planEntry.op;
          entry.count = planEntry.count;
          entries_.push_back(entry);
        }
        tb.entryEnd = static_cast<int32_t>(entries_.size());
        cutGroups(rank, planTb, tb);
        tb.groupBegin = tb.entryBegin;
        if (tb.entryBegin == tb.entryEnd) tb.done = true;
        tbs_.push_back(std::move(tb));
      }
    }
  }
  return tbBase;
}

void Engine::cutGroups(const PlanRank& rank, const PlanTb& planTb, Tb& tb) const {
  for (size_t e = 0; e < planTb.entries.size(); ++e) {
    const bool last = e + 1 == planTb.entries.size();
    bool cut = true;
    if (!last && plan_.executionLevel == ExecutionLevel::Algorithm) cut = false;
    if (!last && plan_.executionLevel == ExecutionLevel::Stage)
      cut = planTb.entries[e].subPipeline != planTb.entries[e + 1].subPipeline;
    if (!split_.empty() && split_[rank.rank][&planTb - rank.tbs.data()][e]) cut = false;
    if (cut) tb.groupEnd.push_back(tb.entryBegin + static_cast<int32_t>(e) + 1);
  }
}

Engine::ReceiveIndex Engine::linkDependencies(const std::vector<std::vector<int32_t>>& tbBase) {
  ReceiveIndex receiveOf;
  for (int32_t c = 0; c < replicas(); ++c) {
    for (const PlanRank& rank : plan_.ranks) {
      const auto& bases = tbBase[c * plan_.nRanks + rank.rank];
      for (size_t t = 0; t < rank.tbs.size(); ++t) {
        for (size_t e = 0; e < rank.tbs[t].entries.size(); ++e) {
          const PlanEntry& planEntry = rank.tbs[t].entries[e];
          Entry& entry = entries_[bases[t] + e];
          entry.depBegin = static_cast<int64_t>(deps_.size());
          for (const EntryRef& dep : planEntry.deps) {
            if (dep.tb < 0 || dep.tb >= static_cast<int32_t>(rank.tbs.size()) || dep.entry < 0 ||
                dep.entry >= static_cast<int32_t>(rank.tbs[dep.tb].entries.size()))
              throw std::invalid_argument("rank " + std::to_string(rank.rank) + " has a dependency out of range");
            deps_.push_back(bases[dep.tb] + dep.entry);
          }
          entry.depEnd = static_cast<int64_t>(deps_.size());
          if (isReceive(planEntry.kind)) receiveOf[{c, rank.rank, planEntry.op}] = bases[t] + static_cast<int32_t>(e);
        }
      }
    }
  }
  return receiveOf;
}

void Engine::pairSends(const ReceiveIndex& receiveOf) {
  std::map<std::pair<int32_t, int32_t>, int32_t> pathOf;
  std::map<std::pair<int32_t, int32_t>, int32_t> bufferOf;  // (send TB, recv TB) -> buffer
  for (int32_t id = 0; id < static_cast<int32_t>(entries_.size()); ++id) {
    Entry& entry = entries_[id];
    if (entry.kind != PrimitiveKind::Send) continue;
    const SimTb& tb = result_.tbs[entry.tb];
    auto it = receiveOf.find({tb.replica, entry.peer, entry.op});
    if (it == receiveOf.end())
      throw std::invalid_argument("rank " + std::to_string(tb.rank) + " sends op " + std::to_string(entry.op) +
                                  " to rank " + std::to_string(entry.peer) + ", which has no matching receive");
    entry.pair = it->second;
    entries_[entry.pair].pair = id;
    auto [bufferIt, added] = bufferOf.try_emplace({entry.tb, entries_[entry.pair].tb}, static_cast<int32_t>(buffers_.size()));
    if (added) buffers_.emplace_back();
    entry.buffer = entries_[entry.pair].buffer = bufferIt->second;
    auto [pathIt, newPath] = pathOf.try_emplace({tb.rank, entry.peer}, static_cast<int32_t>(paths_.size()));
    if (newPath) paths_.push_back(pathInfo(tb.rank, entry.peer));
    entry.path = pathIt->second;
  }
  for (const Entry& entry : entries_) {
    if (isReceive(entry.kind) && entry.pair < 0)
      throw std::invalid_argument("a receive of op " + std::to_string(entry.op) + " has no matching send");
  }
}

PathInfo Engine::pathInfo(int32_t rank, int32_t peer) const {
  const NetworkPath& path = topology_.path(rank, peer);
  PathInfo info;
  info.resources = path.resources;
  info.latencyUs = path.alphaUs + options_.cost.protocol(protocol_).hopLatencyUs[static_cast<int>(path.hop)];
  // A flow never outruns its narrowest resource; keeping caps finite keeps Eq. 1's z finite.
  double narrowest = std::numeric_limits<double>::infinity();
  for (int32_t r : path.resources) narrowest = std::min(narrowest, topology_.resources()[r].capacityGBps);
  info.capGBps = std::min(tbCapGBps(options_.cost, protocol_, plan_.config.nThreads, path.network), narrowest);
  return info;
}

void Engine::build() {
  checkPlanFitsTopology();
  sizeMicroBatches();
  const std::vector<std::vector<int32_t>> tbBase = flattenEntries();
  pairSends(linkDependencies(tbBase));
  completed_.assign(entries_.size(), 0);
  arrived_.assign(entries_.size(), 0);
  waitOnEntry_.resize(entries_.size());
  waitOnArrival_.resize(entries_.size());
  result_.rankEndUs.assign(plan_.nRanks, result_.launchUs);
}

void Engine::tryRun(int32_t tbIndex) {
  Tb& tb = tbs_[tbIndex];
  if (tb.busy || tb.done) return;
  const int32_t id = tb.entry();
  const Entry& entry = entries_[id];
  const int32_t slice = tb.slice;
  for (int64_t d = entry.depBegin; d < entry.depEnd; ++d) {
    if (completed_[deps_[d]] <= slice) {
      waitOnEntry_[deps_[d]].push_back(tbIndex);
      return;
    }
  }
  if (isReceive(entry.kind) && arrived_[id] <= slice) {
    waitOnArrival_[id].push_back(tbIndex);
    return;
  }
  if (entry.kind == PrimitiveKind::Send) {
    Buffer& buffer = buffers_[entry.buffer];
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
  const Entry& entry = entries_[tbs_[tbIndex].entry()];
  const PathInfo& path = paths_[entry.path];
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
  const Entry& entry = entries_[id];
  SimTb& stats = result_.tbs[tbIndex];
  stats.busyUs += nowUs_ - tb.activityStartUs;
  stats.lastUs = nowUs_;
  if (options_.recordTrace) {
    if (static_cast<int64_t>(result_.trace.size()) < options_.maxTraceSpans) {
      result_.trace.push_back(
          TraceSpan{tbIndex, -1, tb.activityStartUs, nowUs_, entry.kind, entry.peer, entry.op, tb.slice});
    } else {
      result_.traceTruncated = true;
    }
  }
  ++completed_[id];
  wake(waitOnEntry_[id]);
  if (entry.kind == PrimitiveKind::Send) {
    push(nowUs_ + paths_[entry.path].latencyUs, EventKind::Arrival, entry.pair);
  } else if (isReceive(entry.kind)) {
    Buffer& buffer = buffers_[entry.buffer];
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
    const Entry& entry = entries_[tb.entry()];
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
    Engine engine(plan, network, options);
    return engine.run();
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidArgument, error.what());
  } catch (const std::runtime_error& error) {
    return makeError(ErrorCode::InvalidInput, error.what());
  }
}

}  // namespace tuccl
