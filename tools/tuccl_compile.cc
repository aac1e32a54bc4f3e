// tuccl-compile: the offline compiler. It reads a ResCCLang program, proves it correct with the
// semantic checker (--check prints a summary), and with -o DIR schedules it and writes the plan:
// parse -> check -> DAG -> pipeline (HPDS or a baseline) -> TB allocation -> plan.json.
//
// Exit status: 0 success, 2 for any error in the program or on the command line.
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lang/algorithm_summary.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/plan.h"
#include "scheduler/tb_allocation.h"
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

struct CompileOptions {
  bool printSummary = false;
  int32_t rankLines = 16;
  std::string outputDir;  ///< empty: no plan
  bool force = false;
  std::string scheduler = "hpds";
  std::string tbAlloc = "state";
  int32_t stages = 4;
  bool report = false;
  tuccl::PlanConfig config;
};

tuccl::Pipeline schedule(const tuccl::Algorithm& algorithm, const tuccl::Dag& dag, const CompileOptions& options) {
  if (options.scheduler == "rr") return tuccl::scheduleRoundRobin(dag);
  if (options.scheduler == "algorithm") return tuccl::scheduleAlgorithmLevel(algorithm, dag);
  if (options.scheduler == "stage") return tuccl::scheduleStageLevel(algorithm, dag, options.stages);
  return tuccl::scheduleHpds(dag);
}

// --report: per rank, TBs with one TB per connection (plain, and split into channels as MSCCL
// does), after state-based merging, and the primitives the plan gives the rank.
void printReport(const tuccl::Algorithm& algorithm, const tuccl::Dag& dag, const tuccl::Pipeline& pipeline,
                 const tuccl::TbAllocation& connectionBased, const tuccl::TbAllocation& stateBased,
                 const tuccl::Plan& plan, int32_t rankLines) {
  tuccl::TbAllocationOptions mscclOptions{tuccl::TbPolicy::ConnectionBased, tuccl::channelsByForwarding(algorithm, dag)};
  tuccl::TbAllocation msccl = tuccl::allocateThreadBlocks(algorithm, dag, pipeline, mscclOptions);
  std::cout << "schedule     " << pipeline.scheduler << " (" << tuccl::executionLevelName(pipeline.level)
            << "-level), " << pipeline.subPipelineCount() << " sub-pipelines\n";
  std::cout << "tb-alloc     " << plan.tbAllocation << '\n';
  std::cout << "  rank  TBs(connection)  TBs(connection+channels, MSCCL)  TBs(state)  primitives\n";
  const int32_t shown = rankLines < 0 ? algorithm.nRanks : std::min(algorithm.nRanks, rankLines);
  for (int32_t r = 0; r < shown; ++r) {
    size_t primitives = 0;
    for (const tuccl::PlanTb& tb : plan.ranks[r].tbs) primitives += tb.entries.size();
    std::printf("%6d  %15d  %31d  %10d  %10zu\n", r, connectionBased.tbCount[r], msccl.tbCount[r],
                stateBased.tbCount[r], primitives);
  }
  if (shown < algorithm.nRanks) std::cout << "  ... " << (algorithm.nRanks - shown) << " more ranks\n";
}

