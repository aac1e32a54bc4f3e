#include "synth/exact_encoding.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace tuccl {

namespace {

bool contains(const std::vector<int32_t>& gpus, int32_t gpu) {
  return std::find(gpus.begin(), gpus.end(), gpu) != gpus.end();
}

// The formula of one (S, R) instance and the handles needed to read a model back.
class ScheduleEncoding {
 public:
  ScheduleEncoding(z3::context& ctx, const ExactTopology& topology, const Demand& demand, int32_t steps,
                   int32_t rounds)
      : ctx_(ctx), topology_(topology), demand_(demand), steps_(steps), rounds_(rounds), never_(steps + 1) {}

  void encode(z3::solver& solver) {
    declareRounds(solver);
    declareTimes(solver);
    declareSends(solver);
    addArrivals(solver);
    addBandwidth(solver);
    breakChunkSymmetry(solver);
  }

  Schedule read(const z3::model& model) const {
    Schedule schedule;
    schedule.steps = steps_;
    for (const z3::expr_vector& options : roundIs_) {
      int32_t value = 1;
      for (unsigned v = 0; v < options.size(); ++v) {
        if (model.eval(options[v], true).is_true()) value = static_cast<int32_t>(v) + 1;
      }
      schedule.rounds.push_back(value);
    }
    const int32_t n = topology_.nGpus;
    for (size_t c = 0; c < demand_.chunks.size(); ++c) {
      std::vector<int32_t> time(n, -1);
      std::vector<int32_t> from(n, -1);
      for (int32_t gpu = 0; gpu < n; ++gpu) {
        const int32_t t = model.eval(time_[c][gpu], true).get_numeral_int();
        time[gpu] = t > steps_ ? -1 : t;
        for (int32_t src = 0; src < n; ++src) {
          const auto& send = sends_[c][src][gpu];
          if (send && model.eval(*send, true).is_true()) from[gpu] = src;
        }
      }
      schedule.time.push_back(std::move(time));
      schedule.from.push_back(std::move(from));
    }
    return schedule;
  }

 private:
  // k-synchronous (SCCL): every step takes r_s >= 1 rounds, R in all. r_s is one-hot over
  // 1..R-S+1 (roundIs_[s][v-1]: r_{s+1} = v), so each bandwidth bound stays a pseudo-Boolean
  // constraint under an implication instead of a sum compared with a product of integers.
  void declareRounds(z3::solver& solver) {
    const int32_t widest = rounds_ - steps_ + 1;
    z3::expr_vector all(ctx_);
    std::vector<int> weights;
    for (int32_t s = 1; s <= steps_; ++s) {
      z3::expr_vector options(ctx_);
      for (int32_t v = 1; v <= widest; ++v) {
        z3::expr is = ctx_.bool_const(("r_" + std::to_string(s) + "_is_" + std::to_string(v)).c_str());
        options.push_back(is);
        all.push_back(is);
        weights.push_back(v);
      }
      solver.add(z3::pbeq(options, std::vector<int>(options.size(), 1).data(), 1));
      roundIs_.push_back(options);
    }
    solver.add(z3::pbeq(all, weights.data(), rounds_));
  }

  // Besides SCCL's domain 1..S (S+1 = never for GPUs outside post), two implied bounds that prune
  // without losing a solution: a chunk reaches a GPU no sooner than its hop distance from the
  // nearest pre GPU, and a GPU outside post that gets a chunk must be able to pass it on to post
  // in time (else dropping that delivery leaves a solution that uses less bandwidth).
  void declareTimes(z3::solver& solver) {
    const int32_t n = topology_.nGpus;
    const auto distances = hopDistances(topology_);
    auto nearest = [&](const std::vector<int32_t>& gpus, int32_t gpu, bool towards) {
      int32_t best = never_;
      for (int32_t other : gpus) {
        const int32_t d = towards ? distances[gpu][other] : distances[other][gpu];
        if (d >= 0) best = std::min(best, d);
      }
      return best;
    };
    for (size_t c = 0; c < demand_.chunks.size(); ++c) {
      const ChunkDemand& chunk = demand_.chunks[c];
      std::vector<z3::expr> times;
      for (int32_t gpu = 0; gpu < n; ++gpu) {
        if (contains(chunk.pre, gpu)) {
          times.push_back(ctx_.int_val(0));
          continue;
        }
        z3::expr t = ctx_.int_const(("time_" + std::to_string(c) + "_" + std::to_string(gpu)).c_str());
        solver.add(t >= std::max(1, nearest(chunk.pre, gpu, /*towards=*/false)));
        if (contains(chunk.post, gpu)) {
          solver.add(t <= steps_);
        } else {
          solver.add(t <= never_);
          solver.add(t <= steps_ - nearest(chunk.post, gpu, /*towards=*/true) || t == never_);
        }
        times.push_back(t);
      }
      time_.push_back(std::move(times));
    }
  }

