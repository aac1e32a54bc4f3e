// The recursive family over power-of-two rank counts: recursive doubling (AllGather, AllReduce)
// and recursive halving (ReduceScatter; AllReduce as Rabenseifner's halving RS + doubling AG).
#include <bit>

#include "synth/generate_common.h"

namespace tuccl {

namespace {

constexpr std::string_view kDoubling = "recursive-doubling";
constexpr std::string_view kHalving = "recursive-halving";

int32_t log2Ranks(int32_t n) { return std::countr_zero(static_cast<uint32_t>(n)); }

// Distance d = 1, 2, 4, ...: rank r sends the d·k chunks of its aligned group to r xor d.
// Block b of the output sits at b·unit; step `first` + s uses distance 2^s.
void doublingAllGather(AlgorithmBuilder& builder, int32_t n, int32_t unit, int32_t first, bool ownBlockInInput) {
  for (int32_t s = 0; (1 << s) < n; ++s) {
    const int32_t d = 1 << s;
    for (int32_t r = 0; r < n; ++r) {
      const int32_t base = r & ~(d - 1);
      const bool fromInput = s == 0 && ownBlockInInput;
      builder.copy(first + s, r, fromInput ? BufferKind::Input : BufferKind::Output, fromInput ? 0 : base * unit,
                   r ^ d, BufferKind::Output, base * unit, d * unit);
    }
  }
}

Algorithm doublingAllGatherAlgorithm(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kDoubling), Collective::AllGather, shape, k);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  doublingAllGather(builder, n, k, 0, true);
  return builder.take();
}

// Step 2s: partners copy their whole partial vector into each other's scratch; step 2s + 1: each
// reduces the scratch into its own (a reduce cannot read and write across a pair in one step).
Algorithm doublingAllReduce(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kDoubling), Collective::AllReduce, shape, k, k);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  for (int32_t s = 0; (1 << s) < n; ++s) {
    const int32_t d = 1 << s;
    for (int32_t r = 0; r < n; ++r) {
      builder.copy(2 * s, r, s == 0 ? BufferKind::Input : BufferKind::Output, 0, r ^ d, BufferKind::Scratch, 0, k);
      builder.reduce(2 * s + 1, r, BufferKind::Scratch, 0, r, BufferKind::Output, 0, k);
    }
  }
  return builder.take();
}

// Rabenseifner's ReduceScatter: distance d = n/2, n/4, ..., 1; rank r sends its partial sums of
// the d blocks of its partner's half to r xor d. `accumulator(rank, block)` says where a rank keeps
// its partial sum of a block; runs of consecutive blocks in one buffer move as one operation.
template <typename Accumulator>
void halvingReduceScatter(AlgorithmBuilder& builder, int32_t n, int32_t unit, int32_t first, Accumulator accumulator) {
  for (int32_t s = 0; (n >> (s + 1)) >= 1; ++s) {
    const int32_t d = n >> (s + 1);
    for (int32_t r = 0; r < n; ++r) {
      const int32_t partner = r ^ d;
      const int32_t lo = partner & ~(d - 1);
      int32_t b = lo;
      while (b < lo + d) {
        const auto [srcBuffer, srcIndex] = accumulator(r, b);
        const auto [dstBuffer, dstIndex] = accumulator(partner, b);
        int32_t run = 1;
        while (b + run < lo + d) {
          const auto [nextSrc, nextSrcIndex] = accumulator(r, b + run);
          const auto [nextDst, nextDstIndex] = accumulator(partner, b + run);
          if (nextSrc != srcBuffer || nextDst != dstBuffer || nextSrcIndex != srcIndex + run * unit ||
              nextDstIndex != dstIndex + run * unit) {
            break;
          }
          ++run;
        }
        builder.reduce(first + s, r, srcBuffer, srcIndex, partner, dstBuffer, dstIndex, run * unit);
        b += run;
      }
    }
  }
}

struct Place {
  BufferKind buffer;
  int32_t index;
};

// Partial sums in scratch (a copy of the input), the rank's own block in its output.
Algorithm halvingReduceScatterAlgorithm(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t k = shape.parts();
  AlgorithmBuilder builder(std::string(kHalving), Collective::ReduceScatter, shape, k, n * k);
  for (int32_t r = 0; r < n; ++r) {
    builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, 0, n * k);
    builder.copyOwnInputToOutput(0, r);
  }
  halvingReduceScatter(builder, n, k, 1, [k](int32_t rank, int32_t block) {
    return block == rank ? Place{BufferKind::Output, 0} : Place{BufferKind::Scratch, block * k};
  });
  return builder.take();
}

Algorithm halvingAllReduce(const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  const int32_t parts = shape.parts();
  AlgorithmBuilder builder(std::string(kHalving), Collective::AllReduce, shape, n * parts);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  halvingReduceScatter(builder, n, parts, 1,
                       [parts](int32_t, int32_t block) { return Place{BufferKind::Output, block * parts}; });
  doublingAllGather(builder, n, parts, 1 + log2Ranks(n), false);
  return builder.take();
}

}  // namespace

Expected<Algorithm> generateRecursiveDoubling(Collective collective, const GeneratorShape& shape) {
  if (Status bad = requirePowerOfTwoRanks(kDoubling, collective, shape); !bad.ok()) return bad;
  if (collective == Collective::AllGather) return doublingAllGatherAlgorithm(shape);
  if (collective == Collective::AllReduce) return doublingAllReduce(shape);
  return unsupported(kDoubling, collective, "only AllGather and AllReduce");
}

Expected<Algorithm> generateRecursiveHalving(Collective collective, const GeneratorShape& shape) {
  if (Status bad = requirePowerOfTwoRanks(kHalving, collective, shape); !bad.ok()) return bad;
  if (collective == Collective::ReduceScatter) return halvingReduceScatterAlgorithm(shape);
  if (collective == Collective::AllReduce) return halvingAllReduce(shape);
  return unsupported(kHalving, collective, "only ReduceScatter and AllReduce");
}

}  // namespace tuccl
