// The state of one communicator's tuner, created by init and read (never written) by getCollInfo.
//
// In:  the communicator (nRanks, nNodes), NCCL's logger, the environment (TUCCL_TUNER_TABLE,
//      NCCL_TUNER_CONFIG_FILE, TUCCL_TOPOLOGY_SIGNATURE, NCCL_DEBUG, TUCCL_TUNER_TRACE) and the
//      table file it names.
// Out: a TunerContext holding an immutable CommIndex shared (reference counted) by every
//      communicator of the same size over the same table bytes — or no index: a no-op tuner.
//      A missing, unreadable or invalid table is one warning, never an error; the lines a CSV
//      reader skipped (and its warnings) are logged at WARN once per process and table.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  CommIndex index;
  TableFormat format = TableFormat::Json;
  std::vector<PlacedConstant> constants;
};

struct TunerContext {
  std::shared_ptr<const SharedTable> shared;  ///< null: no-op tuner
  const CommIndex* index = nullptr;           ///< shared->index, or null
  ncclDebugLogger_t logger = nullptr;         ///< may be null
  bool trace = false;                         ///< log every decision at TRACE
  TableFormat format = TableFormat::Json;
};

/// Creates the context of a communicator; logs the table at INFO (or one WARN). Never throws;
/// returns null only when memory runs out (the caller then acts as a no-op tuner).
TunerContext* createTunerContext(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger) noexcept;

/// v5+: applies the table's cost-model constant overrides to NCCL's constants struct of `layout`
/// (`constants` points at its first double; may be null), logging each at INFO; an override the
/// layout has no place for (a RUBIN row before v7) is logged and skipped.
void applyTunerConstants(const TunerContext& context, double* constants,
                         TunerConstantsLayout layout) noexcept;

void destroyTunerContext(TunerContext* context) noexcept;

}  // namespace tuccl

/// Calls NCCL's logger (if any) for the tuning subsystem.
#define TUCCL_TUNER_LOG(logger, level, ...)                                                              \
  do {                                                                                                   \
    if ((logger) != nullptr) (logger)((level), TUCCL_NCCL_TUNING_FLAG, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
