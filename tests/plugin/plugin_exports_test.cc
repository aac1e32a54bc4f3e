// The shared object NCCL loads, inspected as binutils sees it: it exports exactly
// ncclTunerPlugin_v2 .. _v7 and the duration intake tucclTunerReportDuration (nm -D
// --defined-only) and needs nothing beyond the C library and
// the dynamic loader (readelf -d: the C++ runtime is linked in statically), so it loads into any
// NCCL job whatever its C++ runtime. The profiler plugin likewise exports ncclProfiler_v4 .. _v6.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/run_tool.h"

namespace {

using tuccl::tooltest::runCommand;

/// The words in column `column` (0-based) of the lines of `text` that have at least `minWords`
/// words.
std::set<std::string> column(const std::string& text, size_t column, size_t minWords) {
  std::set<std::string> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> parts;
    for (std::string word; words >> word;) parts.push_back(word);
    if (parts.size() >= minWords && column < parts.size()) values.insert(parts[column]);
  }
  return values;
}

TEST(PluginExports, ExactlyTheTunerStructsV2ToV7AndTheDurationIntake) {
  const auto nm = runCommand(std::string("nm -D --defined-only ") + TUCCL_TUNER_PLUGIN_PATH);
  ASSERT_EQ(nm.status, 0) << nm.output;
  // "ADDRESS TYPE NAME".
  const std::set<std::string> names = column(nm.output, 2, 3);
  EXPECT_EQ(names, (std::set<std::string>{"ncclTunerPlugin_v2", "ncclTunerPlugin_v3", "ncclTunerPlugin_v4",
                                          "ncclTunerPlugin_v5", "ncclTunerPlugin_v6", "ncclTunerPlugin_v7",
                                          "tucclTunerReportDuration"}))
      << nm.output;
  // The structs are data symbols (NCCL dlsyms a struct, not a function): initialised data, 'D'
  // (relocated, so in .data.rel.ro) or 'R'; the intake is a function, 'T'.
  std::istringstream lines(nm.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string address, type, name;
    if (!(words >> address >> type >> name)) continue;
    if (name == "tucclTunerReportDuration") {
      EXPECT_EQ(type, "T") << nm.output;
    } else {
      EXPECT_TRUE(type == "D" || type == "R") << nm.output;
    }
  }
}

/// The libraries `library` needs (readelf -d), each the C library or the dynamic loader.
void expectOnlyTheCLibrary(const std::string& library) {
  const auto readelf = runCommand("readelf -d " + library);
  ASSERT_EQ(readelf.status, 0) << readelf.output;
  std::set<std::string> needed;
  std::istringstream lines(readelf.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    const size_t open = line.find('['), close = line.find(']');
    ASSERT_NE(open, std::string::npos) << line;
    needed.insert(line.substr(open + 1, close - open - 1));
  }
  ASSERT_FALSE(needed.empty()) << readelf.output;
  for (const std::string& name : needed) {
    EXPECT_TRUE(name.starts_with("libc.so") || name.starts_with("ld-linux")) << name << "\n" << readelf.output;
  }
}

TEST(PluginExports, NeedsOnlyTheCLibrary) {
#if defined(TUCCL_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizer builds link the sanitizer runtimes (and so the C++ runtime) dynamically";
#endif
  expectOnlyTheCLibrary(TUCCL_TUNER_PLUGIN_PATH);
}

// The profiler plugin: exactly ncclProfiler_v4 .. _v6, data symbols, and the C library alone.
TEST(PluginExports, TheProfilerPluginExportsItsStructsV4ToV6AndNeedsOnlyTheCLibrary) {
  const auto nm = runCommand(std::string("nm -D --defined-only ") + TUCCL_PROFILER_PLUGIN_PATH);
  ASSERT_EQ(nm.status, 0) << nm.output;
  EXPECT_EQ(column(nm.output, 2, 3), (std::set<std::string>{"ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"}))
      << nm.output;
  for (const std::string& type : column(nm.output, 1, 3)) EXPECT_TRUE(type == "D" || type == "R") << nm.output;
#if !defined(TUCCL_TEST_SANITIZED)
  expectOnlyTheCLibrary(TUCCL_PROFILER_PLUGIN_PATH);
#endif
}

}  // namespace
