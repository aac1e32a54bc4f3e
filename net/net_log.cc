#include "net/net_log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "support/log.h"

namespace tuccl::net {
namespace {
std::atomic<ncclDebugLogger_t> netLogger{nullptr};
}

void setNetLogger(ncclDebugLogger_t logger) noexcept { netLogger.store(logger, std::memory_order_release); }

void netLog(ncclDebugLogLevel level, const char* file, int line, const char* format, ...) noexcept {
  const ncclDebugLogger_t logger = netLogger.load(std::memory_order_acquire);
  if (logger == nullptr && !logEnabled(logLevelOfNccl(level), kLogNet)) return;
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (logger != nullptr) {
    logger(level, TUCCL_NCCL_NET_FLAG, file, line, "%s", text);
  } else {
    logFormat(logLevelOfNccl(level), kLogNet, "%s", text);
  }
}

}  // namespace tuccl::net
