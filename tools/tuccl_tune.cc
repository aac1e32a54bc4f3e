// tuccl-tune: search the configuration of every (collective, message size) on a topology and write
// the tuner plugin's table (issue 8 item 5; docs/tuning.md "tuccl-tune", docs/tuning-table.md).
//
//   tuccl-tune --topo preset:resccl-a100:nodes=2 --collectives allreduce,allgather --sizes 1K:1G
//              --profiler sim --budget 20000 --seed 1 -o table.json
//
// Per size on the grid (powers of two by default) one search (MRACO by default) over
// sketch/algorithm × scheduler × protocol × nChannels × nThreads × chunk size; adjacent sizes with
// the same winner become one byte range. Writes the JSON table (-o), NCCL's CSV beside it (or
// --csv), and a trial log (JSON lines) from which an interrupted run resumes (--resume).
//
// What goes where:
//   - candidates: the example programs that fit the topology's shape, each labelled with the
//     sparsest sketch admitting it (tune/sketch_candidates.h says exactly what a sketch means here);
//   - chunk sizes: per message size, only those giving at most --max-slices micro-batches per chunk
//     and none beyond one whole chunk (larger ones behave the same) — tune/size_grid.h;
//   - byte ranges: grid size s_i covers [s_i, s_{i+1} - 1], the first from 0, the last unbounded;
//   - each entry: protocol, nChannels and chunkSize; algorithm RING only when the winner is the
//     rank-order ring program, otherwise "any" (HM, direct and the rail ring are TuCCL programs
//     NCCL does not have; libtuccl serves them); the TuCCL choice (program, sketch, scheduler,
//     threads) in the entry's comment and in metadata.tuccl.entries; nThreads as the
//     environment recommendation (NCCL_NTHREADS / NCCL_LL128_NTHREADS: the value most sizes chose);
//   - the CSV holds what NCCL's format can (no chunk sizes, no environment);
//   - the trial log (JSON lines, tune/trial_log.h) is appended after every trial; --resume replays
//     it — searches are deterministic given the seed, and the sim profiler's noise is replayed too
//     (tune/measurement_noise.h) — so a resumed run writes the same table as an uninterrupted one.
//     An existing log is never overwritten: without --resume it is an error, as is a log of
//     another run (different arguments). Existing tables are replaced only with --force.
//
// Exit status: 0 success, 2 for an error in the inputs or on the command line, 1 when a search
// or the output fails.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/cli.h"
#include "tools/tuccl_tune_table.h"
#include "sim/metrics.h"
#include "sim/network_topology.h"
#include "support/source_text.h"
#include "tune/command_profiler.h"
#include "tune/measurement_noise.h"
#include "tune/searcher.h"
#include "tune/sim_profiler.h"
#include "tune/size_grid.h"
#include "tune/sketch_candidates.h"
#include "tune/synthetic_profiler.h"
#include "tune/trial_log.h"

namespace {

using namespace tuccl;

constexpr int kExitUsage = 2;
constexpr int kExitFailed = 1;
constexpr const char* kVersion = "tuccl-tune 0.1.0";

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One (collective, size) and what its search found.
struct Workload {
  std::string collective;
  Collective kind = Collective::AllReduce;
  int64_t bytes = 0;
  SearchSpace space;
  SearchResult result;
  double exactUs = 0;  ///< the winner's noiseless simulated time (sim profiler), else its measurement
  size_t replayed = 0;
  std::string winnerKey;
};

/// The progress bar on a terminal (stderr), plain lines otherwise.
class Progress {
 public:
  Progress(size_t workloads, bool quiet) : total_(workloads), quiet_(quiet), tty_(isatty(fileno(stderr)) != 0) {}
  void trial(const Workload& w, size_t index, const Trial& t, double spent, double budget) {
    if (quiet_ || !tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double done = (static_cast<double>(index) + (budget > 0 ? std::min(1.0, spent / budget) : 0.0)) /
                        static_cast<double>(total_);
    const int width = 30, filled = static_cast<int>(done * width);
    std::fprintf(stderr, "\r[%s%s] %3.0f%% %s %s: trial %u, cost %.0f/%.0f\033[K", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), 100 * done, w.collective.c_str(),
                 formatBytes(w.bytes).c_str(), t.id + 1, spent, budget);
    std::fflush(stderr);
  }
  void finished(const Workload& w, size_t index, double gridCost) {
    if (quiet_) return;
    const SearchResult& r = w.result;
    std::fprintf(stderr, "%stuccl-tune: [%zu/%zu] %s %s: %s, %zu trials%s, cost %.0f (%.1f%% of the grid), %s; best %s\n",
                 tty_ ? "\r\033[K" : "", index + 1, total_, w.collective.c_str(), formatBytes(w.bytes).c_str(),
                 r.method.c_str(), r.trials.size(),
                 w.replayed > 0 ? (" (" + std::to_string(w.replayed) + " from the log)").c_str() : "", r.cost,
                 100 * r.cost / gridCost, r.stopReason.c_str(),
                 r.best ? w.space.describe(*r.best).c_str() : "none");
  }

