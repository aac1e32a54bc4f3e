// tuccl-compile: the offline compiler. It reads a ResCCLang program or an MSCCL algorithm XML file
// (lang/load_algorithm.h), proves it correct with the semantic checker (--check prints a summary), and with -o DIR schedules it and writes the plan
// and the kernels: parse -> check -> DAG -> pipeline (HPDS or a baseline) -> TB allocation ->
// plan.json -> kernel<K>.cu (one per rank role) + kernels.json -> (NVRTC) CUBIN/PTX. --verify runs the kernels on the CPU.
// --emit writes one artefact instead, to standard output or -o FILE: the algorithm as ResCCLang
// (lang/resccl_printer.h), the plan as MSCCL XML (plan/msccl_export.h) or the plan JSON.
//
// Exit status: 0 success, 2 for any error in the program, on the command line or in the CPU
// verification, 3 for an internal error (a plan that fails its own check).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernelgen/codegen.h"
#include "kernelgen/compile.h"
#include "kernelgen/cpu_verify.h"
#include "kernelgen/datatype.h"
#include "kernelgen/nvrtc.h"
#include "lang/algorithm_summary.h"
#include "lang/load_algorithm.h"
#include "lang/resccl_printer.h"
#include "lang/semantic_check.h"
#include "plan/msccl_export.h"
#include "plan/mscclpp_export.h"
#include "plan/plan_json.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"
#include "cli/cli.h"

namespace tuccl {
extern const char kEmbeddedHmAllReduce[];
}  // namespace tuccl

