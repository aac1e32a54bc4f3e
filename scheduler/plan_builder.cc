#include "scheduler/plan_builder.h"

#include <algorithm>
#include <stdexcept>

#include "lang/load_algorithm.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"
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

void throwIfInvalid(const Plan& plan) {
  if (Status status = validatePlan(plan); !status) {
    throw std::logic_error("the " + std::string(schedulerName(plan.scheduler)) + " plan of " + plan.algorithm +
                           " fails its check: " + status.message());
  }
}

}  // namespace

Expected<Plan> tryBuildPlan(const Algorithm& algorithm, const PlanRequest& request) {
  if (request.scheduler == Scheduler::AsWritten) {
    if (request.mscclSchedule == nullptr) return makeError(ErrorCode::InvalidArgument, std::string(kAsWrittenNeedsXml));
    Expected<Plan> plan = lowerAsWritten(algorithm, *request.mscclSchedule, request.config);
    if (plan) throwIfInvalid(*plan);
    return plan;
  }
  // The DAG, pipeline and TB allocation are dropped before the plan is validated (at 1,024 ranks
  // they hold hundreds of MiB that validation need not share the peak with).
  Plan plan = [&] {
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
  }();
  throwIfInvalid(plan);
  return plan;
}

Plan buildPlan(const Algorithm& algorithm, const PlanRequest& request) {
  Expected<Plan> plan = tryBuildPlan(algorithm, request);
  if (!plan) throw std::invalid_argument(plan.status().message());
  return std::move(*plan);
}

namespace {

// Runs the program with the overrides and proves it.
Expected<Algorithm> compileAndProve(const SourceText& source, const RescclParameters& parameters) {
  RescclOptions options;
  options.parameterOverrides = parameters;
  Expected<Algorithm> algorithm = compileResccl(source, options);
  if (!algorithm) return algorithm;
  if (Status status = proveAlgorithm(*algorithm, source.name()); !status) return status;
  return algorithm;
}

}  // namespace

Expected<Algorithm> loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode) {
  SourceText source;
  try {
    source = readSourceFile(path);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error, ErrorCode::IoError);
  }
  RescclParameters parameters;
  if (nRanks > 0) parameters.emplace_back("nRanks", nRanks);
  if (gpusPerNode > 0) parameters.emplace_back("GPUPerNode", gpusPerNode);
  return compileAndProve(source, parameters);
}

Expected<Algorithm> loadRescclAlgorithmFromText(const std::string& name, std::string text,
                                                const RescclParameters& parameters) {
  return compileAndProve(SourceText(name, std::move(text)), parameters);
}

}  // namespace tuccl
