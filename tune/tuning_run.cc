#include "tune/tuning_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sim/network_topology.h"
#include "support/json_text.h"
#include "support/text_values.h"
#include "topo/load.h"
#include "tune/command_profiler.h"
#include "sim/cost_files.h"
#include "tune/measurement_noise.h"
#include "tune/nccl_baseline.h"
#include "tune/sim_profiler.h"
#include "tune/synthetic_profiler.h"
#include "tune/trial_log.h"
#include "support/environment.h"

namespace tuccl {
namespace {

/// "allreduce": a collective as the trial log and the table spell it.
std::string logName(Collective collective) { return toLowerCase(collectiveName(collective)); }

/// A request error, thrown inside runTuning and turned into its Status at the boundary.
[[noreturn]] void fail(ErrorCode code, std::string message) { throw StatusError(makeError(code, std::move(message))); }

/// One collective's search: its candidates and its base space (the chunk sizes are cut per size).
struct CollectivePlan {
  Collective collective = Collective::AllReduce;
  std::vector<AlgorithmCandidate> candidates;  ///< sim only
  bool tuccl = false;                          ///< libtuccl runs the configurations
  SearchSpace base;
};

/// The built-in libtuccl algorithms of a collective (backend/builtin_algorithms.cc's registry;
/// tune/ does not link the backend): what the libtuccl profiler searches.
std::vector<std::string> tucclBuiltinAlgorithms(Collective collective) {
  switch (collective) {
    case Collective::AllReduce:
    case Collective::AllGather: return {"ring", "direct"};
    case Collective::ReduceScatter: return {"ring"};
    case Collective::Broadcast:
    case Collective::Reduce: return {"chain", "binomial"};
    case Collective::AllToAll: break;
  }
  return {};
}

/// Whether the libtuccl profiler's runs use the CPU device: TUCCL_DEVICE unset, empty or "cpu"
/// (tucclDefaultEnvironment sets cpu when unset). A CPU-device communicator runs one channel
/// whatever it is given (backend/communicator.cc), so channels are not searched there.
bool tucclOnCpu() {
  const std::optional<std::string> device = env::text("TUCCL_DEVICE");
  return !device || equalsIgnoreCase(*device, "cpu");
}

/// The libtuccl profiler's timed iterations per repetition at `bytes`: about 8 MiB moved per
/// repetition, between 2 and 20 iterations (20 is nccl-tests' default -n), so a repetition is long
/// enough to time and a run of R_max of them stays short.
int64_t tucclIterations(int64_t bytes) {
  return std::clamp<int64_t>((int64_t{8} << 20) / std::max<int64_t>(bytes, 1), 2, 20);
}

/// The most ranks --ranks starts on this machine (tuccl-run takes up to 4096; past a few hundred
/// processes on one host a measurement says little).
constexpr int32_t kMaxHostRanks = 256;

/// "allreduce, allgather": names for messages.
std::string collectiveList(const std::vector<Collective>& collectives) {
  std::string out;
  for (Collective c : collectives) out += (out.empty() ? "" : ", ") + logName(c);
  return out;
}

/// A number in human form: "0.05", "1e+06", "inf".
std::string humanNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// `value` of option `name` must be finite and within [lo, hi] ((lo, hi] when `loOpen`); the
/// message says the range and what was given.
Status checkRange(std::string_view name, double value, double lo, double hi, bool loOpen = false,
                  std::string_view meaning = {}) {
  const bool above = loOpen ? value > lo : value >= lo;
  if (std::isfinite(value) && above && value <= hi) return Status();
  std::string range = std::isinf(hi) ? std::string(loOpen ? "> " : ">= ") + humanNumber(lo)
                                     : std::string("in ") + (loOpen ? "(" : "[") + humanNumber(lo) + ", " +
                                           humanNumber(hi) + "]";
  std::string message = std::string(name) + " must be a finite number " + range;
  if (!meaning.empty()) message += " (" + std::string(meaning) + ")";
  return makeError(ErrorCode::InvalidArgument, message + "; got " + humanNumber(value));
}

Status checkNumbers(const TuningRequest& request) {
  constexpr double kUnbounded = std::numeric_limits<double>::infinity();
  // A week: longer per-run timeouts are a typo, and the deadline arithmetic stays exact.
  constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;
  const Status checks[] = {
      checkRange("--budget", request.budget, 0, kUnbounded, false,
                 "repetitions per collective and size; 0: --budget-fraction of the grid's cost"),
      checkRange("--budget-fraction", request.budgetFraction, 0, 1, true, "a fraction of the grid's cost"),
      checkRange("--max-resource", static_cast<double>(request.maxResource), 1, 1e6),
      checkRange("--max-slices", static_cast<double>(request.maxSlices), 1, 1 << 20),
      checkRange("--sigma", request.sigma, 0, 1, false, "the relative noise of one simulated repetition"),
      checkRange("--timeout", request.timeoutSeconds, 0, kMaxTimeoutSeconds, true, "seconds per run"),
  };
  for (const Status& status : checks)
    if (!status) return status;
  return Status();
}

void checkRequest(const TuningRequest& request) {
  throwIfError(checkNumbers(request));
  if (request.profiler == ProfilerKind::Command && request.commandTemplate.empty())
    fail(ErrorCode::InvalidArgument, "--profiler command needs --command TEMPLATE");
  if (request.sizes.empty()) fail(ErrorCode::InvalidArgument, "no message sizes to tune");
  if (request.collectives.empty()) fail(ErrorCode::InvalidArgument, "--collectives is empty");
  const std::vector<Collective> tunable = tunableCollectives(request.profiler);
  for (size_t i = 0; i < request.collectives.size(); ++i) {
    const Collective collective = request.collectives[i];
    if (std::find(tunable.begin(), tunable.end(), collective) == tunable.end()) {
      std::string message = "collective '" + logName(collective) + "' cannot be tuned with --profiler " +
                            std::string(profilerKindName(request.profiler)) + " (" + collectiveList(tunable) + ")";
      if (collective == Collective::AllToAll) message += "; NCCL's tuner is never asked about alltoall";
      fail(ErrorCode::InvalidArgument, message);
    }
    if (std::find(request.collectives.begin(), request.collectives.begin() + static_cast<std::ptrdiff_t>(i),
                  collective) != request.collectives.begin() + static_cast<std::ptrdiff_t>(i))
      fail(ErrorCode::InvalidArgument, "--collectives names " + logName(collective) + " twice");
  }
  if (!makeSearcher(request.method))
    fail(ErrorCode::InvalidArgument, "unknown search method '" + request.method + "'");
  if (request.profiler == ProfilerKind::Sim) {
    for (const std::string& scheduler : request.schedulers) {
      const std::optional<Scheduler> parsed = parseScheduler(scheduler);
      if (!parsed)
        fail(ErrorCode::InvalidArgument,
             "unknown scheduler '" + scheduler + "' (hpds, rr, algorithm, stage)");
      if (*parsed == Scheduler::AsWritten)
        fail(ErrorCode::InvalidArgument,
             "the as-written scheduler runs an MSCCL XML file's own schedule, which ResCCLang candidates do not "
             "have; search hpds, rr, algorithm, stage (compare as-written with tuccl-sim --compare)");
    }
  } else if (!request.algorithmDirs.empty()) {
    fail(ErrorCode::InvalidArgument, "--algorithms " + request.algorithmDirs.front() +
                                         ": directories of programs are candidates for --profiler sim only");
  }
  if (request.ranks != 0) {
    if (request.profiler != ProfilerKind::Tuccl)
      fail(ErrorCode::InvalidArgument, "--ranks is for --profiler tuccl (this machine's ranks); other profilers take --topo");
    if (request.ranks < 1 || request.ranks > kMaxHostRanks)
      fail(ErrorCode::InvalidArgument, "--ranks must be in [1, " + std::to_string(kMaxHostRanks) + "]; got " +
                                           std::to_string(request.ranks));
    if (!request.topology.empty())
      fail(ErrorCode::InvalidArgument, "--ranks runs this machine's ranks without a topology; give --topo or --ranks");
    if (request.keyBySignature)
      fail(ErrorCode::InvalidArgument, "--signature keys entries by a topology's signature; --ranks has none");
  }
  if (request.confirmMinRounds < 2 || request.confirmMaxRounds < request.confirmMinRounds ||
      request.confirmMaxRounds > 1000)
    fail(ErrorCode::InvalidArgument, "--confirm-rounds MIN:MAX needs 2 <= MIN <= MAX <= 1000; got " +
                                         std::to_string(request.confirmMinRounds) + ":" +
                                         std::to_string(request.confirmMaxRounds));
  if (request.confirmResource < 0 || request.iterations < 0)
    fail(ErrorCode::InvalidArgument, "--iterations and the confirmation's repetitions must not be negative");
  if (request.profiler == ProfilerKind::Tuccl) {
    for (const char* tool : {"tuccl-run", "tuccl-bench"}) {
      const std::filesystem::path path = std::filesystem::path(request.tucclBinDir) / tool;
      if (access(path.c_str(), X_OK) != 0)
        fail(ErrorCode::NotFound, "--profiler tuccl runs " + path.string() + ", which is not an executable");
    }
    for (const std::string& algorithm : request.algorithms) {
      if (algorithm != "ring" && algorithm != "direct" && algorithm != "chain" && algorithm != "binomial")
        fail(ErrorCode::InvalidArgument, "the libtuccl profiler searches TuCCL's built-in algorithms; '" + algorithm +
                                             "' is not one (ring, direct, chain, binomial)");
    }
  }
  if (request.profiler == ProfilerKind::Command) {
    for (const std::string& algorithm : request.algorithms) {
      if (!parseNcclAlgorithm(algorithm)) {
        fail(ErrorCode::InvalidArgument, "the command profiler searches NCCL's algorithms; '" + algorithm +
                                             "' is not one (tree, ring, collnet_direct, collnet_chain, nvls, "
                                             "nvls_tree, pat)");
      }
    }
  }
}

/// Every {placeholder} of the command template must name the size, the iterations, the
/// repetitions or a dimension of the space: checked once, before any run, instead of failing
/// every run.
void checkCommandTemplate(const std::string& commandTemplate, const SearchSpace& space) {
  std::map<std::string, std::string> values = {{"bytes", ""}, {"size", ""}, {"iters", ""}, {"reps", ""}};
  for (size_t d = 0; d < space.dimensionCount(); ++d) values[space.dimension(d).name] = "";
  try {
    (void)expandCommandTemplate(commandTemplate, values);
  } catch (const std::invalid_argument& e) {
    fail(ErrorCode::InvalidArgument, "--command: " + std::string(e.what()));
  }
}

/// The search-space JSON of request.spaceFile, if any.
std::optional<nlohmann::json> readSpaceFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  Expected<nlohmann::json> document = parseJsonText(readSourceFile(path));
  throwIfError(document.status());
  return std::move(document).value();
}

/// Every value of the space's protocol dimension must be a protocol: the table records it.
void checkProtocols(const SearchSpace& space) {
  const size_t d = space.dimensionIndex(kDimProtocol);
  if (d == SearchSpace::npos) return;
  for (const std::string& value : space.dimension(d).categories) {
    if (!parseProtocol(value))
      fail(ErrorCode::InvalidInput,
           "search space: protocol '" + value + "' is not a protocol (LL, LL128, Simple)");
  }
}

/// The command profiler measures a chunk size through NCCL's buffer and the table serves it as the
/// v6 chunkSize: only chunk sizes NCCL's buffers allow, unclamped at the job's default buffers
/// (ncclChunkConstraints).
SearchSpace withNcclChunkLimits(const SearchSpace& space) {
  if (space.dimensionIndex(kDimChunkBytes) == SearchSpace::npos) return space;
  bool ring = true;
  if (const size_t d = space.dimensionIndex(kDimAlgorithm); d != SearchSpace::npos) {
    for (const std::string& value : space.dimension(d).categories)
      ring = ring && parseNcclAlgorithm(value) == NcclAlgorithm::Ring;
  }
  std::vector<Constraint> constraints = space.constraints();
  for (Constraint& c : ncclChunkConstraints(ring)) {
    std::erase_if(constraints, [&](const Constraint& old) { return old.name == c.name; });
    constraints.push_back(std::move(c));
  }
  return SearchSpace(space.dimensions(), std::move(constraints));
}

/// The command profiler runs NCCL: its algorithm values must be NCCL's, for the table.
void checkNcclAlgorithms(const SearchSpace& space) {
  const size_t d = space.dimensionIndex(kDimAlgorithm);
  if (d == SearchSpace::npos) return;
  for (const std::string& value : space.dimension(d).categories) {
    if (!parseNcclAlgorithm(value))
      fail(ErrorCode::InvalidInput, "search space: algorithm '" + value + "' is not one of NCCL's");
  }
}

CollectivePlan planCollective(const TuningRequest& request, Collective collective, const Topology& topology,
                              const Network& network, const CostModel& cost,
                              const std::optional<nlohmann::json>& spaceJson, TuningObserver& observer) {
  CollectivePlan plan;
  plan.collective = collective;
  plan.tuccl = request.profiler == ProfilerKind::Tuccl;
  const std::vector<std::string>& restrict = request.algorithms;
  if (request.profiler == ProfilerKind::Sim) {
    std::vector<std::string> notes;
    CandidateOptions candidateOptions;
    candidateOptions.only = restrict;
    // The synthesiser models the simulator's charges and keeps the routing that simulates fastest
    // at the grid's smallest, middle and largest sizes.
    candidateOptions.charges = synthesisCharges(cost);
    if (!request.sizes.empty()) {
      const std::vector<int64_t>& grid = request.sizes;
      std::vector<int64_t> judged{grid.front(), grid[grid.size() / 2], grid.back()};
      judged.erase(std::unique(judged.begin(), judged.end()), judged.end());
      candidateOptions.judge = simulatedJudge(network, cost, std::move(judged));
    }
    for (AlgorithmCandidate& c : algorithmCandidates(topology, collective, request.examplesDir, &notes, candidateOptions)) {
      if (restrict.empty() || std::find(restrict.begin(), restrict.end(), c.name) != restrict.end())
        plan.candidates.push_back(std::move(c));
    }
    for (const std::string& directory : request.algorithmDirs) {
      std::vector<std::string> taken;
      for (const AlgorithmCandidate& c : plan.candidates) taken.push_back(c.name);
      Expected<std::vector<AlgorithmCandidate>> more = directoryCandidates(topology, collective, directory, taken, &notes);
      throwIfError(more.status());
      if (more->empty()) notes.push_back(directory + " has no " + logName(collective) + " program for this topology");
      for (AlgorithmCandidate& c : *more) plan.candidates.push_back(std::move(c));
    }
    for (const std::string& note : notes) observer.note(note);
    observer.candidates(collective, plan.candidates);
    if (plan.candidates.empty())
      fail(ErrorCode::InvalidArgument, "--algorithms leaves no candidate for " + logName(collective));
    std::vector<std::string> names;
    for (const AlgorithmCandidate& c : plan.candidates) names.push_back(c.name);
    plan.base = defaultSearchSpace(names, request.schedulers);
  } else if (request.profiler == ProfilerKind::Tuccl) {
    // libtuccl runs the built-in algorithms with its own scheduler (HPDS); protocol and thread
    // count are not libtuccl settings. The algorithms a collective has built in:
    std::vector<std::string> names = tucclBuiltinAlgorithms(collective);
    if (!restrict.empty()) {
      std::erase_if(names, [&](const std::string& n) { return std::find(restrict.begin(), restrict.end(), n) == restrict.end(); });
      if (names.empty()) fail(ErrorCode::InvalidArgument, "--algorithms leaves no built-in algorithm for " + logName(collective));
    }
    nlohmann::json removed = {"scheduler", "protocol", "nThreads"};
    if (tucclOnCpu()) removed.push_back("nChannels");
    plan.base = searchSpaceFromJson(nlohmann::json{{"remove", removed}}, defaultSearchSpace(names));
  } else {
    // NCCL runs the command: NCCL's algorithms, no TuCCL scheduler.
    plan.base = searchSpaceFromJson(
        nlohmann::json{{"remove", {"scheduler"}}},
        defaultSearchSpace(restrict.empty() ? std::vector<std::string>{"ring"} : restrict));
  }
  if (spaceJson) {
    try {
      plan.base = searchSpaceFromJson(*spaceJson, plan.base);
    } catch (const std::invalid_argument& e) {
      throw StatusError{makeError(ErrorCode::InvalidInput, request.spaceFile, {}, e.what())};
    } catch (const nlohmann::json::exception& e) {
      throw StatusError{makeError(ErrorCode::InvalidInput, request.spaceFile, {}, jsonErrorMessage(e))};
    }
  }
  checkProtocols(plan.base);
  if (request.profiler == ProfilerKind::Command) {
    checkNcclAlgorithms(plan.base);
    plan.base = withNcclChunkLimits(plan.base);
    checkCommandTemplate(request.commandTemplate, plan.base);
  }
  return plan;
}

/// The run's identity: everything that decides the trial sequence (the trial log's header).
nlohmann::json runHeader(const TuningRequest& request, const std::string& signature,
                         const std::vector<CollectivePlan>& plans) {
  nlohmann::json run = {{"topology", request.topology},
                        {"signature", signature},
                        {"sizes", request.sizes},
                        {"profiler", std::string(profilerKindName(request.profiler))},
                        {"method", request.method},
                        {"seed", request.seed},
                        {"budget", request.budget},
                        {"budgetFraction", request.budgetFraction},
                        {"maxResource", request.maxResource},
                        {"maxSlices", request.maxSlices}};
  if (request.profiler == ProfilerKind::Sim) run["sigma"] = request.sigma;
  if (request.profiler == ProfilerKind::Command) run["command"] = request.commandTemplate;
  if (request.profiler != ProfilerKind::Sim) {
    run["iterations"] = request.iterations;
    run["confirm"] = request.confirm ? nlohmann::json{{"minRounds", request.confirmMinRounds},
                                                      {"maxRounds", request.confirmMaxRounds},
                                                      {"resource", request.confirmResource}}
                                     : nlohmann::json(false);
  }
  if (request.ranks > 0) run["ranks"] = request.ranks;
  for (const CollectivePlan& plan : plans)
    run["spaces"][logName(plan.collective)] = searchSpaceToJson(plan.base);
  return run;
}

/// A constraint as a user reads it: "nccl-simple-chunk: chunkBytes 65536 .. 2097152 when protocol = Simple".
std::string describeConstraint(const Constraint& c) {
  std::string text = c.name + ": " + c.dimension;
  if (c.kind == Constraint::Kind::Range) {
    const bool low = c.min != std::numeric_limits<int64_t>::min(), high = c.max != std::numeric_limits<int64_t>::max();
    text += low && high ? " " + std::to_string(c.min) + " .. " + std::to_string(c.max)
            : low       ? " >= " + std::to_string(c.min)
                        : " <= " + std::to_string(c.max);
  } else {
    char factor[32];
    std::snprintf(factor, sizeof factor, "%g", c.factor);
    text += " >= " + std::string(factor) + " x " + c.other;
  }
  if (!c.whenDimension.empty()) text += " when " + c.whenDimension + " = " + c.whenValue;
  return text;
}

/// Why a space has no valid configuration: the constraints whose removal alone would leave some
/// (else all of them together), with the values of the dimensions they bound.
std::string emptySpaceReason(const SearchSpace& space) {
  std::vector<std::string> culprits;
  std::set<std::string> bounded;
  const std::vector<Constraint>& all = space.constraints();
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<Constraint> others = all;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    if (SearchSpace(space.dimensions(), others).validCount() == 0) continue;
    culprits.push_back(describeConstraint(all[i]));
    bounded.insert(all[i].dimension);
  }
  if (culprits.empty()) {
    for (const Constraint& c : all) {
      culprits.push_back(describeConstraint(c));
      bounded.insert(c.dimension);
    }
  }
  std::string text = "no configuration of the search space is valid: ";
  for (size_t i = 0; i < culprits.size(); ++i) text += (i ? "; " : "") + culprits[i];
  for (const std::string& name : bounded) {
    const size_t d = space.dimensionIndex(name);
    if (d == SearchSpace::npos) continue;
    std::string values;
    for (size_t v = 0; v < space.dimension(d).size(); ++v) values += (v ? ", " : "") + space.dimension(d).label(static_cast<uint32_t>(v));
    text += " (" + name + " searched here: " + values + ")";
  }
  return text + "; a value within those bounds fits";
}

