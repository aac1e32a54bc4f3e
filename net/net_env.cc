#include "net/net_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "net/net_log.h"

namespace tuccl::net {

const char* envFirst(const char* tucclName, const char* ncclName) {
  const char* value = std::getenv(tucclName);
  if (value == nullptr || *value == '\0') value = std::getenv(ncclName);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int envInt(const char* tucclName, const char* ncclName, int fallback) {
  const char* text = envFirst(tucclName, ncclName);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > INT_MAX) {
    TUCCL_NET_WARN("TuCCL net: %s/%s='%s' is not a non-negative integer; using %d", tucclName, ncclName, text, fallback);
    return fallback;
  }
  return static_cast<int>(value);
}

}  // namespace tuccl::net
