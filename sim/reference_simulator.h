// The reference engine: the straightforward discrete-event loop the simulator started with. Every
// (replica, rank, TB, entry) is its own state, every (send entry, micro-batch) its own fluid flow,
// and nothing is shared between replicas. simulatePlan (sim/simulator.h) must give the same
// results; the tests and bench_sim_scaling compare the two.
//
// In / out: as simulatePlan.
#pragma once

#include "sim/simulator.h"

namespace tuccl {

/// simulatePlan's semantics, run the straightforward way (slower, more memory at scale).
Expected<SimResult> simulatePlanReference(const Plan& plan, const Network& network, const SimOptions& options);

}  // namespace tuccl
