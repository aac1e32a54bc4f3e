#include "support/log.h"

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "support/environment.h"

namespace tuccl {
namespace {

spdlog::level::level_enum levelFromEnvironment() {
  const std::optional<std::string> value = env::text("TUCCL_LOG_LEVEL");
  if (!value) return spdlog::level::warn;
  spdlog::level::level_enum level = spdlog::level::from_str(*value);
  // from_str answers "off" for names it does not know; only take that when asked for.
  if (level == spdlog::level::off && *value != "off") return spdlog::level::warn;
  return level;
}

}  // namespace

std::shared_ptr<spdlog::logger> componentLogger(const std::string& component) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::string name = "tuccl." + component;
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_level(levelFromEnvironment());
  logger->set_pattern("[%n] %^%l%$: %v");
  return logger;
}

}  // namespace tuccl
