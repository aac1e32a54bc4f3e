#include "synth/sketch_synthesis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "synth/proved.h"
#include "synth/sketch_routing.h"
#include "synth/sketch_schedule.h"

namespace tuccl {

std::string_view sketchSynthesisMethodName(SketchSynthesisMethod method) {
  return method == SketchSynthesisMethod::Milp ? "milp" : "heuristic";
}

std::string_view hyperedgePolicyName(HyperedgePolicy policy) {
  return policy == HyperedgePolicy::UcMin ? "uc-min" : "uc-max";
}

std::optional<HyperedgePolicy> parseHyperedgePolicy(std::string_view name) {
  if (name == "uc-min") return HyperedgePolicy::UcMin;
  if (name == "uc-max") return HyperedgePolicy::UcMax;
  return std::nullopt;
}

namespace {

using namespace sketch_synth;
using Clock = std::chrono::steady_clock;

// Beyond this many routed chunks the algorithm is too big to hand to the scheduler.
constexpr int64_t kMaxCommodities = 1 << 18;

bool rooted(Collective collective) {
  return collective == Collective::Broadcast || collective == Collective::Reduce;
}

Status checkOptions(Collective collective, const Topology& topology, const SketchSynthesisOptions& options) {
  auto invalid = [](std::string message) { return makeError(ErrorCode::InvalidArgument, std::move(message)); };
  int32_t n = topology.nRanks();
  if (n == 0) return invalid("sketch synthesis: the topology has no GPUs");
  if (options.chunksPerRank < 1) {
    return invalid("sketch synthesis: chunksPerRank must be at least 1, got " + std::to_string(options.chunksPerRank));
  }
  if (rooted(collective) && (options.root < 0 || options.root >= n)) {
    return invalid("sketch synthesis: root " + std::to_string(options.root) + " is out of range [0, " +
                   std::to_string(n) + ")");
  }
  if (!(options.timeLimitSeconds > 0) || !std::isfinite(options.timeLimitSeconds)) {
    return invalid("sketch synthesis: timeLimitSeconds must be a positive number of seconds");
  }
  if (!(options.chunkBytes > 0) || !std::isfinite(options.chunkBytes)) {
    return invalid("sketch synthesis: chunkBytes must be positive");
  }
  const LinkCharges& charges = options.charges;
  for (auto [name, value] : {std::pair{"tbGBps", charges.tbGBps}, std::pair{"networkTbGBps", charges.networkTbGBps},
                             std::pair{"contentionGamma", charges.contentionGamma}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return invalid(std::string("sketch synthesis: charges.") + name + " must be a finite number >= 0 (0: none)");
    }
  }
  if (!(charges.contentionFloor >= 0 && charges.contentionFloor <= 1)) {
    return invalid("sketch synthesis: charges.contentionFloor must be between 0 and 1");
  }
  if (collective == Collective::AllToAll && options.inPlace) {
    return invalid("sketch synthesis: in-place AllToAll is not supported (a rank's slots would be "
                   "overwritten before they are sent)");
  }
  int64_t commodities = static_cast<int64_t>(n) * options.chunksPerRank * (collective == Collective::AllToAll ? n : 1);
  if (commodities > kMaxCommodities) {
    return invalid("sketch synthesis: " + std::to_string(commodities) + " chunks to route exceed the limit of " +
                   std::to_string(kMaxCommodities) + "; lower chunksPerRank");
  }
  return Status();
}

// What the routing works on: AllGather-shaped trees for every collective but AllToAll (unicast
// paths); Broadcast and Reduce route the root's chunks only, without symmetry.
struct RoutedChunks {
  Symmetry symmetry;
  std::vector<Commodity> all;        // canonical order
  std::vector<Commodity> representatives;
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> indexOf;  // (source, part, dest) -> all[]
};

RoutedChunks chunksToRoute(Collective collective, int32_t n, const SketchSynthesisOptions& options,
                           Symmetry symmetry) {
  RoutedChunks chunks;
  int32_t k = options.chunksPerRank;
  if (rooted(collective)) {
    chunks.symmetry = trivialSymmetry(n);
    for (int32_t p = 0; p < k; ++p) chunks.all.push_back({options.root, p, -1});
  } else {
    chunks.symmetry = std::move(symmetry);
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t t = 0; t < (collective == Collective::AllToAll ? n : 1); ++t) {
        for (int32_t p = 0; p < k; ++p) {
          if (collective != Collective::AllToAll) {
            chunks.all.push_back({s, p, -1});
          } else if (s != t) {
            chunks.all.push_back({s, p, t});
          }
        }
      }
    }
  }
  for (size_t i = 0; i < chunks.all.size(); ++i) {
    const Commodity& c = chunks.all[i];
    chunks.indexOf[{c.source, c.part, c.dest}] = static_cast<int32_t>(i);
  }
  // Representatives: the commodities of the first source of every orbit of ranks.
  std::vector<bool> covered(n, false);
  for (int32_t r = 0; r < n; ++r) {
    if (covered[r]) continue;
    for (const std::vector<int32_t>& perm : chunks.symmetry.perms) covered[perm[r]] = true;
    for (const Commodity& c : chunks.all) {
      if (c.source == r) chunks.representatives.push_back(c);
    }
  }
  return chunks;
}

