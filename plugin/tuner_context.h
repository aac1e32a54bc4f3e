// The state of one communicator's tuner, created by init and read (never written) by getCollInfo.
//
// In:  the communicator (nRanks, nNodes), NCCL's logger, the environment (TUCCL_TUNER_TABLE,
//      NCCL_TUNER_CONFIG_FILE, TUCCL_TOPOLOGY_SIGNATURE, NCCL_DEBUG, TUCCL_TUNER_TRACE) and the
//      table file it names.
// Out: a TunerContext holding an immutable CommIndex shared (reference counted) by every
//      communicator of the same size over the same table bytes — or no index: a no-op tuner.
//      A missing, unreadable or invalid table is one warning, never an error.
#pragma once

#include <cstdint>
#include <memory>

#include "plugin/table_index.h"
#include "tuccl/nccl_tuner.h"

namespace tuccl {

/// What a communicator's index was built from; shared with every context of the same key.
struct SharedTable {
  CommIndex index;
  TableFormat format = TableFormat::Json;
  std::vector<ConstantOverride> constants;
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

/// v5+: applies the table's cost-model constant overrides, logging each at INFO.
void applyTunerConstants(const TunerContext& context, ncclTunerConstants_v5_t* constants) noexcept;

void destroyTunerContext(TunerContext* context) noexcept;

}  // namespace tuccl

/// Calls NCCL's logger (if any) for the tuning subsystem.
#define TUCCL_TUNER_LOG(logger, level, ...)                                                              \
  do {                                                                                                   \
    if ((logger) != nullptr) (logger)((level), TUCCL_NCCL_TUNING_FLAG, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
