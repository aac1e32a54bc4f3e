#include "synth/generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lang/algorithm_equivalence.h"
#include "lang/resccl.h"
#include "lang/resccl_printer.h"
#include "lang/semantic_check.h"
#include "topo/paths.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

constexpr Collective kAllCollectives[] = {Collective::Broadcast,     Collective::Reduce,    Collective::AllGather,
                                          Collective::ReduceScatter, Collective::AllReduce, Collective::AllToAll};
constexpr SketchVariant kVariants[] = {SketchVariant::FullMesh, SketchVariant::Pruned, SketchVariant::Relay};

struct Shape {
  std::string spec;
  int32_t nodes;
  int32_t gpus;
};

// 1x2, 1x8, 2x4, 3x3 (odd, NICs serving two GPUs and one), 2x8 and 4x8 with two GPUs per NIC
// (resccl-a100) and one (dgx-h100).
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> list{
      {"preset:resccl-a100:nodes=1,gpus=2", 1, 2}, {"preset:dgx-a100:nodes=1,gpus=8", 1, 8},
      {"preset:resccl-a100:nodes=2,gpus=4", 2, 4}, {"preset:resccl-a100:nodes=3,gpus=3", 3, 3},
      {"preset:dgx-h100:nodes=3,gpus=3", 3, 3},    {"preset:resccl-a100:nodes=2", 2, 8},
      {"preset:dgx-h100:nodes=2", 2, 8},           {"preset:resccl-a100:nodes=4", 4, 8},
      {"preset:dgx-h100:nodes=4", 4, 8},
  };
  return list;
}

