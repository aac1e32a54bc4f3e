#include "synth/exact_synthesis.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lang/semantic_check.h"
#include "synth/exact_encoding.h"
#include "synth/exact_topology.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

const Topology& dgx1() {
  static const Topology topology = makePreset("preset:dgx1-v100");
  return topology;
}

ExactTopology exactOf(const Topology& topology) {
  Expected<ExactTopology> exact = exactTopologyOf(topology);
  EXPECT_TRUE(exact.ok()) << exact.status().message();
  return exact.ok() ? *exact : ExactTopology{};
}

// The point is satisfiable and its algorithm is the collective the checker proves.
void expectProvedPoint(const Topology& topology, Collective collective, int32_t c, int32_t s, int32_t r,
                       int32_t root = 0) {
  ExactSynthesisOptions options;
  options.root = root;
  Expected<ParetoPoint> point = synthesizeExact(topology, collective, c, s, r, options);
  ASSERT_TRUE(point.ok()) << point.status().message();
  EXPECT_EQ(point->chunks, c);
  EXPECT_EQ(point->steps, s);
  EXPECT_EQ(point->rounds, r);
  const Algorithm& algorithm = point->algorithm;
  EXPECT_EQ(algorithm.collective, collective);
  EXPECT_EQ(algorithm.nRanks, topology.nRanks());
  const CheckReport report = checkAlgorithm(algorithm);
  EXPECT_TRUE(report.ok()) << report.violation->message;
  // Every remote operation runs over a GPU-fabric link of the topology.
  const ExactTopology links = exactOf(topology);
  for (const Operation& op : algorithm.ops) {
    if (!op.isLocal()) {
      EXPECT_TRUE(links.hasLink(op.srcRank, op.dstRank)) << op.srcRank << " -> " << op.dstRank;
    }
  }
}

// ---- The link model and the bounds -----------------------------------------------------------

TEST(ExactTopology, Dgx1CarriesItsDoubleNvlinksAsTwoChunksPerRound) {
  const ExactTopology links = exactOf(dgx1());
  EXPECT_EQ(links.nGpus, 8);
  EXPECT_EQ(links.capacity[0][1], 2);
  EXPECT_EQ(links.capacity[0][2], 1);
  EXPECT_EQ(links.capacity[0][4], 2);
  EXPECT_EQ(links.capacity[0][5], 0);
  EXPECT_TRUE(links.groups.empty());
  EXPECT_TRUE(isSymmetric(links));
  int32_t diameter = 0;
  for (const auto& row : hopDistances(links)) {
    for (int32_t d : row) diameter = std::max(diameter, d);
  }
  EXPECT_EQ(diameter, 2);
}

TEST(ExactTopology, NvSwitchBoundsEachGpuPortBothWays) {
  const ExactTopology links = exactOf(makePreset("preset:dgx-a100"));
  EXPECT_EQ(links.capacity[0][7], 1);
  ASSERT_EQ(links.groups.size(), 16u);
  for (const BandwidthGroup& group : links.groups) {
    EXPECT_EQ(group.chunksPerRound, 1);
    EXPECT_EQ(group.links.size(), 7u);
  }
  // Each port takes in one chunk per round: one GPU one chunk, four GPUs four.
  EXPECT_EQ(cutCapacity(links, 0b1u), 1);
  EXPECT_EQ(cutCapacity(links, 0b1111u), 4);
}

TEST(ExactTopology, Dgx1BandwidthBoundsMatchSccl) {
  const ExactTopology links = exactOf(dgx1());
  // AllGather: each GPU takes in 7 chunks over 6 NVLinks (NCCL's (6,7,7) meets it).
  Demand allGather{8, {}};
  for (int32_t owner = 0; owner < 8; ++owner) allGather.chunks.push_back({{owner}, {0, 1, 2, 3, 4, 5, 6, 7}});
  EXPECT_EQ(roundsPerChunkLowerBound(links, allGather, 1), (RoundsPerChunk{7, 6}));
  EXPECT_EQ(stepsLowerBound(links, allGather), 2);
  // AllToAll: 16 chunks cross the 6 NVLinks between the quads (SCCL's (24,8,8) meets it).
  Demand allToAll{8, {}};
  for (int32_t src = 0; src < 8; ++src) {
    for (int32_t dst = 0; dst < 8; ++dst) {
      if (src != dst) allToAll.chunks.push_back({{src}, {dst}});
    }
  }
  EXPECT_EQ(roundsPerChunkLowerBound(links, allToAll, 8), (RoundsPerChunk{1, 3}));
}

// ---- SCCL Table 4 points on DGX-1 ------------------------------------------------------------

TEST(SynthesizeExact, Dgx1AllGatherLatencyOptimal) {
  expectProvedPoint(dgx1(), Collective::AllGather, 1, 2, 2);
}

