// Primitive lowering: an algorithm's pipeline and TB allocation become a Plan (plan/plan.h).
//
// In:  an Algorithm, its Dag, a Pipeline and a TbAllocation.
// Out: a Plan: for every rank its TBs, each an ordered list of primitive entries (ResCCL §4.5:
//      rank dimension, TB dimension, pipeline dimension), with the algorithm's root and the
//      source location of every entry's operation.
#pragma once

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
Plan lowerToPlan(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, const TbAllocation& allocation,
                 const PlanConfig& config = {});

}  // namespace tuccl
