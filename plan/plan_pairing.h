// Send/receive pairing (docs/plan-format.md, "Pairing"): for a directed pair of ranks (a -> b),
// the sends of a to b and the receives of b from a pair one to one, the k-th with the k-th, both
// ordered by (subPipeline, op); a fused entry is a receive of its own task and a send of its
// `next` task (PlanEntry::Next), each in its own connection. The validator, the static checks, the kernel layout and the
// simulator's readers all pair this way.
//
// In:  a Plan (its entries' peers in range).
// Out: every transfer: a send and the receive it pairs with.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

struct PlanTransfer {
  int32_t srcRank = 0;
  EntryRef send;
  int32_t dstRank = 0;
  EntryRef recv;
};

/// The transfers ordered by (srcRank, dstRank), then in pairing order. An error names the first
/// connection whose sends and receives are not equally many. Paired entries are not compared
/// (validatePlan checks they carry the same task).
Expected<std::vector<PlanTransfer>> pairTransfers(const Plan& plan);

}  // namespace tuccl