 private:
  size_t total_;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

/// The mode of `counts` (ties: the smaller value).
std::string modeOf(const std::map<int64_t, int>& counts) {
  int64_t best = 0;
  int bestCount = 0;
  for (const auto& [value, count] : counts)
    if (count > bestCount) best = value, bestCount = count;
  return std::to_string(best);
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tuccl-tune: search collective configurations on a topology and write the tuner plugin's table.\n"
      "  tuccl-tune --topo preset:resccl-a100:nodes=2 --collectives allreduce,allgather --sizes 1K:1G \\\n"
      "             --profiler sim --budget 20000 --seed 1 -o table.json"};
  app.set_version_flag("--version", kVersion);
  std::string topo = "preset:resccl-a100:nodes=2", collectivesText = "allreduce,allgather", sizesText = "1K:1G";
  std::string profilerName = "sim", commandTemplate, method = "mraco", output, csvPath, logPath, spaceFile;
  std::string schedulersText = "hpds,rr,algorithm,stage", examplesDir = (cli::bundledDataDir() / "examples" / "algorithms").string();
  std::string algorithmsText;
  double factor = 2, budget = 0, budgetFraction = 0.1, sigma = 0.05, timeout = 300;
  uint64_t seed = 1;
  int64_t maxResource = 27, maxSlices = 64;
  bool resume = false, force = false, quiet = false, keyBySignature = false;
  app.add_option("--topo", topo, "topology: preset:NAME[:nodes=N,gpus=K], a .json or .xml file, local")
      ->capture_default_str();
  app.add_option("--collectives", collectivesText, "comma-separated: allreduce, allgather")->capture_default_str();
  app.add_option("--sizes", sizesText, "size range MIN:MAX (K, M, G suffixes), message bytes as nccl-tests counts them")
      ->capture_default_str();
  app.add_option("-f,--factor", factor, "grid step: multiply the size by this (2: powers of two)")->capture_default_str();
  app.add_option("--profiler", profilerName, "sim (the simulator) or command (--command)")
      ->check(CLI::IsMember({"sim", "command"}))
      ->capture_default_str();
  app.add_option("--command", commandTemplate,
                 "command template for --profiler command, e.g. 'mpirun -np 16 all_reduce_perf -b {bytes} -e {bytes} "
                 "-n {iters}'");
  app.add_option("--timeout", timeout, "seconds per command run")->capture_default_str();
  app.add_option("--algorithms", algorithmsText,
                 "command profiler: NCCL algorithms to search (ring,tree,...); sim: restrict the candidate programs");
  app.add_option("--method", method, "mraco, grid, random, tpe, coordinate")
      ->check(CLI::IsMember(searcherNames()))
      ->capture_default_str();
  app.add_option("--budget", budget, "profiling budget per (collective, size), in iterations (sum of r); "
                                     "0: --budget-fraction of the grid's cost")
      ->capture_default_str();
  app.add_option("--budget-fraction", budgetFraction, "budget as a fraction of the grid's cost when --budget is 0")
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of the searches and the measurement noise")->capture_default_str();
  app.add_option("--max-resource", maxResource, "R_max: iterations of one full measurement")->capture_default_str();
  app.add_option("--sigma", sigma, "sim: relative noise of one iteration")->capture_default_str();
  app.add_option("--schedulers", schedulersText, "sim: schedulers to search (hpds, rr, algorithm, stage)")
      ->capture_default_str();
  app.add_option("--max-slices", maxSlices,
                 "search only chunk sizes giving at most this many micro-batches per chunk")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--space", spaceFile, "search-space JSON restricting/extending the default (docs/tuning.md)");
  app.add_option("--examples", examplesDir, "directory of the algorithm programs")->capture_default_str();
  app.add_option("-o,--output", output, "the JSON table to write")->required();
  app.add_option("--csv", csvPath, "NCCL's CSV table (default: beside the JSON, .csv)");
  app.add_option("--log", logPath, "the trial log (default: beside the JSON, .trials.jsonl)");
  app.add_flag("--resume", resume, "continue the run recorded in the trial log");
  app.add_flag("--force", force, "overwrite existing tables");
  app.add_flag("--signature", keyBySignature,
               "key entries by the topology signature too (matched through TUCCL_TOPOLOGY_SIGNATURE; the CSV "
               "cannot hold it)");
  app.add_flag("-q,--quiet", quiet, "no progress output");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& success) {
    return app.exit(success);
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    return kExitUsage;
  }

