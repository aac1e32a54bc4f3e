#include "synth/exact_synthesis.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <utility>

#include "synth/exact_encoding.h"
#include "synth/exact_lowering.h"
#include "synth/exact_topology.h"
#include "synth/proved.h"

namespace tuccl {

namespace {

constexpr const char* kProducer = "exact synthesis (SCCL)";

// ---- Collectives as SCCL's base problems --------------------------------------------------------

// How a collective maps onto the non-combining problem the SMT solves (SCCL's combining collectives): a base
// collective (AllGather, Broadcast, AllToAll) run forward on the links, and/or inverted (its
// schedule on the reversed links, run backwards with sends turned into reduces).
struct Reduction {
  Collective base = Collective::AllGather;
  bool inverse = false;     // a combining phase first (ReduceScatter, Reduce, AllReduce)
  bool forward = true;      // a copying phase (AllGather, Broadcast, AllToAll, AllReduce)
  int32_t chunkFactor = 1;  // the collective's C = chunkFactor × the base C
  int32_t stepFactor = 1;   // the collective's S and R = stepFactor × the base's
  int32_t chunkUnit = 1;    // the base C must be a multiple of this
};

std::optional<Reduction> reductionOf(Collective collective, int32_t n) {
  switch (collective) {
    case Collective::AllGather:
      return Reduction{};
    case Collective::Broadcast:
      return Reduction{.base = Collective::Broadcast};
    case Collective::AllToAll:
      return Reduction{.base = Collective::AllToAll, .chunkUnit = n};
    case Collective::ReduceScatter:
      return Reduction{.inverse = true, .forward = false};
    case Collective::Reduce:
      return Reduction{.base = Collective::Broadcast, .inverse = true, .forward = false};
    case Collective::AllReduce:
      return Reduction{.inverse = true, .chunkFactor = n, .stepFactor = 2};
  }
  return std::nullopt;
}

struct AllToAllChunk {
  int32_t src = 0, dst = 0, index = 0;
};

// The chunks that must move, src != dst, in the order the demand lists them.
std::vector<AllToAllChunk> allToAllChunks(int32_t n, int32_t perPair) {
  std::vector<AllToAllChunk> chunks;
  for (int32_t src = 0; src < n; ++src) {
    for (int32_t dst = 0; dst < n; ++dst) {
      for (int32_t m = 0; m < perPair && src != dst; ++m) chunks.push_back({src, dst, m});
    }
  }
  return chunks;
}

// SCCL Table 2's (pre, post) for the base collectives, with `chunks` in the base's unit.
Demand demandOf(Collective base, int32_t n, int32_t chunks, int32_t root) {
  Demand demand;
  demand.nGpus = n;
  std::vector<int32_t> all(n);
  for (int32_t g = 0; g < n; ++g) all[g] = g;
  switch (base) {
    case Collective::AllGather:
      for (int32_t owner = 0; owner < n; ++owner) {
        for (int32_t j = 0; j < chunks; ++j) demand.chunks.push_back({{owner}, all});
      }
      break;
    case Collective::Broadcast:
      for (int32_t j = 0; j < chunks; ++j) demand.chunks.push_back({{root}, all});
      break;
    default:  // AllToAll
      for (const AllToAllChunk& chunk : allToAllChunks(n, chunks / n))
        demand.chunks.push_back({{chunk.src}, {chunk.dst}});
      break;
  }
  return demand;
}

// Everything fixed by (topology, collective, options).
struct Problem {
  Collective collective = Collective::AllGather;
  Reduction reduction;
  int32_t n = 0;
  int32_t root = 0;
  ExactTopology links;     // the forward phase runs here
  ExactTopology reversed;  // the inverse phase's base schedule runs here
  bool symmetric = false;  // links == reversed: one schedule serves both phases of AllReduce
  std::string topologyName;
};

Expected<Problem> problemOf(const Topology& topology, Collective collective,
                            const ExactSynthesisOptions& options) {
  Expected<ExactTopology> links = exactTopologyOf(topology);
  if (!links.ok()) return links.status();
  Problem problem;
  problem.collective = collective;
  problem.n = links->nGpus;
  const std::optional<Reduction> reduction = reductionOf(collective, problem.n);
  if (!reduction) {
    return makeError(ErrorCode::Unsupported,
                     "exact synthesis cannot synthesise " + std::string(collectiveName(collective)));
  }
  problem.reduction = *reduction;
  if (hasRoot(collective) && (options.root < 0 || options.root >= problem.n)) {
    return makeError(ErrorCode::InvalidArgument, "root " + std::to_string(options.root) +
                                                     " out of range [0, " + std::to_string(problem.n) + ")");
  }
  problem.root = hasRoot(collective) ? options.root : 0;
  problem.links = std::move(*links);
  problem.reversed = transposed(problem.links);
  problem.symmetric = isSymmetric(problem.links);
  problem.topologyName = topology.name;
  return problem;
}

std::string shapeName(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds) {
  return std::string(collectiveName(problem.collective)) + " (" + std::to_string(chunks) + "," +
         std::to_string(steps) + "," + std::to_string(rounds) + ")";
}

Status checkShape(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds) {
  const Reduction& r = problem.reduction;
  const std::string shape = shapeName(problem, chunks, steps, rounds);
  if (chunks < 1 || steps < 1 || rounds < steps) {
    return makeError(ErrorCode::InvalidArgument,
                     shape + ": chunks and steps must be at least 1 and rounds at least the steps");
  }
  const int32_t unit = r.chunkFactor * r.chunkUnit;
  if (chunks % unit != 0) {
    return makeError(ErrorCode::InvalidArgument, shape + ": the chunks must be a multiple of " +
                                                     std::to_string(unit) + " (the number of GPUs)");
  }
  if (steps % r.stepFactor != 0 || rounds % r.stepFactor != 0) {
    return makeError(
        ErrorCode::InvalidArgument,
        shape + ": steps and rounds must be even (a ReduceScatter and an AllGather of equal length)");
  }
  return {};
}

// ---- Solving ------------------------------------------------------------------------------------

struct BaseSolution {
  SolveOutcome outcome = SolveOutcome::Unsat;
  Schedule forward;  // on the links
  Schedule inverse;  // on the reversed links
  double seconds = 0;
  std::string reason;
};

// The base problem at base shape (C, S, R), on the links each phase needs.
BaseSolution solveBase(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds,
                       double seconds) {
  const Reduction& r = problem.reduction;
  const Demand demand = demandOf(r.base, problem.n, chunks, problem.root);
  BaseSolution solution;
  auto solveOn = [&](const ExactTopology& links, Schedule& into) {
    const SolveResult result = solveSchedule(links, demand, steps, rounds, seconds - solution.seconds);
    solution.seconds += result.seconds;
    solution.outcome = result.outcome;
    solution.reason = result.reason;
    into = result.schedule;
    return result.outcome == SolveOutcome::Sat;
  };
  if (r.forward && !solveOn(problem.links, solution.forward)) return solution;
  if (r.inverse) {
    if (r.forward && problem.symmetric) {
      solution.inverse = solution.forward;
    } else if (!solveOn(problem.reversed, solution.inverse)) {
      return solution;
    }
  }
  return solution;
}

// ---- Lowering to the IR -------------------------------------------------------------------------

Algorithm emptyAlgorithm(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds) {
  Algorithm algorithm;
  algorithm.name =
      "sccl-" + std::to_string(chunks) + "c" + std::to_string(steps) + "s" + std::to_string(rounds) + "r";
  algorithm.sourceName = problem.topologyName;
  algorithm.collective = problem.collective;
  algorithm.nRanks = problem.n;
  algorithm.ranksPerNode = problem.n;
  algorithm.root = hasRoot(problem.collective) ? problem.root : -1;
  const int32_t k = problem.collective == Collective::AllToAll ? chunks / problem.n : chunks;
  algorithm.bufferChunks = conventionalBufferChunks(problem.collective, problem.n, k);
  return algorithm;
}

ChunkSlot at(BufferKind buffer, int32_t index) { return {buffer, index}; }

// AllGather: chunk c = owner × k + j starts in the owner's input j and lands in output c everywhere.
void lowerAllGather(ExactAlgorithmBuilder& builder, const Schedule& schedule, int32_t n, int32_t k) {
  for (int32_t owner = 0; owner < n; ++owner) {
    for (int32_t j = 0; j < k; ++j)
      builder.addLocalCopy(owner, at(BufferKind::Input, j), at(BufferKind::Output, owner * k + j), 0);
  }
  builder.addCopyPhase(
      schedule,
      [k](int32_t c, int32_t gpu) {
        return gpu == c / k ? at(BufferKind::Input, c % k) : at(BufferKind::Output, c);
      },
      0);
}

void lowerBroadcast(ExactAlgorithmBuilder& builder, const Schedule& schedule, int32_t root, int32_t chunks) {
  for (int32_t j = 0; j < chunks; ++j)
    builder.addLocalCopy(root, at(BufferKind::Input, j), at(BufferKind::Output, j), 0);
  builder.addCopyPhase(
      schedule,
      [root](int32_t c, int32_t gpu) { return at(gpu == root ? BufferKind::Input : BufferKind::Output, c); },
      0);
}

// AllToAll: chunk (src, dst, m) starts in src's input dst·k+m and ends in dst's output src·k+m;
// GPUs on the way keep it in scratch.
void lowerAllToAll(ExactAlgorithmBuilder& builder, Schedule schedule, int32_t n, int32_t k) {
  for (int32_t g = 0; g < n; ++g) {
    for (int32_t m = 0; m < k; ++m)
      builder.addLocalCopy(g, at(BufferKind::Input, g * k + m), at(BufferKind::Output, g * k + m), 0);
  }
  const std::vector<AllToAllChunk> chunks = allToAllChunks(n, k);
  dropDeadEnds(schedule, [&](int32_t c, int32_t gpu) { return gpu == chunks[c].dst; });
  builder.addCopyPhase(
      schedule,
      [&](int32_t c, int32_t gpu) {
        const AllToAllChunk& chunk = chunks[c];
        if (gpu == chunk.src) return at(BufferKind::Input, chunk.dst * k + chunk.index);
        if (gpu == chunk.dst) return at(BufferKind::Output, chunk.src * k + chunk.index);
        return builder.scratch(c, gpu);
      },
      0);
}

// ReduceScatter: contributions are input c = owner·k + j; the owner accumulates into its output j,
// other combining GPUs into scratch.
void lowerReduceScatter(ExactAlgorithmBuilder& builder, const Schedule& inverse, int32_t k) {
  builder.addReducePhase(
      inverse, [](int32_t c, int32_t) { return at(BufferKind::Input, c); },
      [&](int32_t c, int32_t gpu) {
        return gpu == c / k ? at(BufferKind::Output, c % k) : builder.scratch(c, gpu);
      },
      0);
}

void lowerReduce(ExactAlgorithmBuilder& builder, const Schedule& inverse, int32_t root) {
  builder.addReducePhase(
      inverse, [](int32_t c, int32_t) { return at(BufferKind::Input, c); },
      [&](int32_t c, int32_t gpu) {
        return gpu == root ? at(BufferKind::Output, c) : builder.scratch(c, gpu);
      },
      0);
}

// AllReduce: ReduceScatter into output c (the owner's is the full sum), then AllGather of output c.
void lowerAllReduce(ExactAlgorithmBuilder& builder, const BaseSolution& solution) {
  const int32_t next = builder.addReducePhase(
      solution.inverse, [](int32_t c, int32_t) { return at(BufferKind::Input, c); },
      [](int32_t c, int32_t) { return at(BufferKind::Output, c); }, 0);
  builder.addCopyPhase(
      solution.forward, [](int32_t c, int32_t) { return at(BufferKind::Output, c); }, next);
}

Expected<Algorithm> lowerSolution(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds,
                                  const BaseSolution& solution) {
  ExactAlgorithmBuilder builder(emptyAlgorithm(problem, chunks, steps, rounds));
  const int32_t n = problem.n;
  switch (problem.collective) {
    case Collective::AllGather:
      lowerAllGather(builder, solution.forward, n, chunks);
      break;
    case Collective::Broadcast:
      lowerBroadcast(builder, solution.forward, problem.root, chunks);
      break;
    case Collective::AllToAll:
      lowerAllToAll(builder, solution.forward, n, chunks / n);
      break;
    case Collective::ReduceScatter:
      lowerReduceScatter(builder, solution.inverse, chunks);
      break;
    case Collective::Reduce:
      lowerReduce(builder, solution.inverse, problem.root);
      break;
    case Collective::AllReduce:
      lowerAllReduce(builder, solution);
      break;
  }
  return proveGenerated(builder.take(), kProducer);
}

// One query at the collective's shape, with `seconds` left.
Expected<ParetoPoint> solvePoint(const Problem& problem, int32_t chunks, int32_t steps, int32_t rounds,
                                 double seconds) {
  const Reduction& r = problem.reduction;
  const BaseSolution solution =
      solveBase(problem, chunks / r.chunkFactor, steps / r.stepFactor, rounds / r.stepFactor, seconds);
  const std::string shape = shapeName(problem, chunks, steps, rounds);
  char spent[32];
  std::snprintf(spent, sizeof spent, "%.2f s", solution.seconds);
  if (solution.outcome == SolveOutcome::Unknown) {
    return makeError(ErrorCode::Timeout,
                     "Z3 gave up on " + shape + " after " + spent + ": " + solution.reason);
  }
  if (solution.outcome == SolveOutcome::Unsat) {
    return makeError(ErrorCode::NotFound, "no k-synchronous " + shape + " on " + problem.topologyName +
                                              " (unsatisfiable, " + spent + ")");
  }
  Expected<Algorithm> algorithm = lowerSolution(problem, chunks, steps, rounds, solution);
  if (!algorithm.ok()) return algorithm.status();
  return ParetoPoint{chunks, steps, rounds, solution.seconds, std::move(*algorithm)};
}

// ---- Pareto-Synthesize (SCCL Algorithm 1) -------------------------------------------------------

struct WalkBounds {
  int32_t minSteps = 0;      // base steps lower bound
  int32_t maxSteps = 0;      // base steps
  int32_t maxChunks = 0;     // base chunks
  RoundsPerChunk bandwidth;  // base R/C lower bound
};

WalkBounds walkBoundsOf(const Problem& problem, const ExactSynthesisOptions& options) {
  const Reduction& r = problem.reduction;
  const Demand unit = demandOf(r.base, problem.n, r.chunkUnit, problem.root);
  WalkBounds bounds;
  auto include = [&](const ExactTopology& links) {
    bounds.minSteps = std::max(bounds.minSteps, stepsLowerBound(links, unit));
    const RoundsPerChunk rpc = roundsPerChunkLowerBound(links, unit, r.chunkUnit);
    if (bounds.bandwidth < rpc) bounds.bandwidth = rpc;
  };
  if (r.forward) include(problem.links);
  if (r.inverse) include(problem.reversed);
  bounds.maxSteps = options.maxSteps > 0 ? options.maxSteps / r.stepFactor : bounds.minSteps + problem.n;
  bounds.maxChunks = options.maxChunks > 0 ? options.maxChunks / r.chunkFactor : 8 * r.chunkUnit;
  return bounds;
}

struct Candidate {
  int32_t chunks = 0, rounds = 0;  // base
  RoundsPerChunk rpc() const { return {rounds, chunks}; }
};

// (R, C) at base steps S with R in S..S+k, R/C at least the bound and below `best`, best first.
std::vector<Candidate> candidatesAt(int32_t steps, int32_t slack, const WalkBounds& bounds, int32_t unit,
                                    const std::optional<RoundsPerChunk>& best) {
  std::vector<Candidate> candidates;
  for (int32_t rounds = steps; rounds <= steps + slack; ++rounds) {
    for (int32_t chunks = unit; chunks <= bounds.maxChunks; chunks += unit) {
      const Candidate candidate{chunks, rounds};
      if (candidate.rpc() < bounds.bandwidth) continue;
      if (best && !(candidate.rpc() < *best)) continue;
      candidates.push_back(candidate);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.rpc() == b.rpc()) return a.chunks < b.chunks;
    return a.rpc() < b.rpc();
  });
  return candidates;
}

std::string formatRpc(RoundsPerChunk rpc) {
  const int64_t divisor = std::gcd(rpc.rounds, rpc.chunks);
  if (divisor > 1) rpc = {rpc.rounds / divisor, rpc.chunks / divisor};
  char text[64];
  std::snprintf(text, sizeof text, "%lld/%lld", static_cast<long long>(rpc.rounds),
                static_cast<long long>(rpc.chunks));
  return text;
}

class ParetoWalk {
 public:
  ParetoWalk(const Problem& problem, const ExactSynthesisOptions& options)
      : problem_(problem),
        options_(options),
        bounds_(walkBoundsOf(problem, options)),
        start_(std::chrono::steady_clock::now()) {}

