// validatePlan: ranges, references and pairing of a plan (plan_validate.h).
#include "plan/plan_validate.h"

#include <string>
#include <vector>

#include "plan/plan_pairing.h"
#include "plan/plan_storage.h"

namespace tuccl {
namespace {

Status invalid(std::string message) { return makeError(ErrorCode::InvalidInput, std::move(message)); }

std::string where(int32_t rank, int32_t tb, size_t entry) {
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + " entry " + std::to_string(entry);
}

Status checkHeader(const Plan& plan) {
  if (hasRoot(plan.collective)) {
    if (plan.root < 0 || plan.root >= plan.nRanks) {
      return invalid("root " + std::to_string(plan.root) + " of the " + std::string(collectiveName(plan.collective)) +
                     " is out of range [0, " + std::to_string(plan.nRanks) + ")");
    }
  } else if (plan.root != -1) {
    return invalid(std::string(collectiveName(plan.collective)) + " has no root, but the plan names root " +
                   std::to_string(plan.root) + " (must be -1)");
  }
  for (int b = 0; b < kBufferKinds; ++b) {
    if (plan.bufferChunks[b] < 0) return invalid(std::string(bufferName(static_cast<BufferKind>(b))) + " buffer has a negative size");
  }
  const PlanConfig& config = plan.config;
  if (config.nThreads < 1 || config.nThreads > 1024) return invalid("config.nThreads is out of range [1, 1024]");
  if (config.chunkSize < 1) return invalid("config.chunkSize must be positive");
  if (config.nChannels < 1) return invalid("config.nChannels must be at least 1");
  if (config.sendAhead < 0) return invalid("config.sendAhead must not be negative");
  if (static_cast<int64_t>(plan.ranks.size()) != plan.nRanks) {
    return invalid("the plan lists " + std::to_string(plan.ranks.size()) + " ranks, not nRanks");
  }
  return {};
}

// The entries of one rank: ranges, dependency references and hasDependents.
Status checkRank(const Plan& plan, int32_t r) {
  const PlanRank& rank = plan.ranks[r];
  if (rank.rank != r) return invalid("ranks are not listed in order at index " + std::to_string(r));
  std::vector<std::vector<bool>> depended(rank.tbs.size());
  for (size_t b = 0; b < rank.tbs.size(); ++b) depended[b].assign(rank.tbs[b].entries.size(), false);
  for (size_t b = 0; b < rank.tbs.size(); ++b) {
    const PlanTb& tb = rank.tbs[b];
    if (tb.id != static_cast<int32_t>(b)) return invalid("rank " + std::to_string(r) + ": tb ids are not 0, 1, ...");
    for (size_t e = 0; e < tb.entries.size(); ++e) {
      const PlanEntry& entry = tb.entries[e];
      if (entry.peer < 0 || entry.peer >= plan.nRanks) return invalid(where(r, tb.id, e) + ": peer out of range");
      if (isLocal(entry.kind) != (entry.peer == r)) {
        return invalid(where(r, tb.id, e) + ": a local primitive must name its own rank, a remote one another");
      }
      if (entry.srcIndex < 0 || entry.dstIndex < 0 || entry.count < 1 ||
          int64_t{entry.srcIndex} + entry.count > plan.bufferChunks[static_cast<int>(entry.srcBuffer)] ||
          int64_t{entry.dstIndex} + entry.count > plan.bufferChunks[static_cast<int>(entry.dstBuffer)]) {
        return invalid(where(r, tb.id, e) + ": chunks out of the buffer");
      }
      if (entry.subPipeline < 0 || entry.subPipeline >= plan.subPipelines) {
        return invalid(where(r, tb.id, e) + ": subPipeline out of range");
      }
      if (isFused(entry.kind)) {
        const PlanEntry::Next& next = entry.next;
        if (next.peer < 0 || next.peer >= plan.nRanks || next.peer == r) {
          return invalid(where(r, tb.id, e) + ": next.peer must name another rank");
        }
        if (next.dstIndex < 0 ||
            int64_t{next.dstIndex} + entry.count > plan.bufferChunks[static_cast<int>(next.dstBuffer)]) {
          return invalid(where(r, tb.id, e) + ": next chunks out of the buffer");
        }
        if (next.subPipeline < 0 || next.subPipeline >= plan.subPipelines) {
          return invalid(where(r, tb.id, e) + ": next.subPipeline out of range");
        }
        // One pass moves one slice geometry: the three chunks must have one length, i.e. sit at
        // the same place of their units (plan/plan_storage.h).
        const int32_t unit = planChunkUnit(plan);
        const int32_t residue = unit > 0 ? planStorage(plan, r, entry.dstBuffer, entry.dstIndex).index % unit : 0;
        if (unit > 0 && (planStorage(plan, entry.peer, entry.srcBuffer, entry.srcIndex).index % unit != residue ||
                         planStorage(plan, next.peer, next.dstBuffer, next.dstIndex).index % unit != residue)) {
          return invalid(where(r, tb.id, e) + ": a fused primitive's source, destination and next chunks must sit at "
                         "the same place of their units (chunk index modulo " + std::to_string(unit) + ")");
        }
      } else if (entry.next != PlanEntry::Next{}) {
        return invalid(where(r, tb.id, e) + ": next is set, but " + std::string(primitiveName(entry.kind)) +
                       " is not a fused primitive");
      }
      for (const EntryRef& dep : entry.deps) {
        if (dep.tb < 0 || static_cast<size_t>(dep.tb) >= rank.tbs.size() || dep.entry < 0 ||
            static_cast<size_t>(dep.entry) >= rank.tbs[dep.tb].entries.size()) {
          return invalid(where(r, tb.id, e) + ": dependency [" + std::to_string(dep.tb) + ", " + std::to_string(dep.entry) +
                         "] does not exist");
        }
        if (dep.tb == tb.id && static_cast<size_t>(dep.entry) >= e) {
          return invalid(where(r, tb.id, e) + ": depends on itself or a later entry of its TB");
        }
        depended[dep.tb][dep.entry] = true;
      }
    }
  }
  for (size_t b = 0; b < rank.tbs.size(); ++b) {
    for (size_t e = 0; e < rank.tbs[b].entries.size(); ++e) {
      if (rank.tbs[b].entries[e].hasDependents != depended[b][e]) {
        return invalid(where(r, static_cast<int32_t>(b), e) + ": hasDependents is wrong");
      }
    }
  }
  return {};
}

// Paired entries carry the same task: op, count, slots and sub-pipeline.
Status checkPairs(const Plan& plan) {
  Expected<std::vector<PlanTransfer>> transfers = pairTransfers(plan);
  if (!transfers) return transfers.status();
  size_t index = 0;  // of the transfer within its connection
  for (size_t i = 0; i < transfers->size(); ++i) {
    const PlanTransfer& t = (*transfers)[i];
    if (i > 0 && ((*transfers)[i - 1].srcRank != t.srcRank || (*transfers)[i - 1].dstRank != t.dstRank)) index = 0;
    const SendSide s = sendSideOf(plan.ranks[t.srcRank].tbs[t.send.tb].entries[t.send.entry]);
    const PlanEntry& v = plan.ranks[t.dstRank].tbs[t.recv.tb].entries[t.recv.entry];
    if (s.op != v.op || s.count != v.count || s.srcBuffer != v.srcBuffer || s.srcIndex != v.srcIndex ||
        s.dstBuffer != v.dstBuffer || s.dstIndex != v.dstIndex || s.subPipeline != v.subPipeline) {
      return invalid("connection " + std::to_string(t.srcRank) + " -> " + std::to_string(t.dstRank) + ": send " +
                     std::to_string(index) + " (op " + std::to_string(s.op) + ") does not match receive " +
                     std::to_string(index) + " (op " + std::to_string(v.op) + ")");
    }
    ++index;
  }
  return {};
}

}  // namespace

Status validatePlan(const Plan& plan) {
  if (Status status = checkHeader(plan); !status) return status;
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    if (Status status = checkRank(plan, r); !status) return status;
  }
  if (Status status = checkPairs(plan); !status) return status;
  return checkPlanDeadlockFree(plan);
}

}  // namespace tuccl
