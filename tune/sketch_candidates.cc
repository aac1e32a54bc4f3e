// Built only with the simulator (tune/CMakeLists.txt globs every file; topo/ and the scheduler
// are linked only then).
#include "tune/sketch_candidates.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>

#include "lang/semantic_check.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/simulator.h"
#include "synth/generators.h"
#include "synth/sketch_synthesis.h"

namespace tuccl {
namespace {

std::vector<std::vector<int32_t>> ranksByNode(const Topology& topology) {
  std::vector<std::vector<int32_t>> nodes(static_cast<size_t>(topology.nNodes()));
  for (int32_t r = 0; r < topology.nRanks(); ++r) nodes[static_cast<size_t>(topology.gpus[r].node)].push_back(r);
  return nodes;
}

}  // namespace

std::vector<std::pair<int32_t, int32_t>> interNodePairs(const Algorithm& algorithm, const Topology& topology) {
  std::set<std::pair<int32_t, int32_t>> pairs;
  for (const Operation& op : algorithm.ops) {
    if (op.isLocal()) continue;
    if (topology.gpus[op.srcRank].node != topology.gpus[op.dstRank].node) pairs.emplace(op.srcRank, op.dstRank);
  }
  return {pairs.begin(), pairs.end()};
}

bool sketchAdmits(const Sketch& sketch, const Algorithm& algorithm, const Topology& topology) {
  for (const auto& pair : interNodePairs(algorithm, topology))
    if (!std::binary_search(sketch.interNodePairs.begin(), sketch.interNodePairs.end(), pair)) return false;
  return true;
}

std::optional<std::vector<int32_t>> sketchRingOrder(const Topology& topology, const Sketch& sketch) {
  const auto nodes = ranksByNode(topology);
  const size_t n = nodes.size();
  if (n == 0) return std::nullopt;
  auto edge = [&](int32_t a, int32_t b) {
    return std::binary_search(sketch.interNodePairs.begin(), sketch.interNodePairs.end(), std::make_pair(a, b));
  };
  std::vector<int32_t> entry(n, -1), exit(n, -1);
  // Depth-first over (entry of node 0, exit of node i -> entry of node i+1, ..., exit of the last
  // node -> entry of node 0); a node of one GPU enters and leaves through it.
  std::function<bool(size_t)> place = [&](size_t i) -> bool {
    for (int32_t out : nodes[i]) {
      if (out == entry[i] && nodes[i].size() > 1) continue;
      const size_t next = (i + 1) % n;
      if (next == 0) {
        if (n == 1 || edge(out, entry[0])) {
          exit[i] = out;
          return true;
        }
        continue;
      }
      for (int32_t in : nodes[next]) {
        if (!edge(out, in)) continue;
        exit[i] = out;
        entry[next] = in;
        if (place(next)) return true;
      }
    }
    return false;
  };
  for (int32_t first : nodes[0]) {
    entry[0] = first;
    if (!place(0)) continue;
    std::vector<int32_t> order;
    for (size_t i = 0; i < n; ++i) {
      order.push_back(entry[i]);
      for (int32_t r : nodes[i])
        if (r != entry[i] && r != exit[i]) order.push_back(r);
      if (exit[i] != entry[i]) order.push_back(exit[i]);
    }
    return order;
  }
  return std::nullopt;
}

Algorithm relabelRanks(const Algorithm& algorithm, const std::vector<int32_t>& order) {
  if (order.size() != static_cast<size_t>(algorithm.nRanks))
    throw std::invalid_argument("a rank order must name every rank of the algorithm once");
  Algorithm out = algorithm;
  const int32_t k = algorithm.chunksPerRank();
  auto block = [&](BufferKind buffer, int32_t index) {
    if (algorithm.collective != Collective::AllGather || buffer != BufferKind::Output || k <= 0) return index;
    return order[static_cast<size_t>(index / k)] * k + index % k;
  };
  for (Operation& op : out.ops) {
    op.srcIndex = block(op.srcBuffer, op.srcIndex);
    op.dstIndex = block(op.dstBuffer, op.dstIndex);
    op.srcRank = order[static_cast<size_t>(op.srcRank)];
    op.dstRank = order[static_cast<size_t>(op.dstRank)];
  }
  if (CheckReport report = checkAlgorithm(out); !report.ok())
    throw std::logic_error("relabelled " + algorithm.name + " fails the semantic check: " + report.violation->message);
  return out;
}

namespace {

const std::vector<SketchVariant> kSparsestFirst = {SketchVariant::Relay, SketchVariant::Pruned, SketchVariant::FullMesh};

/// Whether `only` asks for candidates of `family` ("hm" or "hm@pruned" both ask for hm).
bool wanted(const std::vector<std::string>& only, const std::string& family) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(), [&](const std::string& name) {
    return name == family || name.starts_with(family + "@");
  });
}

