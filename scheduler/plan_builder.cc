#include "scheduler/plan_builder.h"

#include <algorithm>
#include <stdexcept>

#include "plan/plan_validate.h"
#include "scheduler/as_written.h"
#include "scheduler/dag.h"
#include "scheduler/lowering.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"

namespace tuccl {

std::optional<TbRequest> parseTbRequest(std::string_view name) {
  if (name == "auto") return TbRequest{};
  if (name == "connection+channels") return TbRequest{TbPolicy::ConnectionBased, true};
  if (auto policy = parseTbPolicy(name)) return TbRequest{*policy, false};
  return std::nullopt;
}

namespace {

Pipeline schedule(const Algorithm& algorithm, const Dag& dag, const PlanRequest& request) {
  switch (request.scheduler) {
    case Scheduler::Hpds: return scheduleHpds(dag);
    case Scheduler::RoundRobin: return scheduleRoundRobin(dag);
    case Scheduler::AlgorithmLevel: return scheduleAlgorithmLevel(algorithm, dag);
    case Scheduler::StageLevel: return scheduleStageLevel(algorithm, dag, std::max(1, request.stages));
    case Scheduler::AsWritten: break;  // the file's own schedule, lowered by lowerAsWritten
  }
  throw std::logic_error("unknown scheduler");
}

// The plan's own check: a plan that fails it is a scheduler bug.
Status checkBuilt(const Plan& plan) {
  if (Status status = validatePlan(plan); !status) {
    return makeError(ErrorCode::Internal, "the " + std::string(schedulerName(plan.scheduler)) + " plan of " +
                                              plan.algorithm + " fails its check: " + status.message());
  }
  return {};
}

// DAG -> pipeline -> TB allocation -> lowering. The DAG, pipeline and TB allocation are dropped
// before the plan is validated (at 1,024 ranks they hold hundreds of MiB that validation need not
// share the peak with).
Plan scheduleAndLower(const Algorithm& algorithm, const PlanRequest& request) {
  const Dag dag = buildDependencyDag(algorithm);
  const Pipeline pipeline = schedule(algorithm, dag, request);
  TbRequest tbs = request.tbAllocation;
  if (!tbs.policy) {
    const bool taskLevel = pipeline.level == ExecutionLevel::Task;
    tbs = TbRequest{taskLevel ? TbPolicy::StateBased : TbPolicy::ConnectionBased, !taskLevel};
  }
  TbAllocationOptions options;
  options.policy = *tbs.policy;
  if (tbs.forwardingChannels) options.channelOfTask = channelsByForwarding(algorithm, dag);
  if (!tbs.channelOfOperation.empty()) options.channelOfTask = tbs.channelOfOperation;
  const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, options);
  PlanConfig config = request.config;
  if (config.nChannels <= 0) config.nChannels = algorithm.nChannels > 0 ? algorithm.nChannels : 1;
  Plan lowered = lowerToPlan(algorithm, dag, pipeline, allocation, config, request.fuse);
  if (lowered.config.sendAhead > 0 && !checkPlanDeadlockFree(lowered)) {
    // The rings are too shallow for the buffered order: the pipeline's order needs none.
    config.sendAhead = 0;
    lowered = lowerToPlan(algorithm, dag, pipeline, allocation, config, request.fuse);
  }
  return lowered;
}

// The plan of the request's scheduler, before its check.
Expected<Plan> lower(const Algorithm& algorithm, const PlanRequest& request) {
  if (request.scheduler != Scheduler::AsWritten) return scheduleAndLower(algorithm, request);
  if (request.mscclSchedule == nullptr) return makeError(ErrorCode::InvalidArgument, std::string(kAsWrittenNeedsXml));
  return lowerAsWritten(algorithm, *request.mscclSchedule, request.config);
}

}  // namespace

Expected<Plan> buildPlan(const Algorithm& algorithm, const PlanRequest& request) {
  const std::vector<int32_t>& channels = request.tbAllocation.channelOfOperation;
  if (!channels.empty() && channels.size() != algorithm.ops.size()) {
    return makeError(ErrorCode::InvalidArgument, "channelOfOperation has " + std::to_string(channels.size()) +
                                                     " channels for " + std::to_string(algorithm.ops.size()) +
                                                     " operations");
  }
  if (std::any_of(channels.begin(), channels.end(), [](int32_t c) { return c < 0; }))
    return makeError(ErrorCode::InvalidArgument, "channelOfOperation has a negative channel");
  try {
    Expected<Plan> plan = lower(algorithm, request);
    if (!plan) return plan;
    if (Status status = checkBuilt(*plan); !status) return status;
    return plan;
  } catch (const std::logic_error& error) {
    // A stage's own consistency check failed (the algorithm, DAG, pipeline and allocation disagree).
    return makeError(ErrorCode::Internal, error.what());
  }
}

}  // namespace tuccl