  ParetoFrontier run() {
    const Reduction& r = problem_.reduction;
    const RoundsPerChunk bound{bounds_.bandwidth.rounds * r.stepFactor,
                               bounds_.bandwidth.chunks * r.chunkFactor};
    header_ = "steps >= " + std::to_string(bounds_.minSteps * r.stepFactor) + ", R/C >= " + formatRpc(bound) +
              ", k = " + std::to_string(options_.slack) +
              ", S <= " + std::to_string(bounds_.maxSteps * r.stepFactor) +
              ", C <= " + std::to_string(bounds_.maxChunks * r.chunkFactor);
    report("bounds: " + header_);
    for (int32_t steps = bounds_.minSteps; steps <= bounds_.maxSteps; ++steps) {
      // R >= S, so with C <= maxChunks no later point can beat the last one.
      if (best_ && !(RoundsPerChunk{steps, bounds_.maxChunks} < *best_)) {
        frontier_.complete = false;
        return finish("stopped at S = " + std::to_string(steps * r.stepFactor) +
                      ": with C <= " + std::to_string(bounds_.maxChunks * r.chunkFactor) +
                      " no more steps can lower R/C before it reaches its lower bound");
      }
      if (auto done = walkStep(steps)) return finish(*done);
    }
    frontier_.complete = false;
    return finish("stopped at the step limit before R/C reached its lower bound");
  }