// Every commodity's route: each representative's carried through every symmetric image.
std::vector<Route> replicateRoutes(const RoutedChunks& chunks, const std::vector<Route>& routes, int32_t n) {
  std::vector<Route> all(chunks.all.size());
  for (size_t i = 0; i < chunks.representatives.size(); ++i) {
    const Commodity& rep = chunks.representatives[i];
    for (const std::vector<int32_t>& perm : chunks.symmetry.perms) {
      int32_t dest = rep.dest < 0 ? -1 : perm[rep.dest];
      int32_t index = chunks.indexOf.at({perm[rep.source], rep.part, dest});
      if (!all[index].empty()) continue;
      Route image(n, -1);
      for (int32_t v = 0; v < n; ++v) {
        if (routes[i][v] >= 0) image[perm[v]] = perm[routes[i][v]];
      }
      all[index] = std::move(image);
    }
  }
  return all;
}

Status checkConnected(const LogicalGraph& graph, const std::vector<Commodity>& representatives,
                      HyperedgePolicy policy) {
  for (const Commodity& c : representatives) {
    std::vector<int32_t> level = hopLevels(graph, c.source);
    for (int32_t v = 0; v < graph.nRanks; ++v) {
      if ((c.dest < 0 || c.dest == v) && level[v] < 0) {
        return makeError(ErrorCode::InvalidArgument,
                         "sketch synthesis: the sketch (with the " + std::string(hyperedgePolicyName(policy)) +
                             " hyperedge policy) has no path from rank " + std::to_string(c.source) +
                             " to rank " + std::to_string(v));
      }
    }
  }
  return Status();
}

// One direction of routing: the logical graph (transposed for reductions), the chunks, how they
// were routed, and every chunk's route.
struct RoutedPhase {
  LogicalGraph graph;
  RoutedChunks chunks;
  RoutingOutcome routing;
  std::vector<Route> routes;  // per chunk of chunks.all
};

// Lowering the routed, ordered chunks to operations, per collective: `spreading` carries chunks
// out of their sources (copies), `gathering` into them (reduces, the transposed graph's trees).
class Lowering {
 public:
  Lowering(Collective collective, const SketchSynthesisOptions& options, const RoutedPhase* spreading,
           const RoutedPhase* gathering)
      : collective_(collective), options_(options), spreading_(spreading), gathering_(gathering),
        chunks_((spreading ? spreading : gathering)->chunks), nRanks_(static_cast<int32_t>(chunks_.symmetry.perms[0].size())),
        k_(options.chunksPerRank), scratchNext_(nRanks_, 0) {
    for (const Commodity& c : chunks_.all) sources_.push_back(c.source);
  }

