// What every TuCCL command-line program shares: exit statuses, command-line parsing that maps
// CLI11's errors onto them, and diagnostics that quote the offending source line.
#pragma once

#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "support/source_text.h"

namespace tuccl::cli {

inline constexpr int kExitError = 2;     ///< bad input or command line
inline constexpr int kExitInternal = 3;  ///< a bug of ours (e.g. a plan failing its own check)

/// TuCCL's bundled data (examples/algorithms, examples/topologies, examples/tables): the
/// directory at TUCCL_DATA_FROM_BIN (tools/CMakeLists.txt; ../share/tuccl) from the running
/// program's own directory (/proc/self/exe), so a moved install prefix still finds it.
inline std::filesystem::path bundledDataDir() {
  std::error_code ec;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (program.parent_path() / TUCCL_DATA_FROM_BIN).lexically_normal();
}

/// Parses the command line. Returns nothing to go on, or the status to exit with: 0 after
/// --help / --version, kExitError (with CLI11's message) for a bad command line.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return kExitError;
  }
  return std::nullopt;
}

/// Prints `file:line:col: error: ...` with the source line and a caret: from `source` when given,
/// else by reading the file named in the diagnostic again (silently without the quote when that
/// fails).
inline void printDiagnostic(const Diagnostic& diagnostic, const SourceText* source = nullptr) {
  std::optional<SourceText> reread;
  if (source == nullptr && diagnostic.loc.known() && !diagnostic.file.empty()) {
    try {
      reread = readSourceFile(diagnostic.file);
      source = &*reread;
    } catch (const DiagnosticError&) {
    }
  }
  std::cerr << formatDiagnostic(diagnostic, source);
}

}  // namespace tuccl::cli
