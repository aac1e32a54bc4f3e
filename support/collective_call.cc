#include "support/collective_call.h"

#include <limits>
#include <string>

namespace tuccl {
namespace {

// The collectives whose input (ReduceScatter, AllToAll) holds one block of `count` per rank.
bool blockSized(Collective collective) {
  return collective == Collective::ReduceScatter || collective == Collective::AllToAll;
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

}  // namespace tuccl
