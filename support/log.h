// TuCCL's one log, shared by libtuccl, the tools and the plugins, in NCCL's manner:
//
//   TUCCL_DEBUG=VERSION|WARN|INFO|TRACE   the level (any case). TUCCL_LOG_LEVEL, the older name,
//                                         is read when TUCCL_DEBUG is not set: off, error and
//                                         critical -> nothing/WARN, warn, info, debug and trace.
//   TUCCL_DEBUG_SUBSYS=INIT,COLL,...      NCCL's subsystem list: the subsystems whose INFO and
//                                         TRACE lines are printed (default all; "^NET,SHM" all but
//                                         those). Warnings always pass.
//   TUCCL_DEBUG_FILE=path                 the log file (%h host, %p pid); default stderr.
//
// With no level set, libtuccl and the plugins print nothing (errors are returned, as NCCL does);
// a tool calls useToolLogging() and prints warnings. Lines look like
//   host:pid:tid [rank] TUCCL INFO AllReduce 4 MiB: ...      (libtuccl, the plugins without NCCL)
//   tuccl-compile: warning: topo: ...                        (a tool)
// The plugins hand their lines to NCCL's logger when NCCL gives one (plugin/tuner_log.h,
// net/net_log.h), with the subsystem flags below, and write here only without it.
// Logging never fails the caller: an unwritable file falls back to stderr.
//
// Standard library only (the plugins link it into their shared objects).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>

namespace tuccl {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

/// NCCL's subsystem flags (ncclDebugLogSubSys), so a line keeps its subsystem in either log.
enum LogSubsystem : uint64_t {
  kLogInit = 0x1,
  kLogColl = 0x2,
  kLogP2p = 0x4,
  kLogShm = 0x8,
  kLogNet = 0x10,
  kLogGraph = 0x20,
  kLogTuning = 0x40,
  kLogEnv = 0x80,
  kLogAlloc = 0x100,
  kLogCall = 0x200,
  kLogProxy = 0x400,
  kLogBootstrap = 0x1000,
  kLogAll = ~uint64_t{0},
};

/// The level asked for (TUCCL_DEBUG, else TUCCL_LOG_LEVEL, else the process default; read once).
LogLevel logLevel();
/// Whether a line at `level` of `subsystem` would be written (warnings pass every subsystem mask).
bool logEnabled(LogLevel level, uint64_t subsystem = kLogAll);

/// Writes one line at `level` (when enabled); `rank` < 0 omits the rank.
void logLine(LogLevel level, int32_t rank, const std::string& message);
void logLine(LogLevel level, uint64_t subsystem, int32_t rank, const std::string& message);
/// printf-style logLine without a rank; logFormatV takes the arguments as a va_list (for
/// variadic loggers of other ABIs that write into this log).
[[gnu::format(printf, 3, 4)]] void logFormat(LogLevel level, uint64_t subsystem, const char* format, ...) noexcept;
[[gnu::format(printf, 3, 0)]] void logFormatV(LogLevel level, uint64_t subsystem, const char* format,
                                              std::va_list args) noexcept;

/// Writes a warning once per `key` for the process (e.g. "cache-dir-unwritable").
void warnOnce(const std::string& key, const std::string& message);

/// A tool's log: warnings are printed when no level is set, as "<tool>: warning: <message>".
/// Call before the first line is logged.
void useToolLogging(const std::string& tool);

/// NCCL's ncclDebugLogLevel (NONE 0, VERSION 1, WARN 2, INFO 3, ABORT 4, TRACE 5) as TuCCL's level;
/// ABORT is a warning.
inline LogLevel logLevelOfNccl(int ncclLevel) {
  switch (ncclLevel) {
    case 1: return LogLevel::Version;
    case 2:
    case 4: return LogLevel::Warn;
    case 3: return LogLevel::Info;
    case 5: return LogLevel::Trace;
    default: return LogLevel::None;
  }
}

}  // namespace tuccl
