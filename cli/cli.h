// What every TuCCL command-line program shares: exit statuses, command-line parsing that maps
// CLI11's errors onto them, diagnostics that quote the offending source line, and output files.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <new>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "support/log.h"
#include "support/source_text.h"
#include "support/status.h"
#include "support/text_values.h"
#include "support/vocabulary.h"

namespace tuccl::cli {

inline constexpr int kExitError = 2;     ///< bad input or command line
inline constexpr int kExitInternal = 3;  ///< a bug of ours (e.g. a plan failing its own check)

/// The running program's own directory (/proc/self/exe): the tools find each other there.
inline std::filesystem::path programDir() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
}

#if defined(TUCCL_DATA_FROM_BIN)  // the tools (tools/CMakeLists.txt); bench programs have no bundled data
/// TuCCL's bundled data (examples/algorithms, examples/topologies, examples/tables): the
/// directory at TUCCL_DATA_FROM_BIN (tools/CMakeLists.txt; ../share/tuccl) from the running
/// program's own directory (/proc/self/exe), so a moved install prefix still finds it.
inline std::filesystem::path bundledDataDir() {
  return (programDir() / TUCCL_DATA_FROM_BIN).lexically_normal();
}
#endif

/// Parses the command line. Returns nothing to go on, or the status to exit with: 0 after
/// --help / --version, kExitError (with CLI11's message) for a bad command line.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  useToolLogging(argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "tuccl");
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

// Numeric options. CLI11 transformers over support/text_values.h's range parsers, so every tool
// reads sizes, counts and factors alike and refuses what is out of range with the range written
// for people ("--chunk-size: '1' is out of range: must be between 256 B and 1 GiB"):
//   app.add_option("--chunk-size", bytes)->transform(cli::byteSizeIn(256, 1 << 30));
//   app.add_option("-f,--factor", factor)->transform(cli::numberIn(1.01, 1024));

/// The micro-batch (chunk) sizes a plan may record: tune/'s search space starts at 256 B; beyond
/// 1 GiB a slice no longer fits a GPU's staging memory.
inline constexpr uint64_t kMinChunkBytes = 256;
inline constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;

/// A byte size ("64K", "1MiB", "1048576") in [min, max], handed on as decimal bytes.
inline CLI::Validator byteSizeIn(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        Expected<uint64_t> bytes = parseByteSizeInRange(text, min, max);
        if (!bytes) return bytes.status().message();
        text = std::to_string(*bytes);
        return {};
      },
      "SIZE", "byte size");
}

/// A whole number in [min, max].
inline CLI::Validator integerIn(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        Expected<int64_t> value = parseIntegerInRange(text, min, max);
        if (!value) return value.status().message();
        text = std::to_string(*value);
        return {};
      },
      "INT", "whole number");
}

/// A finite number in [min, max] ("nan" and "inf" refused).
inline CLI::Validator numberIn(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        Expected<double> value = parseNumberInRange(text, min, max);
        return value ? std::string() : value.status().message();
      },
      "NUMBER", "number");
}

/// A comma-separated list with no item given twice ("allreduce,allreduce" is refused).
inline CLI::Validator distinctList() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        Expected<std::vector<std::string>> items = splitDistinctList(text);
        return items ? std::string() : items.status().message();
      },
      "LIST", "list");
}

// Named choices. An option that takes one name of a list checks it against the spellings of its
// concept's vocabulary (support/vocabulary.h's ...Names(), or a stage's name function through
// namesOf), so a tool offers exactly what the stage parses; --help and the error list them in the
// order given ("--protocol: ll not in {LL,LL128,Simple}"):
//   app.add_option("--protocol", protocol)->check(cli::oneOf(protocolNames()));
//   app.add_option("--variant", variant)
//       ->check(cli::oneOf(cli::namesOf({SketchVariant::Pruned, SketchVariant::Relay}, sketchVariantName)));

/// Accepts exactly one of `names`, case-sensitively (CLI11's IsMember).
inline CLI::Validator oneOf(std::vector<std::string> names) { return CLI::IsMember(std::move(names)); }

/// `name` of each of `values`, in that order.
template <typename Enum, typename Name>
std::vector<std::string> namesOf(std::initializer_list<Enum> values, Name name) {
  std::vector<std::string> names;
  for (Enum value : values) names.emplace_back(name(value));
  return names;
}

/// `name` of every value of an enum numbered 0..count-1 (mscclRuntimeName, kMscclRuntimes).
template <typename Enum, typename Name>
std::vector<std::string> namesOf(int count, Name name) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(name(static_cast<Enum>(i)));
  return names;
}

