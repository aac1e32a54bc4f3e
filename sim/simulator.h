// Discrete-event simulation of a plan on a topology (design.md, "Simulator"; docs/simulator.md).
//
// In:  a Plan (plan/plan.h), the Network of a topology (sim/network.h; plan rank r runs on
//      GPU r), a message size and a CostModel (sim/cost_model.h).
// Out: a SimResult: completion time, per-TB busy time, per-resource traffic and, on request, the
//      timeline for the Chrome trace (sim/trace.h). Metrics and the lower bound: sim/metrics.h.
//
// Execution semantics, the runtime's (docs/plan-format.md):
//   - the message is cut into the plan's chunks (bytes / the larger of the input and output
//     buffer, in chunks), split over config.nChannels replicas of the plan (disjoint data, own
//     TBs), and every chunk into micro-batches (slices) of config.chunkSize bytes;
//   - each TB runs its entries in order. Task level: an entry runs all micro-batches before the
//     next. Algorithm level: the TB replays its whole entry list once per micro-batch. Stage level:
//     the same per block of consecutive entries of one sub-pipeline (stage);
//   - micro-batch i of an entry waits for micro-batch i of every entry it depends on; a receive
//     waits for its data to arrive; a send waits for a free staging slot at the receiver (credits:
//     stagingSlots() per connection, returned when the receive completes);
//   - a send keeps its TB busy for the sync overhead and then the transfer (a fluid flow over the
//     path's resources, max-min fair, sim/fair_share.h); the data arrives the path latency later;
//   - a receive costs the sync overhead (the sender wrote the final slot); recvReduceCopy, copy
//     and reduce also move their bytes at the TB's local rate.
//
// The engine simulates one replica for all nChannels (they run in lock step) unless a trace is
// recorded, and gives the results of the straightforward engine (sim/reference_simulator.h);
// docs/simulator.md, "The engine at scale", says what is bitwise equal and what may differ in the
// last bits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"
#include "sim/cost_model.h"
#include "sim/fair_share.h"
#include "sim/network.h"

namespace tuccl {

/// The most micro-batches per chunk a simulation takes (each is an event per plan entry); a
/// smaller chunk size for the message is refused with the smallest one that fits.
inline constexpr int64_t kMaxSimulatedSlices = 65'536;

struct SimOptions {
  int64_t messageBytes = 1 << 20;  ///< nccl-tests "size": AllGather's output, ReduceScatter's input
  CostModel cost = defaultCostModel();
  bool recordTrace = false;
  int64_t maxTraceSpans = 4'000'000;  ///< beyond this the trace is truncated (SimResult::traceTruncated)
};

/// One thread block of one replica (channel) of the plan.
struct SimTb {
  int32_t replica = 0;
  int32_t rank = 0;
  int32_t tb = 0;
  double busyUs = 0;    ///< time running primitives (sync overhead included)
  double firstUs = -1;  ///< first and last activity
  double lastUs = -1;
  int64_t invocations = 0;
};

/// A span of the timeline: a TB running one micro-batch of one entry, or a resource busy.
struct TraceSpan {
  int32_t tb = -1;        ///< index into SimResult::tbs, or -1 for a resource span
  int32_t resource = -1;  ///< Network resource id for a resource span
  double beginUs = 0;
  double endUs = 0;
  PrimitiveKind kind = PrimitiveKind::Send;
  int32_t peer = 0;
  int32_t op = 0;
  int32_t slice = 0;
};

struct SimResult {
  double timeUs = 0;  ///< completion of the last primitive, launch latency included
  int64_t messageBytes = 0;
  double chunkBytes = 0;  ///< per replica
  int32_t slices = 0;     ///< micro-batches per chunk
  double sliceBytes = 0;
  int32_t stagingSlots = 0;
  double launchUs = 0;
  int64_t transfers = 0;  ///< (send entry, micro-batch) flows, every replica's
  int64_t events = 0;     ///< events the engine processed (replicas simulated as one count once)
  std::vector<SimTb> tbs;
  std::vector<double> rankEndUs;                        ///< per rank: its kernel's last activity
  std::vector<FlowNetwork::ResourceStats> resources;  ///< indexed by Network resource id
  std::vector<TraceSpan> trace;
  bool traceTruncated = false;
};

/// Runs the plan. An InvalidArgument status when the plan does not fit the topology (rank count)
/// or is invalid, InvalidInput when the simulation deadlocks (which validatePlan rules out for
/// plans from the scheduler).
Expected<SimResult> simulatePlan(const Plan& plan, const Network& network, const SimOptions& options);

}  // namespace tuccl
