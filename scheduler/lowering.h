// Primitive lowering: an algorithm's pipeline and TB allocation become a Plan (plan/plan.h).
//
// In:  an Algorithm, its Dag, a Pipeline and a TbAllocation.
// Out: a Plan: for every rank its TBs, each an ordered list of primitive entries (ResCCL §4.5:
//      rank dimension, TB dimension, pipeline dimension), with the algorithm's root and the
//      source location of every entry's operation.
#pragma once

#include <vector>

#include "lang/algorithm.h"
#include "plan/plan.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"

namespace tuccl {

/// Task-to-primitive translation (ResCCL §4.3): each remote task becomes a send in its source
/// rank's TB for that connection and a recv (copy) or recvReduceCopy (reduce) in its destination
/// rank's TB; a local task a copy or reduce. Entries of a TB follow the pipeline order, so each
/// connection's sends and receives pair up in order. With TbPolicy::Single and config.sendAhead
/// > 0, each TB runs its entries step by step instead, a step's sends before its receives (a rank
/// posts everything it can before it waits: fewer hand-offs between ranks sharing cores); when
/// that order would break a dependency, the pipeline's order is kept and sendAhead becomes 0.
///
/// With `fuse`, a receive whose result its rank sends on next (the send reads exactly the slots
/// the receive wrote, and nothing else wrote them between) becomes one fused entry —
/// recvCopySend, recvReduceCopySend, or recvReduceSend where nothing but that send ever reads the
/// stored value — so the slice is read once (NCCL's ring primitives; fuseForwarding). The TBs of
/// the two connections merge into one. Where the fused plan would not be deadlock free
/// (checkPlanDeadlockFree), or its order is the buffered single-TB one above, the plan stays
/// unfused. A fused plan that is deadlock free only when its TBs replay their entries per
/// micro-batch (a ring) gets executionLevel algorithm; rings of fused plans need two slots
/// (minStagingSlots, plan.h).
Plan lowerToPlan(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, const TbAllocation& allocation,
                 const PlanConfig& config = {}, bool fuse = false);

/// Where a task's share on one rank landed in a plan (rank -1: it has none there).
struct PlacedEntry {
  int32_t rank = -1;
  EntryRef ref;
};

/// The plan's `deps` and `hasDependents`: a DAG edge p -> t becomes, on every rank where the two
/// tasks touch a common slot, a dependency of t's entry there on p's entry there, unless both are
/// in one TB (which runs its entries in order). sendSide / recvSide: per task, its send entry and
/// its receive (or local) entry.
void addDataDependencies(const Algorithm& algorithm, const Dag& dag, const std::vector<PlacedEntry>& sendSide,
                         const std::vector<PlacedEntry>& recvSide, Plan& plan);

/// Each TB's sendPeer / recvPeer from its entries: -1 none, -2 several.
void setTbPeers(Plan& plan);

/// A plan carrying the algorithm's identity (collective, name, source, ranks, root, buffers,
/// in-place) and `config`; schedule, TBs and ranks are the caller's to fill.
Plan planFromAlgorithm(const Algorithm& algorithm, const PlanConfig& config);

}  // namespace tuccl
