#include "sim/fair_share.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tuccl {

namespace {
constexpr double kBytesPerUsPerGBps = 1e3;  // 1 GB/s = 1e9 B / 1e6 µs
constexpr double kRelativeTolerance = 1e-12;
}  // namespace

FlowNetwork::FlowNetwork(std::vector<double> capacitiesGBps, std::function<double(double)> contention)
    : contention_(std::move(contention)) {
  resources_.resize(capacitiesGBps.size());
  stats_.resize(capacitiesGBps.size());
  for (size_t r = 0; r < capacitiesGBps.size(); ++r) {
    if (!(capacitiesGBps[r] > 0)) throw std::invalid_argument("FlowNetwork: every capacity must be positive");
    resources_[r].capacity = capacitiesGBps[r];
  }
  if (!contention_) contention_ = [](double) { return 1.0; };
}

bool FlowNetwork::uncontended(const Resource& resource) const {
  return resource.capSum <= resource.capacity * (1 + kRelativeTolerance);
}

void FlowNetwork::markDirty(int32_t r) {
  Resource& resource = resources_[r];
  if (resource.dirty == kClean) dirty_.push_back(r);
  if (!uncontended(resource)) {
    resource.dirty = kTouchedContended;
  } else if (resource.dirty == kClean) {
    resource.dirty = kTouchedUncontended;
  }
}

void FlowNetwork::advance(Flow& flow, double nowUs) {
  if (nowUs > flow.lastUs) {
    flow.remaining = std::max(0.0, flow.remaining - flow.rate * kBytesPerUsPerGBps * (nowUs - flow.lastUs));
    flow.lastUs = nowUs;
  }
}

int32_t FlowNetwork::start(double nowUs, std::span<const int32_t> resources, double bytes, double capGBps,
                           int32_t copies) {
  if (!(capGBps > 0)) throw std::invalid_argument("FlowNetwork: a flow's cap must be positive");
  if (copies < 1) throw std::invalid_argument("FlowNetwork: a flow stands for at least one copy");
  int32_t id;
  if (!freeIds_.empty()) {
    id = freeIds_.back();
    freeIds_.pop_back();
  } else {
    id = static_cast<int32_t>(flows_.size());
    flows_.emplace_back();
    flowMark_.push_back(0);
  }
  Flow& flow = flows_[id];
  flow.resources.assign(resources.begin(), resources.end());
  flow.slot.resize(resources.size());
  flow.remaining = flow.total = std::max(0.0, bytes);
  flow.cap = capGBps;
  flow.rate = 0;
  flow.lastUs = nowUs;
  flow.copies = copies;
  flow.alive = true;
  flow.fresh = true;
  for (size_t i = 0; i < resources.size(); ++i) {
    const int32_t r = resources[i];
    Resource& resource = resources_[r];
    markDirty(r);
    if (resource.flows.empty()) {
      resource.busySince = nowUs;
      if (stats_[r].firstUs < 0) stats_[r].firstUs = nowUs;
    }
    flow.slot[i] = static_cast<int32_t>(resource.flows.size());
    resource.flows.push_back(id);
    resource.copies += copies;
    resource.capSum += capGBps * copies;
  }
  freshFlows_.push_back(id);
  ++active_;
  return id;
}

void FlowNetwork::finish(int32_t id, double nowUs) {
  Flow& flow = flows_[id];
  if (!flow.alive) throw std::logic_error("FlowNetwork::finish: flow is not active");
  for (size_t i = 0; i < flow.resources.size(); ++i) {
    const int32_t r = flow.resources[i];
    Resource& resource = resources_[r];
    markDirty(r);  // before the change: were its other flows held back by it?
    const int32_t slot = flow.slot[i];
    const int32_t moved = resource.flows.back();
    resource.flows[slot] = moved;
    resource.flows.pop_back();
    if (moved != id) {
      Flow& other = flows_[moved];
      for (size_t k = 0; k < other.resources.size(); ++k) {
        if (other.resources[k] == r) {
          other.slot[k] = slot;
          break;
        }
      }
    }
    resource.capSum -= flow.cap * flow.copies;
    resource.copies -= flow.copies;
    if (resource.flows.empty()) {
      resource.capSum = 0;  // no drift
      stats_[r].busyUs += nowUs - resource.busySince;
      stats_[r].lastUs = nowUs;
      if (onBusyInterval) onBusyInterval(r, resource.busySince, nowUs);
    }
    stats_[r].bytes += flow.total * flow.copies;
  }
  flow.alive = false;
  flow.fresh = false;
  freeIds_.push_back(id);
  --active_;
}

void FlowNetwork::collectComponent(std::vector<int32_t>& flows, std::vector<int32_t>& resources) {
  // Breadth-first over resource -> flows -> resources, from every dirty resource; `resources`
  // doubles as the queue (a resource is appended once, when first visited).
  for (int32_t r : dirty_) {
    if (resources_[r].visited) continue;
    resources_[r].visited = true;
    resources.push_back(r);
  }
  for (size_t head = 0; head < resources.size(); ++head) {
    const int32_t r = resources[head];
    for (int32_t f : resources_[r].flows) {
      if (flowMark_[f]) continue;
      flowMark_[f] = 1;
      flows.push_back(f);
      for (int32_t other : flows_[f].resources) {
        if (resources_[other].visited) continue;
        resources_[other].visited = true;
        resources.push_back(other);
      }
    }
  }
  for (int32_t f : flows) flowMark_[f] = 0;
}