/// The admitting sketch variants of `algorithm`, sparsest first.
std::vector<std::string> admittingSketches(const std::vector<Sketch>& sketches, const Algorithm& algorithm,
                                           const Topology& topology) {
  std::vector<std::string> names;
  for (const Sketch& s : sketches)
    if (sketchAdmits(s, algorithm, topology)) names.emplace_back(sketchVariantName(s.variant));
  return names;
}

void programCandidates(const Topology& topology, Collective collective, const std::string& examplesDir,
                       const std::vector<Sketch>& sketches, const CandidateOptions& options,
                       std::vector<AlgorithmCandidate>& out, std::vector<std::string>* notes) {
  std::vector<std::pair<std::string, std::string>> programs;  // (name, example)
  if (collective == Collective::AllReduce) {
    programs = {{"ring", "ring_allreduce"}, {"hm", "hm_allreduce"}};
  } else if (collective == Collective::AllGather) {
    programs = {{"ring", "ring_allgather"}, {"hm", "hm_allgather"}, {"direct", "direct_allgather"}};
  }
  const int32_t nRanks = topology.nRanks();
  const int32_t perNode = maxGpusPerNode(topology);
  for (const auto& [name, example] : programs) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), name) == options.only.end() &&
        !(name == "ring" && std::find(options.only.begin(), options.only.end(), "ring-rail") != options.only.end()))
      continue;
    AlgorithmCandidate c;
    c.name = name;
    c.program = example;
    Expected<Algorithm> loaded = loadRescclAlgorithm(examplesDir + "/" + example + ".resccl", nRanks, perNode);
    if (!loaded) {
      if (notes != nullptr)
        notes->push_back(example + " does not fit " + std::to_string(nRanks) + " ranks: " + loaded.status().toString());
      continue;
    }
    c.algorithm = std::move(loaded).value();
    c.sketches = admittingSketches(sketches, c.algorithm, topology);
    c.ncclRing = name == "ring";
    c.interNodeConnections = static_cast<int32_t>(interNodePairs(c.algorithm, topology).size());
    out.push_back(std::move(c));
    if (name != "ring") continue;
    // The sketch-derived ring: along the sparsest sketch that has a Hamiltonian cycle.
    for (const Sketch& s : sketches) {
      if (s.variant == SketchVariant::FullMesh) break;
      auto order = sketchRingOrder(topology, s);
      if (!order) continue;
      bool identity = true;
      for (int32_t p = 0; p < nRanks; ++p) identity = identity && (*order)[static_cast<size_t>(p)] == p;
      if (identity || sketchAdmits(s, out.back().algorithm, topology)) break;  // the plain ring already fits
      AlgorithmCandidate rail;
      rail.name = "ring-rail";
      rail.program = example;
      rail.algorithm = relabelRanks(out.back().algorithm, *order);
      rail.algorithm.name += "-rail";
      rail.sketches = admittingSketches(sketches, rail.algorithm, topology);
      rail.interNodeConnections = static_cast<int32_t>(interNodePairs(rail.algorithm, topology).size());
      out.push_back(std::move(rail));
      break;
    }
  }
}