/// The base space with the chunk sizes worth searching at `bytes` (tune/size_grid.h).
SearchSpace spaceForSize(const SearchSpace& base, int64_t bytes, int32_t nRanks, int64_t maxSlices) {
  const size_t chunkDim = base.dimensionIndex(kDimChunkBytes);
  if (chunkDim == SearchSpace::npos) return base;
  const auto levels = chunkLevelsFor(base.dimension(chunkDim).levels, bytes, nRanks, maxSlices);
  return searchSpaceFromJson(
      nlohmann::json{{"dimensions", {{{"name", std::string(kDimChunkBytes)}, {"values", levels}}}}}, base);
}

/// What the searches share: the request, the topology's network, the searcher, the log.
struct SearchContext {
  const TuningRequest& request;
  const Network& network;
  const CostModel& cost;  ///< the simulator's constants for the topology (sim/cost_files.h)
  int32_t nRanks = 0;
  Searcher& searcher;
  TrialLog& log;
  TuningObserver& observer;
  size_t total = 0;  ///< workloads in the run
};

/// Every configuration the search measured, by its measurement at the largest resource it got
/// (the most accurate; ties by the configuration's description, so the order is deterministic),
/// fastest first, each with that measurement.
std::vector<std::pair<Configuration, Measurement>> measuredFastestFirst(const TunedWorkload& w) {
  std::map<std::string, const Trial*> latest;
  for (const Trial& t : w.result.trials) {
    if (t.isDefault || !t.measurement.ok || !std::isfinite(t.measurement.timeUs)) continue;
    const Trial*& kept = latest[w.space.describe(t.config)];
    if (kept == nullptr || t.resource > kept->resource ||
        (t.resource == kept->resource && t.measurement.timeUs < kept->measurement.timeUs))
      kept = &t;
  }
  std::vector<std::pair<std::string, const Trial*>> order(latest.begin(), latest.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->measurement.timeUs < b.second->measurement.timeUs;
  });
  std::vector<std::pair<Configuration, Measurement>> out;
  for (const auto& [key, trial] : order) out.emplace_back(trial->config, trial->measurement);
  return out;
}

