#include "plan/plan_storage.h"

namespace tuccl {

int32_t planChunkUnit(const Plan& plan) { return collectiveChunkUnit(plan.collective, plan.nRanks, plan.bufferChunks); }

StorageSlot planStorage(const Plan& plan, int32_t rank, BufferKind buffer, int32_t index) {
  if (!plan.inPlace) return {buffer, index};
  return inPlaceSlot(plan.collective, planChunkUnit(plan), rank, buffer, index);
}

}  // namespace tuccl
