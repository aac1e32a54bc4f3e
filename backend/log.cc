// libtuccl's log (log.h).
#include "backend/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "support/text_values.h"
#include "support/environment.h"

namespace tuccl::backend {
namespace {

struct LogSink {
  LogLevel level = LogLevel::None;
  FILE* file = stderr;
  std::string host;
  std::mutex mutex;
  std::set<std::string> warned;

  LogSink() {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
    if (std::optional<std::string> value = env::text("TUCCL_DEBUG")) {
      const std::string text = toLowerCase(*value);
      level = text == "version" ? LogLevel::Version
              : text == "warn"  ? LogLevel::Warn
              : text == "info"  ? LogLevel::Info
              : text == "trace" ? LogLevel::Trace
                                : LogLevel::None;
    }
    if (std::optional<std::string> named = env::text("TUCCL_DEBUG_FILE")) {
      std::string expanded;
      for (const char* p = named->c_str(); *p != '\0'; ++p) {
        if (p[0] == '%' && p[1] == 'h') {
          expanded += host;
          ++p;
        } else if (p[0] == '%' && p[1] == 'p') {
          expanded += std::to_string(getpid());
          ++p;
        } else {
          expanded += *p;
        }
      }
      if (FILE* opened = std::fopen(expanded.c_str(), "a")) file = opened;
    }
  }
};

LogSink& sink() {
  static LogSink* instance = new LogSink();  // never destroyed: logging from exit handlers stays safe
  return *instance;
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

LogLevel logLevel() { return sink().level; }

void logLine(LogLevel level, int32_t rank, const std::string& message) {
  if (!logEnabled(level)) return;
  LogSink& s = sink();
  const auto tid = static_cast<long>(syscall(SYS_gettid));
  std::lock_guard lock(s.mutex);
  if (rank >= 0) {
    std::fprintf(s.file, "%s:%d:%ld [%d] TUCCL %s %s\n", s.host.c_str(), static_cast<int>(getpid()), tid, rank,
                 levelName(level), message.c_str());
  } else {
    std::fprintf(s.file, "%s:%d:%ld TUCCL %s %s\n", s.host.c_str(), static_cast<int>(getpid()), tid, levelName(level),
                 message.c_str());
  }
  std::fflush(s.file);
}

void warnOnce(const std::string& key, const std::string& message) {
  LogSink& s = sink();
  {
    std::lock_guard lock(s.mutex);
    if (!s.warned.insert(key).second) return;
  }
  logLine(LogLevel::Warn, -1, message);
}

}  // namespace tuccl::backend