namespace {

using tuccl::cli::kExitError;
using tuccl::cli::kExitInternal;
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

// --emit: one artefact to standard output or -o FILE instead of -o DIR's plan and kernels.
enum class Emit : uint8_t { None, Resccl, Msccl, Mscclpp, Plan };

struct CompileOptions {
  Emit emit = Emit::None;
  tuccl::MscclRuntime mscclRuntime = tuccl::MscclRuntime::Executor;
  int32_t mscclppRanksPerNode = 0;  ///< --emit mscclpp; 0: from the algorithm
  bool printSummary = false;
  int32_t rankLines = 16;
  std::string outputDir;  ///< empty: no plan written; with --emit the output file ("-": standard output)
  bool force = false;
  tuccl::PlanRequest request;
  bool report = false;
  std::vector<std::string> archs{"sm_90"};
  bool cubin = true;  ///< with NVRTC, write CUBIN and PTX beside the sources
  int planVersion = tuccl::kPlanFormatVersion;  ///< of plan.json and --emit plan
  std::vector<int32_t> emitRanks;  ///< --emit-ranks: only these ranks' kernels and tables (empty: all)
  bool verify = false;
  tuccl::VerifyOptions verifyOptions;
};

// Writes one output file of -o DIR (cli::writeOutput: whole or not at all, with the reason).
bool writeOutputFile(const std::filesystem::path& path, std::string_view bytes) {
  const tuccl::Status status = tuccl::cli::writeOutput(path.string(), bytes);
  if (!status) std::cerr << "tuccl-compile: error: " << status.message() << '\n';
  return status.ok();
}

// The files -o DIR writes that a second run would replace: checked before any work.
const std::vector<std::string> kOutputNames = {"plan.json", "kernels.json", "kernel0.cu"};

// plan.json (version 4 unless --plan-version), streamed: the text of a large plan is never held whole.
bool writePlanFile(const std::filesystem::path& path, const tuccl::Plan& plan, int version) {
  const tuccl::Status status = tuccl::cli::writeOutputStream(
      path.string(), [&](std::ostream& out) { tuccl::writePlanJson(out, plan, version); });
  if (!status) std::cerr << "tuccl-compile: error: " << status.message() << '\n';
  return status.ok();
}

int32_t tbsOf(const tuccl::Plan& plan, int32_t rank) { return static_cast<int32_t>(plan.ranks[rank].tbs.size()); }

// A plan buildPlan refused: a request the input cannot serve (as-written for a ResCCLang program,
// a file whose schedule deadlocks as written) is the user's to fix; a plan failing its own check
// is a scheduler bug, since the checker proved the algorithm.
int reportPlanError(const tuccl::Status& status) {
  if (status.code() == tuccl::ErrorCode::Internal) {
    std::cerr << "tuccl-compile: internal error: " << status.message() << '\n';
    return kExitInternal;
  }
  std::cerr << "tuccl-compile: error: " << status.message() << '\n';
  return kExitError;
}

// --report: per rank, the TBs of the plan's schedule under one TB per connection (plain, and split
// into channels as MSCCL does, ResCCL Table 3) and after state-based merging, and the primitives.
// (As written, a file's TBs are its own whatever the policy: the three columns agree.)
int printReport(const tuccl::Algorithm& algorithm, const tuccl::Plan& plan, const tuccl::PlanRequest& base,
                const CompileOptions& options) {
  tuccl::PlanRequest request = base;
  request.fuse = false;  // the allocations' own TBs (ResCCL Table 3), before fusion merges any
  request.tbAllocation = {tuccl::TbPolicy::ConnectionBased, false};
  const tuccl::Expected<tuccl::Plan> connection = tuccl::buildPlan(algorithm, request);
  request.tbAllocation = {tuccl::TbPolicy::ConnectionBased, true};
  const tuccl::Expected<tuccl::Plan> msccl = tuccl::buildPlan(algorithm, request);
  request.tbAllocation = {tuccl::TbPolicy::StateBased, false};
  const tuccl::Expected<tuccl::Plan> state = tuccl::buildPlan(algorithm, request);
  for (const tuccl::Expected<tuccl::Plan>* variant : {&connection, &msccl, &state}) {
    if (!*variant) return reportPlanError(variant->status());
  }
  std::cout << "schedule     " << tuccl::schedulerName(plan.scheduler) << " ("
            << tuccl::executionLevelName(plan.executionLevel) << "-level), " << plan.subPipelines << " sub-pipelines\n";
  std::cout << "tb-alloc     " << tuccl::tbPolicyName(plan.tbAllocation) << '\n';
  std::cout << "  rank  TBs(connection)  TBs(connection+channels, MSCCL)  TBs(state)  primitives\n";
  const int32_t shown = options.rankLines < 0 ? algorithm.nRanks : std::min(algorithm.nRanks, options.rankLines);
  for (int32_t r = 0; r < shown; ++r) {
    size_t primitives = 0;
    for (const tuccl::PlanTb& tb : plan.ranks[r].tbs) primitives += tb.entries.size();
    std::printf("%6d  %15d  %31d  %10d  %10zu\n", r, tbsOf(*connection, r), tbsOf(*msccl, r), tbsOf(*state, r),
                primitives);
  }
  if (shown < algorithm.nRanks) std::cout << "  ... " << (algorithm.nRanks - shown) << " more ranks\n";
  return 0;
}

// --emit-ranks: the ranks whose kernels and value tables -o DIR writes (all when empty).
std::vector<bool> emittedRanks(const tuccl::Plan& plan, const std::vector<int32_t>& listed) {
  std::vector<bool> emitted(static_cast<size_t>(plan.nRanks), listed.empty());
  for (int32_t r : listed) emitted[r] = true;
  return emitted;
}

// kernels.json: which kernel every rank runs and its value table (KernelArgs::roleValues), and
// per kernel its file, entry point, grid and ranks. Ranks left out by --emit-ranks are omitted.
std::string kernelsJson(const tuccl::GeneratedKernels& kernels, const std::vector<bool>& emitted,
                        const std::vector<bool>& kernelEmitted, int32_t channels) {
  // "nTbs": the plan's TBs a kernel runs per channel; "blocks": its grid, nTbs x "channels".
  std::string out = "{\n \"format\": \"tuccl-kernels\",\n \"version\": 1,\n \"channels\": " +
                    std::to_string(channels) + ",\n \"kernels\": [";
  bool first = true;
  for (const tuccl::GeneratedKernel& kernel : kernels.kernels) {
    if (!kernelEmitted[kernel.id]) continue;
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += "{\"id\": " + std::to_string(kernel.id) + ", \"file\": \"" + kernel.fileName + "\", \"name\": \"" +
           kernel.kernelName + "\", \"nTbs\": " + std::to_string(kernel.nTbs) +
           ", \"blocks\": " + std::to_string(kernel.nTbs * channels) +
           ", \"tableSize\": " + std::to_string(kernel.tableSize) + ", \"ranks\": " +
           std::to_string(kernel.ranks.size()) + "}";
  }
  out += "\n ],\n \"ranks\": [";
  first = true;
  for (size_t r = 0; r < kernels.ranks.size(); ++r) {
    if (!emitted[r]) continue;
    out += first ? "\n  " : ",\n  ";
    first = false;
    out += "{\"rank\": " + std::to_string(r) + ", \"kernel\": " + std::to_string(kernels.ranks[r].kernel) +
           ", \"values\": [";
    for (size_t i = 0; i < kernels.ranks[r].values.size(); ++i) {
      if (i > 0) out += ", ";
      out += std::to_string(kernels.ranks[r].values[i]);
    }
    out += "]}";
  }
  return out + "\n ]\n}\n";
}

// NVRTC over the distinct kernels written (compilePlan's CUBIN target), one worker per core, an
// architecture at a time; results come from the kernel cache when the same kernel was compiled
// before (a second run compiles nothing).
int writeCubins(const std::filesystem::path& dir, tuccl::CompiledPlan& compiled,
                const std::vector<const tuccl::GeneratedKernel*>& kernels, const CompileOptions& options) {
  tuccl::Targets targets;
  targets.cubinRanks = options.emitRanks;
  targets.keepPtx = true;
  for (const std::string& arch : options.archs) {
    targets.cudaArch = arch;
    if (const tuccl::Status built = tuccl::buildTargets(compiled, targets); !built) {
      if (built.diagnostic().file.empty()) return tuccl::cli::reportError("tuccl-compile", built);
      const std::string& message = built.message();
      std::cerr << "tuccl-compile: error: NVRTC failed on " << (dir / built.diagnostic().file).string() << " for "
                << arch << ": " << message << (message.empty() || message.back() != '\n' ? "\n" : "");
      return kExitError;
    }
    for (const tuccl::GeneratedKernel* kernel : kernels) {
      const std::vector<char>& cubin = compiled.cubins[kernel->id];
      const std::string stem = "kernel" + std::to_string(kernel->id) + "." + arch;
      if (!writeOutputFile(dir / (stem + ".cubin"), std::string_view(cubin.data(), cubin.size())) ||
          !writeOutputFile(dir / (stem + ".ptx"), compiled.ptx[kernel->id])) {
        return kExitError;
      }
    }
    const size_t cached = compiled.cubinsFromCache;
    std::cout << "wrote kernel<K>." << arch << ".cubin and .ptx (NVRTC"
              << (cached == kernels.size() ? ", from the kernel cache" : cached > 0 ? ", partly from the kernel cache" : "")
              << ")\n";
  }
  return 0;
}

// kernel<K>.cu of the kernels the emitted ranks run, kernels.json and, with NVRTC, their CUBINs.
int writeKernels(const std::filesystem::path& dir, tuccl::CompiledPlan& compiled, const CompileOptions& options) {
  const tuccl::Plan& plan = compiled.plan;
  const tuccl::GeneratedKernels& kernels = compiled.kernels;
  const std::vector<bool> emitted = emittedRanks(plan, options.emitRanks);
  std::vector<bool> kernelEmitted(kernels.kernels.size(), false);
  for (size_t r = 0; r < kernels.ranks.size(); ++r) {
    if (emitted[r]) kernelEmitted[kernels.ranks[r].kernel] = true;
  }
  std::vector<const tuccl::GeneratedKernel*> written;
  for (const tuccl::GeneratedKernel& kernel : kernels.kernels) {
    if (!kernelEmitted[kernel.id]) continue;
    if (!writeOutputFile(dir / kernel.fileName, kernel.source)) return kExitError;
    written.push_back(&kernel);
  }
  if (!writeOutputFile(dir / "kernels.json", kernelsJson(kernels, emitted, kernelEmitted, std::max(1, plan.config.nChannels)))) return kExitError;
  std::cout << "wrote " << (dir / "plan.json").string() << " (" << tuccl::schedulerName(plan.scheduler) << ", "
            << tuccl::tbPolicyName(plan.tbAllocation) << ", " << plan.subPipelines << " sub-pipelines), "
            << written.size() << " of " << kernels.kernels.size() << " kernels (kernel<K>.cu) for "
            << plan.nRanks << " ranks and kernels.json\n";
  if (!options.cubin) return 0;
  if (!tuccl::nvrtcAvailable()) {
    std::cout << "no CUBIN/PTX: this build has no NVRTC (configure with the CUDA toolkit)\n";
    return 0;
  }
  return writeCubins(dir, compiled, written, options);
}

// -o DIR: plan.json, kernel<K>.cu (one per distinct kernel), kernels.json (the kernel and value
// table of every rank) and, with NVRTC, kernel<K>.<arch>.cubin / .ptx. The plan moves into the
// compilation and back (a 1,024-rank plan is not copied).
int writeOutputs(tuccl::Plan& plan, const CompileOptions& options) {
  namespace fs = std::filesystem;
  const fs::path dir(options.outputDir);
  for (int32_t r : options.emitRanks) {
    if (r >= plan.nRanks) {
      std::cerr << "tuccl-compile: error: --emit-ranks: rank " << r << " is not a rank of the plan's " << plan.nRanks
                << '\n';
      return kExitError;
    }
  }
  if (!writePlanFile(dir / "plan.json", plan, options.planVersion)) return kExitError;
  // The layout and kernels first: the sources are written before NVRTC reads them.
  tuccl::Expected<tuccl::CompiledPlan> compiled = tuccl::compilePlan(std::move(plan), tuccl::Targets{});
  if (!compiled) return tuccl::cli::reportError("tuccl-compile", compiled.status());
  const int status = writeKernels(dir, *compiled, options);
  plan = std::move(compiled->plan);
  return status;
}

// Writes an --emit artefact to -o FILE or standard output; "wrote FILE (what)" for a file.
int writeEmitted(const CompileOptions& options, std::string_view text, const std::string& what) {
  const tuccl::Status status = tuccl::cli::writeOutput(options.outputDir, text);
  if (!status) return tuccl::cli::reportError("tuccl-compile", status);
  if (!tuccl::cli::isStandardOutput(options.outputDir)) std::cout << "wrote " << options.outputDir << " (" << what << ")\n";
  return 0;
}

// --emit plan: the plan JSON, streamed to -o FILE or standard output.
int emitPlan(const tuccl::Plan& plan, const CompileOptions& options) {
  const tuccl::Status status = tuccl::cli::writeOutputStream(
      options.outputDir, [&](std::ostream& out) { tuccl::writePlanJson(out, plan, options.planVersion); });
  if (!status) return tuccl::cli::reportError("tuccl-compile", status);
  if (!tuccl::cli::isStandardOutput(options.outputDir)) std::cout << "wrote " << options.outputDir << " (plan JSON)\n";
  return 0;
}

// --emit resccl: the algorithm as a ResCCLang program (an imported MSCCL file becomes editable).
int emitResccl(const tuccl::Algorithm& algorithm, const CompileOptions& options) {
  tuccl::Expected<std::string> text = tuccl::printResccl(algorithm);
  if (!text) return tuccl::cli::reportError("tuccl-compile", text.status());
  return writeEmitted(options, *text, "ResCCLang, " + std::to_string(algorithm.ops.size()) + " transfers");
}

// --emit msccl: the plan as MSCCL XML for --msccl-runtime, in place when the algorithm is and
// --out-of-place is not given; every limit of the runtime the plan exceeds is named.
int emitMsccl(const tuccl::Plan& plan, const tuccl::Algorithm& algorithm, const CompileOptions& options) {
  tuccl::MscclExportOptions exportOptions;
  exportOptions.runtime = options.mscclRuntime;
  exportOptions.inPlace = algorithm.inPlace && options.verifyOptions.inPlace;
  tuccl::Expected<tuccl::MscclAlgorithm> lowered = tuccl::lowerToMsccl(plan, exportOptions);
  if (!lowered) return tuccl::cli::reportError("tuccl-compile", lowered.status());
  const std::vector<tuccl::MscclLimitViolation> violations = tuccl::checkMscclLimits(*lowered, options.mscclRuntime);
  if (!violations.empty()) {
    std::cerr << "tuccl-compile: error: the plan exceeds " << violations.size() << " limit"
              << (violations.size() == 1 ? "" : "s") << " of " << tuccl::mscclRuntimeName(options.mscclRuntime)
              << " (another --msccl-runtime, --tb-alloc or fewer ranks may fit):\n";
    for (const tuccl::MscclLimitViolation& violation : violations) std::cerr << "  " << violation.message() << '\n';
    return kExitError;
  }
  size_t tbs = 0;
  for (const tuccl::MscclGpu& gpu : lowered->gpus) tbs += gpu.tbs.size();
  return writeEmitted(options, tuccl::writeMscclXml(*lowered, options.mscclRuntime),
                      "MSCCL XML for " + std::string(tuccl::mscclRuntimeName(options.mscclRuntime)) + ", " +
                          std::to_string(tbs) + " thread blocks, " +
                          (exportOptions.inPlace ? "in-place calls" : "out-of-place calls"));
}

// --emit mscclpp: the plan as an MSCCL++ execution plan. Ranks of one node share memory channels,
// the others talk over port channels: --mscclpp-ranks-per-node, else the algorithm's GPUPerNode
// when it splits the ranks into several nodes, else one node.
int emitMscclpp(const tuccl::Plan& plan, const tuccl::Algorithm& algorithm, const CompileOptions& options) {
  tuccl::MscclppExportOptions exportOptions;
  exportOptions.inPlace = algorithm.inPlace && options.verifyOptions.inPlace;
  exportOptions.ranksPerNode = options.mscclppRanksPerNode;
  if (exportOptions.ranksPerNode == 0 && algorithm.ranksPerNode > 0 && algorithm.ranksPerNode < algorithm.nRanks &&
      algorithm.nRanks % algorithm.ranksPerNode == 0) {
    exportOptions.ranksPerNode = algorithm.ranksPerNode;
  }
  tuccl::Expected<std::string> json = tuccl::exportMscclppJson(plan, exportOptions);
  if (!json) return tuccl::cli::reportError("tuccl-compile", json.status());
  const int32_t perNode = exportOptions.ranksPerNode > 0 ? exportOptions.ranksPerNode : algorithm.nRanks;
  return writeEmitted(options, *json,
                      "MSCCL++ execution plan, " + std::to_string(algorithm.nRanks / perNode) + " node(s) of " +
                          std::to_string(perNode) + " ranks, " +
                          (exportOptions.inPlace ? "in-place calls" : "out-of-place calls"));
}

// --verify: the plan's kernels run on the CPU and every element checked.
int verifyOnCpu(const tuccl::Plan& plan, const tuccl::Algorithm& algorithm, const CompileOptions& options) {
  tuccl::VerifyOptions verifyOptions = options.verifyOptions;
  // An out-of-place algorithm (an MSCCL file with inplace="0") runs only as an out-of-place call.
  if (!algorithm.inPlace) verifyOptions.inPlace = false;
  const tuccl::CpuVerifyReport verification = tuccl::verifyPlanOnCpu(plan, verifyOptions);
  std::cout << "cpu verify   " << tuccl::dataTypeName(verifyOptions.dataType) << " "
            << tuccl::reduceOpName(verifyOptions.op) << ", count " << verifyOptions.count
            << (verifyOptions.inPlace ? ", in place" : ", out of place") << '\n'
            << verification.summary();
  if (!verification.ok) {
    std::cerr << "tuccl-compile: error: CPU verification of the " << tuccl::schedulerName(plan.scheduler)
              << " plan failed\n";
    return kExitError;
  }
  return 0;
}

int compile(const tuccl::SourceText& source, const tuccl::RescclOptions& rescclOptions, const CompileOptions& options) {
  tuccl::Expected<tuccl::LoadedAlgorithm> loaded = tuccl::loadAlgorithmText(source, rescclOptions);
  if (!loaded.ok()) {
    tuccl::cli::printDiagnostic(loaded.diagnostic(), &source);
    return kExitError;
  }
  if (loaded->msccl) {  // how an ambiguous file was read
    for (const tuccl::Diagnostic& warning : loaded->msccl->warnings) std::cerr << tuccl::formatDiagnostic(warning, &source);
  }
  tuccl::Algorithm algorithm = std::move(loaded->algorithm);
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
  if (options.emit == Emit::Resccl) {
    if (int status = emitResccl(algorithm, options); status != 0) return status;
  }
  const bool needsPlan = options.emit == Emit::Msccl || options.emit == Emit::Mscclpp || options.emit == Emit::Plan ||
                         (options.emit == Emit::None && !options.outputDir.empty());
  if (!needsPlan && !options.verify) return 0;

  tuccl::PlanRequest request = options.request;
  if (loaded->msccl) request.mscclSchedule = &loaded->msccl->schedule;  // --scheduler as-written runs it
  tuccl::Expected<tuccl::Plan> built = tuccl::buildPlan(algorithm, request);
  if (!built) return reportPlanError(built.status());
  tuccl::Plan& plan = *built;
  if (options.report) {
    if (int status = printReport(algorithm, plan, request, options); status != 0) return status;
  }
  if (options.emit == Emit::Plan) {
    if (int status = emitPlan(plan, options); status != 0) return status;
  } else if (options.emit == Emit::Msccl) {
    if (int status = emitMsccl(plan, algorithm, options); status != 0) return status;
  } else if (options.emit == Emit::Mscclpp) {
    if (int status = emitMscclpp(plan, algorithm, options); status != 0) return status;
  } else if (!options.outputDir.empty()) {
    if (int status = writeOutputs(plan, options); status != 0) return status;
  }
  return options.verify ? verifyOnCpu(plan, algorithm, options) : 0;
}

// The command line as given: the options that need parsing or checking after CLI11 is done, and
// the ones that go straight into RescclOptions and CompileOptions.
struct CompileArgs {
  std::string file;
  bool check = false;
  std::vector<std::string> parameters;
  tuccl::RescclOptions rescclOptions;
  CompileOptions options;
  std::string ranks = "16";
  std::string emit;
  CLI::Option* perNodeOption = nullptr;
  std::string mscclRuntime = "executor";
  CLI::Option* runtimeOption = nullptr;
  std::string scheduler = "hpds";
  std::string tbAllocation = "auto";
  std::string protocol = "Simple";
  bool noFuse = false;
  std::string dataType = "float32";
  std::string reduceOp = "sum";
  bool outOfPlace = false;
};

// FILE, --check, the program's parameters and limits, and --ranks.
void addProgramOptions(CLI::App& app, CompileArgs& args) {
  app.add_option("FILE", args.file,
                 "ResCCLang program (.resccl) or MSCCL algorithm XML (.xml, or text starting with '<'); default: the "
                 "bundled HM AllReduce");
  app.add_flag("--check", args.check, "parse the program, prove the collective's postcondition and print a summary");
  app.add_option("-p,--param", args.parameters,
                 "override a ResCCLang header parameter, e.g. --param nRanks=16 --param GPUPerNode=4 (repeatable)")
      ->type_name("NAME=VALUE");
  app.add_option("--max-ops", args.rescclOptions.maxOperations,
                 "stop a program that makes more transfer() calls than this")
      ->capture_default_str()
      ->transform(tuccl::cli::integerIn(1, int64_t{1} << 40));
  app.add_option("--max-statements", args.rescclOptions.maxStatements,
                 "stop a program that executes more statements than this")
      ->capture_default_str()
      ->transform(tuccl::cli::integerIn(1, int64_t{1} << 40));
  app.add_option("--ranks", args.ranks, "how many ranks the peer table and --report list: a number or 'all'")
      ->capture_default_str();
}

// -o, --emit and its MSCCL / MSCCL++ settings, --plan-version and --force.
void addOutputOptions(CLI::App& app, CompileArgs& args) {
  CompileOptions& options = args.options;
  app.add_option("-o,--output", options.outputDir,
                 "schedule the algorithm and write DIR/plan.json, DIR/kernel<K>.cu and DIR/kernels.json; with --emit, the FILE to write "
                 "('-' or none: standard output)")
      ->type_name("DIR|FILE");
  app.add_option("--emit", args.emit,
                 "write one artefact instead of -o DIR's plan and kernels: resccl (the algorithm as a ResCCLang "
                 "program), msccl (the plan as MSCCL algorithm XML, see --msccl-runtime), mscclpp (the plan as an MSCCL++ "
                 "execution plan), plan (the plan JSON)")
      ->check(tuccl::cli::oneOf({"resccl", "msccl", "mscclpp", "plan"}));
  args.perNodeOption =
      app.add_option("--mscclpp-ranks-per-node", options.mscclppRanksPerNode,
                     "--emit mscclpp: consecutive ranks of one node (memory channels inside, port channels "
                     "between nodes); default: the algorithm's GPUPerNode when it makes several nodes, else one node")
          ->check(CLI::Range(1, 1 << 20));
  args.runtimeOption =
      app.add_option("--msccl-runtime", args.mscclRuntime,
                     "--emit msccl: the runtime whose spelling and limits the file follows: msccl (microsoft/msccl), "
                     "executor (msccl-executor-nccl), rccl; a plan beyond its limits is an error naming each")
          ->check(tuccl::cli::oneOf(
              tuccl::cli::namesOf<tuccl::MscclRuntime>(tuccl::kMscclRuntimes, tuccl::mscclRuntimeName)))
          ->capture_default_str();
  app.add_option("--plan-version", options.planVersion,
                 "the plan JSON version written by -o DIR and --emit plan: 4 (runs and rank templates, its size "
                 "grows with the distinct work; fused primitives), 3 (the same without fused primitives: the "
                 "plan is written unfused) or 2 (one object per entry, unfused, for older readers)")
      ->check(CLI::Range(tuccl::kOldestWrittenPlanFormatVersion, tuccl::kPlanFormatVersion))
      ->capture_default_str();
  tuccl::cli::addForceFlag(app, options.force);
}

// The schedule: scheduler, stages, TB allocation, --report, the plan's configuration and fusion.
void addScheduleOptions(CLI::App& app, CompileArgs& args) {
  CompileOptions& options = args.options;
  app.add_option("--scheduler", args.scheduler,
                 "hpds (ResCCL Algorithm 1), rr (round-robin over chunks), algorithm (step list replayed per "
                 "micro-batch), stage (blocks of steps), as-written (an MSCCL XML file's own thread blocks and "
                 "channels, as MSCCL runs them)")
      ->check(tuccl::cli::oneOf(tuccl::schedulerShortNames()))
      ->capture_default_str();
  app.add_option("--stages", options.request.stages, "number of stages of --scheduler stage")
      ->transform(tuccl::cli::integerIn(1, 1024))
      ->capture_default_str();
  app.add_option("--tb-alloc", args.tbAllocation,
                 "state (merge connections never active together), connection (one thread block per connection), "
                 "connection+channels (MSCCL's channel split), single (one thread block per rank, as libtuccl's CPU "
                 "device runs small calls), auto (state for hpds/rr, else connection+channels)")
      ->check(tuccl::cli::oneOf(tuccl::cli::tbAllocationNames(/*offerSingle=*/true)))
      ->capture_default_str();
  app.add_flag("--report", options.report, "print per rank the TBs before and after merging and the primitives");
  app.add_option("--protocol", args.protocol, "protocol recorded in the plan")  // listed default first
      ->check(tuccl::cli::oneOf(tuccl::cli::namesOf(
          {tuccl::Protocol::Simple, tuccl::Protocol::LL, tuccl::Protocol::LL128}, tuccl::protocolName)))
      ->capture_default_str();
  app.add_option("--threads", options.request.config.nThreads, "threads per thread block recorded in the plan")
      ->transform(tuccl::cli::integerIn(32, 1024))
      ->capture_default_str();
  app.add_option("--chunk-size", options.request.config.chunkSize,
                 "bytes per micro-batch slice recorded in the plan (256 B to 1 GiB; K, M, G)")
      ->transform(tuccl::cli::byteSizeIn(tuccl::cli::kMinChunkBytes, tuccl::cli::kMaxChunkBytes))
      ->capture_default_str();
  options.request.config.nChannels = 0;  // 0: take the program's nChannels hint
  app.add_option("--channels", options.request.config.nChannels,
                 "channels recorded in the plan (default: the program's nChannels)")
      ->transform(tuccl::cli::integerIn(1, 64));
  app.add_flag("--no-fuse", args.noFuse,
               "keep every transfer a plain send and receive: no fused recvCopySend / recvReduceSend / "
               "recvReduceCopySend (docs/scheduling.md, \"Fusion\")");
}

// The kernels -o DIR writes: NVRTC architectures, --no-cubin and --emit-ranks.
void addKernelOptions(CLI::App& app, CompileOptions& options) {
  app.add_option("--arch", options.archs, "with -o and NVRTC: GPU architectures to compile for (sm_80, sm_90, ...)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& arch) -> std::string {
            const size_t digits = arch.rfind("sm_", 0) == 0 ? 3 : arch.rfind("compute_", 0) == 0 ? 8 : 0;
            if (digits == 0 || arch.size() == digits ||
                arch.find_first_not_of("0123456789a", digits) != std::string::npos)
              return "unknown GPU architecture '" + arch + "' (e.g. sm_80, sm_90)";
            return {};
          },
          "ARCH", "GPU architecture"))
      ->capture_default_str();
  app.add_flag("!--no-cubin", options.cubin, "with -o: write only the .cu sources, no NVRTC CUBIN/PTX");
  app.add_option("--emit-ranks", options.emitRanks,
                 "with -o: write only the kernels these ranks run and their value tables in kernels.json (the plan "
                 "stays whole), e.g. --emit-ranks 0,8,17")
      ->delimiter(',')
      ->check(CLI::Range(0, INT32_MAX));
}