  // snd[src][c][dst] exists only where a link runs and dst does not start with the chunk.
  void declareSends(z3::solver& solver) {
    const int32_t n = topology_.nGpus;
    sends_.assign(demand_.chunks.size(), std::vector<std::vector<std::optional<z3::expr>>>(
                                             n, std::vector<std::optional<z3::expr>>(n)));
    for (size_t c = 0; c < demand_.chunks.size(); ++c) {
      for (int32_t src = 0; src < n; ++src) {
        for (int32_t dst = 0; dst < n; ++dst) {
          if (!topology_.hasLink(src, dst) || contains(demand_.chunks[c].pre, dst)) continue;
          z3::expr send = ctx_.bool_const(
              ("snd_" + std::to_string(src) + "_" + std::to_string(c) + "_" + std::to_string(dst)).c_str());
          // Causality: the sender holds the chunk strictly before the step that delivers it, and a
          // chunk that is never delivered is never sent.
          solver.add(z3::implies(send, time_[c][src] < time_[c][dst]));
          solver.add(z3::implies(send, time_[c][dst] <= steps_));
          sends_[c][src][dst] = send;
        }
      }
    }
  }

  // A GPU that does not start with a chunk but holds it by step S got it from exactly one sender.
  void addArrivals(z3::solver& solver) {
    const int32_t n = topology_.nGpus;
    for (size_t c = 0; c < demand_.chunks.size(); ++c) {
      for (int32_t dst = 0; dst < n; ++dst) {
        if (contains(demand_.chunks[c].pre, dst)) continue;
        z3::expr_vector senders(ctx_);
        for (int32_t src = 0; src < n; ++src) {
          if (sends_[c][src][dst]) senders.push_back(*sends_[c][src][dst]);
        }
        if (senders.empty()) {
          solver.add(time_[c][dst] == never_);
          continue;
        }
        solver.add(z3::atmost(senders, 1));
        solver.add(z3::implies(time_[c][dst] <= steps_, z3::atleast(senders, 1)));
      }
    }
  }

  // The chunks that cross link (src, dst) in step s.
  void collectCrossings(int32_t src, int32_t dst, int32_t step, z3::expr_vector& out) const {
    for (size_t c = 0; c < demand_.chunks.size(); ++c) {
      if (sends_[c][src][dst]) out.push_back(*sends_[c][src][dst] && time_[c][dst] == step);
    }
  }

  void addLimit(z3::solver& solver, const z3::expr_vector& crossings, int32_t chunksPerRound, int32_t step) {
    const z3::expr_vector& options = roundIs_[step - 1];
    for (unsigned v = 0; v < options.size(); ++v) {
      const int32_t limit = chunksPerRound * static_cast<int32_t>(v + 1);
      if (static_cast<int32_t>(crossings.size()) <= limit) continue;
      if (options.size() == 1) {
        solver.add(z3::atmost(crossings, static_cast<unsigned>(limit)));
      } else {
        solver.add(z3::implies(options[v], z3::atmost(crossings, static_cast<unsigned>(limit))));
      }
    }
  }

  // Per step, link and bandwidth group: chunks sent <= chunks per round × the step's rounds.
  void addBandwidth(z3::solver& solver) {
    const int32_t n = topology_.nGpus;
    for (int32_t step = 1; step <= steps_; ++step) {
      for (int32_t src = 0; src < n; ++src) {
        for (int32_t dst = 0; dst < n; ++dst) {
          if (!topology_.hasLink(src, dst)) continue;
          z3::expr_vector crossings(ctx_);
          collectCrossings(src, dst, step, crossings);
          addLimit(solver, crossings, topology_.capacity[src][dst], step);
        }
      }
      for (const BandwidthGroup& group : topology_.groups) {
        z3::expr_vector crossings(ctx_);
        for (auto [src, dst] : group.links) collectCrossings(src, dst, step, crossings);
        addLimit(solver, crossings, group.chunksPerRound, step);
      }
    }
  }

