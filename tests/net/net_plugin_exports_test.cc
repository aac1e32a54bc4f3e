// libnccl-net-tuccl.so as binutils sees it: exactly ncclNetPlugin_v8 .. _v12, and nothing needed
// beyond the C library and the loader (the C++ runtime is linked in statically).
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "tests/tools/run_tool.h"

namespace {

TEST(NetPluginExports, ExactlyTheNetStructsV8ToV12) {
  const auto nm = tuccl::tooltest::runCommand(std::string("nm -D --defined-only ") + TUCCL_NET_PLUGIN_PATH);
  ASSERT_EQ(nm.status, 0) << nm.output;
  std::set<std::string> names;
  std::istringstream lines(nm.output);
  for (std::string address, type, name; lines >> address >> type >> name;) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10",
                                          "ncclNetPlugin_v11", "ncclNetPlugin_v12"}))
      << nm.output;
}

TEST(NetPluginExports, NeedsOnlyTheCLibrary) {
#if defined(TUCCL_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizer builds link the sanitizer runtimes dynamically";
#endif
  const auto readelf = tuccl::tooltest::runCommand(std::string("readelf -d ") + TUCCL_NET_PLUGIN_PATH);
  ASSERT_EQ(readelf.status, 0) << readelf.output;
  std::istringstream lines(readelf.output);
  int needed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    ++needed;
    const std::string library = line.substr(line.find('[') + 1);
    EXPECT_TRUE(library.starts_with("libc.so") || library.starts_with("ld-linux")) << line;
  }
  EXPECT_GT(needed, 0) << readelf.output;
}

}  // namespace
