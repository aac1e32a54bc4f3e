// Pipeline invariants, shared by every scheduler.
#include <string>
#include <vector>

#include "scheduler/pipeline.h"

namespace tuccl {
namespace {

std::string firstPipelineProblem(const Dag& dag, const Pipeline& pipeline) {
  const auto n = static_cast<size_t>(dag.nTasks);
  if (pipeline.order.size() != n || pipeline.subPipelineOf.size() != n) return "the pipeline does not hold every task once";
  if (pipeline.subPipelineBegin.empty() || pipeline.subPipelineBegin.front() != 0 ||
      pipeline.subPipelineBegin.back() != static_cast<int64_t>(n)) {
    return "sub-pipeline offsets do not cover the order";
  }
  std::vector<int64_t> position(n, -1);
  for (int32_t k = 0; k < pipeline.subPipelineCount(); ++k) {
    if (pipeline.subPipelineBegin[k] > pipeline.subPipelineBegin[k + 1]) return "sub-pipeline offsets decrease";
    for (int64_t i = pipeline.subPipelineBegin[k]; i < pipeline.subPipelineBegin[k + 1]; ++i) {
      const int32_t t = pipeline.order[i];
      if (t < 0 || static_cast<size_t>(t) >= n || position[t] >= 0) return "task " + std::to_string(t) + " is missing or repeated";
      if (pipeline.subPipelineOf[t] != k) return "task " + std::to_string(t) + " has the wrong sub-pipeline index";
      position[t] = i;
    }
  }
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    for (int32_t p : dag.predecessors(t)) {
      if (position[p] >= position[t]) {
        return "task " + std::to_string(t) + " runs before the task " + std::to_string(p) + " it depends on";
      }
    }
  }
  if (pipeline.level == ExecutionLevel::Task) {
    std::vector<int32_t> linkUsedIn(dag.links.size(), -1);
    for (int32_t k = 0; k < pipeline.subPipelineCount(); ++k) {
      for (int32_t t : pipeline.subPipeline(k)) {
        if (linkUsedIn[dag.linkOf[t]] == k) {
          return "sub-pipeline " + std::to_string(k) + " holds two tasks on the link of task " + std::to_string(t);
        }
        linkUsedIn[dag.linkOf[t]] = k;
      }
    }
  }
  return {};
}

}  // namespace

Status validatePipeline(const Dag& dag, const Pipeline& pipeline) {
  std::string problem = firstPipelineProblem(dag, pipeline);
  if (problem.empty()) return {};
  return makeError(ErrorCode::Internal, "invalid pipeline: " + problem);
}

}  // namespace tuccl