bool isPowerOfTwo(int32_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Every inter-node operation is an edge of the sketch; the first that is not, or nothing.
std::optional<std::pair<int32_t, int32_t>> forbiddenPair(const Algorithm& algorithm, const Topology& topology,
                                                         const Sketch& sketch) {
  std::set<std::pair<int32_t, int32_t>> edges(sketch.interNodePairs.begin(), sketch.interNodePairs.end());
  for (const Operation& op : algorithm.ops) {
    if (topology.gpus[op.srcRank].node == topology.gpus[op.dstRank].node) continue;
    if (!edges.contains({op.srcRank, op.dstRank})) return std::make_pair(op.srcRank, op.dstRank);
  }
  return std::nullopt;
}

// The properties every generated algorithm has, whatever the generator.
void expectWellFormed(const Algorithm& algorithm, const std::string& generator, Collective collective,
                      const Topology& topology, const Sketch& sketch, const GeneratorOptions& options) {
  EXPECT_EQ(algorithm.name, generator);
  EXPECT_EQ(algorithm.collective, collective);
  EXPECT_EQ(algorithm.nRanks, topology.nRanks());
  EXPECT_EQ(algorithm.ranksPerNode, topology.nRanks() / topology.nNodes());
  EXPECT_EQ(algorithm.nicsPerNode, static_cast<int32_t>(nicsOfNode(topology, 0).size()));
  EXPECT_EQ(algorithm.inPlace, options.inPlace);
  EXPECT_EQ(algorithm.root, hasRoot(collective) ? options.root : -1);
  const CheckReport report = checkAlgorithm(algorithm);
  EXPECT_TRUE(report.ok()) << report.violation->message;
  const auto forbidden = forbiddenPair(algorithm, topology, sketch);
  EXPECT_FALSE(forbidden.has_value()) << forbidden->first << " -> " << forbidden->second;
}

// Whether the generator must succeed on this shape and sketch (the others may say why not).
bool mustSucceed(const std::string& generator, const Shape& shape, SketchVariant variant) {
  const int32_t n = shape.nodes * shape.gpus;
  if ((generator == "recursive-doubling" || generator == "recursive-halving") && !isPowerOfTwo(n)) return false;
  if (generator == "hm-leaders") return false;  // declines where every GPU would lead (its own test below)
  if (generator == "ring" || shape.nodes == 1 || variant == SketchVariant::FullMesh) return true;
  if (generator == "direct" || generator == "pairwise") return false;
  // Equal local indices are sketch edges under Pruned; under Relay only where a NIC serves one GPU.
  return variant == SketchVariant::Pruned || shape.spec.find("dgx-h100") != std::string::npos;
}

TEST(Generators, EverySupportedCombinationIsProvedOnEveryShapeAndSketch) {
  int proved = 0;
  for (const Shape& shape : shapes()) {
    const Topology topology = makePreset(shape.spec);
    ASSERT_EQ(topology.nRanks(), shape.nodes * shape.gpus) << shape.spec;
    for (SketchVariant variant : kVariants) {
      const Sketch sketch = buildSketch(topology, variant);
      for (const std::string& generator : generatorNames()) {
        for (Collective collective : kAllCollectives) {
          if (!generatorSupports(generator, collective)) continue;
          for (bool inPlace : {false, true}) {
            GeneratorOptions options;
            options.inPlace = inPlace;
            options.root = hasRoot(collective) ? topology.nRanks() - 1 : 0;
            const std::string where = shape.spec + " " + std::string(sketchVariantName(variant)) + " " + generator +
                                      " " + std::string(collectiveName(collective)) +
                                      (inPlace ? " in place" : " out of place");
            Expected<Algorithm> algorithm = generateAlgorithm(generator, collective, topology, sketch, options);
            if (!algorithm.ok()) {
              EXPECT_EQ(algorithm.status().code(), ErrorCode::Unsupported) << where << ": " << algorithm.status().message();
              EXPECT_FALSE(mustSucceed(generator, shape, variant)) << where << ": " << algorithm.status().message();
              EXPECT_EQ(algorithm.status().message().rfind(generator + " ", 0), 0u) << algorithm.status().message();
              continue;
            }
            SCOPED_TRACE(where);
            expectWellFormed(*algorithm, generator, collective, topology, sketch, options);
            ++proved;
          }
        }
      }
    }
  }
  EXPECT_GT(proved, 1000);
}

TEST(Generators, RootsAndPartsAreHonoured) {
  const Topology topology = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  const Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (const std::string& generator : generatorNames()) {
    for (Collective collective : kAllCollectives) {
      if (!generatorSupports(generator, collective)) continue;
      for (int32_t root : {0, 5}) {
        if (!hasRoot(collective) && root != 0) continue;
        for (bool inPlace : {false, true}) {
          // One leader per NIC: resccl-a100's NICs serve two GPUs each.
          GeneratorOptions options{.root = root, .parts = 3, .inPlace = inPlace, .leaders = 1};
          Expected<Algorithm> algorithm = generateAlgorithm(generator, collective, topology, sketch, options);
          SCOPED_TRACE(generator + " " + std::string(collectiveName(collective)) + " root " + std::to_string(root));
          if (generator == "direct" || generator == "pairwise") {
            ASSERT_FALSE(algorithm.ok());
            continue;
          }
          ASSERT_TRUE(algorithm.ok()) << algorithm.status().message();
          expectWellFormed(*algorithm, generator, collective, topology, sketch, options);
          // Three parts: the ring runs three rings (k = 3, or 3n for AllReduce); the others cut
          // their unit into three.
          EXPECT_EQ(algorithm->chunksPerRank() % 3, 0) << algorithm->chunksPerRank();
        }
      }
    }
  }
}

// Ring c of the ring AllGather moves chunk c of every rank (output index owner·k + c).
std::vector<std::vector<std::pair<int32_t, int32_t>>> interNodeHopsByRing(const Algorithm& algorithm,
                                                                         const Topology& topology) {
  const int32_t k = algorithm.chunksPerRank();
  std::vector<std::vector<std::pair<int32_t, int32_t>>> hops(static_cast<size_t>(k));
  for (const Operation& op : algorithm.ops) {
    if (topology.gpus[op.srcRank].node == topology.gpus[op.dstRank].node) continue;
    hops[op.dstIndex % k].emplace_back(op.srcRank, op.dstRank);
  }
  return hops;
}

TEST(Generators, RingsFollowTheSketchRailsAndUseDistinctNics) {
  for (const std::string spec : {"preset:resccl-a100:nodes=2", "preset:resccl-a100:nodes=4", "preset:dgx-h100:nodes=2",
                                 "preset:dgx-h100:nodes=4", "preset:dgx-a100:nodes=3"}) {
    const Topology topology = makePreset(spec);
    for (SketchVariant variant : kVariants) {
      SCOPED_TRACE(spec + " " + std::string(sketchVariantName(variant)));
      const Sketch sketch = buildSketch(topology, variant);
      ASSERT_GT(sketch.groups.size(), 1u);
      Expected<Algorithm> ring = generateAlgorithm("ring", Collective::AllGather, topology, sketch);
      ASSERT_TRUE(ring.ok()) << ring.status().message();
      EXPECT_EQ(ring->chunksPerRank(), static_cast<int32_t>(sketch.groups.size()));  // one ring per rail
      EXPECT_FALSE(forbiddenPair(*ring, topology, sketch).has_value());
      // Per node, no two rings send through one NIC, nor receive through one NIC.
      std::map<int32_t, std::set<int32_t>> sendingRings;    // NIC -> rings
      std::map<int32_t, std::set<int32_t>> receivingRings;  // NIC -> rings
      const auto hops = interNodeHopsByRing(*ring, topology);
      for (size_t c = 0; c < hops.size(); ++c) {
        ASSERT_FALSE(hops[c].empty()) << "ring " << c << " never leaves a node";
        for (auto [from, to] : hops[c]) {
          // Every hop stays on one rail: both ends bound to NICs of one sketch group.
          const int32_t sendNic = sketch.nicOfRank[from];
          const int32_t recvNic = sketch.nicOfRank[to];
          const auto group = std::find_if(sketch.groups.begin(), sketch.groups.end(), [&](const auto& g) {
            return std::find(g.begin(), g.end(), sendNic) != g.end();
          });
          ASSERT_NE(group, sketch.groups.end());
          EXPECT_NE(std::find(group->begin(), group->end(), recvNic), group->end()) << from << " -> " << to;
          sendingRings[sendNic].insert(static_cast<int32_t>(c));
          receivingRings[recvNic].insert(static_cast<int32_t>(c));
        }
      }
      for (const auto& [nic, rings] : sendingRings) EXPECT_EQ(rings.size(), 1u) << "NIC " << nic << " sends for several rings";
      for (const auto& [nic, rings] : receivingRings) EXPECT_EQ(rings.size(), 1u) << "NIC " << nic << " receives for several rings";
    }
  }
}

TEST(Generators, UnsupportedCombinationsSayWhy) {
  const Topology twoNodes = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  const Sketch pruned = buildSketch(twoNodes, SketchVariant::Pruned);

  Expected<Algorithm> unknown = generateAlgorithm("butterfly", Collective::AllReduce, twoNodes, pruned);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::NotFound);
  for (const std::string& name : generatorNames()) EXPECT_NE(unknown.status().message().find(name), std::string::npos);

  Expected<Algorithm> notMade = generateAlgorithm("pairwise", Collective::AllReduce, twoNodes, pruned);
  ASSERT_FALSE(notMade.ok());
  EXPECT_EQ(notMade.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(notMade.status().message().find("AllToAll"), std::string::npos) << notMade.status().message();

  // Direct needs every pair of nodes' GPUs; the pruned sketch keeps only rail pairs.
  Expected<Algorithm> direct = generateAlgorithm("direct", Collective::AllGather, twoNodes, pruned);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(direct.status().message().find("inter-node pair rank"), std::string::npos) << direct.status().message();
  EXPECT_NE(direct.status().message().find("pruned"), std::string::npos) << direct.status().message();
  EXPECT_TRUE(generateAlgorithm("direct", Collective::AllGather, twoNodes,
                                buildSketch(twoNodes, SketchVariant::FullMesh))
                  .ok());

  const Topology nine = makePreset("preset:resccl-a100:nodes=3,gpus=3");
  Expected<Algorithm> doubling =
      generateAlgorithm("recursive-doubling", Collective::AllReduce, nine, buildSketch(nine, SketchVariant::Pruned));
  ASSERT_FALSE(doubling.ok());
  EXPECT_EQ(doubling.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(doubling.status().message().find("power-of-two"), std::string::npos);

  // hm needs GPU l -> GPU l between nodes; the relay sketch of two GPUs per NIC has GPU 2i+1 -> 2i.
  Expected<Algorithm> hm =
      generateAlgorithm("hm", Collective::AllReduce, twoNodes, buildSketch(twoNodes, SketchVariant::Relay));
  ASSERT_FALSE(hm.ok());
  EXPECT_NE(hm.status().message().find("relay"), std::string::npos) << hm.status().message();

  GeneratorOptions badRoot;
  badRoot.root = 8;
  Expected<Algorithm> root = generateAlgorithm("ring", Collective::Broadcast, twoNodes, pruned, badRoot);
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), ErrorCode::InvalidArgument);
}

