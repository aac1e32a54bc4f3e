// Compiled to an empty test program when the simulator (and so topo/) is not built.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "lang/semantic_check.h"
#include "topo/presets.h"
#include "tune/sketch_candidates.h"

namespace tuccl {
namespace {

const std::string kExamples = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms";

const AlgorithmCandidate* find(const std::vector<AlgorithmCandidate>& cs, const std::string& name) {
  for (const AlgorithmCandidate& c : cs)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(SketchCandidates, SketchesAdmitProgramsByTheirInterNodePeers) {
  // Two GPUs per NIC: pruned keeps NIC groups, relay one sender->receiver pair per group.
  const Topology t = makePreset("preset:resccl-a100:nodes=2");
  const auto cs = algorithmCandidates(t, Collective::AllGather, kExamples);
  const auto* ring = find(cs, "ring");
  const auto* rail = find(cs, "ring-rail");
  const auto* hm = find(cs, "hm");
  const auto* direct = find(cs, "direct");
  ASSERT_TRUE(ring && rail && hm && direct);
  EXPECT_EQ(ring->sketches, std::vector<std::string>{"full-mesh"});  // 7 -> 8 crosses NIC groups
  EXPECT_TRUE(ring->ncclRing);
  EXPECT_EQ(hm->sketches, (std::vector<std::string>{"pruned", "full-mesh"}));
  EXPECT_EQ(direct->sketches, std::vector<std::string>{"full-mesh"});
  EXPECT_EQ(rail->sketch(), "relay");
  EXPECT_FALSE(rail->ncclRing);
  EXPECT_EQ(rail->interNodeConnections, 2);  // one hop each way
  EXPECT_TRUE(checkAlgorithm(rail->algorithm).ok());
  EXPECT_EQ(hm->interNodeConnections, 16);
}

TEST(SketchCandidates, OneGpuPerNicLetsRelayAdmitHm) {
  const Topology t = makePreset("preset:dgx-h100:nodes=2,gpus=4");
  const auto cs = algorithmCandidates(t, Collective::AllReduce, kExamples);
  ASSERT_TRUE(find(cs, "hm"));
  EXPECT_EQ(find(cs, "hm")->sketch(), "relay");
  EXPECT_EQ(find(cs, "direct"), nullptr);  // no direct AllReduce program
}

TEST(SketchCandidates, OneNodeAdmitsEverythingAndNeedsNoRailRing) {
  const Topology t = makePreset("preset:dgx-a100:nodes=1");
  const auto cs = algorithmCandidates(t, Collective::AllGather, kExamples);
  EXPECT_EQ(find(cs, "ring-rail"), nullptr);
  for (const AlgorithmCandidate& c : cs) EXPECT_EQ(c.sketch(), "relay") << c.name;
}

TEST(SketchCandidates, GeneratorsAndTheSynthesiserGiveCandidatesForEveryCollective) {
  const Topology t = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                Collective::Broadcast, Collective::Reduce}) {
    std::vector<std::string> notes;
    const auto cs = algorithmCandidates(t, collective, kExamples, &notes);
    std::set<std::string> names;
    bool synthesised = false;
    for (const AlgorithmCandidate& c : cs) {
      EXPECT_TRUE(names.insert(c.name).second) << c.name << " twice";
      EXPECT_EQ(c.algorithm.collective, collective) << c.name;
      EXPECT_TRUE(checkAlgorithm(c.algorithm).ok()) << c.name;
      ASSERT_FALSE(c.sketches.empty()) << c.name;
      // A generated candidate is named after the sketch it was built on, which admits it.
      if (const size_t at = c.name.find('@'); at != std::string::npos) {
        const std::string variant = c.name.substr(at + 1);
        EXPECT_NE(std::find(c.sketches.begin(), c.sketches.end(), variant), c.sketches.end()) << c.name;
        synthesised = synthesised || c.name.starts_with("synth@");
      }
    }
    EXPECT_TRUE(synthesised) << collectiveName(collective);
    EXPECT_GE(cs.size(), 3u) << collectiveName(collective);
  }
}

TEST(SketchCandidates, OnlyTheNamedCandidatesAreMade) {
  const Topology t = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  CandidateOptions options;
  options.only = {"hm", "synth@relay"};
  const auto cs = algorithmCandidates(t, Collective::AllGather, kExamples, nullptr, options);
  for (const AlgorithmCandidate& c : cs)
    EXPECT_TRUE(c.name == "hm" || c.name.starts_with("hm@") || c.name.starts_with("synth@")) << c.name;
  ASSERT_TRUE(find(cs, "hm"));
}

TEST(SketchCandidates, RingOrderFollowsTheSketch) {
  const Topology t = makePreset("preset:resccl-a100:nodes=4,gpus=4");
  const Sketch relay = buildSketch(t, SketchVariant::Relay);
  auto order = sketchRingOrder(t, relay);
  ASSERT_TRUE(order);
  ASSERT_EQ(order->size(), 16u);
  for (size_t p = 0; p < order->size(); ++p) {
    const int32_t a = (*order)[p], b = (*order)[(p + 1) % order->size()];
    if (t.gpus[a].node == t.gpus[b].node) continue;
    EXPECT_TRUE(std::binary_search(relay.interNodePairs.begin(), relay.interNodePairs.end(), std::make_pair(a, b)))
        << a << " -> " << b;
  }
}

TEST(SketchCandidates, RelabellingKeepsAllGatherCorrect) {
  const Topology t = makePreset("preset:resccl-a100:nodes=2,gpus=4");
  const auto cs = algorithmCandidates(t, Collective::AllGather, kExamples);
  const Algorithm& ring = find(cs, "ring")->algorithm;
  std::vector<int32_t> reversed(static_cast<size_t>(ring.nRanks));
  for (int32_t p = 0; p < ring.nRanks; ++p) reversed[static_cast<size_t>(p)] = ring.nRanks - 1 - p;
  const Algorithm flipped = relabelRanks(ring, reversed);
  EXPECT_TRUE(checkAlgorithm(flipped).ok());
  EXPECT_THROW(relabelRanks(ring, {0, 1}), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
