// Comparison of a call's actual outputs with its reference (collective_reference.h): every element
// of every rank, with a tolerance that depends on the datatype and the operation.
//
// In:  the CollectiveCall, the expected outputs per rank, the output buffer of every rank (elements
//      of the call's datatype).
// Out: per rank the number of wrong elements and the first few, "result[i]: expected E, got G".
//
// Tolerance: integers exactly (with the kernels' wrap-around); moved data (AllGather, AllToAll,
// Broadcast) and min/max exactly, for every datatype, since no arithmetic rounds them; sum, prod
// and avg of floats within a relative (nRanks + 2)·u of the float64 reference, u the type's unit
// roundoff — a bound on any summation order of nRanks terms plus the final rounding and avg's
// division. A NaN or infinity never matches.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernelgen/collective_reference.h"

namespace tuccl {

/// The relative error the comparison accepts for `call` (0: exact).
double relativeTolerance(const CollectiveCall& call);

/// Wrong elements of one buffer.
struct ElementMismatches {
  int64_t count = 0;                  ///< elements outside the tolerance
  int64_t firstIndex = -1;            ///< the first of them
  std::vector<std::string> first;     ///< up to `listed`: "LABEL[i]: expected E, got G"
};

/// Compares expected.size() elements at `actual` (of `type`) with `expected`.
ElementMismatches compareElements(DataType type, double relativeTolerance, std::span<const double> expected,
                                  const void* actual, std::string_view label = "result", int32_t listed = 4);

struct RankComparison {
  int32_t rank = 0;
  bool specified = true;  ///< false: the call leaves this rank's output unspecified (not compared)
  ElementMismatches mismatches;
  bool ok() const { return mismatches.count == 0; }
};

/// Every rank's output (actual[r]: rank r's output buffer, outputElements(call) elements; may be
/// null where expected[r] is unspecified) against the reference.
std::vector<RankComparison> compareOutputs(const CollectiveCall& call, const RankOutputs& expected,
                                           std::span<const void* const> actual, int32_t listed = 4);

}  // namespace tuccl
