// Output comparison (output_compare.h).
#include "kernelgen/output_compare.h"

#include <cmath>

#include "kernelgen/element_values.h"

namespace tuccl {

double relativeTolerance(const CollectiveCall& call) {
  if (isIntegerType(call.dataType) || !isReduction(call.collective)) return 0;
  if (call.op == ReduceOp::Min || call.op == ReduceOp::Max) return 0;
  return (call.nRanks + 2) * unitRoundoff(call.dataType);
}

ElementMismatches compareElements(DataType type, double relativeTolerance, std::span<const double> expected,
                                  const void* actual, std::string_view label, int32_t listed) {
  ElementMismatches result;
  const auto* bytes = static_cast<const unsigned char*>(actual);
  const int64_t size = dataTypeSize(type);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double got = readElement(type, bytes + static_cast<int64_t>(i) * size);
    const double want = expected[i];
    const bool equal = std::isfinite(got) && std::fabs(got - want) <= relativeTolerance * std::fabs(want);
    if (equal) continue;
    if (result.count++ == 0) result.firstIndex = static_cast<int64_t>(i);
    if (static_cast<int64_t>(result.first.size()) < listed) {
      result.first.push_back(std::string(label) + "[" + std::to_string(i) + "]: expected " + formatElement(type, want) +
                             ", got " + formatElement(type, got));
    }
  }
  return result;
}

std::vector<RankComparison> compareOutputs(const CollectiveCall& call, const RankOutputs& expected,
                                           std::span<const void* const> actual, int32_t listed) {
  std::vector<RankComparison> ranks;
  const double tolerance = relativeTolerance(call);
  for (size_t r = 0; r < expected.size(); ++r) {
    RankComparison& rank = ranks.emplace_back();
    rank.rank = static_cast<int32_t>(r);
    rank.specified = expected[r].has_value();
    if (!rank.specified) continue;
    const void* output = r < actual.size() ? actual[r] : nullptr;
    if (output == nullptr && !expected[r]->empty()) {
      rank.mismatches = {static_cast<int64_t>(expected[r]->size()), 0, {"no output buffer"}};
      continue;
    }
    rank.mismatches = compareElements(call.dataType, tolerance, *expected[r], output, "result", listed);
  }
  return ranks;
}

}  // namespace tuccl
