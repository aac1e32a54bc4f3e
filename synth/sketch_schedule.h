// Ordering for sketch-guided synthesis (TACCL §5.2-5.3): routed chunks become steps.
//
// In:  routes of every commodity (synth/sketch_routing.h), where each commodity lives on each rank.
// Out: every route edge with its step; then, on the IR, operations of one step and link over
//      contiguous chunks merged into one operation of count > 1 (TACCL's chunk contiguity).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lang/algorithm.h"
#include "synth/sketch_routing.h"

namespace tuccl::sketch_synth {

/// One chunk slot of one rank's buffer.
struct Slot {
  BufferKind buffer = BufferKind::Output;
  int32_t index = 0;
  friend bool operator==(const Slot&, const Slot&) = default;
  friend auto operator<=>(const Slot&, const Slot&) = default;
};

/// A route edge of one commodity at its step.
struct ScheduledSend {
  int32_t commodity = 0;
  int32_t from = 0;
  int32_t to = 0;
  int32_t step = 0;
};

struct OrderingInput {
  const LogicalGraph* graph = nullptr;
  const std::vector<Route>* routes = nullptr;     ///< per commodity
  const std::vector<int32_t>* sources = nullptr;  ///< per commodity: the rank holding it at step 0
  /// Where a send of commodity c over (from, to) reads and writes; chunks whose slots both follow
  /// on from the chosen send's may ride with it in the same step.
  std::function<std::pair<Slot, Slot>(int32_t c, int32_t from, int32_t to)> endpoints;
  /// A rank sends one commodity to at most one child per step (so that the reversed schedule never
  /// has two reduces into one slot in a step).
  bool oneChildPerStep = false;
};

/// List scheduling: a send is ready the step after its chunk arrives; each step every logical edge
/// takes its ready send with the longest remaining path (cost of the edge plus the costliest path
/// below it; lower commodity first on ties), plus the ready sends contiguous with it.
std::vector<ScheduledSend> orderSends(const OrderingInput& input);

/// Merges operations of one step, one rank pair, one kind and buffers whose source and destination
/// indices both continue the previous one's; the result is sorted by step, then ranks and slots.
std::vector<Operation> mergeContiguous(std::vector<Operation> ops);

}  // namespace tuccl::sketch_synth