/// "a, b, c": the names for help text.
inline std::string joinNames(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

/// --tb-alloc's spellings (parseTbRequest, scheduler/plan_builder.h): auto, state, connection,
/// connection+channels (MSCCL's channel split), and single where `offerSingle`.
inline std::vector<std::string> tbAllocationNames(bool offerSingle) {
  std::vector<std::string> names = {"auto", std::string(tbPolicyShortName(TbPolicy::StateBased)),
                                    std::string(tbPolicyShortName(TbPolicy::ConnectionBased)), "connection+channels"};
  if (offerSingle) names.emplace_back(tbPolicyShortName(TbPolicy::Single));
  return names;
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

// Output files. Every tool writes only where it was asked to, replaces an existing file only with
// --force, and checks its outputs before any work, so a long run never ends in "cannot write":
//   cli::addForceFlag(app, force);                         // one spelling of --force everywhere
//   if (Status s = cli::checkOutputFree(path, force); !s) return cli::reportError(tool, s);
//   ... the work ...
//   if (Status s = cli::writeOutput(path, text); !s) return cli::reportError(tool, s);
// "-" names standard output (checkOutputFree accepts it, writeOutput prints to it).

/// Adds the --force flag: replace existing output files.
inline CLI::Option* addForceFlag(CLI::App& app, bool& force) {
  return app.add_flag("--force", force, "replace output files that exist (without it an existing file is refused)");
}

/// Whether `path` names standard output ("-").
inline bool isStandardOutput(std::string_view path) { return path == "-"; }

/// Whether a program may create or replace files in the existing folder `folder`; the reason why
/// not otherwise ("permission denied", "not a directory").
inline Status checkWritableFolder(const std::filesystem::path& folder, const std::string& output) {
  std::error_code error;
  const std::filesystem::path shown = folder.empty() ? std::filesystem::path(".") : folder;
  if (!std::filesystem::is_directory(shown, error)) {
    return makeError(ErrorCode::IoError, "cannot write " + output + ": " + shown.string() + " is not a directory");
  }
  if (::access(shown.c_str(), W_OK | X_OK) != 0) {
    return makeError(ErrorCode::IoError, "cannot write " + output + ": " + shown.string() + ": " + std::strerror(errno));
  }
  return Status();
}

/// Checks, before any work, that `path` can be written as an output file: an empty path (no output)
/// and "-" pass; a directory is refused; an existing file is refused unless `force` ("X exists;
/// pass --force to overwrite it"); the folder (or, when it is still to be made, its nearest
/// existing ancestor) must be a writable directory, else the reason is given (errno's text).
inline Status checkOutputFree(const std::string& path, bool force) {
  if (path.empty() || isStandardOutput(path)) return Status();
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (fs::is_directory(status)) return makeError(ErrorCode::InvalidArgument, "cannot write " + path + ": it is a directory");
  if (fs::exists(status)) {
    if (!force) return makeError(ErrorCode::InvalidArgument, path + " exists; pass --force to overwrite it");
    if (::access(path.c_str(), W_OK) != 0)
      return makeError(ErrorCode::IoError, "cannot write " + path + ": " + std::strerror(errno));
  }
  fs::path folder = fs::path(path).parent_path();
  while (!folder.empty() && !fs::exists(folder, error)) folder = folder.parent_path();
  return checkWritableFolder(folder, path);
}

/// The same for an output folder: `folder` is a directory or can be made, and each of `names`
/// inside it is free (or `force`).
inline Status checkOutputFolder(const std::string& folder, const std::vector<std::string>& names, bool force) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::exists(folder, error) && !fs::is_directory(folder, error))
    return makeError(ErrorCode::InvalidArgument, "cannot write into " + folder + ": it is not a directory");
  for (const std::string& name : names) {
    if (Status status = checkOutputFree((fs::path(folder) / name).string(), force); !status) return status;
  }
  if (names.empty()) {
    fs::path existing = fs::path(folder);
    while (!existing.empty() && !fs::exists(existing, error)) existing = existing.parent_path();
    return checkWritableFolder(existing, folder);
  }
  return Status();
}

/// Makes the folder of an output file, as `tuccl-compile -o` does.
inline Status makeOutputFolder(const std::string& path) {
  if (path.empty() || isStandardOutput(path)) return Status();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) return makeError(ErrorCode::IoError, "cannot create " + parent.string() + ": " + error.message());
  return Status();
}

