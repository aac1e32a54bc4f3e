// Logging: one spdlog logger per component ("lang", "topo", ...), level from TUCCL_LOG_LEVEL
// (trace, debug, info, warn, error, off; default warn). Messages go to stderr.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace tuccl {

/// The logger of one component, created on first use with the level of TUCCL_LOG_LEVEL.
std::shared_ptr<spdlog::logger> componentLogger(const std::string& component);

}  // namespace tuccl
