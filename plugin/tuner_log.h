// The tuner plugin logs through NCCL's logger when NCCL gives one (with the tuning subsystem
// flag, so NCCL_DEBUG_SUBSYS=TUNING selects it), else through TuCCL's log (support/log.h:
// TUCCL_DEBUG), which a test or another host of the plugin reads.
#pragma once

#include "support/log.h"
#include "tuccl/nccl_tuner.h"

/// One line at NCCL's `level` for the tuning subsystem.
#define TUCCL_TUNER_LOG(logger, level, ...)                                                              \
  do {                                                                                                   \
    if ((logger) != nullptr) {                                                                           \
      (logger)((level), TUCCL_NCCL_TUNING_FLAG, __FILE__, __LINE__, __VA_ARGS__);                        \
    } else {                                                                                             \
      ::tuccl::logFormat(::tuccl::logLevelOfNccl(level), ::tuccl::kLogTuning, __VA_ARGS__);              \
    }                                                                                                    \
  } while (0)
