// TuCCL's one log (log.h).
#include "support/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>

#include "support/environment.h"
#include "support/text_values.h"

namespace tuccl {
namespace {

// NCCL's subsystem names (NCCL_DEBUG_SUBSYS).
constexpr std::pair<const char*, uint64_t> kSubsystems[] = {
    {"INIT", kLogInit},   {"COLL", kLogColl},   {"P2P", kLogP2p},     {"SHM", kLogShm},
    {"NET", kLogNet},     {"GRAPH", kLogGraph}, {"TUNING", kLogTuning}, {"ENV", kLogEnv},
    {"ALLOC", kLogAlloc}, {"CALL", kLogCall},   {"PROXY", kLogProxy}, {"BOOTSTRAP", kLogBootstrap},
    {"ALL", kLogAll},
};

std::optional<LogLevel> levelNamed(const std::string& text) {
  const std::string name = toLowerCase(text);
  if (name == "version") return LogLevel::Version;
  if (name == "warn" || name == "warning" || name == "error" || name == "err" || name == "critical") return LogLevel::Warn;
  if (name == "info") return LogLevel::Info;
  if (name == "trace" || name == "debug") return LogLevel::Trace;
  if (name == "off" || name == "none") return LogLevel::None;
  return std::nullopt;
}

// "INIT,NET" -> those; "^NET" -> all but NET; unknown names are ignored, as NCCL does.
uint64_t subsystemMask(const std::string& text) {
  const bool invert = !text.empty() && text.front() == '^';
  uint64_t mask = 0;
  for (const std::string& item : splitList(invert ? text.substr(1) : text)) {
    for (const auto& [name, flag] : kSubsystems) {
      if (equalsIgnoreCase(item, name)) mask |= flag;
    }
  }
  return invert ? ~mask : mask;
}

std::string expandPath(const std::string& pattern, const std::string& host) {
  std::string expanded;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'h' || pattern[i + 1] == 'p')) {
      expanded += pattern[i + 1] == 'h' ? host : std::to_string(getpid());
      ++i;
    } else {
      expanded += pattern[i];
    }
  }
  return expanded;
}

struct LogSink {
  std::mutex mutex;
  bool configured = false;
  LogLevel level = LogLevel::None;
  std::optional<LogLevel> asked;  ///< the level a variable set; nullopt: the process default
  uint64_t subsystems = kLogAll;
  FILE* file = stderr;
  std::string host;
  std::string tool;  ///< set by useToolLogging
  std::set<std::string> warned;
  std::atomic<bool> ready{false};  ///< configure() has run: the fields above are read without the lock

  // Reads the variables once (under `mutex`).
  void configure() {
    if (configured) return;
    configured = true;
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
    if (std::optional<std::string> value = env::text("TUCCL_DEBUG")) {
      asked = levelNamed(*value).value_or(LogLevel::None);
    } else if (std::optional<std::string> old = env::text("TUCCL_LOG_LEVEL")) {
      asked = levelNamed(*old);
    }
    level = asked.value_or(tool.empty() ? LogLevel::None : LogLevel::Warn);
    if (std::optional<std::string> mask = env::text("TUCCL_DEBUG_SUBSYS")) subsystems = subsystemMask(*mask);
    if (std::optional<std::string> path = env::text("TUCCL_DEBUG_FILE")) {
      if (FILE* opened = std::fopen(expandPath(*path, host).c_str(), "a")) file = opened;
    }
  }
};

LogSink& sink() {
  static LogSink* instance = new LogSink();  // never destroyed: logging from exit handlers stays safe
  return *instance;
}

LogSink& configuredSink() {
  LogSink& s = sink();
  if (!s.ready.load(std::memory_order_acquire)) {
    std::lock_guard lock(s.mutex);
    s.configure();
    s.ready.store(true, std::memory_order_release);
  }
  return s;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Version: return "VERSION";
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

LogLevel logLevel() { return configuredSink().level; }

bool logEnabled(LogLevel level, uint64_t subsystem) {
  if (level == LogLevel::None) return false;
  LogSink& s = configuredSink();
  if (static_cast<int>(s.level) < static_cast<int>(level)) return false;
  return level <= LogLevel::Warn || (s.subsystems & subsystem) != 0;
}

void logLine(LogLevel level, int32_t rank, const std::string& message) { logLine(level, kLogAll, rank, message); }

void logLine(LogLevel level, uint64_t subsystem, int32_t rank, const std::string& message) {
  if (!logEnabled(level, subsystem)) return;
  LogSink& s = sink();
  const auto tid = static_cast<long>(syscall(SYS_gettid));
  std::lock_guard lock(s.mutex);
  if (!s.tool.empty()) {
    const char* kind = level == LogLevel::Warn ? "warning" : level == LogLevel::Info ? "info" : "trace";
    std::fprintf(s.file, "%s: %s: %s\n", s.tool.c_str(), level == LogLevel::Version ? "version" : kind,
                 message.c_str());
  } else if (rank >= 0) {
    std::fprintf(s.file, "%s:%d:%ld [%d] TUCCL %s %s\n", s.host.c_str(), static_cast<int>(getpid()), tid, rank,
                 levelName(level), message.c_str());
  } else {
    std::fprintf(s.file, "%s:%d:%ld TUCCL %s %s\n", s.host.c_str(), static_cast<int>(getpid()), tid, levelName(level),
                 message.c_str());
  }
  std::fflush(s.file);
}

void logFormat(LogLevel level, uint64_t subsystem, const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  logFormatV(level, subsystem, format, args);
  va_end(args);
}

void logFormatV(LogLevel level, uint64_t subsystem, const char* format, std::va_list args) noexcept {
  if (!logEnabled(level, subsystem)) return;
  char text[1024];
  std::vsnprintf(text, sizeof(text), format, args);
  try {
    logLine(level, subsystem, -1, text);
  } catch (...) {
    // out of memory while logging: the line is dropped
  }
}

void warnOnce(const std::string& key, const std::string& message) {
  LogSink& s = configuredSink();
  {
    std::lock_guard lock(s.mutex);
    if (!s.warned.insert(key).second) return;
  }
  logLine(LogLevel::Warn, -1, message);
}

void useToolLogging(const std::string& tool) {
  LogSink& s = sink();
  std::lock_guard lock(s.mutex);
  s.tool = tool;
  s.configure();
  if (!s.asked) s.level = LogLevel::Warn;
  s.ready.store(true, std::memory_order_release);
}


}  // namespace tuccl
