// tuccl-tune: search the configuration of every (collective, message size) on a topology and write
// the tuner plugin's table (docs/tuning.md "tuccl-tune", docs/tuning-table.md).
//
//   tuccl-tune --topo preset:resccl-a100:nodes=2 --collectives allreduce,allgather --sizes 1K:1G
//              --profiler sim --budget 20000 --seed 1 -o table.json
//
// The run is tune/tuning_run.h's: this program reads the command line into a TuningRequest, runs
// it with a progress display, and writes the JSON table (-o), NCCL's CSV beside it (or --csv;
// what CSV cannot hold is left out) and a summary. The trial log (--log, default beside the JSON)
// makes an interrupted run resumable (--resume); existing tables are replaced only with --force.
//
// Exit status (cli/cli.h): 0 success, 2 for an error in the inputs, on the command line or in a
// profiling run, 3 for an internal error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <utility>
#include <string>
#include <vector>

#include "support/text_values.h"
#include "table/table_io.h"
#include "cli/cli.h"
#include "tune/tuning_run.h"
#include "support/environment.h"

namespace {

using namespace tuccl;

constexpr const char* kTool = "tuccl-tune";
constexpr const char* kVersion = "tuccl-tune 0.1.0";
/// --profiler tuccl without --topo or --ranks: the CPU-device ranks it tunes.
constexpr int32_t kDefaultHostRanks = 4;

/// The command line as given.
struct Options {
  std::string topo = "preset:resccl-a100:nodes=2";
  LoadOptions topologyOptions;
  std::string collectives = "allreduce,allgather";
  std::string sizes = "1K:1G";
  double factor = 2;
  std::string profiler = "sim";
  std::string command;
  double timeout = 300;
  int32_t ranks = 0;
  int64_t iterations = 0;
  std::string confirmRounds = "6:12";
  int64_t confirmReps = 0;
  bool noConfirm = false;
  std::string algorithms;
  std::string method = "mraco";
  double budget = 0;
  double budgetFraction = 0.1;
  uint64_t seed = 1;
  int64_t maxResource = 27;
  double sigma = 0.05;
  std::string schedulers = "hpds,rr,algorithm,stage";
  int64_t maxSlices = 64;
  std::string spaceFile;
  int32_t groups = 3;
  std::string examplesDir = (cli::bundledDataDir() / "examples" / "algorithms").string();
  std::string output;
  std::string csv;
  std::string log;
  bool resume = false;
  bool candidatesOnly = false;
  bool force = false;
  bool signature = false;
  bool quiet = false;
};

void addOptions(CLI::App& app, Options& o) {
  app.set_version_flag("--version", kVersion);
  app.add_option("--topo", o.topo, "topology: preset:NAME[:nodes=N,gpus=K], a .json or .xml file, local")
      ->capture_default_str();
  cli::addGpuFabricOption(app, o.topologyOptions.gpuFabric);
  cli::addClusterOptions(app, o.topologyOptions);
  app.add_option("--collectives", o.collectives,
                 "comma-separated: allreduce, allgather, broadcast, reduce, reducescatter")
      ->capture_default_str();
  app.add_option("--sizes", o.sizes,
                 "size range MIN:MAX (K, M, G suffixes), message bytes as nccl-tests counts them")
      ->capture_default_str();
  app.add_option("-f,--factor", o.factor, "grid step: multiply the size by this (2: powers of two)")
      ->capture_default_str();
  app.add_option("--profiler", o.profiler,
                 "sim (the simulator), command (--command), or tuccl (libtuccl runs: tuccl-run ... tuccl-bench, "
                 "one process per rank of the topology on this machine)")
      ->check(cli::oneOf({"sim", "command", "tuccl"}))
      ->capture_default_str();
  app.add_option(
      "--command", o.command,
      "command template for --profiler command, e.g. 'mpirun -np 16 all_reduce_perf -b {bytes} -e {bytes} "
      "-n {iters} -N {reps}' ({reps}: the repetitions, one result row each; without it {iters} is the resource "
      "and the one row the only sample)");
  app.add_option("--timeout", o.timeout, "seconds per command run")->capture_default_str();
  app.add_option("--ranks", o.ranks,
                 "tuccl without --topo: the CPU-device ranks to tune on this machine (default 4; with "
                 "TUCCL_DEVICE=cuda and no --topo, the GPUs discovered here: --topo local)")
      ->check(CLI::Range(1, 256));
  app.add_option("--iterations", o.iterations,
                 "command, tuccl: timed iterations per repetition ({iters} of a template with {reps}; default: "
                 "tuccl about 8 MiB per repetition, 2 to 20 iterations; a command 20)")
      ->check(CLI::PositiveNumber);
  app.add_option("--confirm-rounds", o.confirmRounds,
                 "command, tuccl: MIN:MAX interleaved rounds of the best configurations against the default at "
                 "each size; an entry differs from the default only where the win is significant")
      ->capture_default_str();
  app.add_option("--confirm-reps", o.confirmReps, "repetitions per confirmation run (default: --max-resource)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-confirm", o.noConfirm, "keep each search's best without confirming it against the default");
  app.add_option(
      "--algorithms", o.algorithms,
      "command profiler: NCCL algorithms to search (ring,tree,...); tuccl: built-in algorithms (ring,direct); sim: "
      "restrict the candidate programs, and an item naming a directory adds its .resccl and .xml (MSCCL) files "
      "as candidates");
  app.add_flag("--candidates-only", o.candidatesOnly,
               "sim: keep the best candidate at every size even where NCCL's own choice (the NCCL model) is "
               "faster (by default the table keeps NCCL's choice there)");
  app.add_option("--groups", o.groups,
                 "configuration groups kept per table entry, the winner included (the runtime phase switches "
                 "among them; 1: the winner only)")
      ->check(CLI::Range(1, kMaxGroups))
      ->capture_default_str();
  app.add_option("--method", o.method, "mraco, grid, random, tpe, coordinate")
      ->check(cli::oneOf(searcherNames()))
      ->capture_default_str();
  app.add_option(
         "--budget", o.budget,
         "profiling budget per (collective, size), in repetitions (sum of r); 0: --budget-fraction of the "
         "grid's cost")
      ->capture_default_str();
  app.add_option("--budget-fraction", o.budgetFraction,
                 "budget as a fraction of the grid's cost when --budget is 0")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the searches and the measurement noise")->capture_default_str();
  app.add_option("--max-resource", o.maxResource, "R_max: repetitions of one full measurement")
      ->capture_default_str();
  app.add_option("--sigma", o.sigma, "sim: relative noise of one repetition")->capture_default_str();
  app.add_option("--schedulers", o.schedulers, "sim: schedulers to search (hpds, rr, algorithm, stage)")
      ->capture_default_str();
  app.add_option("--max-slices", o.maxSlices,
                 "search only chunk sizes giving at most this many micro-batches per chunk")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--space", o.spaceFile,
                 "search-space JSON restricting/extending the default (docs/tuning.md)");
  app.add_option("--examples", o.examplesDir, "directory of the algorithm programs")->capture_default_str();
  app.add_option("-o,--output", o.output, "the JSON table to write")->required();
  app.add_option("--csv", o.csv, "NCCL's CSV table (default: beside the JSON, .csv)");
  app.add_option("--log", o.log, "the trial log (default: beside the JSON, .trials.jsonl)");
  app.add_flag("--resume", o.resume, "continue the run recorded in the trial log");
  app.add_flag("--force", o.force, "overwrite existing tables");
  app.add_flag("--signature", o.signature,
               "key entries by the topology signature too (matched through TUCCL_TOPOLOGY_SIGNATURE; the CSV "
               "cannot hold it)");
  app.add_flag("-q,--quiet", o.quiet, "no progress output");
}

