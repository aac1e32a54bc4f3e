// Applying decisions: availability, fallbacks, "any", NCCL's scan order, v2's rules, chunk size.
#include "plugin/decision.h"

#include <gtest/gtest.h>

#include <array>

namespace tuccl {
namespace {

using Costs = std::array<float, kNumAlgorithms * kNumProtocols>;

/// NCCL's selection: the smallest value >= 0, strict less-than scan, algorithm-major.
std::pair<int, int> ncclPick(const float* table, int numAlgo, int numProto) {
  int best = -1;
  float minTime = 3.4e38f;
  for (int a = 0; a < numAlgo; ++a) {
    for (int p = 0; p < numProto; ++p) {
      float t = table[a * numProto + p];
      if (t >= 0.0f && t < minTime) {
        minTime = t;
        best = a * numProto + p;
      }
    }
  }
  return best < 0 ? std::pair{-1, -1} : std::pair{best / numProto, best % numProto};
}

Costs realisticCosts() {
  Costs c;
  for (int i = 0; i < static_cast<int>(c.size()); ++i) c[i] = 20.0f + static_cast<float>(i);
  // CollNet unavailable, NVLS only Simple, PAT unavailable (e.g. AllReduce).
  for (int p = 0; p < 3; ++p)
    c[kAlgoCollNetDirect * 3 + p] = c[kAlgoCollNetChain * 3 + p] = c[kAlgoPat * 3 + p] = -1;
  c[kAlgoNvls * 3 + kProtoLL] = c[kAlgoNvls * 3 + kProtoLL128] = -1;
  c[kAlgoNvlsTree * 3 + kProtoLL] = c[kAlgoNvlsTree * 3 + kProtoLL128] = -1;
  return c;
}

CompiledDecision decisionOf(std::initializer_list<Choice> choices, int nChannels = 0, uint64_t chunk = 0) {
  CompiledDecision d;
  for (Choice c : choices) d.choices[d.numChoices++] = c;
  d.nChannels = nChannels;
  d.chunkSize = chunk;
  return d;
}

TEST(CostTable, TakesTheFirstAvailableChoice) {
  Costs c = realisticCosts();
  int channels = 0;
  AppliedDecision r = applyToCostTable(decisionOf({{kAlgoRing, kProtoLL128}}, 12), c.data(), 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::Applied);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoRing}, int{kProtoLL128}));
  EXPECT_EQ(channels, 12);
  EXPECT_EQ(r.choice, 0);
}

TEST(CostTable, NeverSelectsAnUnavailableEntryAndFallsBackInOrder) {
  Costs c = realisticCosts();
  Costs before = c;
  int channels = 0;
  AppliedDecision r = applyToCostTable(
      decisionOf({{kAlgoCollNetDirect, kProtoSimple}, {kAlgoPat, kProtoSimple}, {kAlgoNvls, kProtoSimple}},
                 8),
      c.data(), 7, 3, &channels);
  EXPECT_EQ(r.choice, 2);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoNvls}, int{kProtoSimple}));
  for (int i = 0; i < 21; ++i) {
    if (before[i] < 0) {
      EXPECT_EQ(c[i], before[i]) << "entry " << i << " was unavailable and must stay so";
    }
  }
}

