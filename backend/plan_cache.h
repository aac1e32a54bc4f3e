// Plans from the table (design.md "libtuccl"): per call, (collective, bytes) -> the lookup
// table's entry -> an algorithm for this communicator -> a plan, compiled once and cached in
// memory and on disk.
//
// Algorithms: the entry's "algorithm" (a built-in name or a ResCCLang file), else the family of
// its NCCL algorithm (RING -> ring / chain, TREE -> binomial trees for Broadcast and Reduce),
// else the built-in default: ring AllReduce / AllGather / ReduceScatter, chain Broadcast /
// Reduce, direct AllToAll. Built-in algorithms are ResCCLang programs embedded in the library.
// Configuration: the entry's nChannels and chunkSize, else the defaults of PlanCacheOptions.
// Thread blocks: state-based (ResCCL), except small calls on the CPU device, which run each rank's
// whole plan in one TB (PlanCacheOptions::singleTbMaxBytes).
// Selection is plan_selection.h, the built-in programs builtin_algorithms.h. A plan's identity is
// its algorithm (program text and parameters) and configuration, never the call's count, datatype
// or operation: the kernels take those at run time (KernelArgs), so one plan serves every size
// that selects it.
//
// Disk cache (TUCCL_CACHE_DIR, default $XDG_CACHE_HOME/tuccl, else ~/.cache/tuccl): plan JSON,
// host kernel libraries and CUBINs, each under the hash of everything it was built from; files
// are written to a temporary name and renamed, carry a checksum that is verified on load (a
// corrupted entry is logged, removed and rebuilt), and a per-entry lock file makes concurrent
// processes build an entry once. An unwritable cache directory degrades to memory-only (logged
// once).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend/device.h"
#include "support/collective_call.h"
#include "table/lookup_table.h"

namespace tuccl::backend {

struct PlanCacheOptions {
  int32_t nRanks = 1;
  int32_t nNodes = 1;
  std::string topology;        ///< topology signature matched against table entries; empty: any
  std::string cacheDir;        ///< empty: memory only
  int64_t defaultChunkSize = 256 << 10;  ///< bytes per slice when the table gives none
  /// Channels (kernel replicas, docs/kernels.md "Channels") when the table gives none, and the
  /// most a table entry may ask for (0: no limit); TUCCL_NCHANNELS (forcedChannels) beats both.
  /// The communicator sets them per device (docs/runtime.md "Channels").
  int32_t defaultChannels = 1;
  int32_t maxChannels = 0;
  /// The TBs a rank's kernel may run at once, every channel's (0: no limit): its GPU's SMs over
  /// the ranks sharing that GPU, agreed by every rank at init. A plan whose TBs exceed it is
  /// refused (ResourceExhausted); its channels are cut to what fits (plan_cache.cc).
  int32_t maxBlocksPerRank = 0;
  bool hostKernels = true;     ///< build the host library (CPU device)
  std::string cudaArch;        ///< non-empty: compile CUBINs for it ("sm_90")
  /// Calls of at most this many tuner bytes get one TB per rank (TbPolicy::Single) when the plans
  /// are not for a GPU (no cudaArch: the CPU device): a TB is a thread there, and a small call
  /// costs less than waking several; larger calls keep state-based TBs. 0: never.
  uint64_t singleTbMaxBytes = 64 << 10;
  /// The table's file (TUCCL_TUNER_TABLE): named in errors, and relative "tucclAlgorithm" paths
  /// are resolved against its directory; empty: "the tuning table", and the working directory.
  std::string tablePath;
  /// The environment's overrides, beating the table (TUCCL_ALGO, TUCCL_NCHANNELS,
  /// TUCCL_CHUNK_SIZE): a built-in family or a ResCCLang file; channels; slice bytes. Empty / 0:
  /// none.
  std::string forcedAlgorithm;
  int32_t forcedChannels = 0;
  int64_t forcedChunkSize = 0;
  /// Lower with fused primitives (TUCCL_FUSE; docs/scheduling.md "Fusion").
  bool fuse = true;
  /// TUCCL_PROTO: the protocol of every plan (beats the table's); empty: the table's, else Simple.
  std::optional<Protocol> forcedProtocol;
};

/// What a PlanCache did, for logs and tests.
struct PlanCacheStats {
  int64_t plansBuilt = 0;        ///< compiled from the algorithm (ResCCLang -> scheduler -> plan)
  int64_t plansLoaded = 0;       ///< read from the disk cache
  int64_t hostBuilds = 0;        ///< host libraries compiled
  int64_t hostLoaded = 0;        ///< host libraries found compiled (disk or this process)
  int64_t cubinsCompiled = 0;    ///< NVRTC compilations (one per distinct kernel)
  int64_t cubinsLoaded = 0;      ///< CUBIN sets read from the disk cache
  int64_t damagedEntries = 0;    ///< disk entries that failed their checksum and were rebuilt
  bool diskCache = false;        ///< the cache directory is in use (false: memory only)
};

/// What a call asks for: the call itself. The plan cache reads its collective, count, datatype
/// and root (Broadcast, Reduce); the rank count is the communicator's (PlanCacheOptions).
using PlanQuery = CollectiveCall;

/// The table's decision for one call, made once (PlanCache::decide: one lookup in the table's
/// index): everything later steps of the call need from the table.
struct CallDecision {
  PlanQuery query;
  const TableEntry* entry = nullptr;  ///< the entry that decides the call; nullptr: the built-in default
  int32_t entryIndex = -1;            ///< its index in the table; -1: none
  int32_t groups = 1;                 ///< the configuration groups the call may run (candidateGroups' size)
  uint64_t bytes = 0;                 ///< the size NCCL's tuner is asked about (tunerBytes)
};

class PlanCache {
 public:
  /// `table` may be empty (no TUCCL_TUNER_TABLE): every call gets the built-in default.
  PlanCache(std::optional<LookupTable> table, PlanCacheOptions options);