// --verify and its data: datatype, reduction, count, seed and buffer placement.
void addVerifyOptions(CLI::App& app, CompileArgs& args) {
  CompileOptions& options = args.options;
  app.add_flag("--verify", options.verify,
                "run the generated kernels on the CPU (every rank a set of threads) on random data and compare "
                "every element with a reference");
  app.add_option("--dtype", args.dataType, "--verify: " + tuccl::cli::joinNames(tuccl::dataTypeNames()))
      ->capture_default_str();
  app.add_option("--op", args.reduceOp, "--verify: " + tuccl::cli::joinNames(tuccl::reduceOpNames()))
      ->capture_default_str();
  app.add_option("--count", options.verifyOptions.count, "--verify: elements (NCCL's count)")
      ->transform(tuccl::cli::integerIn(0, tuccl::kMaxVerifyCount))
      ->capture_default_str();
  app.add_option("--seed", options.verifyOptions.seed, "--verify: random seed (0: a fresh one, printed)")
      ->capture_default_str();
  app.add_flag("--out-of-place", args.outOfPlace,
               "--verify: separate input and output buffers (always so for an out-of-place algorithm); --emit msccl: "
               "a file for out-of-place calls");
}

// Reads --param NAME=VALUE into the program's overrides and --ranks into the lines to list; 0 or
// the exit status of a bad value.
int readProgramArguments(CompileArgs& args) {
  for (const std::string& text : args.parameters) {
    std::pair<std::string, int64_t> parameter;
    if (!parseParameter(text, parameter)) {
      std::cerr << "tuccl-compile: error: --param expects NAME=INTEGER, got '" << text << "'\n";
      return kExitError;
    }
    args.rescclOptions.parameterOverrides.push_back(parameter);
  }
  const std::string& ranks = args.ranks;
  if (ranks == "all") {
    args.options.rankLines = -1;
  } else {
    auto [ptr, ec] = std::from_chars(ranks.data(), ranks.data() + ranks.size(), args.options.rankLines);
    if (ec != std::errc() || ptr != ranks.data() + ranks.size() || args.options.rankLines < 0) {
      std::cerr << "tuccl-compile: error: --ranks expects a number or 'all', got '" << ranks << "'\n";
      return kExitError;
    }
  }
  return 0;
}

