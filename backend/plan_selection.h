// Which algorithm and configuration serve a call (plan_cache.h), the same on every rank for the
// same table and query: the table's entry for the call's size, its libtuccl algorithm or its NCCL
// algorithm's family, else the built-in default; the entry's nChannels and chunk size, else the
// options'.
//
// In:  a PlanQuery, the table with its index for the communicator (or none), PlanCacheOptions.
// Out: a PlanSelection (the algorithm, its shape and configuration, and why), or an error for a
//      query libtuccl cannot plan or an entry naming a built-in that does not exist.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/builtin_algorithms.h"
#include "backend/plan_cache.h"
#include "table/table_index.h"

namespace tuccl::backend {

/// The bytes NCCL's tuner is asked about for the call (nccl-tuner-abi.md, "getCollInfo
/// semantics"): count x element size, where for AllGather (count = sendcount) and ReduceScatter
/// (count = recvcount) NCCL passes the total size, count x element size x nRanks. AllToAll, which
/// NCCL never asks a tuner about, counts the same way: one rank's whole send buffer.
uint64_t tunerBytes(const PlanQuery& query, int32_t nRanks);

/// libtuccl's call as the tuner's index sees it: one operation per group (numPipeOps 1) on
/// unregistered buffers (regBuff 0).
inline constexpr int kQueryPipeOps = 1;
inline constexpr int kQueryRegBuff = 0;

struct PlanSelection {
  Collective collective = Collective::AllReduce;
  std::string algorithm;  ///< a built-in family ("ring"), or a ResCCLang file as the table names it
  bool builtin = true;
  AlgorithmShape shape;
  int64_t chunkSize = 0;
  bool chunkChosen = false;  ///< the table's entry or TUCCL_CHUNK_SIZE gave chunkSize
  /// The kernels' protocol: the entry's (its first choice's), TUCCL_PROTO's, else Simple, on one
  /// host or several (the inter-node proxy carries LL and LL128 lines).
  Protocol protocol = Protocol::Simple;
  /// The TB allocation (singleTbPolicy); empty: the scheduler's own (state-based for HPDS).
  std::optional<TbPolicy> tbPolicy;
  const TableEntry* entry = nullptr;  ///< the entry that matched; nullptr: none
  /// Why: "table entry 3 (RING/SIMPLE, 2 channels, 64K..4M)", "no table entry covers the
  /// size", ... (never the call's own size: one plan, and its description, serves many sizes)
  std::string reason;
};

/// AllReduce payloads up to this many bytes default to the direct algorithm (two communication
/// steps whatever the rank count, against a ring's 2(n - 1)) on communicators of at most
/// kDirectAllReduceMaxRanks ranks; larger ones to the ring, whose traffic per rank stays 2x.
inline constexpr uint64_t kDirectAllReduceBytes = 64 << 10;
inline constexpr int32_t kDirectAllReduceMaxRanks = 16;

/// The most data an LL / LL128 slice carries unless the table or TUCCL_CHUNK_SIZE says: their lines
/// take 16 bytes per 8 of data (LL) and 128 per 120 (LL128), and they serve calls too small to
/// fill Simple's slices, so Simple's slice would only double the staging. NCCL's steps carry 32 KiB
/// (LL) and 576,000 B (LL128) of data (src/init.cc buffer sizes over NCCL_STEPS); these bounds are
/// of that order, in the powers of two the chunk sizes take.
inline constexpr int64_t kLlMaxChunkBytes = 64 << 10;
inline constexpr int64_t kLl128MaxChunkBytes = 512 << 10;

/// The built-in family a query gets when no table entry decides it: on several nodes of equal
/// rank counts, hm AllReduce and AllGather (one ring crossing the nodes per local index, the
/// rest inside nodes); else direct AllReduce up to kDirectAllReduceBytes, else
/// defaultAlgorithmFamily.
std::string_view defaultFamily(const PlanQuery& query, const PlanCacheOptions& options);
/// defaultFamily of a query of `bytes` tuner bytes (tunerBytes, computed once by the caller).
std::string_view defaultFamily(const PlanQuery& query, uint64_t bytes, const PlanCacheOptions& options);

/// TbPolicy::Single for a query of at most options.singleTbMaxBytes tuner bytes whose plans are not
/// for a GPU (no CUDA architecture: the CPU device); empty otherwise.
std::optional<TbPolicy> singleTbPolicy(const PlanQuery& query, const PlanCacheOptions& options);
std::optional<TbPolicy> singleTbPolicy(uint64_t bytes, const PlanCacheOptions& options);

/// Whether libtuccl can plan the query: nRanks >= 2, count >= 0, a root in range for Broadcast
/// and Reduce, positive defaults; InvalidArgument naming what is wrong.
Status checkPlanQuery(const PlanQuery& query, const PlanCacheOptions& options);

/// The table as it bears on one query: the table (nullptr: none) and the entry that decides the
/// query (nullptr: none does).
struct TableMatch {
  const LookupTable* table = nullptr;
  const TableEntry* entry = nullptr;
};
/// The one lookup of a query of `bytes` tuner bytes in the table's index (kQueryPipeOps,
/// kQueryRegBuff). `table` and `index` are both set or both null.
TableMatch matchTable(const PlanQuery& query, uint64_t bytes, const LookupTable* table, const CommIndex* index);

/// The table entry that decides the query (the tuner's index, kQueryPipeOps, kQueryRegBuff);
/// nullptr when none does or there is no table.
const TableEntry* matchingEntry(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                const PlanCacheOptions& options);

/// TUCCL_ALGO, TUCCL_NCHANNELS or TUCCL_CHUNK_SIZE fix the choice: one configuration group.
bool environmentFixesTheChoice(const PlanCacheOptions& options);

/// The configuration groups libtuccl may run for `query`, group 0 (the static choice) first — the
/// runtime phase (adapt/runtime.h) switches among them: the matching table entry's
/// (table/lookup_table.h entryGroups); without one, the built-in default family and an
/// alternative (ring for hm and direct, direct for ring, binomial for chain and back; else the
/// same family on half the default slice, at least 4 KiB). One group when the environment fixes the choice
/// (TUCCL_ALGO, TUCCL_NCHANNELS or TUCCL_CHUNK_SIZE).
std::vector<ConfigGroup> candidateGroups(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                         const PlanCacheOptions& options);
/// candidateGroups of a query already matched (matchTable).
std::vector<ConfigGroup> candidateGroups(const PlanQuery& query, const TableMatch& match,
                                         const PlanCacheOptions& options);

/// Checks the query (checkPlanQuery) and selects configuration group `group` of candidateGroups
/// (0: the static choice). `table` and `index` are both set or both null. Errors name
/// `options.tablePath` and the entry ("entries[3].tucclAlgorithm: there is no built-in binomial
/// AllReduce ..."); a group that does not exist is InvalidArgument.
Expected<PlanSelection> selectPlan(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                   const PlanCacheOptions& options, int32_t group = 0);
/// selectPlan of a query already matched (matchTable): no second lookup.
Expected<PlanSelection> selectPlan(const PlanQuery& query, const TableMatch& match, const PlanCacheOptions& options,
                                   int32_t group = 0);

/// The bytes each of a plan's threads needs before a call takes one more channel (NCCL's rule:
/// nccl-data-path.md section 1.1, src/include/comm.h, tuning.cc): 64 for Simple, 8 for LL and LL128.
inline constexpr uint64_t kSimpleBytesPerThread = 64;
inline constexpr uint64_t kLineBytesPerThread = 8;

/// The channels a call of `bytes` tuner bytes runs of a plan of `planChannels` channels and
/// `nThreads` threads a TB, when the channels are the default's: the most, up to `planChannels`,
/// whose threads each get their protocol's bytes (kSimpleBytesPerThread, kLineBytesPerThread), at
/// least 1. The kernels take the count at run time (KernelArgs::channels), so one plan serves
/// every count: a small call launches and synchronises the TBs of one channel, not sixteen.
int32_t channelsForBytes(uint64_t bytes, int32_t planChannels, int32_t nThreads, Protocol protocol);

/// Whether a call's channel count follows its size (channelsForBytes): its configuration group
/// names no channels (no table entry, or one without nChannels) and TUCCL_NCHANNELS is unset.
bool channelsFollowSize(const TableEntry* entry, int32_t group, const PlanCacheOptions& options);

/// The table as errors name it: PlanCacheOptions::tablePath, else "the tuning table".
std::string tableDisplayName(const PlanCacheOptions& options);

/// "AllReduce: table entry 3 (RING/SIMPLE, 2 channels, 1M..4M) -> built-in ring, 2 channels,
/// chunk 512K" (", LL" or ", LL128" for those protocols, ", one TB per rank" under
/// TbPolicy::Single); a program file as the table names it.
std::string describeSelection(const PlanSelection& selection);

}  // namespace tuccl::backend
