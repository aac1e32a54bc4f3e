// Small plans built by hand for the tests of the plan's readers (plan/, kernelgen/, sim/): they
// need neither the front end nor the scheduler.
#pragma once

#include <cstdint>
#include <string>

#include "plan/plan.h"

namespace tuccl::testing {

inline PlanEntry sampleEntry(PrimitiveKind kind, int32_t peer, int32_t op, SourceLoc loc) {
  PlanEntry entry;
  entry.kind = kind;
  entry.peer = peer;
  entry.op = op;
  entry.step = 0;
  entry.loc = loc;
  return entry;
}

/// AllGather of 2 ranks, out of place, one chunk per rank (ops as written in "ag.resccl"):
///   op 0, line 3: rank 0 copies input[0] to output[0]
///   op 1, line 4: rank 0 sends input[0] to output[0] of rank 1
///   op 2, line 5: rank 1 copies input[0] to output[1]
///   op 3, line 6: rank 1 sends input[0] to output[1] of rank 0
/// On each rank TB 0 holds the copy and the send, TB 1 the receive.
inline Plan twoRankAllGather() {
  Plan plan;
  plan.collective = Collective::AllGather;
  plan.algorithm = "pair";
  plan.sourceName = "ag.resccl";
  plan.nRanks = 2;
  plan.bufferChunks = {1, 2, 0};
  plan.config.chunkSize = 4096;
  plan.scheduler = Scheduler::Hpds;
  plan.executionLevel = ExecutionLevel::Task;
  plan.tbAllocation = TbPolicy::ConnectionBased;
  plan.subPipelines = 1;
  plan.ranks.resize(2);
  for (int32_t r = 0; r < 2; ++r) {
    const int32_t peer = 1 - r;
    PlanEntry copy = sampleEntry(PrimitiveKind::Copy, r, 2 * r, SourceLoc{static_cast<uint32_t>(3 + 2 * r), 3});
    copy.dstIndex = r;
    PlanEntry send = sampleEntry(PrimitiveKind::Send, peer, 2 * r + 1, SourceLoc{static_cast<uint32_t>(4 + 2 * r), 3});
    send.dstIndex = r;
    PlanEntry recv = sampleEntry(PrimitiveKind::Recv, peer, 2 * peer + 1, SourceLoc{static_cast<uint32_t>(4 + 2 * peer), 3});
    recv.dstIndex = peer;
    plan.ranks[r].rank = r;
    plan.ranks[r].tbs = {PlanTb{0, peer, -1, {copy, send}}, PlanTb{1, -1, peer, {recv}}};
  }
  return plan;
}

/// Broadcast of 3 ranks from root 0, in place, along a chain: op 0 sends rank 0's chunk to rank 1
/// (sub-pipeline 0), op 1 forwards it from rank 1 to rank 2 (sub-pipeline 1) in another TB of
/// rank 1, which depends on the receive.
inline Plan chainBroadcast() {
  Plan plan;
  plan.collective = Collective::Broadcast;
  plan.algorithm = "chain";
  plan.nRanks = 3;
  plan.root = 0;
  plan.bufferChunks = {1, 1, 0};
  plan.inPlace = true;
  plan.scheduler = Scheduler::Hpds;
  plan.executionLevel = ExecutionLevel::Task;
  plan.tbAllocation = TbPolicy::ConnectionBased;
  plan.subPipelines = 2;
  auto transfer = [](PrimitiveKind kind, int32_t peer, int32_t op) {
    PlanEntry entry = sampleEntry(kind, peer, op, SourceLoc{});
    entry.srcBuffer = entry.dstBuffer = BufferKind::Output;
    entry.step = entry.subPipeline = op;
    return entry;
  };
  PlanEntry received = transfer(PrimitiveKind::Recv, 0, 0);
  received.hasDependents = true;
  PlanEntry forward = transfer(PrimitiveKind::Send, 2, 1);
  forward.deps = {EntryRef{0, 0}};
  plan.ranks = {PlanRank{0, {PlanTb{0, 1, -1, {transfer(PrimitiveKind::Send, 1, 0)}}}},
                PlanRank{1, {PlanTb{0, -1, 0, {received}}, PlanTb{1, 2, -1, {forward}}}},
                PlanRank{2, {PlanTb{0, -1, 1, {transfer(PrimitiveKind::Recv, 1, 1)}}}}};
  return plan;
}

}  // namespace tuccl::testing