// Refuses an exporter's setting given without its --emit ("--msccl-runtime applies to --emit msccl
// only"); 0 or the exit status of the refusal.
int checkExporterSetting(const CLI::Option& setting, Emit emit, Emit exporter, std::string_view exporterName) {
  if (setting.count() == 0 || emit == exporter) return 0;
  std::cerr << "tuccl-compile: error: " << setting.get_name() << " applies to --emit " << exporterName << " only\n";
  return kExitError;
}

// Settles what the run writes (--emit, its settings, -o) and refuses a run with nothing to do; 0
// or the exit status of the refusal.
int resolveOutputs(CompileArgs& args) {
  CompileOptions& options = args.options;
  if (!args.emit.empty()) {
    options.emit = args.emit == "resccl"    ? Emit::Resccl
                   : args.emit == "msccl"   ? Emit::Msccl
                   : args.emit == "mscclpp" ? Emit::Mscclpp
                                            : Emit::Plan;
    if (options.outputDir.empty()) options.outputDir = "-";
  }
  if (int status = checkExporterSetting(*args.perNodeOption, options.emit, Emit::Mscclpp, "mscclpp")) return status;
  if (int status = checkExporterSetting(*args.runtimeOption, options.emit, Emit::Msccl, "msccl")) return status;
  options.mscclRuntime = tuccl::parseMscclRuntime(args.mscclRuntime).value();  // CLI11 checked the name
  if (!args.check && options.outputDir.empty() && !options.verify) {
    std::cerr << "tuccl-compile: error: nothing to do: pass --check, -o DIR to write a plan and kernels, --emit, or "
                 "--verify (--help lists the options)\n";
    return kExitError;
  }
  return 0;
}

