#include "synth/sketch_synthesis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "lang/semantic_check.h"
#include "synth/sketch_routing.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

constexpr Collective kCollectives[] = {Collective::Broadcast, Collective::Reduce,        Collective::AllGather,
                                       Collective::ReduceScatter, Collective::AllReduce, Collective::AllToAll};
constexpr SketchVariant kVariants[] = {SketchVariant::FullMesh, SketchVariant::Pruned, SketchVariant::Relay};

// gpus = 0: every GPU of the preset's node.
std::string spec(const std::string& preset, int nodes, int gpus) {
  return "preset:" + preset + ":nodes=" + std::to_string(nodes) + (gpus > 0 ? ",gpus=" + std::to_string(gpus) : "");
}

bool anyNoteContains(const SketchSynthesisResult& result, const std::string& text) {
  return std::any_of(result.notes.begin(), result.notes.end(),
                     [&](const std::string& note) { return note.find(text) != std::string::npos; });
}

// Every operation between nodes uses a sketch pair; every one inside a node a sketch link.
void expectSketchEdges(const Topology& topology, const Sketch& sketch, const Algorithm& algorithm,
                       const std::string& label) {
  std::set<std::pair<int32_t, int32_t>> inter(sketch.interNodePairs.begin(), sketch.interNodePairs.end());
  std::set<std::pair<int32_t, int32_t>> intra(sketch.intraNodeLinks.begin(), sketch.intraNodeLinks.end());
  for (const Operation& op : algorithm.ops) {
    if (op.isLocal()) continue;
    bool crossesNodes = topology.gpus[op.srcRank].node != topology.gpus[op.dstRank].node;
    const auto& allowed = crossesNodes ? inter : intra;
    ASSERT_TRUE(allowed.contains({op.srcRank, op.dstRank}))
        << label << ": " << op.srcRank << "->" << op.dstRank << " is not a sketch edge";
  }
}

void expectProved(const Algorithm& algorithm, const std::string& label) {
  CheckReport report = checkAlgorithm(algorithm);
  ASSERT_TRUE(report.ok()) << label << ": " << report.violation->message;
}

struct Case {
  std::string preset;
  int nodes;
};

// Every preset at 1, 2 and 4 nodes of 4 GPUs, every sketch variant, every collective: proved by
// the checker, inter-node traffic on sketch pairs only. uc-min with the MILP, uc-max heuristic.
TEST(SketchSynthesis, EveryPresetVariantAndCollectiveIsProved) {
  for (const std::string preset : {"dgx-a100", "resccl-a100", "dgx-h100", "ndv2"}) {
    for (int nodes : {1, 2, 4}) {
      // ndv2's one NIC hangs off a CPU root complex, which a reduced node leaves out: its GPUs could
      // not leave the node, so multi-node ndv2 keeps all eight.
      Topology topology = makePreset(spec(preset, nodes, preset == "ndv2" && nodes > 1 ? 0 : 4));
      for (SketchVariant variant : kVariants) {
        if (nodes == 1 && variant != SketchVariant::Pruned) continue;  // no inter-node pairs to vary
        Sketch sketch = buildSketch(topology, variant);
        for (Collective collective : kCollectives) {
          for (HyperedgePolicy policy : {HyperedgePolicy::UcMin, HyperedgePolicy::UcMax}) {
            SketchSynthesisOptions options;
            options.root = topology.nRanks() - 1;
            options.hyperedgePolicy = policy;
            options.heuristicOnly = policy == HyperedgePolicy::UcMax;
            std::string label = preset + " nodes=" + std::to_string(nodes) + " " +
                                std::string(sketchVariantName(variant)) + " " +
                                std::string(collectiveName(collective)) + " " +
                                std::string(hyperedgePolicyName(policy));
            Expected<SketchSynthesisResult> result = synthesizeFromSketch(collective, topology, sketch, options);
            ASSERT_TRUE(result.ok()) << label << ": " << result.status().message();
            expectProved(result->algorithm, label);
            expectSketchEdges(topology, sketch, result->algorithm, label);
            EXPECT_GT(result->modelTimeUs, 0) << label;
            EXPECT_EQ(result->algorithm.nRanks, topology.nRanks());
          }
        }
      }
    }
  }
}

