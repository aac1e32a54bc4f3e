// Reference results from the collectives' definitions (collective_reference.h).
#include "kernelgen/collective_reference.h"

#include <algorithm>
#include <limits>
#include <string>

#include "kernelgen/element_values.h"

namespace tuccl {
namespace {

// The reduction of `valueOf(q)` over ranks q, as the kernels compute it: integers in 64 bits
// wrapped to the type (each input first taken as the type holds it, integerOf; min and max of
// uint64 compare unsigned; avg: the wrapped sum divided by n, truncating), floats in float64.
template <typename ValueOf>
double reduceOverRanks(const CollectiveCall& call, ValueOf valueOf) {
  const int32_t n = call.nRanks;
  const DataType type = call.dataType;
  if (isIntegerType(type)) {
    const bool unsigned64 = type == DataType::Uint64;
    auto less = [&](int64_t a, int64_t b) {
      return unsigned64 ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
    };
    int64_t acc = integerOf(type, valueOf(0));
    for (int32_t q = 1; q < n; ++q) {
      const int64_t x = integerOf(type, valueOf(q));
      switch (call.op) {
        case ReduceOp::Prod: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x)); break;
        case ReduceOp::Min: acc = less(x, acc) ? x : acc; break;
        case ReduceOp::Max: acc = less(acc, x) ? x : acc; break;
        default: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x)); break;
      }
    }
    // Wrapped to the width in integers (uint64 stays its 64 bits: no float64 in between).
    const int64_t wrapped = dataTypeSize(type) == 8 ? acc : integerOf(type, wrapInteger(type, acc));
    if (call.op != ReduceOp::Avg) return integerValue(type, wrapped);
    if (unsigned64) return static_cast<double>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(n));
    return static_cast<double>(wrapped / n);
  }
  double acc = valueOf(0);
  for (int32_t q = 1; q < n; ++q) {
    const double x = valueOf(q);
    switch (call.op) {
      case ReduceOp::Prod: acc *= x; break;
      case ReduceOp::Min: acc = std::min(acc, x); break;
      case ReduceOp::Max: acc = std::max(acc, x); break;
      default: acc += x; break;
    }
  }
  return call.op == ReduceOp::Avg ? acc / n : acc;
}

}  // namespace

double referenceElement(const CollectiveCall& call, int32_t rank, int64_t index, const InputElement& given) {
  const int64_t c = call.count;
  // An integer input as its type holds it (-8 is uint32's 4294967288), also where it only moves.
  const DataType type = call.dataType;
  const bool integers = isIntegerType(type);
  auto input = [&](int32_t q, int64_t j) {
    const double v = given(q, j);
    return integers ? integerValue(type, integerOf(type, v)) : v;
  };
  switch (call.collective) {
    case Collective::AllGather: return input(static_cast<int32_t>(index / c), index % c);
    case Collective::AllToAll: return input(static_cast<int32_t>(index / c), rank * c + index % c);
    case Collective::Broadcast: return input(call.root, index);
    case Collective::ReduceScatter:
      return reduceOverRanks(call, [&](int32_t q) { return input(q, rank * c + index); });
    case Collective::AllReduce:
    case Collective::Reduce: break;
  }
  return reduceOverRanks(call, [&](int32_t q) { return input(q, index); });
}

Expected<RankOutputs> referenceOutputs(const CollectiveCall& call, const std::vector<std::vector<double>>& inputs) {
  if (Status status = checkCall(call); !status) return status;
  if (static_cast<int64_t>(inputs.size()) != call.nRanks) {
    return makeError(ErrorCode::InvalidArgument, "reference: " + std::to_string(inputs.size()) + " inputs for " +
                                                     std::to_string(call.nRanks) + " ranks");
  }
  const auto inElems = static_cast<size_t>(inputElements(call));
  for (size_t r = 0; r < inputs.size(); ++r) {
    if (inputs[r].size() != inElems) {
      return makeError(ErrorCode::InvalidArgument, "reference: rank " + std::to_string(r) + " has " +
                                                       std::to_string(inputs[r].size()) + " input elements, not " +
                                                       std::to_string(inElems));
    }
  }
  RankOutputs outputs(static_cast<size_t>(call.nRanks));
  const int64_t outElems = outputElements(call);
  for (int32_t r = 0; r < call.nRanks; ++r) {
    if (call.collective == Collective::Reduce && r != call.root) continue;
    std::vector<double>& expected = outputs[r].emplace(static_cast<size_t>(outElems));
    const InputElement input = [&](int32_t q, int64_t j) { return inputs[q][j]; };
    for (int64_t i = 0; i < outElems; ++i) expected[i] = referenceElement(call, r, i, input);
  }
  return outputs;
}

}  // namespace tuccl
