// Hierarchical priority-based dynamic scheduling, ResCCL §4.3 Algorithm 1.
#include <set>
#include <utility>
#include <vector>

#include "scheduler/pipeline.h"
#include "scheduler/sub_pipeline_builder.h"

namespace tuccl {
namespace {

// Q of Algorithm 1: chunks ordered by how often they were inserted so far (fewest first: the
// least executed chunk has the highest priority), ties by ChunkId. Priorities persist across
// sub-pipelines; flags (membership of `flagged_`) are reset for every sub-pipeline.
class PriorityChunkQueue {
 public:
  explicit PriorityChunkQueue(int32_t nChunks) : executed_(static_cast<size_t>(nChunks), 0) {}

  void begin(const std::vector<int64_t>& remaining) {
    flagged_.clear();
    for (size_t c = 0; c < remaining.size(); ++c) {
      if (remaining[c] > 0) flagged_.emplace(executed_[c], static_cast<int32_t>(c));
    }
  }
  int32_t next() const { return flagged_.empty() ? -1 : flagged_.begin()->second; }
  void succeeded(int32_t chunk, bool hasRemaining) {
    flagged_.erase({executed_[chunk], chunk});
    ++executed_[chunk];  // line 20: C.priority <- C.priority - 1; line 21: Q.sort()
    if (hasRemaining) flagged_.emplace(executed_[chunk], chunk);
  }
  void failed(int32_t chunk) { flagged_.erase({executed_[chunk], chunk}); }

 private:
  std::vector<int64_t> executed_;
  std::set<std::pair<int64_t, int32_t>> flagged_;
};

}  // namespace

Pipeline scheduleHpds(const Dag& dag) {
  PriorityChunkQueue queue(dag.nChunks);
  return detail::buildSubPipelines(dag, queue, Scheduler::Hpds);
}

}  // namespace tuccl