  std::vector<Workload> workloads;
  tune_tool::TunedTable table;
  nlohmann::ordered_json entryNotes = nlohmann::ordered_json::array();
  nlohmann::json run;
  std::string signature;
  int32_t nNodes = 0, nRanks = 0;
  std::unique_ptr<TrialLog> log;
  try {
    // ---- inputs
    const std::filesystem::path outPath(output);
    if (csvPath.empty()) csvPath = std::filesystem::path(outPath).replace_extension(".csv").string();
    if (logPath.empty()) logPath = std::filesystem::path(outPath).replace_extension(".trials.jsonl").string();
    for (const std::string& path : {output, csvPath})
      if (std::filesystem::exists(path) && !force) throw UsageError(path + " exists; pass --force to overwrite it");
    // The folders of the outputs are made on demand, as `tuccl-compile -o` does.
    for (const std::string& path : {output, csvPath, logPath}) {
      const std::filesystem::path parent = std::filesystem::path(path).parent_path();
      std::error_code error;
      if (!parent.empty()) std::filesystem::create_directories(parent, error);
      if (error) throw UsageError("cannot create " + parent.string() + ": " + error.message());
    }
    if (profilerName == "command" && commandTemplate.empty())
      throw UsageError("--profiler command needs --command TEMPLATE");
    const auto [minBytes, maxBytes] = parseSizeRange(sizesText);
    const std::vector<int64_t> sizes = sizeGrid(minBytes, maxBytes, factor);
    const std::vector<std::string> collectives = splitList(collectivesText);
    if (collectives.empty()) throw UsageError("--collectives is empty");
    const Topology topology = loadSimTopology(topo);
    const Network network = makeNetwork(topology);
    nNodes = topology.nNodes();
    nRanks = topology.nRanks();
    signature = signatureHex(topologySignature(topology));
    std::optional<nlohmann::json> spaceJson;
    if (!spaceFile.empty()) {
      std::ifstream in(spaceFile);
      if (!in) throw UsageError("cannot read " + spaceFile);
      spaceJson = nlohmann::json::parse(in);
    }

    // ---- the spaces, one base per collective
    struct CollectivePlan {
      std::string name;
      Collective kind;
      std::vector<AlgorithmCandidate> candidates;
      SearchSpace base;
    };
    std::vector<CollectivePlan> plans;
    const std::vector<std::string> schedulers = splitList(schedulersText);
    const std::vector<std::string> restrictAlgorithms = splitList(algorithmsText);
    for (const std::string& name : collectives) {
      auto kind = parseCollective(name);
      if (!kind || (*kind != Collective::AllReduce && *kind != Collective::AllGather))
        throw UsageError("unknown collective '" + name + "' (allreduce, allgather)");
      CollectivePlan plan{*kind == Collective::AllReduce ? "allreduce" : "allgather", *kind, {}, {}};
      if (profilerName == "sim") {
        std::vector<std::string> notes;
        for (AlgorithmCandidate& c : algorithmCandidates(topology, *kind, examplesDir, &notes))
          if (restrictAlgorithms.empty() ||
              std::find(restrictAlgorithms.begin(), restrictAlgorithms.end(), c.name) != restrictAlgorithms.end())
            plan.candidates.push_back(std::move(c));
        for (const std::string& note : notes) std::fprintf(stderr, "tuccl-tune: note: %s\n", note.c_str());
        if (!quiet) {
          std::string listed;
          for (const AlgorithmCandidate& c : plan.candidates) {
            listed += (listed.empty() ? "" : ", ") + c.name + " [";
            for (size_t i = 0; i < c.sketches.size(); ++i) listed += (i ? " " : "") + c.sketches[i];
            listed += "]";
          }
          std::fprintf(stderr, "tuccl-tune: %s candidates (admitting sketches): %s\n", plan.name.c_str(), listed.c_str());
        }
        if (plan.candidates.empty()) throw UsageError("--algorithms leaves no candidate for " + name);
        std::vector<std::string> names;
        for (const AlgorithmCandidate& c : plan.candidates) names.push_back(c.name);
        plan.base = defaultSearchSpace(names, schedulers);
      } else {
        // NCCL runs the command: NCCL's algorithms, no TuCCL scheduler.
        plan.base = searchSpaceFromJson(nlohmann::json{{"remove", {"scheduler"}}},
                                        defaultSearchSpace(restrictAlgorithms.empty() ? std::vector<std::string>{"ring"}
                                                                                      : restrictAlgorithms));
      }
      if (spaceJson) plan.base = searchSpaceFromJson(*spaceJson, plan.base);
      plans.push_back(std::move(plan));
    }

    // ---- the run's identity (the trial log's header) and the log
    run = {{"topology", topo},
           {"signature", signature},
           {"sizes", sizes},
           {"profiler", profilerName},
           {"method", method},
           {"seed", seed},
           {"budget", budget},
           {"budgetFraction", budgetFraction},
           {"maxResource", maxResource},
           {"maxSlices", maxSlices}};
    if (profilerName == "sim") run["sigma"] = sigma;
    if (profilerName == "command") run["command"] = commandTemplate;
    for (const CollectivePlan& plan : plans) run["spaces"][plan.name] = searchSpaceToJson(plan.base);
    log = TrialLog::open(logPath, run, resume);
    if (log->loadedTrials() > 0 && !quiet)
      std::fprintf(stderr, "tuccl-tune: resuming from %s (%zu trials logged)\n", logPath.c_str(), log->loadedTrials());

    // ---- the searches
    size_t totalWorkloads = plans.size() * sizes.size();
    Progress progress(totalWorkloads, quiet);
    std::unique_ptr<Searcher> searcher = makeSearcher(method);
    for (const CollectivePlan& plan : plans) {
      std::map<std::string, Algorithm> algorithms;
      for (const AlgorithmCandidate& c : plan.candidates) algorithms.emplace(c.name, c.algorithm);
      const size_t chunkDim = plan.base.dimensionIndex(kDimChunkBytes);
      for (int64_t bytes : sizes) {
        Workload w;
        w.collective = plan.name;
        w.kind = plan.kind;
        w.bytes = bytes;
        w.space = plan.base;
        if (chunkDim != SearchSpace::npos) {
          const auto levels = chunkLevelsFor(plan.base.dimension(chunkDim).levels, bytes, nRanks, maxSlices);
          w.space = searchSpaceFromJson(
              nlohmann::json{{"dimensions", {{{"name", std::string(kDimChunkBytes)}, {"values", levels}}}}}, plan.base);
        }
        const double gridCost = static_cast<double>(w.space.validCount()) * static_cast<double>(maxResource);
        SearchOptions options;
        options.seed = seed;
        options.maxResource = maxResource;
        options.budget = budget > 0 ? budget : std::max<double>(static_cast<double>(maxResource), budgetFraction * gridCost);
        const std::vector<LoggedTrial>& logged = log->trialsOf(w.collective, bytes);
        const size_t index = workloads.size();
        // Profilers: the exact one, noise (sim), replay of the log.
        std::unique_ptr<SimProfiler> sim;
        std::unique_ptr<NoisyProfiler> noisy;
        std::unique_ptr<CommandProfiler> command;
        Profiler* measured = nullptr;
        if (profilerName == "sim") {
          SimProfilerOptions o;
          o.messageBytes = bytes;
          o.sigma = 0;
          o.seed = seed;
          sim = std::make_unique<SimProfiler>(network, algorithms, o);
          noisy = std::make_unique<NoisyProfiler>(*sim, sigma, mixBits(seed ^ mixBits(w.kind == Collective::AllReduce ? 1 : 2) ^
                                                                          static_cast<uint64_t>(bytes)));
          measured = noisy.get();
        } else {
          CommandProfilerOptions o;
          o.commandTemplate = commandTemplate;
          o.bytes = static_cast<uint64_t>(bytes);
          o.timeoutSeconds = timeout;
          command = std::make_unique<CommandProfiler>(o);
          measured = command.get();
        }
        ReplayProfiler replay(*measured, logged, [&](const Configuration& c, int64_t r) {
          if (noisy) noisy->countReplayed(c, r);
        });
        double spent = 0;
        options.onTrial = [&](const Trial& t) {
          spent += t.measurement.cost;
          if (t.id >= logged.size()) log->append(w.collective, bytes, w.space, t);
          progress.trial(w, index, t, spent, options.budget);
        };
        w.result = searcher->search(w.space, replay, options);
        w.replayed = replay.replayed();
        if (!w.result.best)
          throw std::runtime_error(w.collective + " " + formatBytes(bytes) + ": no configuration was measured (" +
                                   w.result.stopReason + ")");
        w.exactUs = sim ? sim->simulatedTime(w.space, *w.result.best) : w.result.bestMeasurement.timeUs;
        w.winnerKey = w.space.describe(*w.result.best);
        progress.finished(w, index, gridCost);
        workloads.push_back(std::move(w));
      }
    }

    // ---- the table: per collective, adjacent sizes with the same winner merged
    std::map<int64_t, int> threadCounts, ll128ThreadCounts;
    for (const CollectivePlan& plan : plans) {
      std::vector<const Workload*> mine;
      std::vector<std::string> keys;
      for (const Workload& w : workloads)
        if (w.collective == plan.name) mine.push_back(&w), keys.push_back(w.winnerKey);
      for (const SizeRange& range : mergeSizeRanges(sizes, keys)) {
        const Workload& w = *mine[range.first];
        const SearchSpace& s = w.space;
        const Configuration& best = *w.result.best;
        tune_tool::TunedEntry e;
        e.collective = plan.name;
        e.minBytes = range.minBytes;
        e.maxBytes = range.maxBytes;
        const std::string algorithm = s.valueOf(best, kDimAlgorithm);
        const std::string protocol = s.valueOf(best, kDimProtocol);
        const AlgorithmCandidate* candidate = nullptr;
        for (const AlgorithmCandidate& c : plan.candidates)
          if (c.name == algorithm) candidate = &c;
        // NCCL runs RING only for the rank-order ring; a TuCCL program (HM, direct, rail ring) is
        // not an NCCL algorithm, so the table leaves NCCL's choice free and fixes the protocol.
        if (candidate != nullptr ? candidate->ncclRing : !algorithm.empty()) e.ncclAlgorithm = algorithm;
        e.protocol = protocol;
        e.nChannels = static_cast<int32_t>(s.levelOf(best, kDimChannels, 0));
        e.chunkSize = static_cast<uint64_t>(s.levelOf(best, kDimChunkBytes, 0));
        if (const int64_t threads = s.levelOf(best, kDimThreads, 0); threads > 0)
          (protocol == "LL128" ? ll128ThreadCounts : threadCounts)[threads] += static_cast<int>(range.last - range.first + 1);
        // What the NCCL table cannot say, as the entry's comment and the table's metadata.
        std::ostringstream comment;
        comment << "tuccl: " << (algorithm.empty() ? "-" : algorithm);
        if (candidate != nullptr) comment << " (" << candidate->program << ", sketch " << candidate->sketch() << ")";
        comment << "; " << s.describe(best) << "; tuned at";
        for (size_t i = range.first; i <= range.last; ++i) comment << " " << formatBytes(sizes[i]);
        char numbers[160];
        std::snprintf(numbers, sizeof numbers, "; %.1f us at %s (%s)", w.exactUs, formatBytes(w.bytes).c_str(),
                      profilerName == "sim" ? "simulated, noiseless" : "measured");
        comment << numbers;
        nlohmann::ordered_json note;
        note["comment"] = comment.str();
        note["tuccl"] = {{"algorithm", algorithm},
                         {"program", candidate != nullptr ? candidate->program : ""},
                         {"sketch", candidate != nullptr ? candidate->sketch() : ""},
                         {"scheduler", s.valueOf(best, kDimScheduler)},
                         {"config", s.configurationToJson(best)},
                         {"sizes", std::vector<int64_t>(sizes.begin() + static_cast<std::ptrdiff_t>(range.first),
                                                        sizes.begin() + static_cast<std::ptrdiff_t>(range.last) + 1)},
                         {"timeUs", w.exactUs}};
        e.comment = comment.str();
        table.entries.push_back(e);
        entryNotes.push_back(std::move(note));
      }
    }
    table.nNodes = nNodes;
    table.nRanks = nRanks;
    if (keyBySignature) table.topology = signature;
    if (!threadCounts.empty()) table.environment.emplace_back("NCCL_NTHREADS", modeOf(threadCounts));
    if (!ll128ThreadCounts.empty()) table.environment.emplace_back("NCCL_LL128_NTHREADS", modeOf(ll128ThreadCounts));
  } catch (const UsageError& error) {
    std::cerr << "tuccl-tune: error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const DiagnosticError& error) {
    std::cerr << formatDiagnostic(error.diagnostic(), nullptr);
    return kExitUsage;
  } catch (const std::invalid_argument& error) {
    std::cerr << "tuccl-tune: error: " << error.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "tuccl-tune: error: " << error.what() << "\n";
    return kExitFailed;
  }