  std::vector<Operation> lower(int32_t& scratch) {
    switch (collective_) {
      case Collective::AllGather:
      case Collective::Broadcast:
      case Collective::AllToAll:
        spread(0, false);
        break;
      case Collective::ReduceScatter:
      case Collective::Reduce:
        gather();
        break;
      case Collective::AllReduce:
        spread(gather() + 1, true);
        break;
    }
    scratch = *std::max_element(scratchNext_.begin(), scratchNext_.end());
    return mergeContiguous(std::move(ops_));
  }

 private:
  // Where commodity c lives on rank r once it has arrived (the spreading direction).
  Slot heldAt(int32_t c, int32_t r) {
    const Commodity& chunk = chunks_.all[c];
    switch (collective_) {
      case Collective::AllGather:
      case Collective::AllReduce:
        return {BufferKind::Output, chunk.source * k_ + chunk.part};
      case Collective::AllToAll:
        return r == chunk.dest ? Slot{BufferKind::Output, chunk.source * k_ + chunk.part} : scratchOf(c, r);
      default:
        return {BufferKind::Output, chunk.part};
    }
  }
  // Where the spreading source reads commodity c.
  Slot sourceSlot(int32_t c, bool afterReduction) {
    const Commodity& chunk = chunks_.all[c];
    if (afterReduction) return heldAt(c, chunk.source);
    if (collective_ == Collective::AllToAll) return {BufferKind::Input, chunk.dest * k_ + chunk.part};
    return {BufferKind::Input, chunk.part};
  }
  Slot scratchOf(int32_t c, int32_t r) {
    auto [it, fresh] = scratchSlot_.try_emplace({c, r}, scratchNext_[r]);
    if (fresh) ++scratchNext_[r];
    return {BufferKind::Scratch, it->second};
  }
  void emit(int32_t from, Slot src, int32_t to, Slot dst, int32_t step, OpKind kind) {
    ops_.push_back({.srcRank = from, .srcIndex = src.index, .dstRank = to, .dstIndex = dst.index, .step = step,
                    .srcBuffer = src.buffer, .dstBuffer = dst.buffer, .kind = kind});
  }

  std::vector<ScheduledSend> order(const RoutedPhase& phase, bool oneChildPerStep, bool afterReduction) {
    OrderingInput input{.graph = &phase.graph, .routes = &phase.routes, .sources = &sources_};
    input.oneChildPerStep = oneChildPerStep;
    input.endpoints = [this, afterReduction](int32_t c, int32_t from, int32_t to) {
      Slot src = from == chunks_.all[c].source ? sourceSlot(c, afterReduction) : heldAt(c, from);
      return std::make_pair(src, heldAt(c, to));
    };
    return orderSends(input);
  }

  // AllGather, Broadcast, AllToAll, and AllReduce's second half: copies along the routes.
  void spread(int32_t firstStep, bool afterReduction) {
    if (!afterReduction && !options_.inPlace) copyOwnChunks();
    for (const ScheduledSend& send : order(*spreading_, false, afterReduction)) {
      int32_t c = send.commodity;
      Slot src = send.from == sources_[c] ? sourceSlot(c, afterReduction) : heldAt(c, send.from);
      emit(send.from, src, send.to, heldAt(c, send.to), firstStep + send.step, OpKind::Copy);
    }
  }

  // Each rank's own chunks, from input to output, at step 0 (out of place only).
  void copyOwnChunks() {
    int32_t n = nRanks_;
    if (collective_ == Collective::AllGather) {
      for (int32_t r = 0; r < n; ++r) {
        for (int32_t p = 0; p < k_; ++p) emit(r, {BufferKind::Input, p}, r, {BufferKind::Output, r * k_ + p}, 0, OpKind::Copy);
      }
    } else if (collective_ == Collective::AllToAll) {
      for (int32_t r = 0; r < n; ++r) {
        for (int32_t p = 0; p < k_; ++p) {
          emit(r, {BufferKind::Input, r * k_ + p}, r, {BufferKind::Output, r * k_ + p}, 0, OpKind::Copy);
        }
      }
    } else {
      for (int32_t p = 0; p < k_; ++p) emit(options_.root, {BufferKind::Input, p}, options_.root, {BufferKind::Output, p}, 0, OpKind::Copy);
    }
  }