 private:
  // The best point at `steps`; a reason to stop when the walk is over.
  std::optional<std::string> walkStep(int32_t steps) {
    const Reduction& r = problem_.reduction;
    noteChunkCap(steps);
    for (const Candidate& candidate : candidatesAt(steps, options_.slack, bounds_, r.chunkUnit, best_)) {
      const double left = options_.timeLimitSeconds - elapsed();
      const int32_t chunks = candidate.chunks * r.chunkFactor;
      const int32_t rounds = candidate.rounds * r.stepFactor;
      const int32_t fullSteps = steps * r.stepFactor;
      const std::string shape = shapeName(problem_, chunks, fullSteps, rounds);
      if (left <= 0) {
        frontier_.complete = false;
        return "time limit reached before " + shape;
      }
      Expected<ParetoPoint> point = solvePoint(problem_, chunks, fullSteps, rounds, left);
      if (!point.ok() && point.status().code() == ErrorCode::NotFound) {
        report(shape + ": unsat");
        continue;
      }
      if (!point.ok()) {
        frontier_.complete = false;
        return "cut short: " + point.status().message();
      }
      char line[96];
      std::snprintf(line, sizeof line, ": sat in %.2f s", point->seconds);
      report(shape + line);
      frontier_.points.push_back(std::move(*point));
      best_ = candidate.rpc();
      if (candidate.rpc() == bounds_.bandwidth) {
        if (capped_.empty()) return std::string("R/C reached its lower bound");
        frontier_.complete = false;
        return "R/C reached its lower bound, but " + capped_;
      }
      break;
    }
    return std::nullopt;
  }

