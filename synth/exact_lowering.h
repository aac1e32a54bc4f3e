// From SMT schedules to the algorithm IR (lang/algorithm.h).
//
// In:  Schedules (synth/exact_encoding.h) and where each chunk lives on each GPU.
// Out: Operations: a copy per send of a forward phase (AllGather, Broadcast, AllToAll), a reduce per
//      send of an inverted phase (SCCL's combining collectives: the schedule of the
//      non-combining collective on the reversed links, run backwards in time, each send becoming a
//      reduce into the sender's parent).
//
// Step s of a forward phase becomes IR step first + s - 1; its operations are concurrent, and
// "exactly one sender" keeps two of them from writing one slot. An inverted phase may reduce
// several children into one accumulator in the same SMT step; those reduces are serialised into
// consecutive IR steps (a reduce reads and writes its destination, so they cannot be concurrent).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "lang/algorithm.h"
#include "synth/exact_encoding.h"

namespace tuccl {

struct ChunkSlot {
  BufferKind buffer = BufferKind::Output;
  int32_t index = 0;
};

/// Where `gpu` keeps chunk `chunk` of a schedule (its start for a pre GPU).
using SlotOf = std::function<ChunkSlot(int32_t chunk, int32_t gpu)>;

/// Removes deliveries to GPUs that neither need the chunk nor pass it on (a model may route a
/// chunk somewhere for nothing when bandwidth is left over), until none is left.
void dropDeadEnds(Schedule& schedule, const std::function<bool(int32_t chunk, int32_t gpu)>& needs);

class ExactAlgorithmBuilder {
 public:
  explicit ExactAlgorithmBuilder(Algorithm algorithm) : algorithm_(std::move(algorithm)) {}

  /// A scratch slot of its own on `gpu` for (key, gpu); the same slot when asked again.
  ChunkSlot scratch(int32_t key, int32_t gpu);
  /// A local copy on `gpu` at `step`.
  void addLocalCopy(int32_t gpu, ChunkSlot from, ChunkSlot to, int32_t step);
  /// The sends of a forward schedule as copies from slotOf(sender) to slotOf(receiver), step s at
  /// IR step first + s - 1. Returns the first IR step after the phase.
  int32_t addCopyPhase(const Schedule& schedule, const SlotOf& slotOf, int32_t first);
  /// The inverse of `forward` (a schedule on the reversed links): at IR step `first` every GPU
  /// that combines a chunk copies its contribution into its accumulator; then each GPU reduces its
  /// accumulator (its contribution when it combines nothing) into its parent's accumulator, in
  /// reverse order of the forward steps. Returns the first IR step after the phase.
  int32_t addReducePhase(const Schedule& forward, const SlotOf& contribution, const SlotOf& accumulator,
                         int32_t first);
  /// The algorithm, with its scratch size set.
  Algorithm take();

 private:
  Algorithm algorithm_;
  std::map<std::pair<int32_t, int32_t>, int32_t> scratchSlots_;  // (key, gpu) -> index
  std::vector<int32_t> scratchUsed_;
};

}  // namespace tuccl