  // ReduceScatter, Reduce, and AllReduce's first half: the spreading schedule reversed, each rank
  // combining its children's partial sums into its own before passing it up. Returns the last step.
  int32_t gather() {
    const std::vector<Route>& routes = gathering_->routes;
    std::vector<ScheduledSend> sends = order(*gathering_, true, false);
    int32_t last = 0;
    for (const ScheduledSend& send : sends) last = std::max(last, send.step);
    std::vector<std::vector<bool>> inner(chunks_.all.size());
    for (size_t c = 0; c < routes.size(); ++c) {
      inner[c].assign(nRanks_, false);
      for (int32_t v = 0; v < nRanks_; ++v) {
        if (routes[c][v] >= 0) inner[c][routes[c][v]] = true;
      }
    }
    auto contribution = [&](int32_t c) {
      const Commodity& chunk = chunks_.all[c];
      return Slot{BufferKind::Input, collective_ == Collective::Reduce ? chunk.part : chunk.source * k_ + chunk.part};
    };
    auto accumulator = [&](int32_t c, int32_t r) {
      const Commodity& chunk = chunks_.all[c];
      if (r != chunk.source) return scratchOf(c, r);
      return Slot{BufferKind::Output, collective_ == Collective::AllReduce ? chunk.source * k_ + chunk.part : chunk.part};
    };
    for (size_t c = 0; c < routes.size(); ++c) {
      int32_t ci = static_cast<int32_t>(c);
      for (int32_t r = 0; r < nRanks_; ++r) {
        bool root = r == sources_[c];
        if ((root && !options_.inPlace) || (!root && inner[c][r])) {
          emit(r, contribution(ci), r, accumulator(ci, r), 0, OpKind::Copy);
        }
      }
    }
    for (const ScheduledSend& send : sends) {
      int32_t c = send.commodity;
      Slot src = inner[c][send.to] ? accumulator(c, send.to) : contribution(c);
      emit(send.to, src, send.from, accumulator(c, send.from), 1 + last - send.step, OpKind::Reduce);
    }
    return 1 + last;
  }

  Collective collective_;
  const SketchSynthesisOptions& options_;
  const RoutedPhase* spreading_;
  const RoutedPhase* gathering_;
  const RoutedChunks& chunks_;
  int32_t nRanks_;
  int32_t k_;
  std::vector<int32_t> sources_;
  std::vector<int32_t> scratchNext_;
  std::map<std::pair<int32_t, int32_t>, int32_t> scratchSlot_;
  std::vector<Operation> ops_;
};

std::string fixed(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

Algorithm algorithmShell(Collective collective, const Topology& topology, const SketchSynthesisOptions& options,
                         SketchSynthesisMethod method) {
  Algorithm algorithm;
  algorithm.name = "sketch-" + std::string(sketchSynthesisMethodName(method)) + "-" +
                   std::string(collectiveName(collective));
  algorithm.sourceName = "<sketch synthesis>";
  algorithm.collective = collective;
  algorithm.nRanks = topology.nRanks();
  int32_t perNode = maxGpusPerNode(topology);
  bool equalNodes = perNode * topology.nNodes() == topology.nRanks();
  algorithm.ranksPerNode = equalNodes ? perNode : 0;
  algorithm.nicsPerNode = equalNodes ? static_cast<int32_t>(nicsOfNode(topology, 0).size()) : 0;
  algorithm.root = rooted(collective) ? options.root : -1;
  algorithm.inPlace = options.inPlace;
  return algorithm;
}

}  // namespace

