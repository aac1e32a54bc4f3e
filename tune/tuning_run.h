// The tuning run (docs/tuning.md, "tuccl-tune"): per collective and message size of a grid, one
// search over sketch/algorithm × scheduler × protocol × nChannels × nThreads × chunk size; adjacent
// sizes with the same winner become one byte range of the lookup table (table/).
//
// In:  a TuningRequest — the topology, the collectives, the size grid, the search (method,
//      budget, R_max, seed, space), the profiler (the simulator with its noise, or a command
//      template such as nccl-tests) and the trial log (path, resume).
// Out: runTuning: a TuningResult — every workload's search and the table's ranges, each with the
//      configuration that won it; tableFromResult: the LookupTable the tuner plugin serves.
//
// What goes where:
//   - candidates (sim): the example programs that fit the topology's shape, each labelled with the
//     sparsest sketch admitting it (tune/sketch_candidates.h); command: NCCL's algorithms;
//   - chunk sizes: per message size, only those giving at most maxSlices micro-batches per chunk
//     and none beyond one whole chunk (tune/size_grid.h chunkLevelsFor);
//   - byte ranges: grid size s_i covers [s_i, s_{i+1} - 1], the first from 0, the last unbounded;
//   - each entry: protocol, nChannels and chunkSize; algorithm RING only when the winner is the
//     rank-order ring program (or, with the command profiler, the NCCL algorithm it ran), otherwise
//     "any" (HM, direct and the rail ring are TuCCL programs NCCL does not have); the TuCCL choice
//     (program, sketch, scheduler, threads) in the entry's comment and in metadata.tuccl.entries;
//     nThreads as the environment recommendation (NCCL_NTHREADS / NCCL_LL128_NTHREADS: the value
//     most sizes chose);
//   - with a profiler that measures the system's default (command, tuccl): the search's best
//     few and the default in interleaved rounds (tune/confirmation.h); the entry is the default
//     ("default": true) unless the fastest is significantly faster, and its groups are the
//     confirmed ones fastest first, each with its median's interval;
//   - the trial log (tune/trial_log.h) gets every trial as it happens; with resume the log is
//     replayed — searches are deterministic given the seed and the sim profiler's noise is replayed
//     too (tune/measurement_noise.h) — so a resumed run gives the same result as an uninterrupted
//     one. An existing log is never overwritten: without resume it is an error, as is a log of
//     another run (a different request).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"
#include "support/vocabulary.h"
#include "sim/nccl_model.h"
#include "table/lookup_table.h"
#include "topo/load.h"
#include "tune/confirmation.h"
#include "tune/searcher.h"
#include "tune/size_grid.h"
#include "tune/sketch_candidates.h"

