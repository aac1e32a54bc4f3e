#include "scheduler/plan_builder.h"

#include <algorithm>
#include <stdexcept>

#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"

namespace tuccl {

Plan buildPlan(const Algorithm& algorithm, const PlanRequest& request) {
  const Dag dag = buildDependencyDag(algorithm);
  Pipeline pipeline;
  const std::string& s = request.scheduler;
  bool taskLevel = true;
  if (s == "hpds") {
    pipeline = scheduleHpds(dag);
  } else if (s == "rr") {
    pipeline = scheduleRoundRobin(dag);
  } else if (s == "algorithm" || s == "algorithm-level") {
    pipeline = scheduleAlgorithmLevel(algorithm, dag);
    taskLevel = false;
  } else if (s == "stage" || s == "stage-level") {
    pipeline = scheduleStageLevel(algorithm, dag, std::max(1, request.stages));
    taskLevel = false;
  } else {
    throw std::invalid_argument("unknown scheduler '" + s + "' (hpds, rr, algorithm, stage)");
  }
  std::string allocation = request.tbAllocation;
  if (allocation == "auto") allocation = taskLevel ? "state" : "connection+channels";
  TbAllocationOptions options;
  if (allocation == "state") {
    options.policy = TbPolicy::StateBased;
  } else if (allocation == "connection") {
    options.policy = TbPolicy::ConnectionBased;
  } else if (allocation == "connection+channels") {
    options.policy = TbPolicy::ConnectionBased;
    options.channelOfTask = channelsByForwarding(algorithm, dag);
  } else {
    throw std::invalid_argument("unknown TB allocation '" + allocation +
                                "' (auto, state, connection, connection+channels)");
  }
  const TbAllocation tbs = allocateThreadBlocks(algorithm, dag, pipeline, options);
  PlanConfig config = request.config;
  if (config.nChannels <= 0) config.nChannels = algorithm.nChannels > 0 ? algorithm.nChannels : 1;
  Plan plan = lowerToPlan(algorithm, dag, pipeline, tbs, config);
  if (auto problem = validatePlan(plan))
    throw std::logic_error("the " + pipeline.scheduler + " plan of " + algorithm.name + " fails its check: " + *problem);
  return plan;
}

Algorithm loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode) {
  const SourceText source = readSourceFile(path);
  RescclOptions options;
  if (nRanks > 0) options.parameterOverrides.emplace_back("nRanks", nRanks);
  if (gpusPerNode > 0) options.parameterOverrides.emplace_back("GPUPerNode", gpusPerNode);
  Expected<Algorithm> compiled = compileResccl(source, options);
  throwIfError(compiled.status());
  Algorithm algorithm = std::move(compiled).value();
  const CheckReport report = checkAlgorithm(algorithm);
  if (!report.ok()) {
    const std::vector<Diagnostic> diagnostics = violationDiagnostics(algorithm, *report.violation);
    if (!diagnostics.empty()) throw DiagnosticError(diagnostics.front());
    throw DiagnosticError(Diagnostic{Severity::Error, path, SourceLoc{}, "the algorithm fails the semantic check"});
  }
  return algorithm;
}

}  // namespace tuccl