/// The CSV table and the trial log beside the JSON table unless given.
void defaultOutputPaths(Options& o) {
  if (o.csv.empty()) o.csv = std::filesystem::path(o.output).replace_extension(".csv").string();
  if (o.log.empty()) o.log = std::filesystem::path(o.output).replace_extension(".trials.jsonl").string();
}

/// The request the options describe.
Expected<TuningRequest> requestFromOptions(const Options& o) {
  TuningRequest request;
  request.topology = o.topo;
  request.topologyOptions = o.topologyOptions;
  request.collectives.clear();
  for (const std::string& name : splitList(o.collectives)) {
    const std::optional<Collective> collective = parseCollective(name);
    if (!collective)
      return makeError(ErrorCode::InvalidArgument,
                       "unknown collective '" + name + "' (broadcast, reduce, allgather, reducescatter, allreduce)");
    request.collectives.push_back(*collective);
  }
  Expected<std::vector<int64_t>> sizes = parseSizeGrid(o.sizes, o.factor);
  if (!sizes) return makeError(ErrorCode::InvalidArgument, "--sizes: " + sizes.status().message());
  request.sizes = std::move(*sizes);
  request.method = o.method;
  request.budget = o.budget;
  request.budgetFraction = o.budgetFraction;
  request.ncclChoice = !o.candidatesOnly;
  request.maxResource = o.maxResource;
  request.maxSlices = o.maxSlices;
  request.seed = o.seed;
  request.schedulers = splitList(o.schedulers);
  // An item naming a directory is a directory of candidate programs; the others are names.
  for (std::string& item : splitList(o.algorithms)) {
    std::error_code error;
    (std::filesystem::is_directory(item, error) ? request.algorithmDirs : request.algorithms).push_back(std::move(item));
  }
  request.spaceFile = o.spaceFile;
  request.examplesDir = o.examplesDir;
  request.profiler = *parseProfilerKind(o.profiler);  // CLI11 checked the name
  request.sigma = o.sigma;
  request.commandTemplate = o.command;
  request.timeoutSeconds = o.timeout;
  request.ranks = o.ranks;
  if (o.ranks > 0) request.topology.clear();
  request.iterations = o.iterations;
  request.confirm = !o.noConfirm;
  request.confirmResource = o.confirmReps;
  {
    const size_t colon = o.confirmRounds.find(':');
    const std::string text = o.confirmRounds;
    Expected<int64_t> low = parseIntegerInRange(std::string_view(text).substr(0, colon), 2, 1000);
    Expected<int64_t> high =
        colon == std::string::npos ? low : parseIntegerInRange(std::string_view(text).substr(colon + 1), 2, 1000);
    if (!low || !high || *low > *high)
      return makeError(ErrorCode::InvalidArgument,
                       "--confirm-rounds: expected MIN:MAX with 2 <= MIN <= MAX <= 1000 (e.g. 6:12) or N, got '" +
                           text + "'");
    request.confirmMinRounds = static_cast<int32_t>(*low);
    request.confirmMaxRounds = static_cast<int32_t>(*high);
  }
  request.tucclBinDir = cli::programDir().string();  // tuccl-run and tuccl-bench sit beside tuccl-tune
  request.logPath = o.log;
  request.resume = o.resume;
  request.keyBySignature = o.signature;
  request.groups = o.groups;
  return request;
}

