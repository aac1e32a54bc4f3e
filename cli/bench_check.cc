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

/// The values of every input but prod's: [-8, 8], or [0, 16] for uint8.
double plainValue(DataType type, uint64_t h) {
  if (type == DataType::Uint8) return static_cast<double>(h % 17);
  return static_cast<double>(h % 17) - 8;
}

/// `value` as an element of `type` stores it and reads it back (a conversion of the type: an
/// unsigned type wraps a negative value), for the patterns, whose bytes travel unchanged.
double asStored(DataType type, double value) {
  std::array<unsigned char, sizeof(double)> element{};
  writeElement(type, element.data(), value);
  return readElement(type, element.data());
}

/// Compares `elements` elements at `output` with expected(i), a block at a time; the mismatches.
template <typename ExpectedAt>
int64_t countMismatches(DataType type, double tolerance, int64_t elements, const void* output,
                        ExpectedAt&& expectedAt) {
  const auto* bytes = static_cast<const unsigned char*>(output);
  const int64_t size = dataTypeSize(type);
  std::vector<double> expected;
  int64_t wrong = 0;
  for (int64_t begin = 0; begin < elements; begin += kCompareBlock) {
    const int64_t end = std::min(elements, begin + kCompareBlock);
    expected.resize(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) expected[i - begin] = expectedAt(i);
    wrong += compareElements(type, tolerance, expected, bytes + begin * size, "result", 0).count;
  }
  return wrong;
}

}  // namespace

double benchInputValue(const CollectiveCall& call, int32_t rank, int64_t index, uint64_t seed) {
  const uint64_t h = mix(seed, rank, index);
  if (isReduction(call.collective) && call.op == ReduceOp::Prod)
    return productValue(call.dataType, call.nRanks, h);
  return plainValue(call.dataType, h);
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
  return countMismatches(call.dataType, relativeTolerance(call), outputElements(call), output,
                         [&](int64_t i) { return referenceElement(call, rank, i, input); });
}

int64_t peerElements(PeerPattern pattern, const CollectiveCall& call) {
  return pattern == PeerPattern::SendRecv ? call.count : call.count * call.nRanks;
}

void fillBenchInput(BenchCollective what, const CollectiveCall& call, int32_t rank, uint64_t seed,
                    void* input) {
  const std::optional<PeerPattern> pattern = what.pattern();
  if (!pattern) return fillBenchInput(call, rank, seed, input);
  auto* bytes = static_cast<unsigned char*>(input);
  const int64_t size = dataTypeSize(call.dataType);
  const int64_t elements = peerElements(*pattern, call);
  for (int64_t i = 0; i < elements; ++i)
    writeElement(call.dataType, bytes + i * size, plainValue(call.dataType, mix(seed, rank, i)));
}

int64_t countWrongElements(BenchCollective what, const CollectiveCall& call, int32_t rank, uint64_t seed,
                           const void* output) {
  const std::optional<PeerPattern> pattern = what.pattern();
  if (!pattern) return countWrongElements(call, rank, seed, output);
  const int32_t n = call.nRanks;
  const auto value = [&](int32_t sender, int64_t index) {
    return asStored(call.dataType, plainValue(call.dataType, mix(seed, sender, index)));
  };
  if (*pattern == PeerPattern::SendRecv) {
    const int32_t from = (rank - 1 + n) % n;
    return countMismatches(call.dataType, 0, call.count, output, [&](int64_t i) { return value(from, i); });
  }
  // AllToAllv: the receive buffer is rank q's block for this rank, for q = 0, 1, ..., packed; the
  // source of element i is the block's sender and its place in the sender's send buffer.
  const auto block = static_cast<uint64_t>(call.count);
  std::vector<int64_t> senderOffset;  // per q: the block's first element in q's send buffer minus in ours
  const PeerLayout mine = allToAllvLayout(block, n, rank);
  for (int32_t q = 0; q < n; ++q) {
    const PeerLayout theirs = allToAllvLayout(block, n, q);
    senderOffset.push_back(static_cast<int64_t>(theirs.sendDispls[static_cast<size_t>(rank)]) -
                           static_cast<int64_t>(mine.recvDispls[static_cast<size_t>(q)]));
  }
  int32_t q = 0;  // the sender of element i: elements arrive in order of i, blocks in order of q
  return countMismatches(call.dataType, 0, peerElements(*pattern, call), output, [&](int64_t i) {
    while (q + 1 < n && static_cast<uint64_t>(i) >= mine.recvDispls[static_cast<size_t>(q) + 1]) ++q;
    return value(q, i + senderOffset[static_cast<size_t>(q)]);
  });
}

}  // namespace tuccl::bench
