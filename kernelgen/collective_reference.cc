// Reference results from the collectives' definitions (collective_reference.h).
#include "kernelgen/collective_reference.h"

#include <algorithm>
#include <limits>
#include <string>

#include "kernelgen/element_values.h"

namespace tuccl {
namespace {

bool blockSized(Collective collective) {
  return collective == Collective::ReduceScatter || collective == Collective::AllToAll;
}

// The reduction of `valueOf(q)` over ranks q, as the kernels compute it: integers in 64 bits
// wrapped to the type (avg: the wrapped sum divided by n, truncating), floats in float64.
template <typename ValueOf>
double reduceOverRanks(const CollectiveCall& call, ValueOf valueOf) {
  const int32_t n = call.nRanks;
  if (isIntegerType(call.dataType)) {
    int64_t acc = static_cast<int64_t>(valueOf(0));
    for (int32_t q = 1; q < n; ++q) {
      const auto x = static_cast<int64_t>(valueOf(q));
      switch (call.op) {
        case ReduceOp::Prod: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x)); break;
        case ReduceOp::Min: acc = std::min(acc, x); break;
        case ReduceOp::Max: acc = std::max(acc, x); break;
        default: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x)); break;
      }
    }
    const double wrapped = wrapInteger(call.dataType, acc);
    return call.op == ReduceOp::Avg ? static_cast<double>(static_cast<int64_t>(wrapped) / n) : wrapped;
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

// Element i of rank r's output (the call is one whose output at r is specified); in(q, j) is
// element j of rank q's input.
template <typename Input>
double expectedElement(const CollectiveCall& call, const Input& in, int32_t r, int64_t i) {
  const int64_t c = call.count;
  switch (call.collective) {
    case Collective::AllGather: return in(static_cast<int32_t>(i / c), i % c);
    case Collective::AllToAll: return in(static_cast<int32_t>(i / c), r * c + i % c);
    case Collective::Broadcast: return in(call.root, i);
    case Collective::ReduceScatter:
      return reduceOverRanks(call, [&](int32_t q) { return in(q, r * c + i); });
    case Collective::AllReduce:
    case Collective::Reduce: break;
  }
  return reduceOverRanks(call, [&](int32_t q) { return in(q, i); });
}

}  // namespace

int64_t inputElements(const CollectiveCall& call) {
  return blockSized(call.collective) ? call.nRanks * call.count : call.count;
}

int64_t outputElements(const CollectiveCall& call) {
  return call.collective == Collective::AllGather || call.collective == Collective::AllToAll ? call.nRanks * call.count
                                                                                              : call.count;
}

Status checkCall(const CollectiveCall& call) {
  const std::string name(collectiveName(call.collective));
  if (call.nRanks < 1) return makeError(ErrorCode::InvalidArgument, name + ": nRanks must be at least 1");
  if (call.count < 0) return makeError(ErrorCode::InvalidArgument, name + ": the element count is negative");
  if (call.count > std::numeric_limits<int64_t>::max() / dataTypeSize(call.dataType) / call.nRanks) {
    return makeError(ErrorCode::InvalidArgument, name + ": the element count " + std::to_string(call.count) + " is too large");
  }
  if (hasRoot(call.collective) && (call.root < 0 || call.root >= call.nRanks)) {
    return makeError(ErrorCode::InvalidArgument, name + ": root " + std::to_string(call.root) + " is not a rank in [0, " +
                                                     std::to_string(call.nRanks) + ")");
  }
  return {};
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
    auto in = [&](int32_t q, int64_t j) { return inputs[q][j]; };
    for (int64_t i = 0; i < outElems; ++i) expected[i] = expectedElement(call, in, r, i);
  }
  return outputs;
}

Expected<std::optional<std::vector<double>>> referenceOutput(const CollectiveCall& call, int32_t rank,
                                                            const std::function<double(int32_t, int64_t)>& input) {
  if (Status status = checkCall(call); !status) return status;
  if (rank < 0 || rank >= call.nRanks) {
    return makeError(ErrorCode::InvalidArgument, "reference: rank " + std::to_string(rank) + " is not in [0, " +
                                                     std::to_string(call.nRanks) + ")");
  }
  if (call.collective == Collective::Reduce && rank != call.root) return std::optional<std::vector<double>>();
  std::vector<double> expected(static_cast<size_t>(outputElements(call)));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = expectedElement(call, input, rank, static_cast<int64_t>(i));
  return std::optional<std::vector<double>>(std::move(expected));
}

}  // namespace tuccl
