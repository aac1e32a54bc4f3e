// Static checks of a plan, run before anything executes it (docs/plan-format.md, "Validity").
//
// In:  a Plan.
// Out: an ok Status, or an InvalidInput error naming the first problem (rank, TB, entry,
//      connection or field).
#pragma once

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// Structural and semantic check: the root of Broadcast and Reduce, the configuration's ranges,
/// ranks and TB ids in order, chunk ranges inside the buffers, dependency references,
/// hasDependents, send/recv pairing per connection (same task, same slots, same order) and freedom
/// from deadlock (checkPlanDeadlockFree).
Status validatePlan(const Plan& plan);

/// Static deadlock check: every TB runs its entries in order, an entry waits for its deps, and a
/// send and its recv run together (rendezvous, the strictest flow control) — or, with
/// config.sendAhead k > 0, a receive waits for its send and a send waits for the receive of the
/// chunk k places before its last on the connection (credits of a ring of k slots, one
/// micro-batch). The plan is deadlock free when this wait-for graph is acyclic. Assumes the
/// entries' references are in range (validatePlan checks them first).
Status checkPlanDeadlockFree(const Plan& plan);

/// Static race check: any two entries of one rank that touch a common storage chunk
/// (plan/plan_storage.h), at least one writing it, must be ordered per micro-batch by the plan — a
/// chain of TB order, `deps` and send -> paired receive. Returns the first unordered pair. Catches
/// a removed dependency before anything runs. Assumes a plan that passed validatePlan.
Status checkPlanRaceFree(const Plan& plan);

}  // namespace tuccl
