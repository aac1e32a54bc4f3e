#include "net/net_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "net/net_log.h"
#include "support/environment.h"

namespace tuccl::net {

std::optional<std::string> envFirst(const char* tucclName, const char* ncclName) {
  if (auto named = env::firstOf({tucclName, ncclName})) return std::move(named->second);
  return std::nullopt;
}

int envInt(const char* tucclName, const char* ncclName, int fallback) {
  const std::optional<std::string> named = envFirst(tucclName, ncclName);
  if (!named) return fallback;
  const char* text = named->c_str();
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
