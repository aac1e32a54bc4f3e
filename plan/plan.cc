// Names of the primitive kinds, the send side of an entry and the unfused view (plan.h).
#include "plan/plan.h"

#include <algorithm>
#include <array>

namespace tuccl {
namespace {

constexpr std::array<std::string_view, 8> kPrimitiveNames = {
    "send", "recv", "recvReduceCopy", "copy", "reduce", "recvCopySend", "recvReduceSend", "recvReduceCopySend"};

}  // namespace

std::string_view primitiveName(PrimitiveKind kind) {
  const auto index = static_cast<size_t>(kind);
  return index < kPrimitiveNames.size() ? kPrimitiveNames[index] : std::string_view("?");
}

std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name) {
  for (size_t i = 0; i < kPrimitiveNames.size(); ++i) {
    if (kPrimitiveNames[i] == name) return static_cast<PrimitiveKind>(i);
  }
  return std::nullopt;
}

const char* primitiveNameList() {
  return "send, recv, recvReduceCopy, copy, reduce, recvCopySend, recvReduceSend or recvReduceCopySend";
}

bool isReceive(PrimitiveKind kind) {
  return kind == PrimitiveKind::Recv || kind == PrimitiveKind::RecvReduceCopy || isFused(kind);
}

bool isLocal(PrimitiveKind kind) { return kind == PrimitiveKind::Copy || kind == PrimitiveKind::Reduce; }

bool isFused(PrimitiveKind kind) {
  return kind == PrimitiveKind::RecvCopySend || kind == PrimitiveKind::RecvReduceSend ||
         kind == PrimitiveKind::RecvReduceCopySend;
}

bool isSending(PrimitiveKind kind) { return kind == PrimitiveKind::Send || isFused(kind); }

bool reducesIncoming(PrimitiveKind kind) {
  return kind == PrimitiveKind::RecvReduceCopy || kind == PrimitiveKind::RecvReduceSend ||
         kind == PrimitiveKind::RecvReduceCopySend;
}

PrimitiveKind fusedKind(PrimitiveKind receive, bool stores) {
  if (receive == PrimitiveKind::Recv) return PrimitiveKind::RecvCopySend;
  return stores ? PrimitiveKind::RecvReduceCopySend : PrimitiveKind::RecvReduceSend;
}

PrimitiveKind receiveOf(PrimitiveKind kind) {
  if (kind == PrimitiveKind::RecvCopySend) return PrimitiveKind::Recv;
  if (reducesIncoming(kind)) return PrimitiveKind::RecvReduceCopy;
  return kind;
}

SendSide sendSideOf(const PlanEntry& entry) {
  if (!isFused(entry.kind)) {
    return SendSide{entry.peer,      entry.op,       entry.subPipeline, entry.step,  entry.srcBuffer,
                    entry.srcIndex,  entry.dstBuffer, entry.dstIndex,   entry.count, entry.loc};
  }
  return SendSide{entry.next.peer,  entry.next.op,       entry.next.subPipeline, entry.next.step, entry.dstBuffer,
                  entry.dstIndex,   entry.next.dstBuffer, entry.next.dstIndex,    entry.count,     entry.next.loc};
}

bool hasFusedEntries(const Plan& plan) {
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (const PlanEntry& entry : tb.entries) {
        if (isFused(entry.kind)) return true;
      }
    }
  }
  return false;
}

int32_t minStagingSlots(const Plan& plan) { return hasFusedEntries(plan) ? 2 : 1; }

Plan unfusedPlan(const Plan& plan, std::vector<std::vector<std::vector<bool>>>* splitReceives) {
  if (splitReceives != nullptr) {
    splitReceives->assign(plan.ranks.size(), {});
    for (const PlanRank& rank : plan.ranks) {
      auto& tbs = (*splitReceives)[&rank - plan.ranks.data()];
      for (const PlanTb& tb : rank.tbs) {
        std::vector<bool>& split = tbs.emplace_back();
        for (const PlanEntry& entry : tb.entries) {
          split.push_back(isFused(entry.kind));
          if (isFused(entry.kind)) split.push_back(false);
        }
      }
    }
  }
  if (!hasFusedEntries(plan)) return plan;
  Plan out = plan;
  // A fused chain's sends never waited for their receivers (checkPlanDeadlockFree): split, each
  // send may complete into a free slot before its receive runs — the buffered order.
  if (plan.executionLevel == ExecutionLevel::Algorithm) out.config.sendAhead = std::max(out.config.sendAhead, 1);
  for (PlanRank& rank : out.ranks) {
    // Where entry e of each TB goes: its receive half (a fused entry's send half is the next).
    std::vector<std::vector<int32_t>> moved(rank.tbs.size());
    for (size_t b = 0; b < rank.tbs.size(); ++b) {
      int32_t next = 0;
      for (const PlanEntry& entry : rank.tbs[b].entries) {
        moved[b].push_back(next);
        next += isFused(entry.kind) ? 2 : 1;
      }
    }
    auto renumber = [&](const EntryRef& ref) {
      const PlanEntry& target = plan.ranks[rank.rank].tbs[ref.tb].entries[ref.entry];
      return EntryRef{ref.tb, moved[ref.tb][ref.entry] + (isFused(target.kind) ? 1 : 0)};
    };
    for (PlanTb& tb : rank.tbs) {
      std::vector<PlanEntry> entries;
      entries.reserve(tb.entries.size() * 2);
      for (PlanEntry& entry : tb.entries) {
        for (EntryRef& dep : entry.deps) dep = renumber(dep);
        if (!isFused(entry.kind)) {
          entries.push_back(std::move(entry));
          continue;
        }
        const SendSide side = sendSideOf(entry);
        PlanEntry send;
        send.kind = PrimitiveKind::Send;
        send.peer = side.peer;
        send.srcBuffer = side.srcBuffer;
        send.srcIndex = side.srcIndex;
        send.dstBuffer = side.dstBuffer;
        send.dstIndex = side.dstIndex;
        send.count = side.count;
        send.step = side.step;
        send.op = side.op;
        send.subPipeline = side.subPipeline;
        send.loc = side.loc;
        send.hasDependents = entry.hasDependents;
        entry.kind = receiveOf(entry.kind);
        entry.next = {};
        entry.hasDependents = false;  // dependants wait for the send, which follows in the TB
        entries.push_back(std::move(entry));
        entries.push_back(std::move(send));
      }
      tb.entries = std::move(entries);
    }
  }
  // The TBs' peers stay: a fused entry's send peer is its next peer (PlanTb).
  return out;
}

}  // namespace tuccl