TEST(SynthesizeExact, Dgx1AllGatherInOneStepIsUnsatisfiable) {
  // DGX-1's link graph has diameter 2.
  Expected<ParetoPoint> point = synthesizeExact(dgx1(), Collective::AllGather, 1, 1, 1, {});
  ASSERT_FALSE(point.ok());
  EXPECT_EQ(point.status().code(), ErrorCode::NotFound);
}

TEST(SynthesizeExact, Dgx1AllReduceLatencyOptimal) {
  expectProvedPoint(dgx1(), Collective::AllReduce, 8, 4, 4);
}

TEST(SynthesizeExact, Dgx1BroadcastLatencyOptimal) {
  expectProvedPoint(dgx1(), Collective::Broadcast, 2, 2, 2);
  expectProvedPoint(dgx1(), Collective::Broadcast, 2, 2, 2, /*root=*/5);
}

TEST(SynthesizeExact, Dgx1AllToAllLatencyOptimal) {
  expectProvedPoint(dgx1(), Collective::AllToAll, 8, 2, 3);
}

TEST(SynthesizeExact, Dgx1CombiningCollectivesAreInverses) {
  expectProvedPoint(dgx1(), Collective::ReduceScatter, 1, 2, 2);
  expectProvedPoint(dgx1(), Collective::Reduce, 2, 2, 2, /*root=*/3);
  expectProvedPoint(dgx1(), Collective::AllReduce, 16, 4, 6);
}

TEST(SynthesizeExact, IsDeterministic) {
  Expected<ParetoPoint> first = synthesizeExact(dgx1(), Collective::AllToAll, 8, 2, 3, {});
  Expected<ParetoPoint> second = synthesizeExact(dgx1(), Collective::AllToAll, 8, 2, 3, {});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->algorithm.ops, second->algorithm.ops);
}

// ---- Pareto-Synthesize -----------------------------------------------------------------------

// Points come with S ascending and R/C strictly descending, so none dominates another.
void expectPareto(const ParetoFrontier& frontier) {
  for (size_t i = 0; i + 1 < frontier.points.size(); ++i) {
    const ParetoPoint& a = frontier.points[i];
    const ParetoPoint& b = frontier.points[i + 1];
    EXPECT_LT(a.steps, b.steps);
    EXPECT_GT(int64_t{a.rounds} * b.chunks, int64_t{b.rounds} * a.chunks);
  }
  for (const ParetoPoint& point : frontier.points) {
    const CheckReport report = checkAlgorithm(point.algorithm);
    EXPECT_TRUE(report.ok()) << report.violation->message;
  }
}

std::vector<std::vector<int32_t>> shapes(const ParetoFrontier& frontier) {
  std::vector<std::vector<int32_t>> result;
  for (const ParetoPoint& p : frontier.points) result.push_back({p.chunks, p.steps, p.rounds});
  return result;
}

TEST(ParetoSynthesize, FourDgx1GpusAllGatherFrontierIsComplete) {
  // GPUs 0-3 of DGX-1: one fully connected quad, 4 NVLinks into each GPU (R/C >= 3/4).
  std::vector<std::string> lines;
  ExactSynthesisOptions options;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:gpus=4"), Collective::AllGather, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_TRUE(frontier->complete) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{1, 1, 1}, {4, 3, 3}}));
  expectPareto(*frontier);
  EXPECT_FALSE(lines.empty());
}

TEST(ParetoSynthesize, FourDgx1GpusAllReduceFrontierIsComplete) {
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:gpus=4"), Collective::AllReduce, {});
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_TRUE(frontier->complete) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{4, 2, 2}, {16, 6, 6}}));
  expectPareto(*frontier);
}

TEST(ParetoSynthesize, NvSwitchAllToAllWithSlack) {
  // Four A100s on NVSwitch: 3 chunks into each one-chunk port, so R/C >= 3/4 and one step cannot do.
  ExactSynthesisOptions options;
  options.slack = 1;
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx-a100:gpus=4"), Collective::AllToAll, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_TRUE(frontier->complete) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{4, 2, 3}}));
  expectPareto(*frontier);
}

TEST(ParetoSynthesize, StepLimitLeavesTheFrontierIncomplete) {
  ExactSynthesisOptions options;
  options.maxSteps = 3;
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:gpus=4"), Collective::Broadcast, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_FALSE(frontier->complete);
  EXPECT_NE(frontier->note.find("step limit"), std::string::npos) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{1, 1, 1}, {4, 2, 2}, {8, 3, 3}}));
  expectPareto(*frontier);
}

