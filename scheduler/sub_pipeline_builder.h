// Internal: the sub-pipeline construction shared by HPDS and the round-robin baseline
// (ResCCL §4.3, Algorithm 1, lines 5-26). The chunk queue decides which chunk is visited next.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/dag.h"
#include "scheduler/pipeline.h"

namespace tuccl::detail {

// ChunkQueue:
//   void begin(const std::vector<int64_t>& remaining)  -- a new sub-pipeline; all flags true
//   int32_t next()                                     -- highest-priority flagged chunk, -1 none
//   void succeeded(int32_t chunk, bool hasRemaining)   -- tasks of chunk were inserted
//   void failed(int32_t chunk)                         -- nothing eligible: flag false
template <class ChunkQueue>
Pipeline buildSubPipelines(const Dag& dag, ChunkQueue& queue, Scheduler scheduler) {
  Pipeline pipeline;
  pipeline.scheduler = scheduler;
  pipeline.level = ExecutionLevel::Task;
  pipeline.order.reserve(static_cast<size_t>(dag.nTasks));
  pipeline.subPipelineOf.assign(static_cast<size_t>(dag.nTasks), -1);
  pipeline.subPipelineBegin.push_back(0);

  std::vector<int32_t> waitingOn(static_cast<size_t>(dag.nTasks));
  std::vector<std::vector<int32_t>> ready(static_cast<size_t>(dag.nChunks));
  std::vector<int64_t> remaining(static_cast<size_t>(dag.nChunks), 0);
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    waitingOn[t] = static_cast<int32_t>(dag.predBegin[t + 1] - dag.predBegin[t]);
    ++remaining[dag.chunkOf[t]];
    if (waitingOn[t] == 0) ready[dag.chunkOf[t]].push_back(t);
  }
  // The sub-pipeline that last used each link: a link carries one task per sub-pipeline.
  std::vector<int32_t> linkUsedIn(dag.links.size(), -1);
  std::vector<int32_t> inserted;

  int64_t scheduled = 0;
  for (int32_t k = 0; scheduled < dag.nTasks; ++k) {
    const int64_t before = scheduled;
    queue.begin(remaining);
    for (int32_t chunk = queue.next(); chunk >= 0; chunk = queue.next()) {
      // Task extraction (lines 11-15): ready tasks of the chunk whose link is still free.
      std::vector<int32_t>& list = ready[chunk];
      inserted.clear();
      size_t kept = 0;
      for (int32_t t : list) {
        int32_t& used = linkUsedIn[dag.linkOf[t]];
        if (used == k) {
          list[kept++] = t;
          continue;
        }
        used = k;
        inserted.push_back(t);
      }
      list.resize(kept);
      if (inserted.empty()) {
        queue.failed(chunk);
        continue;
      }
      // Insert (line 19) and remove from G (line 22): dependants become eligible for later
      // visits, in this sub-pipeline too (they wait per micro-batch at run time).
      for (int32_t t : inserted) {
        pipeline.order.push_back(t);
        pipeline.subPipelineOf[t] = k;
        --remaining[chunk];
        ++scheduled;
        for (int32_t s : dag.successors(t)) {
          if (--waitingOn[s] == 0) ready[dag.chunkOf[s]].push_back(s);
        }
      }
      queue.succeeded(chunk, remaining[chunk] > 0);
    }
    if (scheduled == before) throw std::logic_error("scheduler: no task is ready; the dependency graph has a cycle");
    pipeline.subPipelineBegin.push_back(static_cast<int64_t>(pipeline.order.size()));
  }
  return pipeline;
}

}  // namespace tuccl::detail