/// A generator's settings the tuner tries as separate candidates: hm-leaders with 1, 2 and 4
/// leaders per NIC ("hm-leaders-<n>"), every other generator with its defaults (its own name).
struct GeneratorVariant {
  std::string name;
  GeneratorOptions options;
};
std::vector<GeneratorVariant> generatorVariants(const std::string& generator) {
  if (generator != "hm-leaders") return {{generator, {}}};
  std::vector<GeneratorVariant> variants;
  for (int32_t leaders : {1, 2, 4}) {
    GeneratorOptions options;
    options.leaders = leaders;
    variants.push_back({generator + "-" + std::to_string(leaders), options});
  }
  return variants;
}

/// Adds `algorithm` as "<family>@<sketch>" unless an equal algorithm is already a candidate.
void addGenerated(std::string family, std::string program, const Sketch& sketch, Algorithm algorithm,
                  const Topology& topology, const std::vector<Sketch>& sketches,
                  std::vector<AlgorithmCandidate>& out) {
  for (const AlgorithmCandidate& c : out)
    if (c.algorithm.ops == algorithm.ops && c.algorithm.bufferChunks == algorithm.bufferChunks) return;
  AlgorithmCandidate c;
  c.name = family + "@" + std::string(sketchVariantName(sketch.variant));
  c.program = std::move(program);
  c.algorithm = std::move(algorithm);
  c.sketches = admittingSketches(sketches, c.algorithm, topology);
  if (c.sketches.empty()) c.sketches.emplace_back(sketchVariantName(sketch.variant));
  c.interNodeConnections = static_cast<int32_t>(interNodePairs(c.algorithm, topology).size());
  out.push_back(std::move(c));
}

void synthesisCandidates(const Topology& topology, Collective collective, const std::vector<Sketch>& sketches,
                         const CandidateOptions& options, std::vector<AlgorithmCandidate>& out,
                         std::vector<std::string>* notes) {
  for (const Sketch& sketch : sketches) {
    const std::string variant(sketchVariantName(sketch.variant));
    if (options.generated) {
      for (const std::string& generator : generatorNames()) {
        if (!generatorSupports(generator, collective) || !wanted(options.only, generator)) continue;
        std::string why;
        for (const GeneratorVariant& v : generatorVariants(generator)) {
          Expected<Algorithm> made = generateAlgorithm(generator, collective, topology, sketch, v.options);
          if (!made) {
            if (made.status().code() == ErrorCode::Internal) throw std::logic_error(made.status().message());
            if (why.empty()) why = made.status().message();
            continue;
          }
          addGenerated(v.name, "generator " + v.name, sketch, std::move(*made), topology, sketches, out);
        }
        if (!why.empty() && notes != nullptr) notes->push_back(generator + " under the " + variant + " sketch: " + why);
      }
    }
    if (options.synthesised && wanted(options.only, "synth")) {
      SketchSynthesisOptions synthesis;
      synthesis.timeLimitSeconds = options.synthesisSeconds;
      synthesis.charges = options.charges;
      synthesis.judge = options.judge;
      Expected<SketchSynthesisResult> made = synthesizeFromSketch(collective, topology, sketch, synthesis);
      if (!made) {
        if (made.status().code() == ErrorCode::Internal) throw std::logic_error(made.status().message());
        if (notes != nullptr) notes->push_back("synthesis under the " + variant + " sketch: " + made.status().message());
        continue;
      }
      const std::string how = made->method == SketchSynthesisMethod::Milp ? "synthesis (MILP)" : "synthesis (heuristic)";
      addGenerated("synth", how, sketch, std::move(made->algorithm), topology, sketches, out);
    }
  }
}

}  // namespace

LinkCharges synthesisCharges(const CostModel& cost) {
  const PlanConfig defaults;
  LinkCharges charges;
  charges.tbGBps = tbCapGBps(cost, defaults.protocol, defaults.nThreads, false);
  charges.networkTbGBps = tbCapGBps(cost, defaults.protocol, defaults.nThreads, true);
  charges.contentionGamma = cost.contentionGamma;
  charges.contentionFloor = cost.contentionFloor;
  return charges;
}