TEST(SketchSynthesis, MilpAndHeuristicBothRouteAndMilpIsNoWorse) {
  Topology topology = makePreset(spec("dgx-a100", 2, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (Collective collective : {Collective::AllGather, Collective::AllToAll, Collective::AllReduce}) {
    SketchSynthesisOptions options;
    options.chunksPerRank = 2;
    Expected<SketchSynthesisResult> milp = synthesizeFromSketch(collective, topology, sketch, options);
    options.heuristicOnly = true;
    Expected<SketchSynthesisResult> heuristic = synthesizeFromSketch(collective, topology, sketch, options);
    ASSERT_TRUE(milp.ok()) << milp.status().message();
    ASSERT_TRUE(heuristic.ok()) << heuristic.status().message();
    EXPECT_EQ(milp->method, SketchSynthesisMethod::Milp);
    EXPECT_EQ(heuristic->method, SketchSynthesisMethod::Heuristic);
    EXPECT_LE(milp->modelTimeUs, heuristic->modelTimeUs * (1 + 1e-9));
    EXPECT_TRUE(anyNoteContains(*heuristic, "heuristic routing requested"));
  }
}

// On two DGX-A100 nodes the greedy choice (rank by rank, in rank order) ends with a busier
// resource than the routing the MILP finds (bench_synth_scaling: 62.4 against 83.9 µs).
TEST(SketchSynthesis, MilpBeatsTheHeuristicOnTwoDgxA100Nodes) {
  Topology topology = makePreset("preset:dgx-a100:nodes=2");
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  SketchSynthesisOptions options;
  Expected<SketchSynthesisResult> milp = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  options.heuristicOnly = true;
  Expected<SketchSynthesisResult> heuristic = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(milp.ok() && heuristic.ok());
  EXPECT_EQ(milp->method, SketchSynthesisMethod::Milp);
  EXPECT_LT(milp->modelTimeUs, heuristic->modelTimeUs * 0.9);
  expectSketchEdges(topology, sketch, milp->algorithm, "dgx-a100 x2");
}

TEST(SketchSynthesis, SameInputGivesTheSameAlgorithm) {
  Topology topology = makePreset(spec("resccl-a100", 4, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (Collective collective : {Collective::AllReduce, Collective::AllToAll}) {
    SketchSynthesisOptions options;
    options.chunksPerRank = 2;
    Expected<SketchSynthesisResult> first = synthesizeFromSketch(collective, topology, sketch, options);
    Expected<SketchSynthesisResult> second = synthesizeFromSketch(collective, topology, sketch, options);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first->method, second->method);
    EXPECT_EQ(first->algorithm.ops, second->algorithm.ops);
    EXPECT_EQ(first->algorithm.bufferChunks, second->algorithm.bufferChunks);
    EXPECT_EQ(first->modelTimeUs, second->modelTimeUs);
  }
}

TEST(SketchSynthesis, ATinyTimeLimitFallsBackToTheHeuristicWithANote) {
  Topology topology = makePreset(spec("dgx-h100", 2, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  SketchSynthesisOptions options;
  options.timeLimitSeconds = 1e-9;
  Expected<SketchSynthesisResult> result = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->method, SketchSynthesisMethod::Heuristic);
  EXPECT_TRUE(anyNoteContains(*result, "time limit")) << result->notes.front();
  expectProved(result->algorithm, "tiny limit");
}

TEST(SketchSynthesis, UcMinKeepsNvSwitchTrafficOnARing) {
  Topology topology = makePreset("preset:dgx-a100:nodes=1");
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  SketchSynthesisOptions options;
  options.hyperedgePolicy = HyperedgePolicy::UcMin;
  Expected<SketchSynthesisResult> ring = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(ring.ok()) << ring.status().message();
  std::set<int32_t> distances;
  for (const Operation& op : ring->algorithm.ops) {
    if (!op.isLocal()) distances.insert((op.dstRank - op.srcRank + 8) % 8);
  }
  EXPECT_EQ(distances, (std::set<int32_t>{1, 7}));
  options.hyperedgePolicy = HyperedgePolicy::UcMax;
  Expected<SketchSynthesisResult> direct = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  distances.clear();
  for (const Operation& op : direct->algorithm.ops) {
    if (!op.isLocal()) distances.insert((op.dstRank - op.srcRank + 8) % 8);
  }
  EXPECT_EQ(distances.size(), 7u);  // every GPU sends straight to every other
  // Latency-bound: the direct algorithm needs fewer steps than the ring.
  EXPECT_LT(direct->algorithm.maxStep(), ring->algorithm.maxStep());
}

TEST(SketchSynthesis, ContiguousChunksOnOneLinkBecomeOneOperation) {
  Topology topology = makePreset(spec("dgx-a100", 1, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  SketchSynthesisOptions options;
  options.chunksPerRank = 4;
  options.hyperedgePolicy = HyperedgePolicy::UcMax;
  Expected<SketchSynthesisResult> result = synthesizeFromSketch(Collective::AllToAll, topology, sketch, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (const Operation& op : result->algorithm.ops) {
    EXPECT_EQ(op.count, 4) << op.srcRank << "->" << op.dstRank;
  }
  EXPECT_EQ(result->algorithm.ops.size(), 16u);  // 12 peer pairs and 4 local copies
}

TEST(SketchSynthesis, InPlaceVariantsAreProved) {
  Topology topology = makePreset(spec("resccl-a100", 2, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Relay);
  for (Collective collective : {Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                                Collective::ReduceScatter, Collective::AllReduce}) {
    SketchSynthesisOptions options;
    options.inPlace = true;
    options.chunksPerRank = 2;
    options.root = 5;
    Expected<SketchSynthesisResult> result = synthesizeFromSketch(collective, topology, sketch, options);
    ASSERT_TRUE(result.ok()) << collectiveName(collective) << ": " << result.status().message();
    EXPECT_TRUE(result->algorithm.inPlace);
    expectProved(result->algorithm, std::string(collectiveName(collective)));
  }
}

TEST(SketchSynthesis, ReportsProgress) {
  Topology topology = makePreset(spec("ndv2", 2, 0));  // all GPUs: a reduced node has no NIC
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  std::vector<std::string> lines;
  SketchSynthesisOptions options;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  ASSERT_TRUE(synthesizeFromSketch(Collective::AllReduce, topology, sketch, options).ok());
  ASSERT_GE(lines.size(), 3u);
  EXPECT_NE(lines.front().find("gathering graph"), std::string::npos);
  EXPECT_NE(lines.back().find("ordered"), std::string::npos);
}

// The engine's charges on NDv2 (sim/cost/volta.json): 512 threads at 0.0518 GB/s each, 6.25 GB/s
// per TB through a NIC, Eq. 1's gamma 0.15 and floor 0.25.
constexpr LinkCharges kVoltaCharges{.tbGBps = 26.5, .networkTbGBps = 6.25, .contentionGamma = 0.15,
                                    .contentionFloor = 0.25};

// The (source, destination) rank pairs of the operations that cross nodes.
std::set<std::pair<int32_t, int32_t>> interNodeConnections(const Topology& topology, const Algorithm& algorithm) {
  std::set<std::pair<int32_t, int32_t>> connections;
  for (const Operation& op : algorithm.ops) {
    if (!op.isLocal() && topology.gpus[op.srcRank].node != topology.gpus[op.dstRank].node) {
      connections.insert({op.srcRank, op.dstRank});
    }
  }
  return connections;
}

int32_t interNodeTransfers(const Topology& topology, const Algorithm& algorithm) {
  int32_t count = 0;
  for (const Operation& op : algorithm.ops) {
    if (!op.isLocal() && topology.gpus[op.srcRank].node != topology.gpus[op.dstRank].node) count += op.count;
  }
  return count;
}

// 2 x NDv2 under the pruned sketch: every GPU pair across the nodes is a sketch edge through the
// one NIC. A chunk that crossed into the other node relays to that node's GPUs over their local
// links: with same-level relays every chunk crosses the NIC once, not once per remote GPU (16
// transfers, not 128); with relays from any level a chunk may cross twice where the greedy finds
// the NIC less busy than the local links.
TEST(SketchSynthesis, ANetworkHopRelaysInsideTheNodeItReaches) {
  Topology topology = makePreset(spec("ndv2", 2, 0));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (bool heuristicOnly : {true, false}) {
    SketchSynthesisOptions options;
    options.heuristicOnly = heuristicOnly;
    options.charges = kVoltaCharges;
    options.sameLevelRelays = true;
    Expected<SketchSynthesisResult> result = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
    ASSERT_TRUE(result.ok()) << result.status().message();
    expectProved(result->algorithm, "ndv2 x2 allgather");
    expectSketchEdges(topology, sketch, result->algorithm, "ndv2 x2 allgather");
    EXPECT_EQ(interNodeTransfers(topology, result->algorithm), 16) << (heuristicOnly ? "heuristic" : "MILP");
    // Each node's chunks enter the other node through different GPUs: no GPU takes them all.
    std::set<int32_t> entries;
    for (auto [source, destination] : interNodeConnections(topology, result->algorithm)) entries.insert(destination);
    EXPECT_GT(entries.size(), 2u);
  }
  // AllReduce's reduce-scatter half aggregates inside a node before the NIC: each of the 16
  // chunks crosses it once each way.
  SketchSynthesisOptions options;
  options.charges = kVoltaCharges;
  options.sameLevelRelays = true;
  Expected<SketchSynthesisResult> allReduce = synthesizeFromSketch(Collective::AllReduce, topology, sketch, options);
  ASSERT_TRUE(allReduce.ok()) << allReduce.status().message();
  expectProved(allReduce->algorithm, "ndv2 x2 allreduce");
  EXPECT_EQ(interNodeTransfers(topology, allReduce->algorithm), 2 * 16);
  options.sameLevelRelays = false;
  Expected<SketchSynthesisResult> anyLevel = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(anyLevel.ok()) << anyLevel.status().message();
  expectProved(anyLevel->algorithm, "ndv2 x2 allgather, relays from any level");
  EXPECT_LE(interNodeTransfers(topology, anyLevel->algorithm), 2 * 16);
}

// A NIC path's edge costs its chunk at one TB's network rate, and a resource shared by more
// connections than it carries at full rate takes longer: both raise the modelled time.
TEST(SketchSynthesis, PerTbRatesAndContentionAreModelled) {
  Topology topology = makePreset(spec("ndv2", 2, 0));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  const double chunk = 1 << 20;
  Expected<sketch_synth::LogicalGraph> plain = sketch_synth::buildLogicalGraph(topology, sketch, HyperedgePolicy::UcMin, chunk);
  Expected<sketch_synth::LogicalGraph> charged =
      sketch_synth::buildLogicalGraph(topology, sketch, HyperedgePolicy::UcMin, chunk, false, kVoltaCharges);
  ASSERT_TRUE(plain.ok() && charged.ok());
  int32_t network = plain->edgeBetween(0, 8);
  ASSERT_GE(network, 0);
  EXPECT_NEAR(charged->edges[network].costUs - plain->edges[network].costUs,
              chunk / 6.25e3 - chunk / (plain->edges[network].tbGBps * 1e3), 1e-6);
  EXPECT_DOUBLE_EQ(charged->edges[network].tbGBps, 6.25);
  EXPECT_FALSE(charged->edges[network].local);
  EXPECT_TRUE(charged->edges[plain->edgeBetween(0, 1)].local);

  SketchSynthesisOptions options;
  options.heuristicOnly = true;
  Expected<SketchSynthesisResult> alphaBeta = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  options.charges = kVoltaCharges;
  options.charges.contentionGamma = 0;
  Expected<SketchSynthesisResult> capped = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  options.charges = kVoltaCharges;
  Expected<SketchSynthesisResult> contended = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(alphaBeta.ok() && capped.ok() && contended.ok());
  // The NIC's serialised load, not a path's latency, is the modelled time here: capping a
  // connection's rate lengthens arrivals only.
  EXPECT_GE(capped->modelTimeUs, alphaBeta->modelTimeUs);
  // Eight connections at 6.25 GB/s through a 12.5 GB/s NIC: z = 4, 1 / (1 + 0.15 x 3) of it left.
  EXPECT_GT(contended->modelTimeUs, capped->modelTimeUs);
}

// With a judge, the MILP's and the heuristic's routings are both simulated and the faster kept.
TEST(SketchSynthesis, AJudgeKeepsTheFasterRoutingAndSaysBothTimes) {
  Topology topology = makePreset("preset:dgx-a100:nodes=2");
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  SketchSynthesisOptions options;
  std::vector<std::string> judged;
  // A judge that prefers the heuristic's routing (named in the algorithm) whatever it costs.
  options.judge = [&](const Algorithm& algorithm) -> std::optional<double> {
    judged.push_back(algorithm.name);
    return algorithm.name.find("heuristic") != std::string::npos ? 1.0 : 2.0;
  };
  Expected<SketchSynthesisResult> result = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  // The MILP's routing, then the heuristic's without a connection budget and under budgets of 1,
  // 2 and 4 connections per node (those that differ from one already made).
  ASSERT_GE(judged.size(), 2u);
  EXPECT_EQ(judged[0], "sketch-milp-AllGather");
  for (size_t i = 1; i < judged.size(); ++i) EXPECT_EQ(judged[i], "sketch-heuristic-AllGather");
  EXPECT_EQ(result->method, SketchSynthesisMethod::Heuristic);
  EXPECT_TRUE(anyNoteContains(*result, "simulated: MILP routing 2.00 us, heuristic routing 1.00 us"))
      << result->notes.back();
  EXPECT_NE(result->notes.back().find("; kept the heuristic's"), std::string::npos) << result->notes.back();
  EXPECT_FALSE(anyNoteContains(*result, "heuristic routing requested"));
  // A judge that cannot simulate either leaves the MILP's.
  options.judge = [](const Algorithm&) -> std::optional<double> { return std::nullopt; };
  Expected<SketchSynthesisResult> unjudged = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
  ASSERT_TRUE(unjudged.ok());
  EXPECT_EQ(unjudged->method, SketchSynthesisMethod::Milp);
  EXPECT_TRUE(anyNoteContains(*unjudged, "MILP routing not simulated, heuristic routing not simulated"));
  EXPECT_NE(unjudged->notes.back().find("; kept the MILP's"), std::string::npos) << unjudged->notes.back();
}

// A connection budget: the heuristic opens at most that many inter-node connections out of a
// node, the other chunks reaching the NIC through them (a leader sends for its node's GPUs).
TEST(SketchSynthesis, AConnectionBudgetBoundsTheConnectionsThroughTheNic) {
  Topology topology = makePreset(spec("ndv2", 2, 0));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (int32_t budget : {1, 2, 4}) {
    SketchSynthesisOptions options;
    options.heuristicOnly = true;
    options.charges = kVoltaCharges;
    options.maxNetworkConnections = budget;
    Expected<SketchSynthesisResult> result = synthesizeFromSketch(Collective::AllGather, topology, sketch, options);
    ASSERT_TRUE(result.ok()) << result.status().message();
    expectProved(result->algorithm, "budget " + std::to_string(budget));
    EXPECT_EQ(static_cast<int32_t>(interNodeConnections(topology, result->algorithm).size()), 2 * budget) << "budget " << budget;  // per node
    EXPECT_LE(interNodeTransfers(topology, result->algorithm), 2 * 16) << "budget " << budget;
  }
}

TEST(SketchSynthesis, BadInputIsRefusedClearly) {
  Topology topology = makePreset(spec("dgx-a100", 2, 4));
  Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  auto refuse = [&](Collective collective, SketchSynthesisOptions options, const std::string& text,
                    const Sketch& which) {
    Expected<SketchSynthesisResult> result = synthesizeFromSketch(collective, topology, which, options);
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_EQ(result.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status().message();
  };
  refuse(Collective::Broadcast, {.root = 8}, "root 8 is out of range [0, 8)", sketch);
  refuse(Collective::Reduce, {.root = -1}, "root -1 is out of range", sketch);
  refuse(Collective::AllGather, {.chunksPerRank = 0}, "chunksPerRank must be at least 1", sketch);
  refuse(Collective::AllToAll, {.inPlace = true}, "in-place AllToAll", sketch);
  refuse(Collective::AllGather, {.timeLimitSeconds = 0}, "timeLimitSeconds", sketch);
  refuse(Collective::AllGather, {.timeLimitSeconds = std::nan("")}, "timeLimitSeconds", sketch);
  refuse(Collective::AllGather, {.charges = {.tbGBps = -1}}, "charges.tbGBps", sketch);
  refuse(Collective::AllGather, {.charges = {.networkTbGBps = std::nan("")}}, "charges.networkTbGBps", sketch);
  refuse(Collective::AllGather, {.charges = {.contentionFloor = 2}}, "charges.contentionFloor", sketch);
  Sketch other = buildSketch(makePreset(spec("dgx-a100", 4, 4)), SketchVariant::Pruned);
  refuse(Collective::AllGather, {}, "does not belong to the topology", other);
}

}  // namespace
}  // namespace tuccl
