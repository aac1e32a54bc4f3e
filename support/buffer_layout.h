// NCCL's buffer conventions of each collective, shared by the algorithm IR (lang/) and the plan
// (plan/): the chunk unit of a collective and where an in-place call keeps every chunk.
//
// In:  a collective, its ranks and the sizes of its buffers in chunks.
// Out: the chunk unit k, and the storage slot of (rank, buffer, index) in an in-place call.
#pragma once

#include <array>
#include <cstdint>

#include "support/vocabulary.h"

namespace tuccl {

/// One chunk of one of a rank's buffers.
struct StorageSlot {
  BufferKind buffer;
  int32_t index;
};

/// The collective's chunk unit k: AllGather's input, ReduceScatter's output, AllToAll's input
/// divided by the ranks, and the whole input of the others.
int32_t collectiveChunkUnit(Collective collective, int32_t nRanks, const std::array<int32_t, kBufferKinds>& bufferChunks);

/// Where chunk `index` of `buffer` on `rank` lives when input and output are views of one buffer
/// (NCCL's in-place layout), for a collective of chunk unit k: in-place AllGather's input is chunk
/// block `rank` of the output, in-place ReduceScatter's output is chunk block `rank` of the input,
/// every other collective shares indices. The one storage is Output for AllGather, Input for
/// ReduceScatter, Output otherwise; scratch stays scratch.
StorageSlot inPlaceSlot(Collective collective, int32_t chunkUnit, int32_t rank, BufferKind buffer, int32_t index);

}  // namespace tuccl