/// What the confirmation measures against the default: the search's best, then the next best
/// configurations it measured, request.groups in all.
std::vector<Configuration> confirmationCandidates(const TuningRequest& request, const TunedWorkload& w) {
  std::vector<Configuration> out = {*w.result.best};
  for (const auto& [config, measurement] : measuredFastestFirst(w)) {
    if (static_cast<int32_t>(out.size()) >= request.groups) break;
    if (std::find(out.begin(), out.end(), config) == out.end()) out.push_back(config);
  }
  return out;
}

/// One workload's search: the exact profiler (sim, with its noise; or the command), behind a
/// replay of the logged trials; every new trial appended to the log.
TunedWorkload searchWorkload(const SearchContext& ctx, const CollectivePlan& plan, int64_t bytes,
                             size_t index) {
  const TuningRequest& request = ctx.request;
  TunedWorkload w;
  w.collective = plan.collective;
  w.bytes = bytes;
  // A command's NCCL splits a message into chunks of its own; only TuCCL's programs (the
  // simulator's, libtuccl's) bound the micro-batches a chunk size makes.
  const int64_t maxSlices = request.profiler == ProfilerKind::Command ? std::numeric_limits<int64_t>::max() / 2
                                                                     : request.maxSlices;
  w.space = spaceForSize(plan.base, bytes, ctx.nRanks, maxSlices);
  if (w.space.validCount() == 0) {
    fail(ErrorCode::InvalidArgument, logName(plan.collective) + " " + formatByteSize(static_cast<uint64_t>(bytes)) +
                                         ": " + emptySpaceReason(w.space) +
                                         (request.profiler == ProfilerKind::Command
                                              ? ""
                                              : "; --max-slices bounds the micro-batches a chunk size makes at this "
                                                "size: a larger value, or a --space file with other chunkBytes, fits"));
  }
  const double gridCost =
      static_cast<double>(w.space.validCount()) * static_cast<double>(request.maxResource);
  SearchOptions options;
  options.seed = request.seed;
  options.maxResource = request.maxResource;
  options.budget = request.budget > 0 ? request.budget
                                      : std::max<double>(static_cast<double>(request.maxResource),
                                                         request.budgetFraction * gridCost);
  const std::string name = logName(plan.collective);
  const std::vector<LoggedTrial>& logged = ctx.log.trialsOf(name, bytes);
  std::unique_ptr<SimProfiler> sim;
  std::unique_ptr<NoisyProfiler> noisy;
  std::unique_ptr<CommandProfiler> command;
  Profiler* measured = nullptr;
  if (request.profiler == ProfilerKind::Sim) {
    std::map<std::string, Algorithm> algorithms;
    for (const AlgorithmCandidate& c : plan.candidates) algorithms.emplace(c.name, c.algorithm);
    SimProfilerOptions o;
    o.messageBytes = bytes;
    o.cost = ctx.cost;
    o.sigma = 0;
    o.seed = request.seed;
    sim = std::make_unique<SimProfiler>(ctx.network, std::move(algorithms), o);
    const uint64_t stream = mixBits(plan.collective == Collective::AllReduce ? 1 : 2);
    noisy = std::make_unique<NoisyProfiler>(*sim, request.sigma,
                                            mixBits(request.seed ^ stream ^ static_cast<uint64_t>(bytes)));
    measured = noisy.get();
  } else {
    CommandProfilerOptions o;
    o.commandTemplate = request.commandTemplate;
    if (request.profiler == ProfilerKind::Tuccl) {
      // One rank per process on this machine; tuccl-bench prints nccl-tests' rows.
      const std::filesystem::path bin(request.tucclBinDir);
      o.commandTemplate = "'" + (bin / "tuccl-run").string() + "' -n " + std::to_string(ctx.nRanks) + " --timeout " +
                          std::to_string(static_cast<int64_t>(request.timeoutSeconds)) + " -- '" +
                          (bin / "tuccl-bench").string() + "' " + logName(plan.collective) +
                          " -b {bytes} -e {bytes} -n {iters} -N {reps} -w 2 -c 0";
      o.environmentFor = tucclEnvironmentFor;
      o.defaultEnvironment = tucclDefaultEnvironment;
      o.iterations = request.iterations > 0 ? request.iterations : tucclIterations(bytes);
    } else if (request.iterations > 0) {
      o.iterations = request.iterations;
    }
    o.bytes = static_cast<uint64_t>(bytes);
    o.timeoutSeconds = request.timeoutSeconds;
    command = std::make_unique<CommandProfiler>(o);
    measured = command.get();
  }
  ReplayProfiler replay(*measured, logged, [&](const Configuration& c, int64_t r) {
    if (noisy) noisy->countReplayed(c, r);
  });
  double spent = 0;
  options.onTrial = [&](const Trial& t) {
    spent += t.measurement.cost;
    if (t.id >= logged.size()) ctx.log.append(name, bytes, w.space, t);
    ctx.observer.trial(w, index, ctx.total, t, spent, options.budget);
  };
  w.result = ctx.searcher.search(w.space, replay, options);
  w.replayed = replay.replayed();
  if (!w.result.best) {
    throw std::runtime_error(name + " " + formatByteSize(static_cast<uint64_t>(bytes)) +
                             ": no configuration was measured (" + w.result.stopReason + ")");
  }
  w.exactUs = sim ? sim->simulatedTime(w.space, *w.result.best) : w.result.bestMeasurement.timeUs;
  if (request.confirm && replay.hasDefault()) {
    ConfirmationOptions confirmOptions;
    confirmOptions.minRounds = request.confirmMinRounds;
    confirmOptions.maxRounds = request.confirmMaxRounds;
    confirmOptions.resource = request.confirmResource > 0 ? request.confirmResource : request.maxResource;
    uint32_t next = static_cast<uint32_t>(w.result.trials.size());
    w.confirmation = confirmAgainstDefault(
        replay, w.space, confirmationCandidates(request, w), confirmOptions, next, [&](const Trial& t) {
          if (t.id >= logged.size()) ctx.log.append(name, bytes, w.space, t);
          ctx.observer.confirmationRun(w, index, ctx.total, t);
        });
    w.replayed = replay.replayed();
    w.exactUs = w.confirmation->chosen().summary.timeUs;
  }
  ctx.observer.workloadDone(w, index, ctx.total, gridCost);
  return w;
}

