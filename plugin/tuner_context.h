// The state of one communicator's tuner, created by init; getCollInfo reads its table index (and,
// with the runtime phase on, counts its calls in the communicator's CommAdaptation).
//
// In:  the communicator (nRanks, nNodes, NCCL's commId from v5 on), NCCL's logger, the
//      environment (TUCCL_TUNER_TABLE, NCCL_TUNER_CONFIG_FILE, TUCCL_TOPOLOGY_SIGNATURE,
//      NCCL_DEBUG, TUCCL_TUNER_TRACE, the runtime phase's TUCCL_ADAPT*) and the table file it names.
// Out: a TunerContext holding an immutable CommIndex shared (reference counted) by every
//      communicator of the same size over the same table bytes — or no index: a no-op tuner.
//      A missing, unreadable or invalid table is one warning, never an error; the lines a CSV
//      reader skipped (and its warnings) are logged at WARN once per process and table. With the
//      runtime phase on (tuner_adapt.h) and a table with configuration groups, the context also
//      holds the communicator's CommAdaptation; then getCollInfo serves the group it chooses.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugin/tuner_adapt.h"
#include "plugin/tuner_log.h"
#include "table/table_index.h"
#include "table/tuner_constants.h"
#include "tuccl/nccl_tuner.h"

namespace tuccl {

/// A cost-model constant override placed in each layout of NCCL's constants struct.
struct PlacedConstant {
  std::string name;
  double value = 0;
  std::optional<uint32_t> offsetV5;  ///< in ncclTunerConstants_v5_t; empty: not there (RUBIN)
  std::optional<uint32_t> offsetV7;  ///< in ncclTunerConstants_v7_t
};

/// What a communicator's index was built from; shared with every context of the same key.
struct SharedTable {
  uint64_t tableHash = 0;  ///< FNV-1a 64 of the table file's bytes
  CommIndex index;
  TableFormat format = TableFormat::Json;
  std::vector<PlacedConstant> constants;
  /// Per entry (LookupTable index) that can match and has alternative configuration groups: the
  /// decisions of groups 1, 2, ... (each its choice without fallbacks, channels, chunk size).
  std::map<uint32_t, std::vector<CompiledDecision>> groupDecisions;
};

struct TunerContext {
  std::shared_ptr<const SharedTable> shared;  ///< null: no-op tuner
  const CommIndex* index = nullptr;           ///< shared->index, or null
  ncclDebugLogger_t logger = nullptr;         ///< may be null
  bool trace = false;                         ///< log every decision at TRACE
  TableFormat format = TableFormat::Json;
  std::unique_ptr<CommAdaptation> adapt;      ///< null: the static table (group 0) only
};

/// Creates the context of a communicator; logs the table at INFO (or one WARN). `commId`: NCCL's
/// (v5+); nullopt under v2..v4 (legacyCommunicatorId names the communicator). Never throws;
/// returns null only when memory runs out (the caller then acts as a no-op tuner).
TunerContext* createTunerContext(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                                 std::optional<uint64_t> commId) noexcept;

/// The decision a call of `decision`'s entry runs: with the runtime phase on, the group the
/// context's CommAdaptation chooses for (collective, nBytes' bucket, entry) — counting the call;
/// otherwise `decision` itself (group 0).
const CompiledDecision& adaptedDecision(const TunerContext& context, int collective, uint64_t nBytes,
                                        const CompiledDecision& decision) noexcept;

/// The decision of the group the last call of (collective, nBytes' bucket, entry) ran, for
/// getChunkSize (nothing is counted); `decision` when adaptation is off or the call ran group 0.
const CompiledDecision& lastAdaptedDecision(const TunerContext& context, int collective, uint64_t nBytes,
                                            const CompiledDecision& decision) noexcept;

/// v5+: applies the table's cost-model constant overrides to NCCL's constants struct of `layout`
/// (`constants` points at its first double; may be null), logging each at INFO; an override the
/// layout has no place for (a RUBIN row before v7) is logged and skipped.
void applyTunerConstants(const TunerContext& context, double* constants,
                         TunerConstantsLayout layout) noexcept;

void destroyTunerContext(TunerContext* context) noexcept;

}  // namespace tuccl