TEST(Generators, RingsStayOnTheGpuFabricInsideANode) {
  // DGX-1's hybrid cube mesh: GPU i and i+1 are not all joined by NVLink (3 -> 4 crosses PCIe),
  // so index order is no NVLink ring; the ring generator finds one, as NCCL's search does.
  const Topology dgx1 = makePreset("preset:dgx1-v100");
  const Router router(dgx1);
  for (int32_t parts : {1, 2}) {
    GeneratorOptions options;
    options.parts = parts;
    Algorithm ring = generateAlgorithm("ring", Collective::AllGather, dgx1, Sketch{}, options).value();
    for (const Operation& op : ring.ops) {
      if (op.srcRank == op.dstRank) continue;
      EXPECT_EQ(router.pathBetween(op.srcRank, op.dstRank).kind, PathKind::NVLink)
          << "hop " << op.srcRank << " -> " << op.dstRank;
    }
  }
}

TEST(Generators, GivenRingsAreRunAsGivenAndCheckedFirst) {
  const Topology node = makePreset("preset:dgx-a100:nodes=1,gpus=4");
  GeneratorOptions options;
  options.rings = {{0, 2, 1, 3}, {3, 2, 1, 0}};
  Algorithm ring = generateAlgorithm("ring", Collective::AllGather, node, Sketch{}, options).value();
  EXPECT_EQ(ring.chunksPerRank(), 2);  // one part per ring
  std::set<std::pair<int32_t, int32_t>> hops;
  for (const Operation& op : ring.ops)
    if (op.srcRank != op.dstRank) hops.emplace(op.srcRank, op.dstRank);
  EXPECT_EQ(hops, (std::set<std::pair<int32_t, int32_t>>{
                      {0, 2}, {2, 1}, {1, 3}, {3, 0}, {3, 2}, {2, 1}, {1, 0}, {0, 3}}));
  GeneratorOptions notPermutation;
  notPermutation.rings = {{0, 1, 1, 3}};
  Expected<Algorithm> bad = generateAlgorithm("ring", Collective::AllGather, node, Sketch{}, notPermutation);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a permutation of the 4 ranks"), std::string::npos) << bad.status().message();
  GeneratorOptions parts = options;
  parts.parts = 3;
  Expected<Algorithm> mismatch = generateAlgorithm("ring", Collective::AllGather, node, Sketch{}, parts);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("parts=3 with 2 given rings"), std::string::npos)
      << mismatch.status().message();
}