// Parses the verification's datatype and reduction and the plan request's names; 0 or the exit
// status of an unknown name.
int resolveRequest(CompileArgs& args) {
  CompileOptions& options = args.options;
  if (auto type = tuccl::parseDataType(args.dataType)) {
    options.verifyOptions.dataType = *type;
  } else {
    std::cerr << "tuccl-compile: error: --dtype: unknown datatype '" << args.dataType << "'\n";
    return kExitError;
  }
  if (auto op = tuccl::parseReduceOp(args.reduceOp)) {
    options.verifyOptions.op = *op;
  } else {
    std::cerr << "tuccl-compile: error: --op: unknown reduction '" << args.reduceOp << "'\n";
    return kExitError;
  }
  // CLI11 checked the names (cli::oneOf): each parses.
  options.request.scheduler = tuccl::parseScheduler(args.scheduler).value();
  options.request.tbAllocation = tuccl::parseTbRequest(args.tbAllocation).value();
  options.request.config.protocol = tuccl::parseProtocol(args.protocol).value();
  options.request.fuse = !args.noFuse;
  options.verifyOptions.inPlace = !args.outOfPlace;
  options.printSummary = args.check;
  return 0;
}

// Checks before any work that the outputs can be written (--force to replace them); 0 or the
// exit status of the refusal.
int checkOutputsFree(const CompileOptions& options) {
  if (options.emit != Emit::None) {
    const tuccl::Status free = tuccl::cli::checkOutputFree(options.outputDir, options.force);
    if (!free) return tuccl::cli::reportError("tuccl-compile", free);
  } else if (!options.outputDir.empty()) {
    const tuccl::Status free = tuccl::cli::checkOutputFolder(options.outputDir, kOutputNames, options.force);
    if (!free) return tuccl::cli::reportError("tuccl-compile", free);
  }
  return 0;
}

