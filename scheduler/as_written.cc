#include "scheduler/as_written.h"

#include <algorithm>
#include <string>
#include <vector>

#include "plan/plan_validate.h"
#include "scheduler/dag.h"
#include "scheduler/lowering.h"

namespace tuccl {
namespace {

Status mismatch(const Algorithm& algorithm, const std::string& what) {
  return makeError(ErrorCode::InvalidInput,
                   algorithm.sourceName + ": the MSCCL schedule does not belong to the algorithm: " + what);
}

// The plan's skeleton: everything but the TBs' entries.
Plan planHeader(const Algorithm& algorithm, const PlanConfig& config) {
  Plan plan = planFromAlgorithm(algorithm, config);
  if (plan.config.nChannels <= 0) plan.config.nChannels = 1;
  plan.scheduler = Scheduler::AsWritten;
  plan.executionLevel = ExecutionLevel::Algorithm;
  plan.tbAllocation = TbPolicy::ConnectionBased;
  int32_t steps = 0;
  for (const Operation& op : algorithm.ops) steps = std::max(steps, op.step + 1);
  plan.subPipelines = std::max(steps, 1);
  plan.ranks.resize(static_cast<size_t>(algorithm.nRanks));
  for (int32_t r = 0; r < algorithm.nRanks; ++r) plan.ranks[r].rank = r;
  return plan;
}

// Places every operation's share on `rank` from the file's TBs (and its <copy> TB) in program
// order; records where each landed.
class EntryPlacer {
 public:
  explicit EntryPlacer(const Algorithm& algorithm)
      : algorithm_(algorithm), sendSide_(algorithm.ops.size()), recvSide_(algorithm.ops.size()) {}

  Status place(int32_t rank, PlanTb& tb, int32_t t) {
    if (t < 0 || static_cast<size_t>(t) >= algorithm_.ops.size()) {
      return mismatch(algorithm_, "operation " + std::to_string(t) + " does not exist");
    }
    const Operation& op = algorithm_.ops[t];
    PlanEntry entry;
    PlacedEntry* side = &recvSide_[t];
    if (op.isLocal()) {
      entry.kind = op.kind == OpKind::Reduce ? PrimitiveKind::Reduce : PrimitiveKind::Copy;
      entry.peer = op.srcRank;
    } else if (op.srcRank == rank) {
      entry.kind = PrimitiveKind::Send;
      entry.peer = op.dstRank;
      side = &sendSide_[t];
    } else {
      entry.kind = op.kind == OpKind::Reduce ? PrimitiveKind::RecvReduceCopy : PrimitiveKind::Recv;
      entry.peer = op.srcRank;
    }
    if (op.dstRank != rank && op.srcRank != rank) {
      return mismatch(algorithm_, "rank " + std::to_string(rank) + " lists operation " + std::to_string(t) +
                                      ", which does not touch it");
    }
    if (side->rank >= 0) {
      return mismatch(algorithm_, "operation " + std::to_string(t) + " is listed twice on rank " + std::to_string(rank));
    }
    entry.srcBuffer = op.srcBuffer;
    entry.srcIndex = op.srcIndex;
    entry.dstBuffer = op.dstBuffer;
    entry.dstIndex = op.dstIndex;
    entry.count = op.count;
    entry.step = op.step;
    entry.op = t;
    entry.subPipeline = op.step;
    entry.loc = op.loc;
    tb.entries.push_back(std::move(entry));
    *side = PlacedEntry{rank, EntryRef{tb.id, static_cast<int32_t>(tb.entries.size()) - 1}};
    return {};
  }

  // Every operation placed on both of its sides.
  Status complete() const {
    for (size_t t = 0; t < algorithm_.ops.size(); ++t) {
      const bool remote = !algorithm_.ops[t].isLocal();
      if (recvSide_[t].rank < 0 || (remote && sendSide_[t].rank < 0)) {
        return mismatch(algorithm_, "operation " + std::to_string(t) + " is in no step");
      }
    }
    return {};
  }

