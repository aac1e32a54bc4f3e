// tuccl-compile: the offline compiler. Today it reads a ResCCLang program, proves it correct with
// the semantic checker and summarises it (--check); plan and kernel output follow the scheduler
// and kernel generator stages.
//
// Exit status: 0 success, 2 for any error in the program or on the command line.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lang/algorithm_summary.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "support/source_text.h"

namespace tuccl {
extern const char kEmbeddedHmAllReduce[];
}  // namespace tuccl

namespace {

constexpr int kExitError = 2;
constexpr const char* kEmbeddedName = "<bundled>/examples/algorithms/hm_allreduce.resccl";

// "NAME=VALUE" with an integer value.
bool parseParameter(const std::string& text, std::pair<std::string, int64_t>& out) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  const char* begin = text.data() + eq + 1;
  const char* end = text.data() + text.size();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) return false;
  out = {text.substr(0, eq), value};
  return true;
}

int runCheck(const tuccl::SourceText& source, const tuccl::RescclOptions& options, int32_t rankLines) {
  tuccl::Algorithm algorithm = tuccl::compileResccl(source, options);
  tuccl::AlgorithmSummary summary = tuccl::summarizeAlgorithm(algorithm);
  tuccl::CheckReport report = tuccl::checkAlgorithm(algorithm);
  std::cout << tuccl::renderSummary(algorithm, summary, rankLines);
  if (report.ok()) {
    std::cout << "verified: " << tuccl::collectiveName(algorithm.collective) << " postcondition holds\n";
    return 0;
  }
  std::cout << "not verified: " << tuccl::violationName(report.violation->kind) << '\n';
  for (const tuccl::Diagnostic& diagnostic : tuccl::violationDiagnostics(algorithm, *report.violation)) {
    std::cerr << tuccl::formatDiagnostic(diagnostic, &source);
  }
  return kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-compile: compile a collective algorithm (ResCCLang) for TuCCL.\n"
      "With no FILE it uses the bundled hierarchical-mesh AllReduce (examples/algorithms/hm_allreduce.resccl)."};
  app.set_version_flag("--version", "tuccl-compile 0.1.0");
  std::string file;
  bool check = false;
  std::vector<std::string> parameters;
  tuccl::RescclOptions options;
  std::string ranks = "16";
  app.add_option("FILE", file, "ResCCLang program (.resccl); default: the bundled HM AllReduce");
  app.add_flag("--check", check, "parse the program, prove the collective's postcondition and print a summary");
  app.add_option("-p,--param", parameters,
                 "override a header parameter, e.g. --param nRanks=16 --param GPUPerNode=4 (repeatable)")
      ->type_name("NAME=VALUE");
  app.add_option("--max-ops", options.maxOperations, "stop a program that makes more transfer() calls than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-statements", options.maxStatements,
                 "stop a program that executes more statements than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ranks", ranks, "how many ranks the peer table lists: a number or 'all'")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return kExitError;
  }

  for (const std::string& text : parameters) {
    std::pair<std::string, int64_t> parameter;
    if (!parseParameter(text, parameter)) {
      std::cerr << "tuccl-compile: error: --param expects NAME=INTEGER, got '" << text << "'\n";
      return kExitError;
    }
    options.parameterOverrides.push_back(parameter);
  }
  int32_t rankLines = 0;
  if (ranks == "all") {
    rankLines = -1;
  } else {
    auto [ptr, ec] = std::from_chars(ranks.data(), ranks.data() + ranks.size(), rankLines);
    if (ec != std::errc() || ptr != ranks.data() + ranks.size() || rankLines < 0) {
      std::cerr << "tuccl-compile: error: --ranks expects a number or 'all', got '" << ranks << "'\n";
      return kExitError;
    }
  }
  if (!check) {
    std::cerr << "tuccl-compile: error: nothing to do: pass --check (writing plans with -o DIR is not "
                 "implemented yet)\n";
    return kExitError;
  }

  tuccl::SourceText source;
  try {
    source = file.empty() ? tuccl::SourceText(kEmbeddedName, tuccl::kEmbeddedHmAllReduce) : tuccl::readSourceFile(file);
    return runCheck(source, options, rankLines);
  } catch (const tuccl::DiagnosticError& error) {
    std::cerr << tuccl::formatDiagnostic(error.diagnostic(), &source);
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << "tuccl-compile: error: out of memory (lower --max-ops to stop large programs earlier)\n";
    return kExitError;
  }
}