TEST(ParetoSynthesize, ChunkLimitEndsTheWalkWhenNoPointCanImprove) {
  // Broadcast's bound (R/C >= 1/4 out of the root's 4 NVLinks) needs C = 4R; with C <= 8 no S >= 4
  // beats (8,3,3).
  ExactSynthesisOptions options;
  options.maxChunks = 8;
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:gpus=4"), Collective::Broadcast, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_FALSE(frontier->complete);
  EXPECT_NE(frontier->note.find("stopped at S = 4"), std::string::npos) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{1, 1, 1}, {4, 2, 2}, {8, 3, 3}}));
}

TEST(ParetoSynthesize, ChunkCapBelowTheBoundLeavesTheFrontierIncomplete) {
  // The quad's bound R/C = 3/4 takes C = 4 at S = 3; with C <= 2 the walk cannot get there.
  ExactSynthesisOptions options;
  options.maxChunks = 2;
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:gpus=4"), Collective::AllGather, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_FALSE(frontier->complete) << frontier->note;
  EXPECT_EQ(shapes(*frontier), (std::vector<std::vector<int32_t>>{{1, 1, 1}}));
}

TEST(ParetoSynthesize, ExhaustedTimeLimitCutsTheWalkShort) {
  ExactSynthesisOptions options;
  options.timeLimitSeconds = 0;
  Expected<ParetoFrontier> frontier = paretoSynthesize(dgx1(), Collective::AllGather, options);
  ASSERT_TRUE(frontier.ok()) << frontier.status().message();
  EXPECT_FALSE(frontier->complete);
  EXPECT_TRUE(frontier->points.empty());
  EXPECT_NE(frontier->note.find("time limit"), std::string::npos) << frontier->note;
}

// ---- Bad input ---------------------------------------------------------------------------------

TEST(ExactSynthesisErrors, TwoNodesAreRefused) {
  Expected<ParetoFrontier> frontier =
      paretoSynthesize(makePreset("preset:dgx1-v100:nodes=2"), Collective::AllGather, {});
  ASSERT_FALSE(frontier.ok());
  EXPECT_EQ(frontier.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(frontier.status().message().find("one node of at most 8 GPUs"), std::string::npos)
      << frontier.status().message();
  EXPECT_NE(frontier.status().message().find("2 node(s)"), std::string::npos) << frontier.status().message();
}

TEST(ExactSynthesisErrors, SixteenGpusAreRefused) {
  Topology ring;
  ring.name = "ring16";
  ring.nodes.push_back(Node{});
  for (int32_t r = 0; r < 16; ++r) ring.gpus.push_back(Gpu{r, 0, "", 80, ""});
  for (int32_t r = 0; r < 16; ++r)
    ring.links.push_back(Link{gpuRef(r), gpuRef((r + 1) % 16), LinkKind::NVLink, 0.7, 25.0, 1});
  Expected<ParetoPoint> point = synthesizeExact(ring, Collective::AllGather, 1, 8, 8, {});
  ASSERT_FALSE(point.ok());
  EXPECT_EQ(point.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(point.status().message().find("16 GPUs"), std::string::npos) << point.status().message();
}

TEST(ExactSynthesisErrors, ShapesTheCollectiveCannotHaveAreRefused) {
  auto code = [](Collective collective, int32_t c, int32_t s, int32_t r, int32_t root = 0) {
    ExactSynthesisOptions options;
    options.root = root;
    return synthesizeExact(dgx1(), collective, c, s, r, options).status().code();
  };
  EXPECT_EQ(code(Collective::AllToAll, 3, 2, 3), ErrorCode::InvalidArgument);      // not a multiple of 8 GPUs
  EXPECT_EQ(code(Collective::AllReduce, 8, 3, 3), ErrorCode::InvalidArgument);     // odd steps
  EXPECT_EQ(code(Collective::AllGather, 1, 3, 2), ErrorCode::InvalidArgument);     // rounds below steps
  EXPECT_EQ(code(Collective::Broadcast, 1, 2, 2, 8), ErrorCode::InvalidArgument);  // root out of range
}

TEST(ExactSynthesisErrors, GpusWithoutAFabricAreRefused) {
  // Two GPUs joined only through a PCIe switch: exact synthesis models the GPU fabric alone.
  Topology pcie;
  pcie.name = "pcie-pair";
  pcie.nodes.push_back(Node{});
  pcie.gpus = {Gpu{0, 0, "", 70, ""}, Gpu{1, 0, "", 70, ""}};
  pcie.switches.push_back(Switch{SwitchKind::PCIeSwitch, 0, "", ""});
  pcie.links = {Link{gpuRef(0), switchRef(0), LinkKind::PCIe, 1, 12, 1},
                Link{gpuRef(1), switchRef(0), LinkKind::PCIe, 1, 12, 1}};
  Expected<ParetoPoint> point = synthesizeExact(pcie, Collective::AllGather, 1, 1, 1, {});
  ASSERT_FALSE(point.ok());
  EXPECT_EQ(point.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(point.status().message().find("NVLink"), std::string::npos) << point.status().message();
}

}  // namespace
}  // namespace tuccl