namespace tuccl {

enum class ProfilerKind : uint8_t {
  Sim,      ///< the simulator, with seeded measurement noise (tune/sim_profiler.h)
  Command,  ///< a command template run per configuration (tune/command_profiler.h)
  Tuccl,    ///< libtuccl runs: tuccl-run ... tuccl-bench per configuration (a command profiler)
};
/// "sim", "command", "tuccl".
std::string_view profilerKindName(ProfilerKind kind);
std::optional<ProfilerKind> parseProfilerKind(std::string_view name);

/// The collectives a profiler can tune, in ncclFunc_t order: sim, those with candidate programs
/// (allreduce, allgather); command, every collective NCCL's tuner is asked about (NCCL runs the
/// command); tuccl, those of them with libtuccl built-in algorithms.
std::vector<Collective> tunableCollectives(ProfilerKind kind);

struct TuningRequest {
  // ---- what to tune
  std::string topology = "preset:resccl-a100:nodes=2";  ///< a spec topo/load.h loadTopology accepts
  LoadOptions topologyOptions;  ///< --gpu-fabric, --nodes and how the nodes are wired (topo/load.h)
  std::vector<Collective> collectives = {Collective::AllReduce, Collective::AllGather};
  std::vector<int64_t> sizes;  ///< message bytes, strictly ascending (tune/size_grid.h sizeGrid)
  /// The simulator's searches keep NCCL's own choice (sim/nccl_model.h) for a size where it is
  /// faster than every candidate, so no table entry is slower than what NCCL would do; false
  /// keeps the best candidate (--candidates-only).
  bool ncclChoice = true;
  // ---- the search
  std::string method = "mraco";  ///< a makeSearcher name
  double budget = 0;             ///< per workload, in repetitions; 0: budgetFraction of the grid's cost
  double budgetFraction = 0.1;
  int64_t maxResource = 27;  ///< R_max
  int64_t maxSlices = 64;    ///< chunk sizes giving at most this many micro-batches per chunk
  uint64_t seed = 1;
  /// Search-space values: schedulers (sim), and the candidate programs (sim) or NCCL algorithms
  /// (command) to search; empty algorithms: every candidate (sim), ring (command).
  std::vector<std::string> schedulers = {"hpds", "rr", "algorithm", "stage"};
  std::vector<std::string> algorithms;
  /// sim: directories whose .resccl and .xml files are candidates too (tune/sketch_candidates.h
  /// directoryCandidates), whatever `algorithms` restricts the built-in candidates to.
  std::vector<std::string> algorithmDirs;
  std::string spaceFile;    ///< search-space JSON restricting / extending the default; empty: none
  std::string examplesDir;  ///< the algorithm programs (sim)
  // ---- the profiler
  ProfilerKind profiler = ProfilerKind::Sim;
  double sigma = 0.05;  ///< sim: relative noise of one iteration
  std::string commandTemplate;
  double timeoutSeconds = 300;  ///< command, tuccl: per run
  /// command, tuccl: timed iterations per repetition ({iters} of a template with {reps}); 0: the
  /// tuccl profiler's per-size default (tucclIterations), 20 for a command.
  int64_t iterations = 0;
  /// tuccl without a topology: the ranks to run on this machine (the CPU device); 0: a topology
  /// (`topology`) says.
  int32_t ranks = 0;
  // ---- the confirmation against the default (command, tuccl; tune/confirmation.h)
  bool confirm = true;
  int32_t confirmMinRounds = 6;
  int32_t confirmMaxRounds = 12;
  int64_t confirmResource = 0;  ///< repetitions per run; 0: maxResource
  /// tuccl: the directory of tuccl-run and tuccl-bench (tuccl-tune passes its own)
  std::string tucclBinDir;
  // ---- the trial log
  std::string logPath;
  bool resume = false;
  // ---- the table
  bool keyBySignature = false;  ///< key entries by the topology signature too
  /// Configuration groups kept per entry, the winner included (table ConfigGroup): the runtime
  /// phase switches among them. 1: the winner only.
  int32_t groups = 3;
};

/// One (collective, size) and what its search found.
struct TunedWorkload {
  Collective collective = Collective::AllReduce;
  int64_t bytes = 0;
  SearchSpace space;
  SearchResult result;  ///< result.best is set (runTuning fails otherwise)
  double exactUs = 0;   ///< the winner's noiseless simulated time (sim), else its measurement
  NcclChoice nccl;      ///< what NCCL would do at this size (sim/nccl_model.h): speed-ups are over it
  /// nccl.timeUs is NCCL's plan simulated by the engine that simulated the candidates
  /// (tune/nccl_baseline.h, the sim profiler), not the NCCL model's formula.
  bool ncclSimulated = false;
  double ncclModelUs = 0;  ///< the NCCL model's time for NCCL's choice (the cross-check)
  size_t replayed = 0;  ///< trials answered from the log
  /// The search's best few against the default (command, tuccl; empty for the sim or with
  /// confirm off): what the table's entry sets.
  std::optional<Confirmation> confirmation;
  /// The configuration the table sets at this size: the confirmed one, or the search's best;
  /// nullptr where the confirmation kept the default.
  const Configuration* chosen() const;
};

/// One byte range of the table: adjacent grid sizes of one collective with the same winner.
/// TunedRange::algorithm of a range where NCCL's own choice (the NCCL model) beat every candidate.
inline constexpr std::string_view kNcclOwnChoice = "nccl";

struct TunedRange {
  Collective collective = Collective::AllReduce;
  SizeRange sizes;      ///< grid indices and bytes
  size_t workload = 0;  ///< TuningResult::workloads index of the range's first size (its winner)
  // ---- the winner
  std::string algorithm;  ///< the "algorithm" value ("hm", "ring", ...), kNcclOwnChoice; empty: none in the space
  std::string program;    ///< sim: the example program ("hm_allreduce"); empty otherwise
  std::string sketch;     ///< sim: the sparsest sketch admitting it; empty otherwise
  std::string scheduler;  ///< empty: none in the space
  std::optional<NcclAlgorithm> ncclAlgorithm;  ///< what NCCL can run of it; empty: any
  /// Whether NCCL runs what was measured (the command profiler; the sim's rank-order ring). When
  /// not, the plugin hands NCCL a protocol and channel count measured on another program.
  bool ncclRuns = false;
  std::optional<Protocol> protocol;            ///< empty: none in the space
  int32_t nChannels = 0;                       ///< 0: none in the space
  int64_t nThreads = 0;
  uint64_t chunkBytes = 0;
  double timeUs = 0;  ///< TunedWorkload::exactUs of the first size (the confirmed median)
  TimeInterval interval;  ///< what timeUs rests on (a measured time's interval and samples)
  /// The confirmation kept the default at the first size: the entry sets nothing.
  bool isDefault = false;
  std::optional<DefaultComparison> versusDefault;  ///< the confirmation's evidence
  /// The next best configuration groups at the first size, fastest first, each as the table
  /// gives it (distinct from the winner's and each other's): TuningRequest::groups - 1 at most.
  std::vector<ConfigGroup> alternatives;
  // ---- what it cost, over the range's sizes
  size_t trials = 0;
  double cost = 0;
};

struct TuningResult {
  TuningRequest request;
  int32_t nNodes = 0;
  int32_t nRanks = 0;
  std::string signature;                 ///< signatureHex(topologySignature(topology))
  std::vector<TunedWorkload> workloads;  ///< collective-major, sizes ascending
  std::vector<TunedRange> ranges;        ///< the table's entries, in request.collectives order
};

/// What a run reports while it goes (progress bars, notes); every method may be left as is.
class TuningObserver {
 public:
  virtual ~TuningObserver() = default;
  /// Something worth telling (a program that does not fit the topology's shape).
  virtual void note(std::string_view /*text*/) {}
  /// Something the user must know about the table (entries NCCL cannot run as tuned).
  virtual void warning(std::string_view /*text*/) {}
  /// Once every argument is checked (the topology loaded, the spaces built), before the trial log
  /// is opened or anything is measured: a failed Status (an output that cannot be written) stops
  /// the run with it, having written nothing.
  virtual Status ready() { return Status(); }
  /// The candidate programs of a collective (sim).
  virtual void candidates(Collective /*collective*/, const std::vector<AlgorithmCandidate>& /*candidates*/) {}
  /// An existing log is being resumed.
  virtual void resuming(const std::string& /*logPath*/, size_t /*trials*/) {}
  /// After every trial of workload `index` of `total` (`spent` of `budget` used).
  virtual void trial(const TunedWorkload& /*workload*/, size_t /*index*/, size_t /*total*/,
                     const Trial& /*trial*/, double /*spent*/, double /*budget*/) {}
  /// After every run of workload `index`'s confirmation against the default.
  virtual void confirmationRun(const TunedWorkload& /*workload*/, size_t /*index*/, size_t /*total*/,
                               const Trial& /*run*/) {}
  /// After workload `index`'s search (and confirmation); `gridCost` is what the exhaustive grid
  /// would have cost.
  virtual void workloadDone(const TunedWorkload& /*workload*/, size_t /*index*/, size_t /*total*/,
                            double /*gridCost*/) {}
};

/// The checks of the request's own values, without reading any file: the numbers within their
/// ranges (the message says the range), the collectives tunable by the profiler and not repeated,
/// the method, schedulers and algorithms known. runTuning runs them first.
Status checkTuningRequest(const TuningRequest& request);

/// Runs every search of the request. Fails with InvalidArgument / InvalidInput for a bad request
/// (checkTuningRequest, a bad topology or space file, a command template with an unknown
/// placeholder, a log that exists without resume or belongs to another run) before anything is
/// written, and with the error of a search that measured nothing (e.g. a command that always
/// fails).
Expected<TuningResult> runTuning(const TuningRequest& request, TuningObserver* observer = nullptr);

/// The lookup table of a result: one entry per range (keyed by the topology's nNodes and nRanks,
/// and its signature when request.keyBySignature), the environment recommendation, the entry
/// comments and metadata.tuccl, and a description.
LookupTable tableFromResult(const TuningResult& result);

}  // namespace tuccl