  // Chunks with the same pre and post are interchangeable: swapping two of them in a solution
  // gives another. Ordering consecutive ones by their arrival at one GPU that needs them keeps one
  // solution of each swap class, so UNSAT proofs need not try every permutation.
  void breakChunkSymmetry(z3::solver& solver) {
    for (size_t c = 0; c + 1 < demand_.chunks.size(); ++c) {
      const ChunkDemand& a = demand_.chunks[c];
      const ChunkDemand& b = demand_.chunks[c + 1];
      if (a.pre != b.pre || a.post != b.post) continue;
      for (int32_t gpu : a.post) {
        if (contains(a.pre, gpu)) continue;
        solver.add(time_[c][gpu] <= time_[c + 1][gpu]);
        break;
      }
    }
  }

  z3::context& ctx_;
  const ExactTopology& topology_;
  const Demand& demand_;
  const int32_t steps_;
  const int32_t rounds_;
  const int32_t never_;
  std::vector<z3::expr_vector> roundIs_;
  std::vector<std::vector<z3::expr>> time_;
  std::vector<std::vector<std::vector<std::optional<z3::expr>>>> sends_;
};

}  // namespace

SolveResult solveSchedule(const ExactTopology& topology, const Demand& demand, int32_t steps, int32_t rounds,
                          double timeLimitSeconds) {
  SolveResult result;
  if (steps < 1 || rounds < steps) {
    result.outcome = SolveOutcome::Unsat;
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    z3::context ctx;
    z3::solver solver(ctx);
    z3::params params(ctx);
    // Fixed seeds: the same query gives the same model on every run.
    params.set("random_seed", 0u);
    const double ms = std::clamp(timeLimitSeconds * 1000.0, 1.0, 4.0e9);
    params.set("timeout", static_cast<unsigned>(ms));
    solver.set(params);
    ScheduleEncoding encoding(ctx, topology, demand, steps, rounds);
    encoding.encode(solver);
    switch (solver.check()) {
      case z3::sat:
        result.outcome = SolveOutcome::Sat;
        result.schedule = encoding.read(solver.get_model());
        break;
      case z3::unsat:
        result.outcome = SolveOutcome::Unsat;
        break;
      case z3::unknown:
        result.outcome = SolveOutcome::Unknown;
        result.reason = solver.reason_unknown();
        break;
    }
  } catch (const z3::exception& error) {
    result.outcome = SolveOutcome::Unknown;
    result.reason = std::string("Z3: ") + error.msg();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

int32_t stepsLowerBound(const ExactTopology& topology, const Demand& demand) {
  const auto distances = hopDistances(topology);
  int32_t bound = 0;
  for (const ChunkDemand& chunk : demand.chunks) {
    for (int32_t dst : chunk.post) {
      int32_t nearest = -1;
      for (int32_t src : chunk.pre) {
        const int32_t d = distances[src][dst];
        if (d >= 0 && (nearest < 0 || d < nearest)) nearest = d;
      }
      bound = std::max(bound, nearest);
    }
  }
  return bound;
}

RoundsPerChunk roundsPerChunkLowerBound(const ExactTopology& topology, const Demand& demand,
                                        int32_t chunkUnits) {
  RoundsPerChunk bound{0, 1};
  const uint32_t sets = 1u << topology.nGpus;
  for (uint32_t inside = 1; inside + 1 < sets; ++inside) {
    auto in = [&](int32_t gpu) { return ((inside >> gpu) & 1u) != 0; };
    int64_t entering = 0;
    for (const ChunkDemand& chunk : demand.chunks) {
      const bool startsOutside = std::none_of(chunk.pre.begin(), chunk.pre.end(), in);
      const bool neededInside = std::any_of(chunk.post.begin(), chunk.post.end(), in);
      if (startsOutside && neededInside) ++entering;
    }
    if (entering == 0) continue;
    const int64_t capacity = cutCapacity(topology, inside);
    if (capacity == 0) continue;  // unreachable sets are refused earlier (exactTopologyOf)
    const RoundsPerChunk candidate{entering, capacity * chunkUnits};
    if (bound < candidate) bound = candidate;
  }
  return bound;
}

}  // namespace tuccl