std::function<std::optional<double>(const Algorithm&)> simulatedJudge(const Network& network, const CostModel& cost,
                                                                      std::vector<int64_t> sizes) {
  return [network, cost, sizes = std::move(sizes)](const Algorithm& algorithm) -> std::optional<double> {
    Expected<Plan> plan = buildPlan(algorithm, PlanRequest{});
    if (!plan || sizes.empty()) return std::nullopt;
    double logSum = 0;
    for (int64_t bytes : sizes) {
      SimOptions sim;
      sim.messageBytes = bytes;
      sim.cost = cost;
      Expected<SimResult> result = simulatePlan(*plan, network, sim);
      if (!result || result->timeUs <= 0) return std::nullopt;
      logSum += std::log(result->timeUs);
    }
    return std::exp(logSum / static_cast<double>(sizes.size()));
  };
}

std::vector<AlgorithmCandidate> algorithmCandidates(const Topology& topology, Collective collective,
                                                    const std::string& examplesDir, std::vector<std::string>* notes,
                                                    const CandidateOptions& options) {
  std::vector<Sketch> sketches;
  for (SketchVariant v : kSparsestFirst) sketches.push_back(buildSketch(topology, v));
  std::vector<AlgorithmCandidate> out;
  if (options.programs) programCandidates(topology, collective, examplesDir, sketches, options, out, notes);
  if (options.generated || options.synthesised) synthesisCandidates(topology, collective, sketches, options, out, notes);
  if (out.empty() && options.only.empty()) throw std::runtime_error("no candidate algorithm fits the topology");
  return out;
}

Expected<std::vector<AlgorithmCandidate>> directoryCandidates(const Topology& topology, Collective collective,
                                                              const std::string& directory,
                                                              const std::vector<std::string>& taken,
                                                              std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string extension = it->path().extension().string();
    if ((extension == ".resccl" || extension == ".xml") && it->is_regular_file(error)) files.push_back(it->path());
  }
  if (error) return makeError(ErrorCode::IoError, directory + ": " + error.message());
  std::sort(files.begin(), files.end());
  const int32_t nRanks = topology.nRanks();
  const int32_t perNode = maxGpusPerNode(topology);
  std::vector<Sketch> sketches;
  for (SketchVariant v : kSparsestFirst) sketches.push_back(buildSketch(topology, v));
  std::vector<AlgorithmCandidate> out;
  for (const fs::path& file : files) {
    const bool xml = file.extension() == ".xml";
    RescclParameters parameters;
    if (!xml) parameters = {{"nRanks", nRanks}, {"GPUPerNode", perNode}};
    Expected<LoadedAlgorithm> loaded = loadProvedAlgorithmFile(file.string(), parameters);
    if (!loaded) {
      if (notes != nullptr) notes->push_back(file.string() + " is left out: " + loaded.status().toString());
      continue;
    }
    if (loaded->algorithm.collective != collective) continue;
    if (loaded->algorithm.nRanks != nRanks) {
      if (notes != nullptr)
        notes->push_back(file.string() + " is left out: it is for " + std::to_string(loaded->algorithm.nRanks) +
                         " GPUs, the topology has " + std::to_string(nRanks));
      continue;
    }
    AlgorithmCandidate c;
    c.name = file.filename().string();
    if (std::find(taken.begin(), taken.end(), c.name) != taken.end()) {
      return makeError(ErrorCode::InvalidArgument,
                       file.string() + ": the candidate name '" + c.name + "' is taken by another candidate");
    }
    c.program = file.string();
    c.algorithm = std::move(loaded->algorithm);
    c.sketches = admittingSketches(sketches, c.algorithm, topology);
    c.interNodeConnections = static_cast<int32_t>(interNodePairs(c.algorithm, topology).size());
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tuccl