/// Whether NCCL's own choice (sim/nccl_model.h) is faster than the best simulated candidate at
/// `w`'s size: then the table keeps NCCL's algorithm, protocol and channels, so a tuned entry is
/// never slower than what NCCL would do. Only the simulator's searches compare: a command or
/// libtuccl measures the real thing.
bool ncclWins(const TuningRequest& request, const CollectivePlan& plan, const TunedWorkload& w) {
  return request.ncclChoice && !plan.candidates.empty() && w.nccl.timeUs > 0 && w.nccl.timeUs < w.exactUs;
}

/// The table's view of configuration `config` of `space` (what an entry or a group sets): the
/// NCCL algorithm where NCCL runs the candidate (see describeRange), the protocol, channels and
/// chunk size, and (libtuccl's profiler) the algorithm libtuccl ran.
ConfigGroup groupOf(const TuningRequest& request, const CollectivePlan& plan, const SearchSpace& s,
                    const Configuration& config, double timeUs) {
  ConfigGroup g;
  const std::string algorithm = s.valueOf(config, kDimAlgorithm);
  const AlgorithmCandidate* candidate = nullptr;
  for (const AlgorithmCandidate& c : plan.candidates)
    if (c.name == algorithm) candidate = &c;
  if (candidate != nullptr ? candidate->ncclRing : !algorithm.empty()) g.choice.algorithm = parseNcclAlgorithm(algorithm);
  g.choice.protocol = protocolOf(s, config);
  g.nChannels = static_cast<int32_t>(s.levelOf(config, kDimChannels, 0));
  g.chunkSize = static_cast<uint64_t>(s.levelOf(config, kDimChunkBytes, 0));
  if (request.profiler == ProfilerKind::Tuccl) g.tucclAlgorithm = algorithm;
  g.timeUs = timeUs;
  return g;
}

