// Baseline schedulers beside HPDS: round-robin (ResCCL §5.3), algorithm-level (Eq. 3) and
// stage-level (Eq. 4) execution.
#include <algorithm>
#include <deque>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "scheduler/pipeline.h"
#include "scheduler/sub_pipeline_builder.h"

namespace tuccl {
namespace {

// Chunks in ascending ChunkId order on a circular queue: a chunk that inserted tasks goes to the
// back, one with nothing eligible leaves the queue for this sub-pipeline. The next sub-pipeline
// starts after the last chunk that inserted tasks, so the circle is never restarted at chunk 0.
class CircularChunkQueue {
 public:
  explicit CircularChunkQueue(int32_t nChunks) : nChunks_(nChunks) {}

  void begin(const std::vector<int64_t>& remaining) {
    queue_.clear();
    for (int32_t i = 0; i < nChunks_; ++i) {
      const int32_t c = (cursor_ + i) % nChunks_;
      if (remaining[c] > 0) queue_.push_back(c);
    }
  }
  int32_t next() const { return queue_.empty() ? -1 : queue_.front(); }
  void succeeded(int32_t chunk, bool hasRemaining) {
    queue_.pop_front();
    if (hasRemaining) queue_.push_back(chunk);
    cursor_ = (chunk + 1) % nChunks_;
  }
  void failed(int32_t) { queue_.pop_front(); }

 private:
  int32_t nChunks_;
  int32_t cursor_ = 0;
  std::deque<int32_t> queue_;
};

// Sub-pipelines are blocks of consecutive steps; block b holds the steps whose rank among the
// distinct steps is in [b * size, (b + 1) * size).
Pipeline scheduleStepBlocks(const Algorithm& algorithm, const Dag& dag, int32_t stepsPerBlock, Scheduler scheduler) {
  std::vector<int32_t> steps;
  steps.reserve(algorithm.ops.size());
  for (const Operation& op : algorithm.ops) steps.push_back(op.step);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());

  Pipeline pipeline;
  pipeline.scheduler = scheduler;
  pipeline.level = executionLevelOf(scheduler);
  pipeline.order.resize(static_cast<size_t>(dag.nTasks));
  std::iota(pipeline.order.begin(), pipeline.order.end(), 0);
  std::stable_sort(pipeline.order.begin(), pipeline.order.end(),
                   [&](int32_t a, int32_t b) { return algorithm.ops[a].step < algorithm.ops[b].step; });
  pipeline.subPipelineOf.resize(static_cast<size_t>(dag.nTasks));
  pipeline.subPipelineBegin.push_back(0);
  int32_t block = 0;
  for (size_t i = 0; i < pipeline.order.size(); ++i) {
    const int32_t t = pipeline.order[i];
    const auto rank = static_cast<int32_t>(std::lower_bound(steps.begin(), steps.end(), algorithm.ops[t].step) - steps.begin());
    const int32_t b = rank / stepsPerBlock;
    while (block < b) {
      pipeline.subPipelineBegin.push_back(static_cast<int64_t>(i));
      ++block;
    }
    pipeline.subPipelineOf[t] = block;
  }
  if (!pipeline.order.empty()) pipeline.subPipelineBegin.push_back(static_cast<int64_t>(pipeline.order.size()));
  return pipeline;
}

}  // namespace

Pipeline scheduleRoundRobin(const Dag& dag) {
  CircularChunkQueue queue(dag.nChunks);
  return detail::buildSubPipelines(dag, queue, Scheduler::RoundRobin);
}

Pipeline scheduleAlgorithmLevel(const Algorithm& algorithm, const Dag& dag) {
  return scheduleStepBlocks(algorithm, dag, 1, Scheduler::AlgorithmLevel);
}

Pipeline scheduleStageLevel(const Algorithm& algorithm, const Dag& dag, int32_t stages) {
  if (stages < 1) throw std::invalid_argument("the stage-level scheduler needs at least 1 stage");
  std::vector<int32_t> steps;
  for (const Operation& op : algorithm.ops) steps.push_back(op.step);
  std::sort(steps.begin(), steps.end());
  const auto distinct = static_cast<int32_t>(std::unique(steps.begin(), steps.end()) - steps.begin());
  const int32_t perStage = std::max(1, (distinct + stages - 1) / stages);
  return scheduleStepBlocks(algorithm, dag, perStage, Scheduler::StageLevel);
}

}  // namespace tuccl