/// Every output checked before any work: the tables are replaced only with --force, the three
/// paths are distinct and writable; then the folders of every output are made.
Status prepareOutputs(const Options& o) {
  const std::pair<const char*, const std::string*> outputs[] = {{"-o", &o.output}, {"--csv", &o.csv}, {"--log", &o.log}};
  for (size_t i = 0; i < std::size(outputs); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (cli::sameOutputFile(*outputs[i].second, *outputs[j].second))
        return makeError(ErrorCode::InvalidArgument, std::string(outputs[j].first) + " and " + outputs[i].first +
                                                         " name the same file, " + *outputs[i].second);
    }
  }
  for (const std::string& path : {o.output, o.csv}) {
    if (Status status = cli::checkOutputFree(path, o.force); !status) return status;
  }
  // The trial log is appended to on --resume: it must be writable, not free.
  if (Status status = cli::checkOutputFree(o.log, true); !status) return status;
  for (const std::string& path : {o.output, o.csv, o.log}) {
    if (Status status = cli::makeOutputFolder(path); !status) return status;
  }
  return Status();
}

std::string collectiveLabel(Collective collective) { return toLowerCase(collectiveName(collective)); }
std::string bytesLabel(int64_t bytes) { return formatByteSize(static_cast<uint64_t>(bytes)); }