bool sameDecision(const ConfigGroup& a, const ConfigGroup& b) {
  return a.choice == b.choice && a.nChannels == b.nChannels && a.chunkSize == b.chunkSize &&
         a.tucclAlgorithm == b.tucclAlgorithm;
}

/// The interval a measurement gives a table time.
TimeInterval intervalOf(const Measurement& m) {
  TimeInterval interval;
  if (!m.ok) return interval;
  interval.samples = static_cast<int32_t>(std::max<size_t>(m.samplesUs.size(), 1));
  interval.lowUs = m.lowUs;
  interval.highUs = std::isfinite(m.highUs) ? m.highUs : -1;
  return interval;
}

/// The table's group of a confirmed candidate: the default's settings are empty.
ConfigGroup groupOfConfirmed(const TuningRequest& request, const CollectivePlan& plan, const TunedWorkload& w,
                             const ConfirmedCandidate& c) {
  ConfigGroup g;
  if (c.config) g = groupOf(request, plan, w.space, *c.config, c.summary.timeUs);
  g.timeUs = c.summary.ok ? c.summary.timeUs : -1;
  g.interval = intervalOf(c.summary);
  return g;
}

/// The next best groups of `w` after `winner`, fastest first, each decision once and none equal
/// to the winner's; at most request.groups - 1. Confirmed: the confirmation's candidates (the
/// default among them); otherwise every configuration the search measured, by its measurement at
/// the largest resource it got.
std::vector<ConfigGroup> alternativesOf(const TuningRequest& request, const CollectivePlan& plan,
                                        const TunedWorkload& w, const ConfigGroup& winner) {
  std::vector<ConfigGroup> out;
  if (request.groups <= 1) return out;
  std::vector<ConfigGroup> candidates;
  if (w.confirmation) {
    for (const ConfirmedCandidate& c : w.confirmation->candidates)
      if (c.summary.ok) candidates.push_back(groupOfConfirmed(request, plan, w, c));
  } else {
    for (const auto& [config, measurement] : measuredFastestFirst(w)) {
      ConfigGroup g = groupOf(request, plan, w.space, config, measurement.timeUs);
      g.interval = intervalOf(measurement);
      candidates.push_back(std::move(g));
    }
  }
  for (ConfigGroup& g : candidates) {
    if (sameDecision(g, winner)) continue;
    if (std::any_of(out.begin(), out.end(), [&](const ConfigGroup& o) { return sameDecision(o, g); })) continue;
    out.push_back(std::move(g));
    if (static_cast<int32_t>(out.size()) + 1 >= request.groups) break;
  }
  return out;
}

