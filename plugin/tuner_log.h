// The tuner plugin logs only through NCCL's logger (no spdlog: the plugin must not bring its own
// logging into NCCL's process), with the tuning subsystem flag.
#pragma once

#include "tuccl/nccl_tuner.h"

/// Calls NCCL's logger (if any) for the tuning subsystem.
#define TUCCL_TUNER_LOG(logger, level, ...)                                                              \
  do {                                                                                                   \
    if ((logger) != nullptr) (logger)((level), TUCCL_NCCL_TUNING_FLAG, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
