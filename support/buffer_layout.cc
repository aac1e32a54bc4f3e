#include "support/buffer_layout.h"

namespace tuccl {

int32_t collectiveChunkUnit(Collective collective, int32_t nRanks, const std::array<int32_t, kBufferKinds>& bufferChunks) {
  const int32_t input = bufferChunks[static_cast<int>(BufferKind::Input)];
  switch (collective) {
    case Collective::AllGather:
      return input;
    case Collective::ReduceScatter:
      return bufferChunks[static_cast<int>(BufferKind::Output)];
    case Collective::AllToAll:
      return nRanks > 0 ? input / nRanks : 0;
    default:
      return input;
  }
}

StorageSlot inPlaceSlot(Collective collective, int32_t chunkUnit, int32_t rank, BufferKind buffer, int32_t index) {
  if (buffer == BufferKind::Scratch) return {buffer, index};
  switch (collective) {
    case Collective::AllGather:
      if (buffer == BufferKind::Input) return {BufferKind::Output, rank * chunkUnit + index};
      return {BufferKind::Output, index};
    case Collective::ReduceScatter:
      if (buffer == BufferKind::Output) return {BufferKind::Input, rank * chunkUnit + index};
      return {BufferKind::Input, index};
    default:
      return {BufferKind::Output, index};
  }
}

}  // namespace tuccl