/// The confirmation's evidence as the table holds it; `versus` names the rival of a default entry.
DefaultComparison comparisonOf(const TunedWorkload& w) {
  const Confirmation& c = *w.confirmation;
  DefaultComparison d;
  d.ratio = c.versusDefault.ratio;
  d.low = c.versusDefault.pairs >= 2 ? c.versusDefault.low : -1;
  d.high = c.versusDefault.pairs >= 2 && std::isfinite(c.versusDefault.high) ? c.versusDefault.high : -1;
  d.pairs = c.versusDefault.pairs;
  d.won = c.versusDefault.firstWon;
  if (c.keepDefault && c.rival < c.candidates.size() && c.candidates[c.rival].config)
    d.versus = w.space.describe(*c.candidates[c.rival].config);
  return d;
}

/// The winner of `w` as a table range over `sizes`.
TunedRange describeRange(const TuningRequest& request, const CollectivePlan& plan, const TunedWorkload& w,
                         const SizeRange& sizes, size_t workload) {
  const SearchSpace& s = w.space;
  TunedRange r;
  r.collective = plan.collective;
  r.sizes = sizes;
  r.workload = workload;
  if (w.confirmation) r.versusDefault = comparisonOf(w);
  if (w.chosen() == nullptr) {
    // The confirmation kept the default: the entry sets nothing; its groups are the rivals.
    const ConfirmedCandidate& kept = w.confirmation->chosen();
    r.isDefault = true;
    r.algorithm = "default";
    r.ncclRuns = true;  // the entry serves nothing: NCCL (or libtuccl) runs its own choice
    r.timeUs = kept.summary.timeUs;
    r.interval = intervalOf(kept.summary);
    r.alternatives = alternativesOf(request, plan, w, ConfigGroup{});
    return r;
  }
  const Configuration& best = *w.chosen();
  if (ncclWins(request, plan, w)) {
    r.algorithm = std::string(kNcclOwnChoice);
    r.ncclAlgorithm = w.nccl.algorithm;
    r.ncclRuns = true;
    r.protocol = w.nccl.protocol;
    r.nChannels = w.nccl.nChannels;
    r.timeUs = w.nccl.timeUs;
    ConfigGroup nccl;
    nccl.choice = {r.ncclAlgorithm, r.protocol};
    nccl.nChannels = r.nChannels;
    r.alternatives = alternativesOf(request, plan, w, nccl);
    return r;
  }
  r.algorithm = s.valueOf(best, kDimAlgorithm);
  const AlgorithmCandidate* candidate = nullptr;
  for (const AlgorithmCandidate& c : plan.candidates)
    if (c.name == r.algorithm) candidate = &c;
  if (candidate != nullptr) {
    r.program = candidate->program;
    r.sketch = candidate->sketch();
  }
  // NCCL runs RING only for the rank-order ring; a TuCCL program (HM, direct, rail ring) is not an
  // NCCL algorithm, so the table leaves NCCL's choice free and fixes the protocol. With the
  // command profiler the values are NCCL's algorithms (checked in planCollective).
  if (candidate != nullptr ? candidate->ncclRing : !r.algorithm.empty())
    r.ncclAlgorithm = parseNcclAlgorithm(r.algorithm);
  r.ncclRuns = plan.candidates.empty() ? !plan.tuccl : candidate != nullptr && candidate->ncclRing;
  r.scheduler = s.valueOf(best, kDimScheduler);
  r.protocol = protocolOf(s, best);
  r.nChannels = static_cast<int32_t>(s.levelOf(best, kDimChannels, 0));
  r.nThreads = s.levelOf(best, kDimThreads, 0);
  r.chunkBytes = static_cast<uint64_t>(s.levelOf(best, kDimChunkBytes, 0));
  r.timeUs = w.exactUs;
  if (w.confirmation) {
    r.interval = intervalOf(w.confirmation->chosen().summary);
  } else if (request.profiler != ProfilerKind::Sim) {
    // The measured time of the best at the largest resource it got (the sim's time is noiseless).
    for (const auto& [config, measurement] : measuredFastestFirst(w))
      if (config == best) r.interval = intervalOf(measurement);
  }
  r.alternatives = alternativesOf(request, plan, w, groupOf(request, plan, s, best, w.exactUs));
  return r;
}

/// Per collective, adjacent sizes with the same winner merged into one range.
std::vector<TunedRange> mergeRanges(const TuningRequest& request, const std::vector<CollectivePlan>& plans,
                                    const std::vector<TunedWorkload>& workloads,
                                    const std::vector<int64_t>& sizes) {
  std::vector<TunedRange> ranges;
  for (const CollectivePlan& plan : plans) {
    std::vector<size_t> mine;
    std::vector<std::string> keys;
    for (size_t i = 0; i < workloads.size(); ++i) {
      if (workloads[i].collective != plan.collective) continue;
      mine.push_back(i);
      const TunedWorkload& w = workloads[i];
      // Default sizes merge only where their rivals (the entry's groups) are the same too.
      keys.push_back(w.chosen() == nullptr ? "default, " + comparisonOf(w).versus
                     : ncclWins(request, plan, w) ? std::string(kNcclOwnChoice) + " " + describeNcclChoice(w.nccl)
                                                  : w.space.describe(*w.chosen()));
    }
    for (const SizeRange& sizeRange : mergeSizeRanges(sizes, keys)) {
      TunedRange r =
          describeRange(request, plan, workloads[mine[sizeRange.first]], sizeRange, mine[sizeRange.first]);
      for (size_t i = sizeRange.first; i <= sizeRange.last; ++i) {
        r.trials += workloads[mine[i]].result.trials.size();
        r.cost += workloads[mine[i]].result.cost;
      }
      ranges.push_back(std::move(r));
    }
  }
  return ranges;
}

/// The sim's winners that are TuCCL programs (HM, direct, the rail ring): NCCL runs its own
/// algorithms, so the plugin's protocol and channel count for them were measured on a program
/// NCCL will not run. Said once, listing the ranges.
void warnAboutProgramsNcclDoesNotRun(const TuningResult& result, TuningObserver& observer) {
  std::string ranges;
  size_t count = 0;
  for (const TunedRange& r : result.ranges) {
    if (r.ncclRuns) continue;
    ++count;
    ranges += (ranges.empty() ? "" : ", ") + logName(r.collective) + " " + formatByteSize(r.sizes.minBytes) + ".." +
              (r.sizes.maxBytes == UINT64_MAX ? std::string("inf") : formatByteSize(r.sizes.maxBytes)) + ": " +
              (r.program.empty() ? r.algorithm : r.program);
  }
  if (count == 0) return;
  observer.warning(std::to_string(count) + " of " + std::to_string(result.ranges.size()) +
                   " table entries were won by TuCCL programs NCCL does not run (" + ranges +
                   "); the NCCL tuner plugin serves NCCL only their protocol and channel count, which NCCL "
                   "applies to its own ring or tree (libtuccl runs the programs themselves). To tune NCCL, "
                   "use --algorithms ring or --profiler command.");
}

