#include "plan/plan_pairing.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

namespace tuccl {
namespace {

// Pairing order of one side of a connection: (subPipeline, op), then the entry's place.
using SideKey = std::tuple<int32_t, int32_t, int32_t, int32_t>;  // subPipeline, op, tb, entry

std::string connectionName(std::pair<int32_t, int32_t> connection) {
  return "connection " + std::to_string(connection.first) + " -> " + std::to_string(connection.second);
}

}  // namespace

Expected<std::vector<PlanTransfer>> pairTransfers(const Plan& plan) {
  std::map<std::pair<int32_t, int32_t>, std::vector<SideKey>> sends;  // (src, dst) -> sends of src
  std::map<std::pair<int32_t, int32_t>, std::vector<SideKey>> recvs;  // (src, dst) -> receives of dst
  for (const PlanRank& rank : plan.ranks) {
    for (size_t b = 0; b < rank.tbs.size(); ++b) {
      const auto& entries = rank.tbs[b].entries;
      for (size_t e = 0; e < entries.size(); ++e) {
        const PlanEntry& entry = entries[e];
        const int32_t tb = static_cast<int32_t>(b);
        const int32_t place = static_cast<int32_t>(e);
        if (isSending(entry.kind)) {
          const SendSide side = sendSideOf(entry);
          sends[{rank.rank, side.peer}].push_back(SideKey{side.subPipeline, side.op, tb, place});
        }
        if (isReceive(entry.kind)) recvs[{entry.peer, rank.rank}].push_back(SideKey{entry.subPipeline, entry.op, tb, place});
      }
    }
  }
  std::vector<PlanTransfer> transfers;
  for (auto& [connection, mine] : sends) {
    auto other = recvs.find(connection);
    if (other == recvs.end() || other->second.size() != mine.size()) {
      return makeError(ErrorCode::InvalidInput, connectionName(connection) + ": sends and receives do not pair up");
    }
    std::vector<SideKey>& theirs = other->second;
    std::sort(mine.begin(), mine.end());
    std::sort(theirs.begin(), theirs.end());
    for (size_t i = 0; i < mine.size(); ++i) {
      transfers.push_back(PlanTransfer{connection.first, EntryRef{std::get<2>(mine[i]), std::get<3>(mine[i])},
                                       connection.second, EntryRef{std::get<2>(theirs[i]), std::get<3>(theirs[i])}});
    }
  }
  for (const auto& [connection, list] : recvs) {
    if (!sends.contains(connection)) {
      return makeError(ErrorCode::InvalidInput, connectionName(connection) + ": receives without sends");
    }
  }
  return transfers;
}

}  // namespace tuccl
