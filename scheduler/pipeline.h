// Execution schedules: the global pipeline of an algorithm (ResCCL §3, §4.3).
//
// In:  an Algorithm and its Dag (scheduler/dag.h).
// Out: a Pipeline: the tasks in execution order, cut into sub-pipelines.
//
// Task-level execution (HPDS, RR): a TB runs one task for all micro-batches before moving on;
// a sub-pipeline is a set of tasks on pairwise distinct links, data dependencies always point to
// the same or an earlier sub-pipeline (a dependant in the same sub-pipeline waits per
// micro-batch, ResCCL Eq. 5). Algorithm-level and stage-level execution (Eq. 3, Eq. 4) replay a
// block of steps per micro-batch; their sub-pipelines are steps and stages and may hold several
// tasks of one link. See docs/scheduling.md for the decisions where the paper is ambiguous.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "scheduler/dag.h"
#include "support/status.h"

namespace tuccl {

struct Pipeline {
  Scheduler scheduler = Scheduler::Hpds;
  ExecutionLevel level = ExecutionLevel::Task;
  std::vector<int32_t> order;             ///< every task once, in execution order
  std::vector<int64_t> subPipelineBegin;  ///< sub-pipeline k is order[begin[k] .. begin[k + 1])
  std::vector<int32_t> subPipelineOf;     ///< per task: the index of its sub-pipeline

  int32_t subPipelineCount() const { return static_cast<int32_t>(subPipelineBegin.size()) - 1; }
  std::span<const int32_t> subPipeline(int32_t k) const {
    return {order.data() + subPipelineBegin[k], static_cast<size_t>(subPipelineBegin[k + 1] - subPipelineBegin[k])};
  }
};

/// Hierarchical priority-based dynamic scheduling, ResCCL §4.3 Algorithm 1.
Pipeline scheduleHpds(const Dag& dag);

/// Round-robin baseline (ResCCL §5.3): the same sub-pipeline construction, but chunks are visited
/// in a fixed ascending circular order instead of by priority.
Pipeline scheduleRoundRobin(const Dag& dag);

/// Algorithm-level execution (MSCCL/TACCL runtimes, Eq. 3): one sub-pipeline per step, tasks in
/// op order.
Pipeline scheduleAlgorithmLevel(const Algorithm& algorithm, const Dag& dag);

/// Stage-level execution (Eq. 4): steps cut into `stages` contiguous blocks of (nearly) equal
/// numbers of steps; one sub-pipeline per stage.
Pipeline scheduleStageLevel(const Algorithm& algorithm, const Dag& dag, int32_t stages);

/// Checks the invariants every Pipeline must satisfy: a permutation of the tasks, subPipelineOf
/// consistent, every data dependency in the same or an earlier sub-pipeline and earlier in
/// `order`, and for task-level pipelines distinct links within each sub-pipeline. Returns the
/// first violation as an Internal status (an invalid pipeline is a scheduler bug), ok when valid.
Status validatePipeline(const Dag& dag, const Pipeline& pipeline);

}  // namespace tuccl
