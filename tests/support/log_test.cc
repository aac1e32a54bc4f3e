// TuCCL's one log: the level from TUCCL_DEBUG (TUCCL_LOG_LEVEL the older name), NCCL's subsystem
// mask, the tool and library line shapes. The log reads its
// variables once per process, so each case runs in a child process writing to TUCCL_DEBUG_FILE.
#include "support/log.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace tuccl {
namespace {

// Runs `body` in a child with `variables` set; answers what it logged.
std::string logOf(const std::map<std::string, std::string>& variables, const std::function<void()>& body) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("tuccl-log-test-" + std::to_string(getpid()) + ".txt");
  std::filesystem::remove(file);
  const pid_t child = fork();
  if (child == 0) {
    for (const char* name : {"TUCCL_DEBUG", "TUCCL_LOG_LEVEL", "TUCCL_DEBUG_SUBSYS"}) ::unsetenv(name);
    ::setenv("TUCCL_DEBUG_FILE", file.c_str(), 1);
    for (const auto& [name, value] : variables) ::setenv(name.c_str(), value.c_str(), 1);
    body();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(file);
  return text.str();
}

void oneOfEach() {
  logLine(LogLevel::Warn, kLogInit, -1, "w-init");
  logLine(LogLevel::Info, kLogInit, 3, "i-init");
  logLine(LogLevel::Info, kLogNet, -1, "i-net");
  logLine(LogLevel::Trace, kLogColl, -1, "t-coll");
}

bool has(const std::string& log, const std::string& text) { return log.find(text) != std::string::npos; }

TEST(Log, LibraryPrintsNothingUnlessAsked) {
  EXPECT_EQ(logOf({}, oneOfEach), "");
  const std::string warn = logOf({{"TUCCL_DEBUG", "WARN"}}, oneOfEach);
  EXPECT_TRUE(has(warn, " TUCCL WARN w-init")) << warn;
  EXPECT_FALSE(has(warn, "i-init")) << warn;
  const std::string info = logOf({{"TUCCL_DEBUG", "info"}}, oneOfEach);
  EXPECT_TRUE(has(info, "] TUCCL INFO i-init")) << info;  // with its rank: "[3]"
  EXPECT_TRUE(has(info, "[3] TUCCL INFO i-init")) << info;
  EXPECT_TRUE(has(info, "i-net")) << info;
  EXPECT_FALSE(has(info, "t-coll")) << info;
  EXPECT_TRUE(has(logOf({{"TUCCL_DEBUG", "TRACE"}}, oneOfEach), "TUCCL TRACE t-coll"));
}

TEST(Log, TheOlderVariableIsAnAliasAndTucclDebugWins) {
  const std::string old = logOf({{"TUCCL_LOG_LEVEL", "info"}}, oneOfEach);
  EXPECT_TRUE(has(old, "i-init")) << old;
  EXPECT_FALSE(has(old, "t-coll")) << old;
  EXPECT_TRUE(has(logOf({{"TUCCL_LOG_LEVEL", "debug"}}, oneOfEach), "t-coll"));
  EXPECT_EQ(logOf({{"TUCCL_LOG_LEVEL", "off"}}, oneOfEach), "");
  const std::string both = logOf({{"TUCCL_LOG_LEVEL", "trace"}, {"TUCCL_DEBUG", "WARN"}}, oneOfEach);
  EXPECT_TRUE(has(both, "w-init")) << both;
  EXPECT_FALSE(has(both, "i-init")) << both;
}

TEST(Log, SubsystemsFilterInfoButNeverWarnings) {
  const std::string net = logOf({{"TUCCL_DEBUG", "TRACE"}, {"TUCCL_DEBUG_SUBSYS", "NET"}}, oneOfEach);
  EXPECT_TRUE(has(net, "w-init")) << net;
  EXPECT_TRUE(has(net, "i-net")) << net;
  EXPECT_FALSE(has(net, "i-init")) << net;
  EXPECT_FALSE(has(net, "t-coll")) << net;
  const std::string allButNet = logOf({{"TUCCL_DEBUG", "TRACE"}, {"TUCCL_DEBUG_SUBSYS", "^net"}}, oneOfEach);
  EXPECT_FALSE(has(allButNet, "i-net")) << allButNet;
  EXPECT_TRUE(has(allButNet, "i-init")) << allButNet;
  EXPECT_TRUE(has(allButNet, "t-coll")) << allButNet;
}

TEST(Log, AToolPrintsWarningsByDefaultInItsOwnShape) {
  const std::string tool = logOf({}, [] {
    useToolLogging("tuccl-demo");
    oneOfEach();
    warnOnce("k", "said once");
    warnOnce("k", "said once");
  });
  EXPECT_TRUE(has(tool, "tuccl-demo: warning: w-init\n")) << tool;
  EXPECT_FALSE(has(tool, "i-init")) << tool;
  EXPECT_EQ(tool.find("said once"), tool.rfind("said once")) << tool;
  EXPECT_EQ(logOf({{"TUCCL_DEBUG", "NONE"}}, [] {
              useToolLogging("tuccl-demo");
              oneOfEach();
            }),
            "");
  EXPECT_TRUE(has(logOf({{"TUCCL_DEBUG", "INFO"}}, [] {
                    useToolLogging("tuccl-demo");
                    oneOfEach();
                  }),
                  "tuccl-demo: info: i-net"));
}

TEST(Log, NcclLevelsMapToOurs) {
  EXPECT_EQ(logLevelOfNccl(0), LogLevel::None);
  EXPECT_EQ(logLevelOfNccl(1), LogLevel::Version);
  EXPECT_EQ(logLevelOfNccl(2), LogLevel::Warn);
  EXPECT_EQ(logLevelOfNccl(3), LogLevel::Info);
  EXPECT_EQ(logLevelOfNccl(4), LogLevel::Warn);
  EXPECT_EQ(logLevelOfNccl(5), LogLevel::Trace);
}

}  // namespace
}  // namespace tuccl