TuningResult runSearches(const TuningRequest& request, TuningObserver& observer) {
  checkRequest(request);
  const std::optional<nlohmann::json> spaceJson = readSpaceFile(request.spaceFile);
  // This machine's ranks (--ranks) have no topology: one node, no signature, no NCCL model.
  Topology topology;
  if (request.ranks == 0) {
    Expected<LoadedTopology> loaded = loadTopology(request.topology, request.topologyOptions);
    throwIfError(loaded.status());
    topology = std::move(loaded)->topology;
  }
  const Network network = makeNetwork(topology);
  TuningResult result;
  result.request = request;
  result.nNodes = request.ranks > 0 ? 1 : topology.nNodes();
  result.nRanks = request.ranks > 0 ? request.ranks : topology.nRanks();
  result.signature = request.ranks > 0 ? std::string() : signatureHex(topologySignature(topology));

  // The simulator's constants: the file the topology names, else its hardware class's.
  CostModel cost = defaultCostModel();
  if (request.ranks == 0) {
    Expected<CostModel> forTopology = costModelForTopology(topology, request.topology);
    throwIfError(forTopology.status());
    cost = *forTopology;
  }
  std::vector<CollectivePlan> plans;
  for (Collective collective : request.collectives)
    plans.push_back(planCollective(request, collective, topology, network, cost, spaceJson, observer));

  throwIfError(observer.ready());
  std::unique_ptr<TrialLog> log =
      TrialLog::open(request.logPath, runHeader(request, result.signature, plans), request.resume);
  if (log->loadedTrials() > 0) observer.resuming(request.logPath, log->loadedTrials());
  std::unique_ptr<Searcher> searcher = makeSearcher(request.method);
  const SearchContext ctx{
      request, network, cost, result.nRanks, *searcher, *log, observer, plans.size() * request.sizes.size()};
  // The NCCL model describes GPUs: its choice is compared with what ran on GPUs (the simulator's
  // and a command's topologies; libtuccl's runs only on the CUDA device), never with CPU ranks.
  const bool compareWithNccl = request.ranks == 0 && (request.profiler != ProfilerKind::Tuccl || !tucclOnCpu());
  // The simulator's candidates are compared with NCCL's own plan in the same simulator; measured
  // ones with the NCCL model's time (no plan of NCCL's ran beside them).
  std::optional<NcclGraph> ncclGraph;
  std::optional<NcclBaseline> ncclPlans;
  if (compareWithNccl && request.profiler == ProfilerKind::Sim) ncclPlans.emplace(topology, network, cost);
  else if (compareWithNccl) ncclGraph = searchNcclGraph(topology);
  for (const CollectivePlan& plan : plans) {
    for (int64_t bytes : request.sizes) {
      result.workloads.push_back(searchWorkload(ctx, plan, bytes, result.workloads.size()));
      TunedWorkload& w = result.workloads.back();
      if (ncclPlans) {
        Expected<NcclSimulated> simulated = ncclPlans->evaluate(plan.collective, bytes);
        throwIfError(simulated.status());
        w.nccl = simulated->choice;
        w.ncclSimulated = true;
        w.ncclModelUs = simulated->model.timeUs;
      } else if (ncclGraph) {
        w.nccl = ncclModelChoice(*ncclGraph, plan.collective, static_cast<uint64_t>(bytes));
        w.ncclModelUs = w.nccl.timeUs;
      }
    }
  }
  result.ranges = mergeRanges(request, plans, result.workloads, request.sizes);
  if (request.profiler == ProfilerKind::Sim) warnAboutProgramsNcclDoesNotRun(result, observer);
  return result;
}

/// The mode of `counts` (ties: the smaller value).
std::string modeOf(const std::map<int64_t, int>& counts) {
  int64_t best = 0;
  int bestCount = 0;
  for (const auto& [value, count] : counts) {
    if (count > bestCount) best = value, bestCount = count;
  }
  return std::to_string(best);
}

/// "0.82 [0.78, 0.87], 6 pairs, 6 won": a comparison with the default, for comments and logs.
std::string describeComparison(const DefaultComparison& c) {
  char text[160];
  if (c.low >= 0 && c.high >= 0)
    std::snprintf(text, sizeof text, "%.3f [%.3f, %.3f], %d pairs, %d won", c.ratio, c.low, c.high, c.pairs, c.won);
  else
    std::snprintf(text, sizeof text, "%.3f (no interval), %d pairs, %d won", c.ratio, c.pairs, c.won);
  return text;
}

/// What the NCCL table cannot say about a range: the entry's comment.
std::string rangeComment(const TuningResult& result, const TunedRange& r) {
  const TunedWorkload& w = result.workloads[r.workload];
  std::ostringstream comment;
  comment << "tuccl: " << (r.algorithm.empty() ? "-" : r.algorithm);
  if (!r.program.empty()) comment << " (" << r.program << ", sketch " << r.sketch << ")";
  if (r.isDefault) {
    comment << " (nothing measured was significantly faster than the defaults: " << r.versusDefault->versus
            << " against the default " << describeComparison(*r.versusDefault) << "); tuned at";
  } else if (r.algorithm == kNcclOwnChoice) {
    comment << " (NCCL's own choice " << describeNcclChoice(w.nccl)
            << (w.ncclSimulated ? ", its plan simulated," : ", by the NCCL model,") << " beats the best candidate "
            << w.space.describe(*w.result.best) << " at " << std::fixed << std::setprecision(1) << w.exactUs
            << " us); tuned at";
    comment.unsetf(std::ios::fixed);
  } else {
    comment << "; " << w.space.describe(*w.chosen());
    if (r.versusDefault) comment << ", against the default " << describeComparison(*r.versusDefault);
    comment << "; tuned at";
  }
  for (size_t i = r.sizes.first; i <= r.sizes.last; ++i)
    comment << " " << formatByteSize(static_cast<uint64_t>(result.request.sizes[i]));
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, "; %.1f us at %s (%s)", r.timeUs,
                formatByteSize(static_cast<uint64_t>(w.bytes)).c_str(),
                r.algorithm == kNcclOwnChoice                  ? (w.ncclSimulated ? "NCCL's plan, simulated" : "the NCCL model")
                : result.request.profiler == ProfilerKind::Sim ? "simulated, noiseless"
                : w.confirmation                               ? "measured, the median of the confirmation rounds"
                                                               : "measured");
  comment << numbers;
  return comment.str();
}