  // Whether C <= maxChunks hides candidates at `steps` (R/C within the bounds with more chunks):
  // the walk then cannot claim the frontier complete.
  void noteChunkCap(int32_t steps) {
    const Reduction& r = problem_.reduction;
    if (!capped_.empty() || bounds_.bandwidth.rounds == 0) return;
    for (int32_t rounds = steps; rounds <= steps + options_.slack; ++rounds) {
      // The most chunks R/C >= the bound allows at these rounds, in whole units.
      const int64_t most =
          rounds * bounds_.bandwidth.chunks / bounds_.bandwidth.rounds / r.chunkUnit * r.chunkUnit;
      if (most <= bounds_.maxChunks || (best_ && !(RoundsPerChunk{rounds, most} < *best_))) continue;
      capped_ = "C <= " + std::to_string(bounds_.maxChunks * r.chunkFactor) +
                " left out candidates at S = " + std::to_string(steps * r.stepFactor);
      return;
    }
  }

  ParetoFrontier finish(const std::string& why) {
    frontier_.note = header_ + "; " + why;
    report(frontier_.note);
    return std::move(frontier_);
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  void report(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }

  const Problem& problem_;
  const ExactSynthesisOptions& options_;
  const WalkBounds bounds_;
  const std::chrono::steady_clock::time_point start_;
  std::optional<RoundsPerChunk> best_;
  std::string header_;
  std::string capped_;  // set once C <= maxChunks hid a candidate
  ParetoFrontier frontier_;
};

}  // namespace

Expected<ParetoFrontier> paretoSynthesize(const Topology& topology, Collective collective,
                                          const ExactSynthesisOptions& options) {
  Expected<Problem> problem = problemOf(topology, collective, options);
  if (!problem.ok()) return problem.status();
  return ParetoWalk(*problem, options).run();
}

Expected<ParetoPoint> synthesizeExact(const Topology& topology, Collective collective, int32_t chunks,
                                      int32_t steps, int32_t rounds, const ExactSynthesisOptions& options) {
  Expected<Problem> problem = problemOf(topology, collective, options);
  if (!problem.ok()) return problem.status();
  if (Status shape = checkShape(*problem, chunks, steps, rounds); !shape.ok()) return shape;
  return solvePoint(*problem, chunks, steps, rounds, options.timeLimitSeconds);
}

}  // namespace tuccl