/// The progress bar on a terminal (stderr), a line per finished search otherwise.
class Progress : public TuningObserver {
 public:
  explicit Progress(const Options& options) : options_(options), quiet_(options.quiet), tty_(isatty(fileno(stderr)) != 0) {}

  /// The request is checked: the outputs are checked and their folders made before the trial log.
  Status ready() override { return prepareOutputs(options_); }

  void warning(std::string_view text) override {
    std::fprintf(stderr, "%stuccl-tune: warning: %.*s\n", tty_ && !quiet_ ? "\r\033[K" : "",
                 static_cast<int>(text.size()), text.data());
  }

  void note(std::string_view text) override {
    std::fprintf(stderr, "tuccl-tune: note: %.*s\n", static_cast<int>(text.size()), text.data());
  }

  void candidates(Collective collective, const std::vector<AlgorithmCandidate>& candidates) override {
    if (quiet_) return;
    std::string listed;
    for (const AlgorithmCandidate& c : candidates) {
      listed += (listed.empty() ? "" : ", ") + c.name + " [";
      for (size_t i = 0; i < c.sketches.size(); ++i) listed += (i ? " " : "") + c.sketches[i];
      listed += "]";
    }
    std::fprintf(stderr, "tuccl-tune: %s candidates (admitting sketches): %s\n",
                 collectiveLabel(collective).c_str(), listed.c_str());
  }

  void resuming(const std::string& logPath, size_t trials) override {
    if (!quiet_)
      std::fprintf(stderr, "tuccl-tune: resuming from %s (%zu trials logged)\n", logPath.c_str(), trials);
  }

  void trial(const TunedWorkload& w, size_t index, size_t total, const Trial& t, double spent,
             double budget) override {
    if (quiet_ || !tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double done = (static_cast<double>(index) + (budget > 0 ? std::min(1.0, spent / budget) : 0.0)) /
                        static_cast<double>(total);
    const int width = 30, filled = static_cast<int>(done * width);
    std::fprintf(stderr, "\r[%s%s] %3.0f%% %s %s: trial %u, cost %.0f/%.0f\033[K",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), 100 * done,
                 collectiveLabel(w.collective).c_str(), bytesLabel(w.bytes).c_str(), t.id + 1, spent, budget);
    std::fflush(stderr);
  }

  void confirmationRun(const TunedWorkload& w, size_t index, size_t total, const Trial& t) override {
    if (quiet_ || !tty_) return;
    std::fprintf(stderr, "\r[confirming %zu/%zu] %s %s: run %u (%s)\033[K", index + 1, total,
                 collectiveLabel(w.collective).c_str(), bytesLabel(w.bytes).c_str(),
                 t.id + 1 - static_cast<uint32_t>(w.result.trials.size()),
                 t.isDefault ? "the default" : w.space.describe(t.config).c_str());
    std::fflush(stderr);
  }

  void workloadDone(const TunedWorkload& w, size_t index, size_t total, double gridCost) override {
    if (quiet_) return;
    const SearchResult& r = w.result;
    std::fprintf(
        stderr,
        "%stuccl-tune: [%zu/%zu] %s %s: %s, %zu trials%s, cost %.0f (%.1f%% of the grid), %s; best %s\n",
        tty_ ? "\r\033[K" : "", index + 1, total, collectiveLabel(w.collective).c_str(),
        bytesLabel(w.bytes).c_str(), r.method.c_str(), r.trials.size(),
        w.replayed > 0 ? (" (" + std::to_string(w.replayed) + " from the log)").c_str() : "", r.cost,
        100 * r.cost / gridCost, r.stopReason.c_str(), r.best ? w.space.describe(*r.best).c_str() : "none");
    if (!w.confirmation) return;
    const Confirmation& c = *w.confirmation;
    const ConfirmedCandidate& rival = c.candidates[c.rival];
    std::fprintf(stderr,
                 "tuccl-tune:   against the default, %d rounds: %s %.3f [%.3f, %.3f], won %d of %d -> %s\n",
                 c.rounds, rival.config ? w.space.describe(*rival.config).c_str() : "-", c.versusDefault.ratio,
                 c.versusDefault.low, c.versusDefault.high, c.versusDefault.firstWon, c.versusDefault.pairs,
                 c.keepDefault ? "the default stays (no significant win)" : "tuned (significantly faster)");
  }

