// Check data of the benchmarks (bench_check.h).
#include "cli/bench_check.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernelgen/element_values.h"
#include "kernelgen/output_compare.h"

namespace tuccl::bench {
namespace {

/// A well-mixed 64-bit value of (seed, rank, index) (splitmix64's finaliser).
uint64_t mix(uint64_t seed, int32_t rank, int64_t index) {
  uint64_t x = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full ^ (seed + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Largest rank count whose product of ±2s stays inside half's normal range (2^-14 .. 2^15).
constexpr int32_t kPowerOfTwoProductRanks = 14;

double productValue(DataType type, int32_t nRanks, uint64_t h) {
  if (type == DataType::Uint8) return static_cast<double>(1 + h % 3);
  if (isIntegerType(type)) {
    constexpr std::array<double, 5> kSigned = {-2, -1, 1, 2, 3};
    return kSigned[h % kSigned.size()];
  }
  if (nRanks > kPowerOfTwoProductRanks) return h % 2 == 0 ? -1.0 : 1.0;
  constexpr std::array<double, 6> kPowers = {-2, -1, -0.5, 0.5, 1, 2};
  return kPowers[h % kPowers.size()];
}

/// Elements compared per block: the reference of a block is held as float64.
constexpr int64_t kCompareBlock = 1 << 16;

}  // namespace

double benchInputValue(const CollectiveCall& call, int32_t rank, int64_t index, uint64_t seed) {
  const uint64_t h = mix(seed, rank, index);
  if (isReduction(call.collective) && call.op == ReduceOp::Prod)
    return productValue(call.dataType, call.nRanks, h);
  if (call.dataType == DataType::Uint8) return static_cast<double>(h % 17);
  return static_cast<double>(h % 17) - 8;
}

void fillBenchInput(const CollectiveCall& call, int32_t rank, uint64_t seed, void* input) {
  auto* bytes = static_cast<unsigned char*>(input);
  const int64_t size = dataTypeSize(call.dataType);
  const int64_t elements = inputElements(call);
  for (int64_t i = 0; i < elements; ++i)
    writeElement(call.dataType, bytes + i * size, benchInputValue(call, rank, i, seed));
}

int64_t countWrongElements(const CollectiveCall& call, int32_t rank, uint64_t seed, const void* output) {
  if (call.collective == Collective::Reduce && rank != call.root) return 0;
  const InputElement input = [&](int32_t q, int64_t j) { return benchInputValue(call, q, j, seed); };
  const double tolerance = relativeTolerance(call);
  const auto* bytes = static_cast<const unsigned char*>(output);
  const int64_t size = dataTypeSize(call.dataType);
  const int64_t elements = outputElements(call);
  std::vector<double> expected;
  int64_t wrong = 0;
  for (int64_t begin = 0; begin < elements; begin += kCompareBlock) {
    const int64_t end = std::min(elements, begin + kCompareBlock);
    expected.resize(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) expected[i - begin] = referenceElement(call, rank, i, input);
    wrong += compareElements(call.dataType, tolerance, expected, bytes + begin * size, "result", 0).count;
  }
  return wrong;
}

}  // namespace tuccl::bench