/// The same, as metadata.tuccl.entries[i].
nlohmann::ordered_json rangeMetadata(const TuningResult& result, const TunedRange& r) {
  const TunedWorkload& w = result.workloads[r.workload];
  const auto first = result.request.sizes.begin() + static_cast<std::ptrdiff_t>(r.sizes.first);
  const auto last = result.request.sizes.begin() + static_cast<std::ptrdiff_t>(r.sizes.last) + 1;
  nlohmann::ordered_json j = {{"algorithm", r.algorithm},
                              {"ncclRuns", r.ncclRuns},
                              {"program", r.program},
                              {"sketch", r.sketch},
                              {"scheduler", r.scheduler},
                              {"config", w.chosen() != nullptr ? w.space.configurationToJson(*w.chosen())
                                                               : nlohmann::json(nullptr)},
                              {"searchBest", w.space.configurationToJson(*w.result.best)},
                              {"sizes", std::vector<int64_t>(first, last)},
                              {"timeUs", r.timeUs},
                              {"bestCandidateUs", w.exactUs}};
  if (w.nccl.timeUs > 0) {
    j["ncclUs"] = w.nccl.timeUs;
    j["ncclChoice"] = describeNcclChoice(w.nccl);
    j["ncclTime"] = w.ncclSimulated ? "simulated plan" : "model";
    j["ncclModelUs"] = w.ncclModelUs;
  }
  if (w.confirmation) {
    // Per size of the range: the confirmation's verdict (the entry's own is the first size's).
    // A collective's workloads are its sizes in order, the range's first at r.workload.
    nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
    for (size_t i = 0; i <= r.sizes.last - r.sizes.first; ++i) {
      const TunedWorkload& other = result.workloads[r.workload + i];
      if (!other.confirmation) continue;
      const DefaultComparison c = comparisonOf(other);
      verdicts.push_back({{"bytes", other.bytes},
                          {"default", other.confirmation->keepDefault},
                          {"rounds", other.confirmation->rounds},
                          {"ratio", c.ratio},
                          {"low", c.low},
                          {"high", c.high},
                          {"won", c.won}});
    }
    j["confirmation"] = std::move(verdicts);
  }
  return j;
}

}  // namespace

const Configuration* TunedWorkload::chosen() const {
  if (!confirmation) return result.best ? &*result.best : nullptr;
  const ConfirmedCandidate& c = confirmation->chosen();
  return c.config ? &*c.config : nullptr;
}

std::string_view profilerKindName(ProfilerKind kind) {
  switch (kind) {
    case ProfilerKind::Command: return "command";
    case ProfilerKind::Tuccl: return "tuccl";
    case ProfilerKind::Sim: break;
  }
  return "sim";
}

std::vector<Collective> tunableCollectives(ProfilerKind kind) {
  std::vector<Collective> out;
  for (int c = 0; c < kTunerCollectives; ++c) {
    const auto collective = static_cast<Collective>(c);
    // The simulator's candidates come from synth/'s generators and synthesiser, which make every
    // collective NCCL's tuner is asked about.
    const bool tunable = kind != ProfilerKind::Tuccl || !tucclBuiltinAlgorithms(collective).empty();
    if (tunable) out.push_back(collective);
  }
  return out;
}

Status checkTuningRequest(const TuningRequest& request) {
  try {
    checkRequest(request);
  } catch (const StatusError& error) {
    return error.status();
  }
  return Status();
}

std::optional<ProfilerKind> parseProfilerKind(std::string_view name) {
  if (name == "sim") return ProfilerKind::Sim;
  if (name == "command") return ProfilerKind::Command;
  if (name == "tuccl") return ProfilerKind::Tuccl;
  return std::nullopt;
}

Expected<TuningResult> runTuning(const TuningRequest& request, TuningObserver* observer) {
  TuningObserver silent;
  try {
    return runSearches(request, observer != nullptr ? *observer : silent);
  } catch (const StatusError& error) {
    return error.status();
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error);
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidArgument, error.what());
  } catch (const std::logic_error& error) {
    return makeError(ErrorCode::Internal, error.what());
  } catch (const std::exception& error) {
    // The trial log (exists, another run's, unwritable) and the profiling runs (a command that
    // always fails, a log the search diverges from).
    return makeError(ErrorCode::InvalidInput, error.what());
  }
}

LookupTable tableFromResult(const TuningResult& result) {
  const TuningRequest& request = result.request;
  const std::string topology = request.keyBySignature ? result.signature : std::string();
  LookupTable table;
  std::map<int64_t, int> threadCounts, ll128ThreadCounts;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const TunedRange& r : result.ranges) {
    TableEntry e;
    e.collective = r.collective;
    e.minBytes = r.sizes.minBytes;
    e.maxBytes = r.sizes.maxBytes;
    e.nNodes = result.nNodes;
    e.nRanks = result.nRanks;
    e.topology = topology;
    if (r.ncclAlgorithm || r.protocol) e.choices.push_back({r.ncclAlgorithm, r.protocol});
    e.nChannels = r.nChannels;
    e.chunkSize = r.chunkBytes;
    if (request.profiler == ProfilerKind::Tuccl && !r.isDefault) e.tucclAlgorithm = r.algorithm;  // what libtuccl ran
    e.timeUs = r.timeUs;
    e.interval = r.interval;
    e.isDefault = r.isDefault;
    e.versusDefault = r.versusDefault;
    e.groups = r.alternatives;
    e.comment = rangeComment(result, r);
    table.entries.push_back(std::move(e));
    entries.push_back(rangeMetadata(result, r));
    if (r.nThreads > 0)
      (r.protocol == Protocol::LL128 ? ll128ThreadCounts : threadCounts)[r.nThreads] +=
          static_cast<int>(r.sizes.last - r.sizes.first + 1);
  }
  EnvRecommendation env;
  env.nNodes = result.nNodes;
  env.nRanks = result.nRanks;
  env.topology = topology;
  if (!threadCounts.empty()) env.settings.emplace_back("NCCL_NTHREADS", modeOf(threadCounts));
  if (!ll128ThreadCounts.empty()) env.settings.emplace_back("NCCL_LL128_NTHREADS", modeOf(ll128ThreadCounts));
  if (!env.settings.empty()) table.environment.push_back(std::move(env));
  const std::string profiler(profilerKindName(request.profiler));
  const std::string where = request.ranks > 0 ? std::string("this machine's CPU device") : request.topology;
  table.description = "tuned for " + where + " (" + std::to_string(result.nRanks) + " ranks on " +
                      std::to_string(result.nNodes) + " nodes) with " + request.method + ", profiler " +
                      profiler;
  const nlohmann::ordered_json metadata = {{"tuccl",
                                            {{"topology", where},
                                             {"signature", result.signature},
                                             {"method", request.method},
                                             {"seed", request.seed},
                                             {"profiler", profiler},
                                             {"entries", entries}}}};
  table.metadataJson = metadata.dump();
  return table;
}

}  // namespace tuccl
