#include "synth/exact_lowering.h"

#include <algorithm>

namespace tuccl {

namespace {

Operation operation(int32_t srcRank, ChunkSlot src, int32_t dstRank, ChunkSlot dst, int32_t step,
                    OpKind kind) {
  Operation op;
  op.srcRank = srcRank;
  op.srcBuffer = src.buffer;
  op.srcIndex = src.index;
  op.dstRank = dstRank;
  op.dstBuffer = dst.buffer;
  op.dstIndex = dst.index;
  op.step = step;
  op.kind = kind;
  return op;
}

// children[c][gpu]: whether some GPU receives chunk c from gpu in the forward schedule.
std::vector<std::vector<bool>> sendersOf(const Schedule& schedule) {
  std::vector<std::vector<bool>> sends;
  for (const auto& from : schedule.from) {
    std::vector<bool> row(from.size(), false);
    for (int32_t parent : from) {
      if (parent >= 0) row[parent] = true;
    }
    sends.push_back(std::move(row));
  }
  return sends;
}

}  // namespace

void dropDeadEnds(Schedule& schedule, const std::function<bool(int32_t chunk, int32_t gpu)>& needs) {
  for (size_t c = 0; c < schedule.from.size(); ++c) {
    auto& from = schedule.from[c];
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (size_t g = 0; g < from.size(); ++g) {
        const auto gpu = static_cast<int32_t>(g);
        if (from[g] < 0 || needs(static_cast<int32_t>(c), gpu)) continue;
        if (std::find(from.begin(), from.end(), gpu) != from.end()) continue;  // passes it on
        from[g] = -1;
        schedule.time[c][g] = -1;
        dropped = true;
      }
    }
  }
}

ChunkSlot ExactAlgorithmBuilder::scratch(int32_t key, int32_t gpu) {
  if (scratchUsed_.empty()) scratchUsed_.assign(algorithm_.nRanks, 0);
  auto [it, inserted] = scratchSlots_.try_emplace({key, gpu}, scratchUsed_[gpu]);
  if (inserted) ++scratchUsed_[gpu];
  return {BufferKind::Scratch, it->second};
}

void ExactAlgorithmBuilder::addLocalCopy(int32_t gpu, ChunkSlot from, ChunkSlot to, int32_t step) {
  algorithm_.ops.push_back(operation(gpu, from, gpu, to, step, OpKind::Copy));
}

int32_t ExactAlgorithmBuilder::addCopyPhase(const Schedule& schedule, const SlotOf& slotOf, int32_t first) {
  for (size_t c = 0; c < schedule.from.size(); ++c) {
    const auto chunk = static_cast<int32_t>(c);
    for (size_t g = 0; g < schedule.from[c].size(); ++g) {
      const int32_t sender = schedule.from[c][g];
      if (sender < 0) continue;
      const auto gpu = static_cast<int32_t>(g);
      algorithm_.ops.push_back(operation(sender, slotOf(chunk, sender), gpu, slotOf(chunk, gpu),
                                         first + schedule.time[c][g] - 1, OpKind::Copy));
    }
  }
  return first + schedule.steps;
}

int32_t ExactAlgorithmBuilder::addReducePhase(const Schedule& forward, const SlotOf& contribution,
                                              const SlotOf& accumulator, int32_t first) {
  const auto combines = sendersOf(forward);
  // Accumulators start as the GPU's own contribution: the chunk's final GPU (time 0 forward) and
  // every GPU that children reduce into.
  for (size_t c = 0; c < forward.time.size(); ++c) {
    const auto chunk = static_cast<int32_t>(c);
    for (size_t g = 0; g < forward.time[c].size(); ++g) {
      const auto gpu = static_cast<int32_t>(g);
      if (forward.time[c][g] == 0 || combines[c][g])
        addLocalCopy(gpu, contribution(chunk, gpu), accumulator(chunk, gpu), first);
    }
  }
  // Reversed step r = S + 1 - forward step; within one reversed step, the reduces into one
  // accumulator take consecutive IR steps.
  struct PendingReduce {
    Operation op;
    int32_t order = 0;  // among the reduces into the same accumulator in the same reversed step
  };
  std::vector<std::vector<PendingReduce>> byStep(forward.steps + 1);
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, int32_t> arrivals;  // (r, rank, buffer, index)
  for (size_t c = 0; c < forward.from.size(); ++c) {
    const auto chunk = static_cast<int32_t>(c);
    for (size_t g = 0; g < forward.from[c].size(); ++g) {
      const int32_t parent = forward.from[c][g];
      if (parent < 0) continue;
      const auto gpu = static_cast<int32_t>(g);
      const int32_t reversed = forward.steps + 1 - forward.time[c][g];
      const ChunkSlot src = combines[c][g] ? accumulator(chunk, gpu) : contribution(chunk, gpu);
      const ChunkSlot dst = accumulator(chunk, parent);
      const int32_t order = arrivals[{reversed, parent, static_cast<int32_t>(dst.buffer), dst.index}]++;
      byStep[reversed].push_back({operation(gpu, src, parent, dst, 0, OpKind::Reduce), order});
    }
  }
  int32_t step = first + 1;
  for (int32_t reversed = 1; reversed <= forward.steps; ++reversed) {
    int32_t width = 0;
    for (PendingReduce& pending : byStep[reversed]) {
      pending.op.step = step + pending.order;
      width = std::max(width, pending.order + 1);
      algorithm_.ops.push_back(pending.op);
    }
    step += width;
  }
  return step;
}

Algorithm ExactAlgorithmBuilder::take() {
  int32_t scratchChunks = 0;
  for (int32_t used : scratchUsed_) scratchChunks = std::max(scratchChunks, used);
  algorithm_.bufferChunks[static_cast<int>(BufferKind::Scratch)] = scratchChunks;
  return std::move(algorithm_);
}

}  // namespace tuccl