  /// A hash of the table's content (0 without a table); the ranks compare it at init.
  uint64_t tableHash() const;
  /// The communicator's shape as the ranks' agreement found it: its hosts (the plans' node count)
  /// and the TBs one rank runs at once (0: no limit). Before the first plan only.
  void setCommunicatorShape(int32_t nNodes, int32_t maxBlocksPerRank);
  /// The plan for `query` run as configuration group `group` (0: the static choice); the same on
  /// every rank for the same table, query and group. Thread-safe:
  /// concurrent calls for one plan build it once. nRanks 1 is InvalidArgument (the communicator
  /// copies locally); a table entry whose algorithm does not load or prove is an error naming the
  /// table and the entry, never another plan.
  Expected<std::shared_ptr<const CompiledPlan>> planFor(const PlanQuery& query, int32_t group = 0);
  /// The call's decision: its entry, group count and tuner bytes, in one table lookup.
  CallDecision decide(const PlanQuery& query) const;
  /// planFor of a call already decided: no second lookup; a plan served before is found by the
  /// decision alone.
  Expected<std::shared_ptr<const CompiledPlan>> planFor(const CallDecision& decision, int32_t group = 0);
  /// The channels the call runs of `plan`, the plan of `decision` as group `group`: all of them when
  /// a table entry or TUCCL_NCHANNELS chose them, else as many as its size fills
  /// (plan_selection.h channelsForBytes). The same on every rank for the same call.
  int32_t channelsFor(const CallDecision& decision, int32_t group, const CompiledPlan& plan) const;
  /// The configuration groups `query` may run (plan_selection.h candidateGroups), group 0 first.
  std::vector<ConfigGroup> groupsFor(const PlanQuery& query) const;
  /// Which table entry decides `query`: its index in the table, -1 for none.
  int32_t entryFor(const PlanQuery& query) const;
  /// What the table holds for collectives none of whose entries can match this communicator (its
  /// rank count, node count or topology signature), one line per collective, naming what the
  /// entries are for and what the communicator is; empty when every collective with entries has
  /// one that can match (or there is no table).
  std::string tableMismatch() const;
  /// The runtime phase's view of `query`, on every call: the entry that decides it (-1: none)
  /// and how many configuration groups it may run (groupsFor's size), without building them.
  std::pair<int32_t, int32_t> entryAndGroupCount(const PlanQuery& query) const;

  PlanCacheStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// Reads the table in file `path` (the format the tuner plugin reads: TuCCL JSON or NCCL's CSV);
/// nullopt when `path` is empty; an error naming the file when it does not parse. Give the same
/// path to PlanCacheOptions::tablePath.
Expected<std::optional<LookupTable>> loadNamedTable(const std::string& path);
/// loadNamedTable of the file TUCCL_TUNER_TABLE names.
Expected<std::optional<LookupTable>> loadTableFromEnvironment();

/// The cache directory from the environment: $TUCCL_CACHE_DIR, else $XDG_CACHE_HOME/tuccl, else
/// $HOME/.cache/tuccl; empty (memory only) when none is set.
std::string defaultCacheDir();

}  // namespace tuccl::backend
