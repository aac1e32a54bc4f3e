// Fluid flows sharing resources: max-min fair rates by progressive filling (water-filling).
//
// In:  resource capacities (GB/s) and flows, each a set of resources, a volume in bytes and a
//      per-flow rate cap (the TB's ceiling).
// Out: every flow's rate and finish time; per resource the bytes carried and the time busy.
//
// Units: bytes and µs; a rate in GB/s is 1e3 bytes per µs.
//
// Max-min fairness with caps: all unfrozen flows rise together; a flow freezes when it reaches
// its cap or when a resource on its path fills (its remaining capacity divided among its unfrozen
// flows is the smallest level). Each resource's capacity is first scaled by the contention factor
// of ResCCL Eq. 1 (cost_model.h), computed from z = (sum of the caps of its flows) / capacity.
//
// Rates change only when a flow starts or finishes, and only for flows connected to it through
// shared resources. FlowNetwork keeps the flows of a resource, marks the resources touched since
// the last settle() and recomputes only their connected component; a fast path skips even that
// when every touched resource is uncontended (the sum of its flows' caps fits its capacity, so
// every flow there runs at its cap or at a bottleneck elsewhere that did not change).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tuccl {

/// One-shot max-min fair allocation (progressive filling with per-flow caps and Eq. 1 contention):
/// flow f uses resources flowResources[f] and may not exceed caps[f] (positive; pass a resource's
/// capacity for "uncapped"). Rates in the capacities' unit. `contention(z)` scales a resource's capacity (return 1 for none).
std::vector<double> maxMinFairRates(std::span<const double> capacities,
                                    std::span<const std::vector<int32_t>> flowResources, std::span<const double> caps,
                                    const std::function<double(double)>& contention);

class FlowNetwork {
 public:
  struct Change {
    int32_t flow;
    double finishUs;
  };

  /// capacities in GB/s; `contention(z)` as above.
  FlowNetwork(std::vector<double> capacitiesGBps, std::function<double(double)> contention);

  /// Starts a flow of `bytes` over `resources` (deduplicated by the caller) at `nowUs`, capped at
  /// `capGBps`. Its rate is set by the next settle(). Returns its id (ids are reused).
  /// `copies` > 1 stands for that many identical flows (same resources, bytes, cap, start): they
  /// always get the same rate, so one flow of multiplicity k takes k shares of each resource, k
  /// caps in Eq. 1's z and carries k times its bytes. With copies 1 the arithmetic is that of one flow.
  int32_t start(double nowUs, std::span<const int32_t> resources, double bytes, double capGBps, int32_t copies = 1);
  /// Removes a finished flow (its bytes are credited to its resources).
  void finish(int32_t flow, double nowUs);
  /// Recomputes the rates changed since the last call; returns the flows whose finish time changed
  /// (including every flow started since), with their new finish times (valid until the next call).
  const std::vector<Change>& settle(double nowUs);

  double rateGBps(int32_t flow) const { return flows_[flow].rate; }
  int32_t activeFlows() const { return active_; }

  /// Per resource: bytes carried, time with at least one flow, first and last activity.
  struct ResourceStats {
    double bytes = 0;
    double busyUs = 0;
    double firstUs = -1;
    double lastUs = -1;
  };
  const std::vector<ResourceStats>& stats() const { return stats_; }
  /// Called with (resource, beginUs, endUs) for every busy interval when set (for the trace).
  std::function<void(int32_t, double, double)> onBusyInterval;

 private:
  struct Flow {
    std::vector<int32_t> resources;
    std::vector<int32_t> slot;  // position in each resource's flow list
    double remaining = 0;       // bytes
    double total = 0;
    double cap = 0;             // GB/s
    double rate = 0;            // GB/s
    double lastUs = 0;
    int32_t copies = 1;         // identical flows this one stands for
    bool alive = false;
    bool fresh = false;
    bool frozen = false;
  };
  enum DirtyState : uint8_t { kClean, kTouchedUncontended, kTouchedContended };
  struct Resource {
    double capacity = 0;
    std::vector<int32_t> flows;
    int64_t copies = 0;  // sum of the flows' copies
    double capSum = 0;
    double busySince = -1;
    DirtyState dirty = kClean;
    bool visited = false;
    int32_t position = 0;
  };
  bool uncontended(const Resource& resource) const;
  void markDirty(int32_t resource);
  void collectComponent(std::vector<int32_t>& flows, std::vector<int32_t>& resources);
  void fill(const std::vector<int32_t>& flows, const std::vector<int32_t>& resources);
  void advance(Flow& flow, double nowUs);

  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<int32_t> freeIds_;
  std::vector<ResourceStats> stats_;
  std::function<double(double)> contention_;
  std::vector<int32_t> dirty_;       // resources touched since the last settle
  std::vector<int32_t> freshFlows_;  // flows started since the last settle
  std::vector<char> flowMark_;
  int32_t active_ = 0;
  // Scratch of settle() and fill(), kept to avoid an allocation per event.
  struct Scratch {
    double remaining;
    int64_t unfrozen;
    bool saturated;
  };
  std::vector<Change> changes_;
  std::vector<int32_t> componentFlows_;
  std::vector<int32_t> componentResources_;
  std::vector<double> before_;
  std::vector<Scratch> scratch_;
  std::vector<int32_t> unfrozen_;
  std::vector<int32_t> next_;
  std::vector<int32_t> frozenNow_;
};

}  // namespace tuccl
