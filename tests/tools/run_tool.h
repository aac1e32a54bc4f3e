// Runs a command line through the shell and captures its output and exit status, for the
// end-to-end tests of the command-line programs.
#pragma once

// TUCCL_TEST_SANITIZED: built with AddressSanitizer (GCC's macro or Clang's feature test).
#if defined(__SANITIZE_ADDRESS__)
#define TUCCL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TUCCL_TEST_SANITIZED 1
#endif
#endif

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tuccl::tooltest {

struct ToolRun {
  int status = -1;     ///< exit status; -1 when the program did not exit normally
  std::string output;  ///< stdout and stderr together
};

inline ToolRun runCommand(const std::string& command) {
  ToolRun result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), got);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace tuccl::tooltest