TEST(Generators, GenerateAllListsTheGeneratorsInOrderAndNotesTheOthers) {
  const Topology topology = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  const Sketch pruned = buildSketch(topology, SketchVariant::Pruned);
  std::vector<std::string> notes;
  const std::vector<GeneratedAlgorithm> all = generateAll(Collective::AllReduce, topology, pruned, {}, &notes);
  std::vector<std::string> names;
  for (const GeneratedAlgorithm& generated : all) {
    names.push_back(generated.generator);
    EXPECT_EQ(generated.algorithm.name, generated.generator);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ring", "hm", "recursive-doubling", "recursive-halving",
                                             "double-binary-tree"}));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].rfind("hm-leaders ", 0), 0u) << notes[0];  // two GPUs per NIC: both would lead
  EXPECT_EQ(notes[1].rfind("direct ", 0), 0u) << notes[1];
  EXPECT_EQ(generatorNames(), (std::vector<std::string>{"ring", "hm", "hm-leaders", "direct", "recursive-doubling",
                                                        "recursive-halving", "double-binary-tree", "pairwise",
                                                        "hierarchical"}));
}

// hm-leaders on NDv2 (one NIC, on CPU 0's root complex, for eight GPUs): only the leaders cross
// nodes, they are the GPUs nearest the NIC (0..3 under CPU 0 before 4..7 under CPU 1), and each
// leader count gives a proved algorithm; where every GPU would lead it declines.
TEST(Generators, HmLeadersCarryTheInterNodeTrafficOnTheGpusNearestTheNic) {
  for (int32_t nodes : {2, 4}) {
    const Topology topology = makePreset("preset:ndv2:nodes=" + std::to_string(nodes));
    for (SketchVariant variant : {SketchVariant::Pruned, SketchVariant::FullMesh}) {
      const Sketch sketch = buildSketch(topology, variant);
      for (int32_t leaders : {1, 2, 4}) {
        for (bool inPlace : {false, true}) {
          GeneratorOptions options;
          options.leaders = leaders;
          options.inPlace = inPlace;
          SCOPED_TRACE(std::to_string(nodes) + " nodes, " + std::to_string(leaders) + " leaders");
          Expected<Algorithm> algorithm = generateAlgorithm("hm-leaders", Collective::AllReduce, topology, sketch, options);
          ASSERT_TRUE(algorithm.ok()) << algorithm.status().message();
          expectWellFormed(*algorithm, "hm-leaders", Collective::AllReduce, topology, sketch, options);
          std::set<int32_t> crossing;
          for (const Operation& op : algorithm->ops) {
            if (topology.gpus[op.srcRank].node == topology.gpus[op.dstRank].node) continue;
            crossing.insert(op.srcRank % 8);
            crossing.insert(op.dstRank % 8);
          }
          ASSERT_EQ(static_cast<int32_t>(crossing.size()), leaders);
          EXPECT_LT(*crossing.rbegin(), 4) << "a leader under CPU 1, away from the NIC";
        }
      }
      GeneratorOptions everyGpu;
      everyGpu.leaders = 8;
      Expected<Algorithm> hm = generateAlgorithm("hm-leaders", Collective::AllReduce, topology, sketch, everyGpu);
      ASSERT_FALSE(hm.ok());
      EXPECT_EQ(hm.status().code(), ErrorCode::Unsupported);
      EXPECT_NE(hm.status().message().find("which is hm"), std::string::npos) << hm.status().message();
    }
  }
  GeneratorOptions negative;
  negative.leaders = -1;
  const Topology ndv2 = makePreset("preset:ndv2:nodes=2");
  EXPECT_EQ(generateAlgorithm("hm-leaders", Collective::AllReduce, ndv2, buildSketch(ndv2, SketchVariant::Pruned), negative)
                .status()
                .code(),
            ErrorCode::InvalidArgument);
}

