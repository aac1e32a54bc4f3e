// The all-pairs family: direct (every pair in one round) and pairwise-exchange AllToAll.
#include "synth/generate_common.h"

namespace tuccl {

namespace {

constexpr std::string_view kDirect = "direct";
constexpr std::string_view kPairwise = "pairwise";

// Where a rank reads its own AllToAll input: the input itself, or (in place, where the output
// overwrites it) a copy staged in scratch at step 0.
struct AllToAllSource {
  BufferKind buffer = BufferKind::Input;
  int32_t base = 0;
};

AllToAllSource stageAllToAllInput(AlgorithmBuilder& builder, const GeneratorShape& shape, int32_t scratchBase) {
  const int32_t n = shape.nRanks;
  const int32_t k = builder.k();
  if (!shape.options.inPlace) {
    for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
    return {};
  }
  for (int32_t r = 0; r < n; ++r) builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, scratchBase, n * k);
  return {BufferKind::Scratch, scratchBase};
}

Algorithm directAllGather(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kDirect), Collective::AllGather, shape, k);
  for (int32_t r = 0; r < n; ++r) {
    builder.copyOwnInputToOutput(0, r);
    for (int32_t to = 0; to < n; ++to) {
      if (to == r) continue;
      for (int32_t q = 0; q < k; ++q) builder.copy(0, r, BufferKind::Input, q, to, BufferKind::Output, r * k + q);
    }
  }
  return builder.take();
}

// Step s: rank r reduces its contribution to block (r + s) mod n into that block's owner, so
// every owner takes one reduction per step. The owner keeps the block at output chunk 0
// (ReduceScatter) or at its place in the whole vector (AllReduce).
void directReduceScatterInto(AlgorithmBuilder& builder, int32_t n, int32_t parts, bool wholeVector) {
  for (int32_t s = 1; s < n; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t owner = (r + s) % n;
      for (int32_t q = 0; q < parts; ++q) {
        const int32_t dst = wholeVector ? owner * parts + q : q;
        builder.reduce(s, r, BufferKind::Input, owner * parts + q, owner, BufferKind::Output, dst);
      }
    }
  }
}

Algorithm directReduceScatter(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kDirect), Collective::ReduceScatter, shape, k);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  directReduceScatterInto(builder, n, k, false);
  return builder.take();
}

// Direct ReduceScatter of block r onto rank r, then rank r copies its block to every rank.
Algorithm directAllReduce(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t parts = shape.parts();
  AlgorithmBuilder builder(std::string(kDirect), Collective::AllReduce, shape, n * parts);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  directReduceScatterInto(builder, n, parts, true);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t to = 0; to < n; ++to) {
      if (to == r) continue;
      for (int32_t q = 0; q < parts; ++q) {
        builder.copy(n, r, BufferKind::Output, r * parts + q, to, BufferKind::Output, r * parts + q);
      }
    }
  }
  return builder.take();
}

Algorithm directAllToAll(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kDirect), Collective::AllToAll, shape, k, shape.options.inPlace ? n * k : 0);
  const AllToAllSource source = stageAllToAllInput(builder, shape, 0);
  const int32_t step = shape.options.inPlace ? 1 : 0;
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t to = 0; to < n; ++to) {
      if (to == r) continue;
      for (int32_t q = 0; q < k; ++q) {
        builder.copy(step, r, source.buffer, source.base + to * k + q, to, BufferKind::Output, r * k + q);
      }
    }
  }
  return builder.take();
}

Algorithm directBroadcast(const GeneratorShape& shape) {
  const int32_t k = shape.parts();
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kDirect), Collective::Broadcast, shape, k);
  builder.copyOwnInputToOutput(0, root);
  for (int32_t to = 0; to < shape.nRanks; ++to) {
    if (to == root) continue;
    for (int32_t q = 0; q < k; ++q) builder.copy(0, root, BufferKind::Input, q, to, BufferKind::Output, q);
  }
  return builder.take();
}

// Every rank reduces into the root's output, one rank per step.
Algorithm directReduce(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kDirect), Collective::Reduce, shape, k);
  builder.copyOwnInputToOutput(0, root);
  for (int32_t s = 1; s < n; ++s) {
    for (int32_t q = 0; q < k; ++q) builder.reduce(s, (root + s) % n, BufferKind::Input, q, root, BufferKind::Output, q);
  }
  return builder.take();
}

}  // namespace

Expected<Algorithm> generateDirect(Collective collective, const GeneratorShape& shape) {
  switch (collective) {
    case Collective::AllGather:
      return directAllGather(shape);
    case Collective::ReduceScatter:
      return directReduceScatter(shape);
    case Collective::AllReduce:
      return directAllReduce(shape);
    case Collective::AllToAll:
      return directAllToAll(shape);
    case Collective::Broadcast:
      return directBroadcast(shape);
    case Collective::Reduce:
      return directReduce(shape);
  }
  return unsupported(kDirect, collective, "unknown collective");
}

// Step s (1 .. n-1): rank r sends its block for rank (r + s) mod n, so every rank sends to and
// receives from exactly one peer per step.
Expected<Algorithm> generatePairwise(Collective collective, const GeneratorShape& shape) {
  if (collective != Collective::AllToAll) return unsupported(kPairwise, collective, "only AllToAll");
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kPairwise), Collective::AllToAll, shape, k, shape.options.inPlace ? n * k : 0);
  const AllToAllSource source = stageAllToAllInput(builder, shape, 0);
  for (int32_t s = 1; s < n; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t to = (r + s) % n;
      for (int32_t q = 0; q < k; ++q) {
        builder.copy(s, r, source.buffer, source.base + to * k + q, to, BufferKind::Output, r * k + q);
      }
    }
  }
  return builder.take();
}

}  // namespace tuccl