  // ---- the files
  try {
    table.generator = kVersion;
    table.description = "tuned for " + topo + " (" + std::to_string(nRanks) + " ranks on " + std::to_string(nNodes) +
                        " nodes) with " + method + ", profiler " + profilerName;
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    for (const auto& note : entryNotes) entries.push_back(note["tuccl"]);
    table.metadata = {{"tuccl", {{"topology", topo},
                                 {"signature", signature},
                                 {"method", method},
                                 {"seed", seed},
                                 {"profiler", profilerName},
                                 {"entries", entries}}}};
    table.csvHeader = "# tuccl-tune: " + topo + ", " + method + ", seed " + std::to_string(seed) +
                      " (chunk sizes and thread counts are only in the JSON table)\n";
    const tune_tool::RenderedTable rendered = tune_tool::renderTunedTable(table, output);
    writeFile(output, rendered.json);
    writeFile(csvPath, rendered.csv);

    // ---- summary
    std::printf("# %s: %d ranks on %d nodes, signature %s; %s, profiler %s, seed %llu\n", topo.c_str(), nRanks,
                nNodes, signature.c_str(), method.c_str(), profilerName.c_str(), static_cast<unsigned long long>(seed));
    std::printf("# %-10s %-22s %-10s %-8s %-10s %-6s %3s %4s %6s %10s %9s %7s\n", "collective", "bytes", "algorithm",
                "sketch", "scheduler", "proto", "ch", "thr", "chunk", "time(us)", "trials", "cost");
    for (size_t i = 0; i < table.entries.size(); ++i) {
      const tune_tool::TunedEntry& e = table.entries[i];
      const auto& t = entryNotes[i]["tuccl"];
      const std::string range = tune_tool::formatTableBytes(e.minBytes) + ".." +
                                (e.maxBytes == UINT64_MAX ? std::string("inf") : tune_tool::formatTableBytes(e.maxBytes));
      size_t trials = 0;
      double cost = 0;
      for (const Workload& w : workloads)
        if (w.collective == e.collective && static_cast<uint64_t>(w.bytes) >= e.minBytes &&
            static_cast<uint64_t>(w.bytes) <= e.maxBytes)
          trials += w.result.trials.size(), cost += w.result.cost;
      const auto& c = t["config"];
      std::printf("  %-10s %-22s %-10s %-8s %-10s %-6s %3d %4d %6s %10.1f %9zu %7.0f\n", e.collective.c_str(),
                  range.c_str(), t["algorithm"].get<std::string>().c_str(), t["sketch"].get<std::string>().c_str(),
                  t["scheduler"].get<std::string>().c_str(), c.value("protocol", std::string("-")).c_str(),
                  e.nChannels, static_cast<int>(c.value("nThreads", 0)),
                  tune_tool::formatTableBytes(e.chunkSize).c_str(), t["timeUs"].get<double>(), trials, cost);
    }
    for (const auto& [name, value] : table.environment)
      std::printf("# recommends %s=%s for %d ranks on %d nodes\n", name.c_str(), value.c_str(), nRanks, nNodes);
    if (!rendered.csvDropped.empty() && !quiet)
      std::fprintf(stderr, "tuccl-tune: the CSV leaves out what it cannot hold (%zu items: chunk sizes, environment)\n",
                   rendered.csvDropped.size());
    if (!quiet)
      std::fprintf(stderr, "tuccl-tune: wrote %s (%zu entries), %s and the trial log %s\n", output.c_str(),
                   table.entries.size(), csvPath.c_str(), logPath.c_str());
  } catch (const std::exception& error) {
    std::cerr << "tuccl-tune: error: " << error.what() << "\n";
    return kExitFailed;
  }
  return 0;
}