TEST(CostTable, AllUnavailableLeavesTableAndChannelsUntouched) {
  Costs c = realisticCosts();
  Costs before = c;
  int channels = 0;
  AppliedDecision r = applyToCostTable(
      decisionOf({{kAlgoCollNetChain, kProtoSimple}, {kAlgoNvls, kProtoLL}}, 8), c.data(), 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(c, before);
  EXPECT_EQ(channels, 0);
}

TEST(CostTable, AnyProtocolPicksTheCheapestAvailableWithinTheAlgorithm) {
  Costs c = realisticCosts();
  c[kAlgoTree * 3 + kProtoLL] = -1;
  c[kAlgoTree * 3 + kProtoLL128] = 50;
  c[kAlgoTree * 3 + kProtoSimple] = 40;
  applyToCostTable(decisionOf({{kAlgoTree, kAny}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoTree}, int{kProtoSimple}));
}

TEST(CostTable, AnyAlgorithmPicksTheCheapestAvailableWithTheProtocol) {
  Costs c = realisticCosts();
  c[kAlgoRing * 3 + kProtoLL128] = 30;
  c[kAlgoTree * 3 + kProtoLL128] = 30;  // tie: NCCL's scan order, TREE first
  applyToCostTable(decisionOf({{kAny, kProtoLL128}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoTree}, int{kProtoLL128}));
}

TEST(CostTable, AnyAnyKeepsNcclsChoiceButSetsChannels) {
  Costs c = realisticCosts();
  Costs before = c;
  int channels = 0;
  AppliedDecision r = applyToCostTable(decisionOf({{kAny, kAny}}, 6), c.data(), 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::Applied);
  EXPECT_EQ(c, before);
  EXPECT_EQ(channels, 6);
}

TEST(CostTable, ChannelsOnlyEntry) {
  Costs c = realisticCosts();
  Costs before = c;
  int channels = 0;
  applyToCostTable(decisionOf({}, 3), c.data(), 7, 3, &channels);
  EXPECT_EQ(c, before);
  EXPECT_EQ(channels, 3);
  int untouched = 0;
  applyToCostTable(decisionOf({{kAlgoRing, kProtoLL}}), c.data(), 7, 3, &untouched);
  EXPECT_EQ(untouched, 0) << "nChannels stays 0 when the entry does not set it";
}

TEST(CostTable, SixAlgorithmTableOfOldNccl) {
  // NCCL < 2.23: float[6][3], no PAT row. A PAT choice is unavailable; indices use numAlgo.
  std::array<float, 18> c;
  for (int i = 0; i < 18; ++i) c[i] = 10.0f + static_cast<float>(i);
  std::array<float, 18> before = c;
  AppliedDecision r = applyToCostTable(decisionOf({{kAlgoPat, kProtoSimple}}), c.data(), 6, 3, nullptr);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(c, before);
  applyToCostTable(decisionOf({{kAlgoPat, kProtoSimple}, {kAlgoNvlsTree, kProtoSimple}}), c.data(), 6, 3,
                   nullptr);
  EXPECT_EQ(ncclPick(c.data(), 6, 3), std::pair(int{kAlgoNvlsTree}, int{kProtoSimple}));
  std::array<float, 18> any = before;
  applyToCostTable(decisionOf({{kAny, kProtoLL}}), any.data(), 6, 3, nullptr);
  EXPECT_EQ(ncclPick(any.data(), 6, 3), std::pair(int{kAlgoTree}, int{kProtoLL}));
}

TEST(CostTable, EarlierZeroCostEntriesDoNotStealTheSelection) {
  Costs c = realisticCosts();
  c[kAlgoTree * 3 + kProtoLL] = 0.0f;
  applyToCostTable(decisionOf({{kAlgoRing, kProtoSimple}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoRing}, int{kProtoSimple}));
  EXPECT_GT(c[kAlgoTree * 3 + kProtoLL], 0.0f);
}

TEST(CostTable, NaNCountsAsUnavailableAndNullTablesAreSafe) {
  Costs c = realisticCosts();
  c[kAlgoRing * 3 + kProtoLL] = std::numeric_limits<float>::quiet_NaN();
  AppliedDecision r = applyToCostTable(decisionOf({{kAlgoRing, kProtoLL}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  int channels = 0;
  r = applyToCostTable(decisionOf({{kAlgoRing, kProtoLL}}, 4), nullptr, 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(channels, 0);
}

TEST(V2, FullySpecifiedChoicesOnlyAndSupportFlags) {
  int algorithm = -1, protocol = -1, channels = 0;
  AppliedDecision r = applyToV2(decisionOf({{kAlgoNvls, kProtoSimple}, {kAlgoRing, kProtoLL128}}, 4), 0, 0,
                                &algorithm, &protocol, &channels);
  EXPECT_EQ(r.choice, 1);
  EXPECT_EQ(algorithm, kAlgoRing);
  EXPECT_EQ(protocol, kProtoLL128);
  EXPECT_EQ(channels, 4);

  algorithm = protocol = -1;
  channels = 0;
  applyToV2(decisionOf({{kAlgoNvls, kProtoSimple}}), 0, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, kAlgoNvls);

  algorithm = protocol = -1;
  r = applyToV2(decisionOf({{kAlgoCollNetDirect, kProtoSimple},
                            {kAlgoPat, kProtoSimple},
                            {kAny, kProtoLL},
                            {kAlgoNvls, kProtoLL}},
                           9),
                0, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(algorithm, -1);
  EXPECT_EQ(protocol, -1);
  EXPECT_EQ(channels, 0);

  applyToV2(decisionOf({{kAlgoCollNetChain, kProtoSimple}}), 1, 0, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, kAlgoCollNetChain);
}

TEST(ChunkSize, OnlyWhenSetAndForAnAllowedChoice) {
  CompiledDecision d = decisionOf({{kAlgoRing, kProtoLL128}, {kAny, kProtoSimple}}, 0, 1 << 19);
  EXPECT_EQ(chunkSizeFor(d, kAlgoRing, kProtoLL128), 1u << 19);
  EXPECT_EQ(chunkSizeFor(d, kAlgoTree, kProtoSimple), 1u << 19);
  EXPECT_EQ(chunkSizeFor(d, kAlgoTree, kProtoLL), 0u);
  EXPECT_EQ(chunkSizeFor(decisionOf({{kAlgoRing, kProtoLL}}), kAlgoRing, kProtoLL), 0u);
  EXPECT_EQ(chunkSizeFor(decisionOf({}, 0, 4096), kAlgoTree, kProtoLL), 4096u);
}

TEST(FormatChoice, Names) {
  char text[32];
  EXPECT_STREQ(formatChoice({kAlgoNvlsTree, kProtoSimple}, text, sizeof text), "NVLS_TREE/SIMPLE");
  EXPECT_STREQ(formatChoice({kAny, kProtoLL}, text, sizeof text), "any/LL");
  char tiny[4];
  EXPECT_STREQ(formatChoice({kAlgoRing, kProtoLL}, tiny, sizeof tiny), "RIN");
}

}  // namespace
}  // namespace tuccl
