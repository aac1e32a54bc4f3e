// What every TuCCL command-line program shares: exit statuses, command-line parsing that maps
// CLI11's errors onto them, diagnostics that quote the offending source line, and output files.
#pragma once

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "support/source_text.h"
#include "support/status.h"

namespace tuccl::cli {

inline constexpr int kExitError = 2;     ///< bad input or command line
inline constexpr int kExitInternal = 3;  ///< a bug of ours (e.g. a plan failing its own check)

/// The running program's own directory (/proc/self/exe): the tools find each other there.
inline std::filesystem::path programDir() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
}

/// TuCCL's bundled data (examples/algorithms, examples/topologies, examples/tables): the
/// directory at TUCCL_DATA_FROM_BIN (tools/CMakeLists.txt; ../share/tuccl) from the running
/// program's own directory (/proc/self/exe), so a moved install prefix still finds it.
inline std::filesystem::path bundledDataDir() {
  return (programDir() / TUCCL_DATA_FROM_BIN).lexically_normal();
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

/// Reports a failed Status and returns the exit status for it: the diagnostic with its quoted line
/// when it names a file, `tool: error: message` otherwise; kExitInternal for ErrorCode::Internal,
/// kExitError for everything a user can cause.
inline int reportError(std::string_view tool, const Status& status) {
  if (!status.diagnostic().file.empty()) {
    printDiagnostic(status.diagnostic());
  } else {
    std::cerr << tool << ": error: " << status.message() << "\n";
  }
  return status.code() == ErrorCode::Internal ? kExitInternal : kExitError;
}

/// Whether `path` may be written as an output: an existing file only with `force`.
inline Status checkOutputFree(const std::string& path, bool force) {
  std::error_code error;
  if (!force && std::filesystem::exists(path, error))
    return makeError(ErrorCode::InvalidArgument, path + " exists; pass --force to overwrite it");
  return Status();
}

/// Makes the folder of an output file, as `tuccl-compile -o` does.
inline Status makeOutputFolder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) return makeError(ErrorCode::IoError, "cannot create " + parent.string() + ": " + error.message());
  return Status();
}

/// Writes `text` to `path`, replacing the file.
inline Status writeOutput(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) return makeError(ErrorCode::IoError, "cannot write " + path);
  return Status();
}

/// The value, or the status thrown as a StatusError for the tool's main to report: tools unwind
/// to one catch that prints the diagnostic and picks the exit status.
template <typename T>
T valueOrThrow(Expected<T> expected) {
  throwIfError(expected.status());
  return std::move(expected).value();
}

}  // namespace tuccl::cli

// ---- Output paths, checked before any work ----
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tuccl::cli {

/// Whether `path` can be written as an output, without creating anything: not a directory; an
/// existing file writable; otherwise the nearest existing folder on its way a writable directory
/// (the folders still missing are made later, as makeOutputFolder does). The message says why not.
inline Status checkOutputWritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (path.empty()) return makeError(ErrorCode::InvalidArgument, "an output path is empty");
  const fs::path file(path);
  if (fs::is_directory(file, error))
    return makeError(ErrorCode::InvalidArgument, "cannot write " + path + ": it is a directory");
  if (fs::exists(file, error)) {
    if (access(path.c_str(), W_OK) != 0)
      return makeError(ErrorCode::InvalidArgument, "cannot write " + path + ": " + std::strerror(errno));
    return Status();
  }
  fs::path folder = file.parent_path();
  while (!folder.empty() && !fs::exists(folder, error)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";  // a relative path whose folders are all still to be made
  if (!fs::is_directory(folder, error))
    return makeError(ErrorCode::InvalidArgument,
                     "cannot write " + path + ": " + folder.string() + " is not a directory");
  if (access(folder.c_str(), W_OK | X_OK) != 0)
    return makeError(ErrorCode::InvalidArgument,
                     "cannot write " + path + ": " + folder.string() + ": " + std::strerror(errno));
  return Status();
}

/// Whether two output paths name the same file (after resolving what exists of them).
inline bool sameOutputFile(const std::string& a, const std::string& b) {
  auto resolved = [](const std::string& path) {
    std::error_code error;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, error);
    return error ? std::filesystem::absolute(path, error).lexically_normal() : p;
  };
  return resolved(a) == resolved(b);
}

}  // namespace tuccl::cli

// ---- Topology options every tool that takes a topology shares ------------------------------------

#include "topo/gpu_fabric.h"

namespace tuccl::cli {

/// Adds --gpu-fabric nvswitch|hybrid-cube-mesh|pcie, the GPU fabric of a topology source that
/// cannot show it (vendor files without <nvlink>, discovery); stored parsed in `fabric`.
inline CLI::Option* addGpuFabricOption(CLI::App& app, std::optional<GpuFabric>& fabric) {
  return app
      .add_option_function<std::string>(
          "--gpu-fabric", [&fabric](const std::string& name) { fabric = parseGpuFabric(name); },
          "the GPUs' fabric when the topology cannot show it (vendor files without NVLink, local): "
          "nvswitch, hybrid-cube-mesh (8 GPUs, DGX-1) or pcie")
      ->check(CLI::IsMember(gpuFabricNames()));
}

}  // namespace tuccl::cli
