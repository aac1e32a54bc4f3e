// Where a plan's chunks live: the collective's chunk unit and the in-place storage mapping, over
// the plan's own fields (NCCL's conventions, support/buffer_layout.h).
//
// In:  a Plan.
// Out: its chunk unit k, and the storage slot of (rank, buffer, index).
#pragma once

#include <cstdint>

#include "plan/plan.h"
#include "support/buffer_layout.h"

namespace tuccl {

/// The chunk unit k of the plan's collective (collectiveChunkUnit): AllGather's input,
/// ReduceScatter's output, AllToAll's input over the ranks, the whole input otherwise.
int32_t planChunkUnit(const Plan& plan);

/// Where chunk `index` of `buffer` on `rank` lives: the one in-place storage of plan.inPlace
/// plans (inPlaceSlot), the buffer itself otherwise.
StorageSlot planStorage(const Plan& plan, int32_t rank, BufferKind buffer, int32_t index);

}  // namespace tuccl
