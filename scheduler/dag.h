// The dependency DAG of an algorithm (ResCCL §3 and §4.1, Figure 5(b)).
//
// In:  a structurally valid Algorithm (lang/algorithm.h).
// Out: a Dag whose nodes are the algorithm's operations ("transmission tasks", indexed like
//      Algorithm::ops) with
//        - data dependencies as edges: two tasks touching the same (rank, storage, chunk) slot,
//          at least one writing it, at different steps; the earlier step comes first;
//        - communication dependencies as a link id per task: tasks on the same link must not run
//          in the same sub-pipeline. The DAG never lists the O(n^2) pairs; it indexes tasks by
//          link instead (tasksOfLink).
//
// Edges are the transitive-reduction-friendly "last writer / readers since" edges: a read depends
// on the last write of the slot, a write on the last write and on every read since it. Every
// conflicting pair is then ordered through a path of edges, and the edge count stays linear in
// the slot accesses (about 2 per task for the HM algorithms).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "lang/algorithm.h"

namespace tuccl {

/// A link: the directed connection srcRank -> dstRank (srcRank == dstRank for local operations,
/// which each rank runs on its own local connection).
struct DagLink {
  int32_t srcRank = 0;
  int32_t dstRank = 0;
  friend bool operator==(const DagLink&, const DagLink&) = default;
  friend auto operator<=>(const DagLink&, const DagLink&) = default;
};

struct DagOptions {
  /// Hook for topology-aware communication dependencies: maps a task to the key of the resource
  /// it occupies. Tasks with equal keys share a link. Unset: the task's connection
  /// (srcRank, dstRank). A later topology stage can map connections that share a NIC to one key.
  std::function<uint64_t(const Operation&)> linkKey;
};

struct Dag {
  int32_t nTasks = 0;
  /// Data dependencies in CSR form: the predecessors of task t are
  /// preds[predBegin[t] .. predBegin[t + 1]), sorted and unique; successors likewise.
  std::vector<int64_t> predBegin;
  std::vector<int32_t> preds;
  std::vector<int64_t> succBegin;
  std::vector<int32_t> succs;
  /// Communication dependencies: the link of each task, and the tasks of each link in op order.
  std::vector<int32_t> linkOf;
  std::vector<DagLink> links;  ///< per link id: the connection of its first task (sorted by key)
  std::vector<int64_t> linkTaskBegin;
  std::vector<int32_t> linkTasks;
  /// The ChunkId of each task (ResCCL §4.3): the first destination chunk index in storage
  /// (inPlaceStorage). HPDS schedules chunk by chunk.
  std::vector<int32_t> chunkOf;
  int32_t nChunks = 0;

  std::span<const int32_t> predecessors(int32_t task) const {
    return {preds.data() + predBegin[task], static_cast<size_t>(predBegin[task + 1] - predBegin[task])};
  }
  std::span<const int32_t> successors(int32_t task) const {
    return {succs.data() + succBegin[task], static_cast<size_t>(succBegin[task + 1] - succBegin[task])};
  }
  std::span<const int32_t> tasksOfLink(int32_t link) const {
    return {linkTasks.data() + linkTaskBegin[link],
            static_cast<size_t>(linkTaskBegin[link + 1] - linkTaskBegin[link])};
  }
  int64_t edgeCount() const { return static_cast<int64_t>(preds.size()); }
};

/// Builds the DAG. Accesses of one slot in the same step are concurrent and get no edge (a
/// conflicting pair there is a race, which the semantic checker reports). Throws
/// std::invalid_argument when the algorithm is not structurally valid.
Dag buildDependencyDag(const Algorithm& algorithm, const DagOptions& options = {});

/// Dense slot numbering shared by the DAG, lowering and the plan checker: slot of chunk `index`
/// of `buffer` on `rank`, after inPlaceStorage.
class SlotNumbering {
 public:
  explicit SlotNumbering(const Algorithm& algorithm);
  int64_t slot(int32_t rank, BufferKind buffer, int32_t index) const;
  int64_t slotCount() const { return slotsPerRank_ * nRanks_; }

 private:
  const Algorithm* algorithm_;
  std::array<int64_t, kBufferKinds> base_{};
  int64_t slotsPerRank_ = 0;
  int64_t nRanks_ = 0;
};

}  // namespace tuccl