namespace {

// Routes the collective's chunks over the sketch (transposed for the gathering direction) by the
// MILP or the heuristic, and carries the representatives' routes to every chunk.
Expected<RoutedPhase> routePhase(Collective collective, const Topology& topology, const Sketch& sketch,
                                 const SketchSynthesisOptions& options, bool transposed, Clock::time_point deadline) {
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  Expected<LogicalGraph> graph =
      buildLogicalGraph(topology, sketch, options.hyperedgePolicy, options.chunkBytes, transposed, options.charges);
  if (!graph.ok()) return graph.status();
  int32_t n = topology.nRanks();
  RoutedPhase phase{.graph = std::move(*graph)};
  phase.chunks = chunksToRoute(collective, n, options, findSymmetry(topology, sketch, phase.graph));
  if (Status connected = checkConnected(phase.graph, phase.chunks.representatives, options.hyperedgePolicy);
      !connected.ok()) {
    return connected;
  }
  say(std::string(transposed ? "gathering" : "spreading") + " graph: " + std::to_string(phase.graph.edges.size()) +
      " edges (" + std::string(hyperedgePolicyName(options.hyperedgePolicy)) + "); " +
      std::to_string(phase.chunks.representatives.size()) + " of " + std::to_string(phase.chunks.all.size()) +
      " chunks routed, " + phase.chunks.symmetry.description);
  RoutingProblem problem{.graph = &phase.graph, .symmetry = &phase.chunks.symmetry,
                         .representatives = phase.chunks.representatives,
                         .maxNetworkConnections = options.maxNetworkConnections,
                         .sameLevelRelays = options.sameLevelRelays};
  if (options.heuristicOnly) {
    phase.routing = routeHeuristic(problem);
    phase.routing.notes.push_back("heuristic routing requested");
  } else {
    phase.routing = routeMilp(problem, deadline, options.progress);
  }
  phase.routing.notes.insert(phase.routing.notes.begin(), "symmetry: " + phase.chunks.symmetry.description);
  phase.routes = replicateRoutes(phase.chunks, phase.routing.routes, n);
  return phase;
}

// AllReduce routes twice; the first routing may use half of what is left.
Clock::time_point halfwayTo(Clock::time_point deadline) {
  Clock::time_point now = Clock::now();
  return deadline <= now ? deadline : now + (deadline - now) / 2;
}

}  // namespace

namespace {

Expected<SketchSynthesisResult> synthesizeOnce(Collective collective, const Topology& topology, const Sketch& sketch,
                                               const SketchSynthesisOptions& options) {
  Clock::time_point start = Clock::now();
  if (Status valid = checkOptions(collective, topology, options); !valid.ok()) return valid;
  Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                  std::min(options.timeLimitSeconds, 1e7)));
  bool gathers = collective == Collective::ReduceScatter || collective == Collective::Reduce ||
                 collective == Collective::AllReduce;
  bool spreads = collective != Collective::ReduceScatter && collective != Collective::Reduce;
  std::optional<RoutedPhase> gathering, spreading;
  if (gathers) {
    Expected<RoutedPhase> phase =
        routePhase(collective, topology, sketch, options, true, spreads ? halfwayTo(deadline) : deadline);
    if (!phase.ok()) return phase.status();
    gathering = std::move(*phase);
  }
  if (spreads) {
    Expected<RoutedPhase> phase = routePhase(collective, topology, sketch, options, false, deadline);
    if (!phase.ok()) return phase.status();
    spreading = std::move(*phase);
  }

  SketchSynthesisResult result;
  result.method = SketchSynthesisMethod::Milp;
  auto absorb = [&](const std::optional<RoutedPhase>& phase, const std::string& prefix) {
    if (!phase) return;
    if (phase->routing.method == SketchSynthesisMethod::Heuristic) result.method = SketchSynthesisMethod::Heuristic;
    result.modelTimeUs += phase->routing.modelTimeUs;
    for (const std::string& note : phase->routing.notes) result.notes.push_back(prefix + note);
  };
  absorb(gathering, gathers && spreads ? "reduce-scatter half: " : "");
  absorb(spreading, gathers && spreads ? "all-gather half: " : "");

  Algorithm algorithm = algorithmShell(collective, topology, options, result.method);
  int32_t scratch = 0;
  algorithm.ops = Lowering(collective, options, spreading ? &*spreading : nullptr, gathering ? &*gathering : nullptr)
                      .lower(scratch);
  int32_t n = topology.nRanks();
  int32_t unit = collective == Collective::AllReduce ? n * options.chunksPerRank : options.chunksPerRank;
  algorithm.bufferChunks = conventionalBufferChunks(collective, n, unit, scratch);
  if (options.progress) {
    options.progress("ordered: " + std::to_string(algorithm.ops.size()) + " operations in " +
                     std::to_string(algorithm.maxStep() + 1) + " steps, modelled " + fixed(result.modelTimeUs) +
                     " us");
  }

  Expected<Algorithm> proved = proveGenerated(std::move(algorithm), "sketch synthesis");
  if (!proved.ok()) return proved.status();
  result.algorithm = std::move(*proved);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace

Expected<SketchSynthesisResult> synthesizeFromSketch(Collective collective, const Topology& topology,
                                                     const Sketch& sketch, const SketchSynthesisOptions& options) {
  if (!options.judge || options.heuristicOnly) return synthesizeOnce(collective, topology, sketch, options);
  // The modelled objective checked against the engine: the MILP's routing, the heuristic's, and
  // the heuristic's under budgets of inter-node connections (contention the MILP cannot weigh),
  // each simulated, the fastest kept (the first on a tie or when none can be simulated).
  Clock::time_point start = Clock::now();
  struct Tried {
    std::string name;
    SketchSynthesisResult result;
    std::optional<double> us;
  };
  std::vector<Tried> tried;
  Expected<SketchSynthesisResult> milp = synthesizeOnce(collective, topology, sketch, options);
  if (!milp.ok()) return milp;
  tried.push_back({milp->method == SketchSynthesisMethod::Milp ? "MILP" : "its", std::move(*milp), std::nullopt});
  for (bool sameLevel : {false, true}) {
    for (int32_t budget : {0, 1, 2, 4}) {
      if (budget > 0 && options.maxNetworkConnections > 0) break;  // the caller's budget holds
      SketchSynthesisOptions quick = options;
      quick.heuristicOnly = true;
      quick.sameLevelRelays = sameLevel || options.sameLevelRelays;
      if (budget > 0) quick.maxNetworkConnections = budget;
      Expected<SketchSynthesisResult> heuristic = synthesizeOnce(collective, topology, sketch, quick);
      if (!heuristic.ok()) return heuristic;
      std::string how;
      if (budget > 0) how = std::to_string(budget) + " connection" + (budget > 1 ? "s" : "") + " per node";
      if (sameLevel) how += std::string(how.empty() ? "" : ", ") + "same-level relays";
      std::string name = how.empty() ? "heuristic" : "heuristic (" + how + ")";
      bool same = std::any_of(tried.begin(), tried.end(),
                              [&](const Tried& t) { return t.result.algorithm.ops == heuristic->algorithm.ops; });
      if (!same) tried.push_back({std::move(name), std::move(*heuristic), std::nullopt});
    }
  }
  size_t best = 0;
  for (size_t i = 0; i < tried.size(); ++i) {
    tried[i].us = options.judge(tried[i].result.algorithm);
    if (tried[i].us && (!tried[best].us || *tried[i].us < *tried[best].us)) best = i;
  }
  std::string note = "simulated:";
  for (size_t i = 0; i < tried.size(); ++i) {
    note += std::string(i > 0 ? "," : "") + " " + tried[i].name + " routing " +
            (tried[i].us ? fixed(*tried[i].us) + " us" : std::string("not simulated"));
  }
  note += "; kept the " + (best == 0 && tried[0].name == "its" ? std::string("first") : tried[best].name + "'s");
  SketchSynthesisResult kept = std::move(tried[best].result);
  std::erase_if(kept.notes, [](const std::string& line) {
    return line.find("heuristic routing requested") != std::string::npos;
  });
  kept.notes.push_back(note);
  kept.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return kept;
}

}  // namespace tuccl