/// Writes what `write` puts into its stream to `path` ("-": standard output) through a temporary
/// file beside it and a rename, so a failed write leaves the old file (or none) rather than half a
/// file; makes the folder when missing. The error says why (errno's text). A large output (a
/// plan) is streamed, never held whole in memory.
inline Status writeOutputStream(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (isStandardOutput(path)) {
    write(std::cout);
    std::cout << std::flush;
    return std::cout ? Status() : makeError(ErrorCode::IoError, "cannot write to standard output");
  }
  if (Status status = makeOutputFolder(path); !status) return status;
  std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    errno = 0;
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return makeError(ErrorCode::IoError, "cannot write " + path + ": " + std::strerror(errno));
    write(out);
    if (!out.flush()) {
      const int saved = errno;
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      return makeError(ErrorCode::IoError, "cannot write " + path + ": " + std::strerror(saved != 0 ? saved : EIO));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    return makeError(ErrorCode::IoError, "cannot write " + path + ": " + error.message());
  }
  return Status();
}

/// writeOutputStream of `text`.
inline Status writeOutput(const std::string& path, std::string_view text) {
  return writeOutputStream(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

/// Runs a tool's work and turns whatever escapes it into a message and an exit status, so no
/// input ends in an abort (exit 134) or an uncaught exception: a StatusError is reported as its
/// Status (reportError), a DiagnosticError with its quoted line, running out of memory and sizes
/// too large to hold as bad input (kExitError), any other exception as `tool: error: what`.
/// `work` returns the exit status.
template <typename Work>
int runGuarded(std::string_view tool, Work&& work) {
  try {
    return work();
  } catch (const StatusError& error) {
    return reportError(tool, error.status());
  } catch (const DiagnosticError& error) {
    printDiagnostic(error.diagnostic());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": error: out of memory: the input asks for more memory than this machine has\n";
  } catch (const std::length_error&) {
    std::cerr << tool << ": error: out of memory: the input asks for a buffer larger than can be held\n";
  } catch (const std::exception& error) {
    std::cerr << tool << ": error: " << error.what() << "\n";
  }
  return kExitError;
}

/// The value, or the status thrown as a StatusError for the tool's main to report: tools unwind
/// to one catch that prints the diagnostic and picks the exit status.
template <typename T>
T valueOrThrow(Expected<T> expected) {
  throwIfError(expected.status());
  return std::move(expected).value();
}

}  // namespace tuccl::cli

// ---- Output paths that must differ ----

namespace tuccl::cli {

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
#include "topo/load.h"

namespace tuccl::cli {

/// Adds --gpu-fabric nvswitch|hybrid-cube-mesh|pcie, the GPU fabric of a topology source that
/// cannot show it (vendor files without <nvlink>, discovery); stored parsed in `fabric`.
inline CLI::Option* addGpuFabricOption(CLI::App& app, std::optional<GpuFabric>& fabric) {
  return app
      .add_option_function<std::string>(
          "--gpu-fabric", [&fabric](const std::string& name) { fabric = parseGpuFabric(name); },
          "the GPUs' fabric when the topology cannot show it (vendor files without NVLink, local): "
          "nvswitch, hybrid-cube-mesh (8 GPUs, DGX-1) or pcie")
      ->check(oneOf(gpuFabricNames()));
}

/// Adds what a topology source may be composed with (topo/load.h), stored in `options`:
/// --nodes N (copies of a one-node source: an XML or one-node JSON file, local, or a preset, which
/// gets nodes=N), and for files and local how the copies are wired: --fabric switch|clos,
/// --oversub R (Clos uplink oversubscription), --rack K (Clos: nodes per ToR switch).
inline void addClusterOptions(CLI::App& app, LoadOptions& options) {
  app.add_option("--nodes", options.cluster.nodes,
                 "copies of a one-node topology (an .xml or one-node .json file, local; a preset gets nodes=N)")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--fabric", [&options](const std::string& name) {
           options.cluster.fabric = name == "clos" ? Fabric::Clos : Fabric::Switch;
         },
         "network for --nodes (files, local): switch or clos")
      ->check(oneOf({"switch", "clos"}));
  app.add_option("--oversub", options.cluster.oversubscription, "Clos uplink oversubscription (>= 1)");
  app.add_option("--rack", options.cluster.nodesPerTor, "Clos: nodes per ToR switch")->check(CLI::PositiveNumber);
}

}  // namespace tuccl::cli