void FlowNetwork::fill(const std::vector<int32_t>& flows, const std::vector<int32_t>& resources) {
  // Progressive filling: every unfrozen flow sits at the same level; raise it until a flow's cap or
  // a resource's remaining capacity (shared by its unfrozen copies) stops it.
  std::vector<Scratch>& scratch = scratch_;
  scratch.resize(resources.size());
  for (size_t i = 0; i < resources.size(); ++i) {
    Resource& resource = resources_[resources[i]];
    const double z = resource.capSum / resource.capacity;
    scratch[i] = {resource.capacity * contention_(z), resource.copies, false};
    resource.position = static_cast<int32_t>(i);
  }
  auto position = [&](int32_t r) { return static_cast<size_t>(resources_[r].position); };
  std::vector<int32_t>& unfrozen = unfrozen_;
  unfrozen.assign(flows.begin(), flows.end());
  for (int32_t f : flows) flows_[f].frozen = false;
  std::vector<int32_t>& next = next_;
  std::vector<int32_t>& frozenNow = frozenNow_;
  while (!unfrozen.empty()) {
    double level = std::numeric_limits<double>::infinity();
    for (const Scratch& s : scratch) {
      if (s.unfrozen > 0) level = std::min(level, std::max(0.0, s.remaining) / static_cast<double>(s.unfrozen));
    }
    for (int32_t f : unfrozen) level = std::min(level, flows_[f].cap);
    const double threshold = level * (1 + 1e-9);
    for (Scratch& s : scratch)
      s.saturated = s.unfrozen > 0 && std::max(0.0, s.remaining) / static_cast<double>(s.unfrozen) <= threshold;
    next.clear();
    frozenNow.clear();
    for (int32_t f : unfrozen) {
      Flow& flow = flows_[f];
      bool stop = flow.cap <= threshold;
      for (size_t k = 0; !stop && k < flow.resources.size(); ++k) stop = scratch[position(flow.resources[k])].saturated;
      if (stop) {
        flow.rate = level;
        flow.frozen = true;
        frozenNow.push_back(f);
      } else {
        next.push_back(f);
      }
    }
    for (int32_t f : frozenNow) {
      const Flow& flow = flows_[f];
      // One copy subtracts `level` exactly as a lone flow does; k copies take k shares.
      const double taken = flow.copies == 1 ? level : level * flow.copies;
      for (int32_t r : flow.resources) {
        Scratch& s = scratch[position(r)];
        s.remaining -= taken;
        s.unfrozen -= flow.copies;
      }
    }
    unfrozen.swap(next);
  }
}

const std::vector<FlowNetwork::Change>& FlowNetwork::settle(double nowUs) {
  std::vector<Change>& changes = changes_;
  changes.clear();
  if (dirty_.empty() && freshFlows_.empty()) return changes;
  bool fast = true;
  for (int32_t r : dirty_) {
    if (resources_[r].dirty == kTouchedContended || !uncontended(resources_[r])) {
      fast = false;
      break;
    }
  }
  if (fast) {
    // Every touched resource is uncontended before and after: only the new flows get a rate, their
    // cap unless a bottleneck elsewhere on their path (a resource not touched) holds them lower.
    for (int32_t f : freshFlows_) {
      Flow& flow = flows_[f];
      if (!flow.alive) continue;
      flow.rate = flow.cap;
      flow.fresh = false;
      changes.push_back({f, nowUs + flow.remaining / (flow.rate * kBytesPerUsPerGBps)});
    }
  } else {
    std::vector<int32_t>& flows = componentFlows_;
    std::vector<int32_t>& resources = componentResources_;
    flows.clear();
    resources.clear();
    collectComponent(flows, resources);
    std::vector<double>& before = before_;
    before.resize(flows.size());
    for (size_t i = 0; i < flows.size(); ++i) {
      Flow& flow = flows_[flows[i]];
      advance(flow, nowUs);
      before[i] = flow.rate;
    }
    fill(flows, resources);
    for (size_t i = 0; i < flows.size(); ++i) {
      Flow& flow = flows_[flows[i]];
      if (flow.fresh || std::abs(flow.rate - before[i]) > kRelativeTolerance * std::max(flow.rate, before[i])) {
        flow.fresh = false;
        changes.push_back({flows[i], nowUs + flow.remaining / (flow.rate * kBytesPerUsPerGBps)});
      }
    }
    for (int32_t r : resources) resources_[r].visited = false;
  }
  for (int32_t r : dirty_) resources_[r].dirty = kClean;
  dirty_.clear();
  freshFlows_.clear();
  return changes;
}

std::vector<double> maxMinFairRates(std::span<const double> capacities, std::span<const std::vector<int32_t>> flowResources,
                                    std::span<const double> caps, const std::function<double(double)>& contention) {
  if (flowResources.size() != caps.size()) throw std::invalid_argument("fair sharing needs one rate cap per flow");
  FlowNetwork network(std::vector<double>(capacities.begin(), capacities.end()), contention);
  constexpr double kLargeBytes = 1e30;
  std::vector<int32_t> ids;
  for (size_t f = 0; f < caps.size(); ++f) ids.push_back(network.start(0, flowResources[f], kLargeBytes, caps[f]));
  network.settle(0);
  std::vector<double> rates;
  for (int32_t id : ids) rates.push_back(network.rateGBps(id));
  return rates;
}

}  // namespace tuccl