// Reads FILE (or the bundled program) and compiles it, turning every failure into its message and
// exit status.
int compileFile(const std::string& file, const tuccl::RescclOptions& rescclOptions, const CompileOptions& options) {
  tuccl::SourceText source;
  try {
    source = file.empty() ? tuccl::SourceText(kEmbeddedName, tuccl::kEmbeddedHmAllReduce) : tuccl::readSourceFile(file);
    return compile(source, rescclOptions, options);
  } catch (const tuccl::StatusError& error) {
    return tuccl::cli::reportError("tuccl-compile", error.status());
  } catch (const tuccl::DiagnosticError& error) {
    // Before the file was read (it could not be), the diagnostic quotes nothing.
    tuccl::cli::printDiagnostic(error.diagnostic(), source.name().empty() ? nullptr : &source);
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::cerr << "tuccl-compile: error: out of memory (lower --max-ops to stop large programs earlier, or --count)\n";
    return kExitError;
  } catch (const std::length_error&) {
    std::cerr << "tuccl-compile: error: out of memory: a buffer larger than can be held (lower --count)\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "tuccl-compile: error: " << error.what() << '\n';
    return kExitError;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-compile: compile a collective algorithm (ResCCLang, or MSCCL algorithm XML) for TuCCL.\n"
      "With no FILE it uses the bundled hierarchical-mesh AllReduce (examples/algorithms/hm_allreduce.resccl).\n"
      "  tuccl-compile --check FILE        prove the algorithm correct and summarise it\n"
      "  tuccl-compile FILE -o DIR         also schedule it and write DIR/plan.json, the distinct kernels\n"
      "                                    DIR/kernel<K>.cu and DIR/kernels.json (each rank's kernel and values)\n"
      "  tuccl-compile FILE --verify       run the generated kernels on the CPU and check every element\n"
      "  tuccl-compile FILE --emit resccl  print the algorithm as ResCCLang (e.g. an MSCCL XML file, to edit)\n"
      "  tuccl-compile FILE --emit msccl   print the plan as MSCCL algorithm XML (-o FILE to write a file)\n"
      "  tuccl-compile FILE --emit mscclpp print the plan as an MSCCL++ execution plan (JSON)"};
  app.set_version_flag("--version", "tuccl-compile 0.1.0");
  CompileArgs args;
  addProgramOptions(app, args);
  addOutputOptions(app, args);
  addScheduleOptions(app, args);
  addKernelOptions(app, args.options);
  addVerifyOptions(app, args);
  if (auto status = tuccl::cli::parse(app, argc, argv)) return *status;
  if (int status = readProgramArguments(args); status != 0) return status;
  if (int status = resolveOutputs(args); status != 0) return status;
  if (int status = resolveRequest(args); status != 0) return status;
  if (int status = checkOutputsFree(args.options); status != 0) return status;
  return compileFile(args.file, args.rescclOptions, args.options);
}