  const std::vector<PlacedEntry>& sendSide() const { return sendSide_; }
  const std::vector<PlacedEntry>& recvSide() const { return recvSide_; }

 private:
  const Algorithm& algorithm_;
  std::vector<PlacedEntry> sendSide_;
  std::vector<PlacedEntry> recvSide_;
};

// A TB runs its entries in order: a task the file puts later in a TB than a task that depends on
// it would read or overwrite the wrong data.
Status checkProgramOrder(const Algorithm& algorithm, const Dag& dag, const std::vector<PlacedEntry>& sendSide,
                         const std::vector<PlacedEntry>& recvSide) {
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (const PlacedEntry* side : {&sendSide[t], &recvSide[t]}) {
      if (side->rank < 0) continue;
      for (int32_t p : dag.predecessors(t)) {
        for (const PlacedEntry* before : {&sendSide[p], &recvSide[p]}) {
          if (before->rank == side->rank && before->ref.tb == side->ref.tb && before->ref.entry > side->ref.entry) {
            const SourceLoc& loc = algorithm.ops[t].loc;
            return makeError(ErrorCode::InvalidInput, algorithm.sourceName, loc,
                             "rank " + std::to_string(side->rank) + " tb " + std::to_string(side->ref.tb) +
                                 " runs this step before one it depends on");
          }
        }
      }
    }
  }
  return {};
}

// The smallest buffering depth at which the file's order cannot deadlock.
Status chooseSendAhead(const Algorithm& algorithm, Plan& plan) {
  const int32_t first = std::max(0, plan.config.sendAhead);
  for (int32_t ahead = first; ahead <= std::max(first, kAsWrittenMaxSendAhead); ++ahead) {
    plan.config.sendAhead = ahead;
    if (checkPlanDeadlockFree(plan)) return {};
  }
  return makeError(ErrorCode::InvalidInput, algorithm.sourceName + ": run as written, the file deadlocks even with " +
                                                std::to_string(std::max(first, kAsWrittenMaxSendAhead)) +
                                                " buffered sends per connection");
}

}  // namespace

Expected<Plan> lowerAsWritten(const Algorithm& algorithm, const MscclSchedule& schedule, const PlanConfig& config) {
  if (schedule.ranks.size() != static_cast<size_t>(algorithm.nRanks)) {
    return mismatch(algorithm, std::to_string(schedule.ranks.size()) + " ranks, the algorithm has " +
                                   std::to_string(algorithm.nRanks));
  }
  Plan plan = planHeader(algorithm, config);
  EntryPlacer placer(algorithm);
  for (int32_t r = 0; r < algorithm.nRanks; ++r) {
    std::vector<PlanTb>& tbs = plan.ranks[r].tbs;
    for (const MscclThreadBlock& fileTb : schedule.ranks[r]) {
      tbs.push_back(PlanTb{static_cast<int32_t>(tbs.size()), -1, -1, {}});
      for (const MscclScheduleStep& step : fileTb.steps) {
        for (int8_t k = 0; k < step.nOps; ++k) {
          if (Status status = placer.place(r, tbs.back(), step.ops[static_cast<size_t>(k)]); !status) return status;
        }
      }
    }
    bool copies = false;
    for (int32_t t : schedule.preCopyOps) {
      if (t < 0 || static_cast<size_t>(t) >= algorithm.ops.size() || algorithm.ops[t].dstRank != r) continue;
      if (!copies) tbs.push_back(PlanTb{static_cast<int32_t>(tbs.size()), -1, -1, {}});
      copies = true;
      if (Status status = placer.place(r, tbs.back(), t); !status) return status;
    }
  }
  if (Status status = placer.complete(); !status) return status;

  const Dag dag = buildDependencyDag(algorithm);
  if (Status status = checkProgramOrder(algorithm, dag, placer.sendSide(), placer.recvSide()); !status) return status;
  addDataDependencies(algorithm, dag, placer.sendSide(), placer.recvSide(), plan);
  setTbPeers(plan);
  if (Status status = chooseSendAhead(algorithm, plan); !status) return status;
  return plan;
}

}  // namespace tuccl
