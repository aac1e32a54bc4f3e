// Kernel layout (kernel_layout.h).
#include "kernelgen/kernel_layout.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "plan/plan_pairing.h"
#include "plan/plan_storage.h"

namespace tuccl {

Expected<KernelLayout> layoutKernels(const Plan& plan) {
  KernelLayout layout;
  layout.collective = plan.collective;
  layout.chunksPerUnit = planChunkUnit(plan);
  if (layout.chunksPerUnit <= 0) return makeError(ErrorCode::InvalidInput, "the plan has no chunks: no kernel can be generated");
  layout.entries.resize(plan.ranks.size());
  layout.progressCounters.assign(plan.ranks.size(), 0);
  for (const PlanRank& rank : plan.ranks) {
    auto& rankEntries = layout.entries[rank.rank];
    rankEntries.resize(rank.tbs.size());
    for (const PlanTb& tb : rank.tbs) {
      rankEntries[tb.id].resize(tb.entries.size());
      for (size_t e = 0; e < tb.entries.size(); ++e) {
        if (tb.entries[e].hasDependents) rankEntries[tb.id][e].progress = layout.progressCounters[rank.rank]++;
      }
    }
  }
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) {
    return makeError(ErrorCode::InvalidInput, "the plan's sends and receives do not pair: " + transfers.status().message());
  }
  // One ring per (src rank, src TB, dst rank, dst TB), numbered in pairing order.
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, int32_t> ringOf;
  for (const PlanTransfer& t : *transfers) {
    const auto key = std::make_tuple(t.srcRank, t.send.tb, t.dstRank, t.recv.tb);
    auto [it, inserted] = ringOf.try_emplace(key, static_cast<int32_t>(layout.rings.size()));
    if (inserted) layout.rings.push_back(RingInfo{t.srcRank, t.send.tb, t.dstRank, t.recv.tb, 0});
    ++layout.rings[it->second].messages;
    EntryLayout& s = layout.entries[t.srcRank][t.send.tb][t.send.entry];
    EntryLayout& r = layout.entries[t.dstRank][t.recv.tb][t.recv.entry];
    r.ring = it->second;
    r.peer = t.send;
    if (isFused(plan.ranks[t.srcRank].tbs[t.send.tb].entries[t.send.entry].kind)) {
      s.outRing = it->second;  // its receiving side has the entry's ring
      s.outPeer = t.recv;
    } else {
      s.ring = it->second;
      s.peer = t.recv;
    }
  }
  // Channels: replica c of ring i is ring i + c * ringsPerChannel, between the replicas' TBs
  // (TB tb of replica c is block tb + c * the rank's TBs); a rank's progress counters repeat
  // per replica the same way.
  layout.channels = std::max(1, plan.config.nChannels);
  layout.ringsPerChannel = static_cast<int32_t>(layout.rings.size());
  layout.progressPerChannel = layout.progressCounters;
  for (int32_t c = 1; c < layout.channels; ++c) {
    for (int32_t i = 0; i < layout.ringsPerChannel; ++i) {
      RingInfo ring = layout.rings[i];
      ring.srcTb += c * static_cast<int32_t>(plan.ranks[ring.srcRank].tbs.size());
      ring.dstTb += c * static_cast<int32_t>(plan.ranks[ring.dstRank].tbs.size());
      layout.rings.push_back(ring);
    }
  }
  for (int32_t& counters : layout.progressCounters) counters *= layout.channels;
  return layout;
}

}  // namespace tuccl