 private:
  const Options& options_;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

/// "0.82 [0.78, 0.87]": a ratio with its interval; "-" when not measured.
std::string ratioText(const std::optional<DefaultComparison>& c) {
  if (!c) return "-";
  char text[64];
  if (c->low >= 0 && c->high >= 0)
    std::snprintf(text, sizeof text, "%.2f [%.2f,%.2f]", c->ratio, c->low, c->high);
  else
    std::snprintf(text, sizeof text, "%.2f", c->ratio);
  return text;
}

/// One line per table entry: its range and what won it; NCCL's choice beside it where the run
/// measured GPUs (a table for CPU ranks has nothing to compare with it): its plan simulated by
/// the sim profiler's engine ("nccl-sim"), the NCCL model's time for measured runs ("nccl-model").
void printSummary(const TuningResult& result, const LookupTable& table, const std::string& described) {
  const TuningRequest& request = result.request;
  const std::string profiler(profilerKindName(request.profiler));
  bool nccl = false, simulated = false;
  for (const TunedWorkload& w : result.workloads) nccl = nccl || w.nccl.timeUs > 0, simulated = simulated || w.ncclSimulated;
  std::printf("# %s: %d ranks on %d nodes, signature %s; %s, profiler %s, seed %llu\n", described.c_str(),
              result.nRanks, result.nNodes, result.signature.empty() ? "-" : result.signature.c_str(),
              request.method.c_str(), profiler.c_str(), static_cast<unsigned long long>(request.seed));
  std::printf("# %-13s %-22s %-18s %-9s %-10s %-6s %3s %4s %6s %10s %-20s %9s %7s %-22s", "collective", "bytes",
              "algorithm", "sketch", "scheduler", "proto", "ch", "thr", "chunk", "time(us)", "[95% interval]",
              "trials", "cost", "/default [95%]");
  if (nccl) std::printf(" %10s %-18s %7s", simulated ? "nccl-sim" : "nccl-model", "(NCCL's choice)", "xNCCL");
  std::printf("\n");
  for (const TunedRange& r : result.ranges) {
    const std::string range =
        formatByteSize(r.sizes.minBytes) + ".." +
        (r.sizes.maxBytes == UINT64_MAX ? std::string("inf") : formatByteSize(r.sizes.maxBytes));
    const std::string protocol = r.protocol ? std::string(protocolName(*r.protocol)) : std::string("-");
    char interval[48] = "-";
    if (r.interval.lowUs >= 0 && r.interval.highUs >= 0)
      std::snprintf(interval, sizeof interval, "[%.1f, %.1f] n=%d", r.interval.lowUs, r.interval.highUs,
                    r.interval.samples);
    std::printf("  %-13s %-22s %-18s %-9s %-10s %-6s %3d %4d %6s %10.1f %-20s %9zu %7.0f %-22s",
                collectiveLabel(r.collective).c_str(), range.c_str(), r.algorithm.c_str(), r.sketch.c_str(),
                r.scheduler.c_str(), protocol.c_str(), r.nChannels, static_cast<int>(r.nThreads),
                r.chunkBytes > 0 ? formatByteSize(r.chunkBytes).c_str() : "-", r.timeUs, interval, r.trials, r.cost,
                ratioText(r.versusDefault).c_str());
    // The speed-up over what NCCL would do (sim/nccl_model.h) at the range's first size.
    const NcclChoice& choice = result.workloads[r.workload].nccl;
    if (nccl)
      std::printf(" %10.1f %-18s %6.2fx", choice.timeUs, describeNcclChoice(choice).c_str(), choice.timeUs / r.timeUs);
    std::printf("\n");
  }
  for (const EnvRecommendation& env : table.environment) {
    for (const auto& [name, value] : env.settings)
      std::printf("# recommends %s=%s for %d ranks on %d nodes\n", name.c_str(), value.c_str(), result.nRanks,
                  result.nNodes);
  }
}

/// The JSON table, and NCCL's CSV with a line saying where it came from.
Status writeTables(const Options& o, const TuningResult& result, const LookupTable& table) {
  Expected<CsvTable> csv = writeTableCsv(table, /*lossy=*/true);
  if (!csv) return csv.status();
  const std::string header = "# tuccl-tune: " + o.topo + ", " + o.method + ", seed " +
                             std::to_string(o.seed) +
                             " (chunk sizes and thread counts are only in the JSON table)\n";
  if (Status status = cli::writeOutput(o.output, writeTableJson(table)); !status) return status;
  if (Status status = cli::writeOutput(o.csv, header + csv->text); !status) return status;
  printSummary(result, table, o.topo);
  if (!csv->dropped.empty() && !o.quiet) {
    std::fprintf(stderr,
                 "tuccl-tune: the CSV leaves out what it cannot hold (%zu items: chunk sizes, environment)\n",
                 csv->dropped.size());
  }
  if (!o.quiet) {
    std::fprintf(stderr, "tuccl-tune: wrote %s (%zu entries), %s and the trial log %s\n", o.output.c_str(),
                 table.entries.size(), o.csv.c_str(), o.log.c_str());
  }
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-tune: search collective configurations on a topology and write the tuner plugin's table.\n"
      "  tuccl-tune --topo preset:resccl-a100:nodes=2 --collectives allreduce,allgather --sizes 1K:1G \\\n"
      "             --profiler sim --budget 20000 --seed 1 -o table.json"};
  Options options;
  addOptions(app, options);
  if (auto status = cli::parse(app, argc, argv)) return *status;
  defaultOutputPaths(options);
  // --nodes without --topo composes the default preset's node.
  if (app.count("--topo") == 0 && app.count("--nodes") > 0) options.topo = "preset:resccl-a100";
  if (options.profiler == "tuccl" && app.count("--topo") == 0 && app.count("--nodes") == 0) {
    // The machine this runs on: its GPUs where the runs use the CUDA device, else CPU ranks.
    if (options.ranks == 0 && equalsIgnoreCase(env::text("TUCCL_DEVICE").value_or(""), "cuda")) {
      options.topo = "local";
    } else {
      if (options.ranks == 0) options.ranks = kDefaultHostRanks;
      options.topo = "this machine, " + std::to_string(options.ranks) + " CPU-device ranks";
    }
  } else if (options.ranks > 0) {
    return cli::reportError(kTool, makeError(ErrorCode::InvalidArgument,
                                             "--ranks is for --profiler tuccl without --topo: a topology gives the "
                                             "ranks"));
  }
  if (options.profiler == "command" && app.count("--topo") == 0) {
    // The table is keyed by the topology's nodes and ranks: the default preset's would not match
    // the job the command measures.
    return cli::reportError(
        kTool, makeError(ErrorCode::InvalidArgument,
                         "--profiler command needs --topo: the topology the command runs on keys the table "
                         "(its nodes and ranks); give a topology file, 'local', or a preset with the job's "
                         "shape, e.g. preset:dgx-h100:nodes=2 or preset:dgx-a100:nodes=1,gpus=4"));
  }

  Expected<TuningRequest> request = requestFromOptions(options);
  if (!request) return cli::reportError(kTool, request.status());
  if (Status status = checkTuningRequest(*request); !status) return cli::reportError(kTool, status);
  Progress progress(options);
  Expected<TuningResult> result = runTuning(*request, &progress);
  if (!result) return cli::reportError(kTool, result.status());
  LookupTable table = tableFromResult(*result);
  table.generator = kVersion;
  if (Status status = writeTables(options, *result, table); !status) return cli::reportError(kTool, status);
  return 0;
}