int compile(const tuccl::SourceText& source, const tuccl::RescclOptions& rescclOptions, const CompileOptions& options) {
  namespace fs = std::filesystem;
  tuccl::Algorithm algorithm = tuccl::compileResccl(source, rescclOptions);
  tuccl::CheckReport report = tuccl::checkAlgorithm(algorithm);
  if (options.printSummary) {
    std::cout << tuccl::renderSummary(algorithm, tuccl::summarizeAlgorithm(algorithm), options.rankLines);
  }
  if (!report.ok()) {
    if (options.printSummary) std::cout << "not verified: " << tuccl::violationName(report.violation->kind) << '\n';
    for (const tuccl::Diagnostic& diagnostic : tuccl::violationDiagnostics(algorithm, *report.violation)) {
      std::cerr << tuccl::formatDiagnostic(diagnostic, &source);
    }
    return kExitError;
  }
  if (options.printSummary) {
    std::cout << "verified: " << tuccl::collectiveName(algorithm.collective) << " postcondition holds\n";
  }
  if (options.outputDir.empty()) return 0;

  const fs::path planPath = fs::path(options.outputDir) / "plan.json";
  std::error_code error;
  if (!options.force && fs::exists(planPath, error)) {
    std::cerr << "tuccl-compile: error: " << planPath.string() << " exists; pass --force to overwrite it\n";
    return kExitError;
  }
  tuccl::Dag dag = tuccl::buildDependencyDag(algorithm);
  tuccl::Pipeline pipeline = schedule(algorithm, dag, options);
  tuccl::TbAllocationOptions allocationOptions;
  allocationOptions.policy =
      options.tbAlloc == "connection" ? tuccl::TbPolicy::ConnectionBased : tuccl::TbPolicy::StateBased;
  tuccl::TbAllocation allocation = tuccl::allocateThreadBlocks(algorithm, dag, pipeline, allocationOptions);
  tuccl::PlanConfig config = options.config;
  if (algorithm.nChannels > 0 && config.nChannels == 0) config.nChannels = algorithm.nChannels;
  if (config.nChannels == 0) config.nChannels = 1;
  tuccl::Plan plan = tuccl::lowerToPlan(algorithm, dag, pipeline, allocation, config);
  if (auto problem = tuccl::validatePlan(plan)) {
    // The checker proved the algorithm, so this is a scheduler bug, not the user's.
    std::cerr << "tuccl-compile: internal error: the " << pipeline.scheduler << " plan fails its static check: "
              << *problem << '\n';
    return 3;
  }
  if (options.report) {
    tuccl::TbAllocationOptions other = allocationOptions;
    other.policy = allocationOptions.policy == tuccl::TbPolicy::StateBased ? tuccl::TbPolicy::ConnectionBased
                                                                          : tuccl::TbPolicy::StateBased;
    tuccl::TbAllocation otherAllocation = tuccl::allocateThreadBlocks(algorithm, dag, pipeline, other);
    const bool stateFirst = allocationOptions.policy == tuccl::TbPolicy::StateBased;
    printReport(algorithm, dag, pipeline, stateFirst ? otherAllocation : allocation,
                stateFirst ? allocation : otherAllocation, plan, options.rankLines);
  }
  fs::create_directories(options.outputDir, error);
  if (error) {
    std::cerr << "tuccl-compile: error: cannot create " << options.outputDir << ": " << error.message() << '\n';
    return kExitError;
  }
  const fs::path temporary = fs::path(options.outputDir) / ".plan.json.tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << tuccl::writePlanJson(plan);
    if (!out.flush()) {
      std::cerr << "tuccl-compile: error: cannot write " << temporary.string() << '\n';
      return kExitError;
    }
  }
  fs::rename(temporary, planPath, error);
  if (error) {
    std::cerr << "tuccl-compile: error: cannot write " << planPath.string() << ": " << error.message() << '\n';
    return kExitError;
  }
  std::cout << "wrote " << planPath.string() << " (" << pipeline.scheduler << ", " << plan.tbAllocation << ", "
            << pipeline.subPipelineCount() << " sub-pipelines)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-compile: compile a collective algorithm (ResCCLang) for TuCCL.\n"
      "With no FILE it uses the bundled hierarchical-mesh AllReduce (examples/algorithms/hm_allreduce.resccl).\n"
      "  tuccl-compile --check FILE        prove the algorithm correct and summarise it\n"
      "  tuccl-compile FILE -o DIR         also schedule it and write DIR/plan.json"};
  app.set_version_flag("--version", "tuccl-compile 0.1.0");
  std::string file;
  bool check = false;
  std::vector<std::string> parameters;
  tuccl::RescclOptions rescclOptions;
  CompileOptions options;
  std::string ranks = "16";
  app.add_option("FILE", file, "ResCCLang program (.resccl); default: the bundled HM AllReduce");
  app.add_flag("--check", check, "parse the program, prove the collective's postcondition and print a summary");
  app.add_option("-p,--param", parameters,
                 "override a header parameter, e.g. --param nRanks=16 --param GPUPerNode=4 (repeatable)")
      ->type_name("NAME=VALUE");
  app.add_option("--max-ops", rescclOptions.maxOperations,
                 "stop a program that makes more transfer() calls than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-statements", rescclOptions.maxStatements,
                 "stop a program that executes more statements than this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ranks", ranks, "how many ranks the peer table and --report list: a number or 'all'")
      ->capture_default_str();
  app.add_option("-o,--output", options.outputDir, "schedule the algorithm and write DIR/plan.json")
      ->type_name("DIR");
  app.add_flag("--force", options.force, "overwrite an existing DIR/plan.json");
  app.add_option("--scheduler", options.scheduler,
                 "hpds (ResCCL Algorithm 1), rr (round-robin over chunks), algorithm (step list replayed per "
                 "micro-batch), stage (blocks of steps)")
      ->check(CLI::IsMember({"hpds", "rr", "algorithm", "stage"}))
      ->capture_default_str();
  app.add_option("--stages", options.stages, "number of stages of --scheduler stage")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tb-alloc", options.tbAlloc,
                 "connection (one thread block per connection) or state (merge connections never active together)")
      ->check(CLI::IsMember({"connection", "state"}))
      ->capture_default_str();
  app.add_flag("--report", options.report, "print per rank the TBs before and after merging and the primitives");
  app.add_option("--protocol", options.config.protocol, "protocol recorded in the plan")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}))
      ->capture_default_str();
  app.add_option("--threads", options.config.nThreads, "threads per thread block recorded in the plan")
      ->check(CLI::Range(32, 1024))
      ->capture_default_str();
  app.add_option("--chunk-size", options.config.chunkSize, "bytes per micro-batch slice recorded in the plan")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  options.config.nChannels = 0;  // 0: take the program's nChannels hint
  app.add_option("--channels", options.config.nChannels, "channels recorded in the plan (default: the program's nChannels)")
      ->check(CLI::Range(1, 64));

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
    rescclOptions.parameterOverrides.push_back(parameter);
  }
  if (ranks == "all") {
    options.rankLines = -1;
  } else {
    auto [ptr, ec] = std::from_chars(ranks.data(), ranks.data() + ranks.size(), options.rankLines);
    if (ec != std::errc() || ptr != ranks.data() + ranks.size() || options.rankLines < 0) {
      std::cerr << "tuccl-compile: error: --ranks expects a number or 'all', got '" << ranks << "'\n";
      return kExitError;
    }
  }
  if (!check && options.outputDir.empty()) {
    std::cerr << "tuccl-compile: error: nothing to do: pass --check, or -o DIR to write a plan (--help lists the "
                 "options)\n";
    return kExitError;
  }
  options.printSummary = check;

  tuccl::SourceText source;
  try {
    source = file.empty() ? tuccl::SourceText(kEmbeddedName, tuccl::kEmbeddedHmAllReduce) : tuccl::readSourceFile(file);
    return compile(source, rescclOptions, options);
  } catch (const tuccl::DiagnosticError& error) {
    std::cerr << tuccl::formatDiagnostic(error.diagnostic(), &source);
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << "tuccl-compile: error: out of memory (lower --max-ops to stop large programs earlier)\n";
    return kExitError;
  }
}
