// The structure both simulator engines run a plan on (simulator.h's execution semantics): the
// checks that the plan fits, the message cut into micro-batches, and every (replica, rank, TB,
// entry) laid out as one entry with a global id, its TB's entries cut into the groups replayed per
// micro-batch, its dependencies resolved to global ids, every send paired with its receive and
// every (send TB, receive TB) pair made one connection over one route.
//
// Structure only: what an entry costs and when it runs is each engine's own (simulator.cc, the
// engine; reference_simulator.cc, the straightforward loop), and that is what
// tests/sim/engine_equivalence_test.cc compares. Both report a plan that does not fit with the
// messages thrown here (std::invalid_argument), so their errors agree by construction.
//
// In:  a plan without fused entries (plan.h: unfusedPlan, with its marks of the receives split
//      from fused entries), the number of replicas (channels) to lay out.
// Out: PlanEvents.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"
#include "sim/simulator.h"

namespace tuccl {

/// Per rank, TB and entry of an unfused plan: whether the entry is the receive half of a split
/// fused entry (plan.h: unfusedPlan's splitReceives); empty for a plan that had none.
using SplitReceives = std::vector<std::vector<std::vector<bool>>>;

/// Throws std::invalid_argument when the plan's ranks disagree with a topology of `gpus` GPUs or
/// the message size is negative.
void checkPlanFits(const Plan& plan, int32_t gpus, const SimOptions& options);

/// The message cut as simulator.h says: per replica, into the plan's chunks, each chunk into
/// micro-batches (slices) of config.chunkSize bytes.
struct MessageCut {
  double chunkBytes = 0;  ///< per replica
  int32_t slices = 0;     ///< micro-batches per chunk
  double sliceBytes = 0;  ///< every micro-batch but the last, which may be shorter
};

/// Throws std::invalid_argument for a chunk size that is not positive or that makes more than
/// kMaxSimulatedSlices micro-batches (naming the smallest chunk size that fits).
MessageCut cutMessage(const Plan& plan, int64_t messageBytes);

/// One entry of one TB of one replica.
struct EventEntry {
  int64_t depBegin = 0;     ///< its dependencies: PlanEvents::deps[depBegin, depBegin + depCount)
  int32_t depCount = 0;
  int32_t tb = 0;           ///< index into PlanEvents::tbs
  int32_t pair = -1;        ///< a send's receive, a receive's send
  int32_t connection = -1;  ///< a send's and its receive's: index into PlanEvents::connections
  int32_t count = 1;        ///< chunks per micro-batch
  int32_t groupEnd = 0;     ///< exclusive end of the group of entries replayed per micro-batch with it
  PrimitiveKind kind = PrimitiveKind::Send;
};

/// One TB of one replica: the entries [entryBegin, entryEnd).
struct EventTb {
  int32_t replica = 0;
  int32_t rank = 0;
  int32_t entryBegin = 0;
  int32_t entryEnd = 0;
  const PlanTb* plan = nullptr;  ///< into the plan the events were built from
};

/// A (send TB, receive TB) pair: its staging credits are one engine's, its path the route's.
struct EventConnection {
  int32_t sendTb = 0;
  int32_t recvTb = 0;
  int32_t route = 0;  ///< index into PlanEvents::routes
};

/// Where a connection's data goes: from `rank` to `peer`.
struct EventRoute {
  int32_t rank = 0;
  int32_t peer = 0;
};

/// Global ids run replica by replica, then rank by rank in plan order, TB by TB, entry by entry;
/// connections and routes are numbered in the order of the first send that uses them.
struct PlanEvents {
  std::vector<EventEntry> entries;
  std::vector<int32_t> deps;
  std::vector<EventTb> tbs;
  std::vector<EventConnection> connections;
  std::vector<EventRoute> routes;

  /// The plan's entry behind global entry `id` (its op and peer).
  const PlanEntry& planEntry(int32_t id) const {
    const EventTb& tb = tbs[entries[id].tb];
    return tb.plan->entries[id - tb.entryBegin];
  }
};

/// A route's path as both engines cost it: its resources, its latency (alpha plus the plan
/// protocol's per-hop latency) and the rate one flow can reach (the TB's cap for the protocol and
/// threads, never above the narrowest resource, which keeps Eq. 1's z finite).
struct PathInfo {
  std::vector<int32_t> resources;
  double latencyUs = 0;
  double capGBps = 0;
};
/// The path of every route of `events`, in route order.
std::vector<PathInfo> routePaths(const PlanEvents& events, const Network& network, const CostModel& cost,
                                 const Plan& plan);

/// Lays out `replicas` replicas of `plan` (checked with checkPlanFits). Throws
/// std::invalid_argument for too many entries, a dependency out of range, or a send or receive
/// without its match; a send meets the last receive of its op on its peer in the same replica.
PlanEvents buildPlanEvents(const Plan& plan, const SplitReceives& split, int32_t replicas);

}  // namespace tuccl
