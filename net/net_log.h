// The network layer logs through the logger its host hands it (NCCL's, in the plugin), else
// through TuCCL's log (support/log.h: nothing unless TUCCL_DEBUG asks), so it never writes into an
// application's stdout.
#pragma once

#include "tuccl/nccl_net.h"

namespace tuccl::net {

/// Sets the logger every later message goes to (NULL: none). Thread-safe.
void setNetLogger(ncclDebugLogger_t logger) noexcept;
/// printf-style message at `level` under NCCL's NET subsystem.
[[gnu::format(printf, 4, 5)]] void netLog(ncclDebugLogLevel level, const char* file, int line, const char* format,
                                          ...) noexcept;

}  // namespace tuccl::net

#define TUCCL_NET_WARN(...) ::tuccl::net::netLog(NCCL_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define TUCCL_NET_INFO(...) ::tuccl::net::netLog(NCCL_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