TEST(Generators, PrintedProgramsCompileBackToEquivalentAlgorithms) {
  int roundTrips = 0;
  for (const Shape& shape : shapes()) {
    const std::string& spec = shape.spec;
    const Topology topology = makePreset(spec);
    const Sketch sketch = buildSketch(topology, SketchVariant::FullMesh);
    for (const std::string& generator : generatorNames()) {
      for (Collective collective : kAllCollectives) {
        if (!generatorSupports(generator, collective)) continue;
        for (bool inPlace : {false, true}) {
          GeneratorOptions options{.root = hasRoot(collective) ? 1 : 0, .parts = 2, .inPlace = inPlace};
          Expected<Algorithm> algorithm = generateAlgorithm(generator, collective, topology, sketch, options);
          if (!algorithm.ok()) continue;
          SCOPED_TRACE(spec + " " + generator + " " + std::string(collectiveName(collective)));
          Expected<std::string> program = printResccl(*algorithm);
          if (!program.ok()) {
            EXPECT_EQ(program.status().code(), ErrorCode::Unsupported);
            continue;
          }
          Expected<Algorithm> compiled = compileResccl(SourceText(generator + ".resccl", *program));
          ASSERT_TRUE(compiled.ok()) << compiled.status().message();
          EXPECT_EQ(compiled->name, generator);
          const Status same = compareAlgorithmSemantics(*algorithm, *compiled);
          EXPECT_TRUE(same.ok()) << same.message();
          ++roundTrips;
        }
      }
    }
  }
  EXPECT_GT(roundTrips, 300);
}

// 80 ranks: the ring and hm algorithms stay linear in the ranks per chunk they move, so generating
// and proving them is quick (checked by the test's time budget, not asserted).
TEST(Generators, EightyRanksRingAndHm) {
  const Topology topology = makePreset("preset:resccl-a100:nodes=10");
  const Sketch sketch = buildSketch(topology, SketchVariant::Pruned);
  for (const std::string generator : {"ring", "hm"}) {
    for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
      Expected<Algorithm> algorithm = generateAlgorithm(generator, collective, topology, sketch);
      ASSERT_TRUE(algorithm.ok()) << algorithm.status().message();
      EXPECT_EQ(algorithm->nRanks, 80);
      // Each chunk crosses at most a few hops per rank: no quadratic blow-up per chunk.
      EXPECT_LE(static_cast<int64_t>(algorithm->ops.size()),
                int64_t{4} * algorithm->nRanks * std::max(algorithm->chunksPerRank(), algorithm->nRanks));
    }
  }
}

}  // namespace
}  // namespace tuccl
