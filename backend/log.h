// libtuccl's log, in NCCL's manner: TUCCL_DEBUG=VERSION|WARN|INFO|TRACE selects the level (unset:
// errors are not printed, only returned), TUCCL_DEBUG_FILE=path (with %h host and %p pid
// substituted) sends it to a file instead of stderr. Lines look like
//   host:pid:tid [rank] TUCCL INFO AllReduce 4 MiB: ...
// Logging never fails the caller: an unwritable file falls back to stderr.
#pragma once

#include <cstdint>
#include <string>

namespace tuccl::backend {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

/// The level TUCCL_DEBUG asked for (read once).
LogLevel logLevel();
inline bool logEnabled(LogLevel level) { return static_cast<int>(logLevel()) >= static_cast<int>(level); }

/// Writes one line at `level` (when enabled); `rank` < 0 omits the rank.
void logLine(LogLevel level, int32_t rank, const std::string& message);

/// Writes a warning once per `key` for the process (e.g. "cache-dir-unwritable").
void warnOnce(const std::string& key, const std::string& message);

}  // namespace tuccl::backend
