// Applying decisions: availability, fallbacks, "any", NCCL's scan order, v2's rules, chunk size.
#include "plugin/cost_table.h"

#include <gtest/gtest.h>

#include <array>

namespace tuccl {
namespace {

using Costs = std::array<float, kNcclAlgorithms * kProtocols>;
using A = NcclAlgorithm;
using P = Protocol;
constexpr std::nullopt_t kAny = std::nullopt;

/// NCCL's cost-table indices of the enums.
constexpr int kAlgoTree = 0, kAlgoRing = 1, kAlgoCollNetDirect = 2, kAlgoCollNetChain = 3, kAlgoNvls = 4,
              kAlgoNvlsTree = 5, kAlgoPat = 6;
constexpr int kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2;
static_assert(kAlgoPat == static_cast<int>(A::Pat) && kAlgoCollNetChain == static_cast<int>(A::CollNetChain));
static_assert(kProtoSimple == static_cast<int>(P::Simple) && kProtoLL128 == static_cast<int>(P::LL128));

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
  AppliedDecision r = applyToCostTable(decisionOf({{A::Ring, P::LL128}}, 12), c.data(), 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::Applied);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoRing}, int{kProtoLL128}));
  EXPECT_EQ(channels, 12);
  EXPECT_EQ(r.choice, 0);
  EXPECT_EQ(r.selected, (Choice{A::Ring, P::LL128}));
}

TEST(CostTable, NeverSelectsAnUnavailableEntryAndFallsBackInOrder) {
  Costs c = realisticCosts();
  Costs before = c;
  int channels = 0;
  AppliedDecision r = applyToCostTable(
      decisionOf({{A::CollNetDirect, P::Simple}, {A::Pat, P::Simple}, {A::Nvls, P::Simple}}, 8), c.data(), 7,
      3, &channels);
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
  AppliedDecision r = applyToCostTable(decisionOf({{A::CollNetChain, P::Simple}, {A::Nvls, P::LL}}, 8),
                                       c.data(), 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(c, before);
  EXPECT_EQ(channels, 0);
}

TEST(CostTable, AnyProtocolPicksTheCheapestAvailableWithinTheAlgorithm) {
  Costs c = realisticCosts();
  c[kAlgoTree * 3 + kProtoLL] = -1;
  c[kAlgoTree * 3 + kProtoLL128] = 50;
  c[kAlgoTree * 3 + kProtoSimple] = 40;
  applyToCostTable(decisionOf({{A::Tree, kAny}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoTree}, int{kProtoSimple}));
}

TEST(CostTable, AnyAlgorithmPicksTheCheapestAvailableWithTheProtocol) {
  Costs c = realisticCosts();
  c[kAlgoRing * 3 + kProtoLL128] = 30;
  c[kAlgoTree * 3 + kProtoLL128] = 30;  // tie: NCCL's scan order, TREE first
  applyToCostTable(decisionOf({{kAny, P::LL128}}), c.data(), 7, 3, nullptr);
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
  applyToCostTable(decisionOf({{A::Ring, P::LL}}), c.data(), 7, 3, &untouched);
  EXPECT_EQ(untouched, 0) << "nChannels stays 0 when the entry does not set it";
}

TEST(CostTable, SixAlgorithmTableOfOldNccl) {
  // NCCL < 2.23: float[6][3], no PAT row. A PAT choice is unavailable; indices use numAlgo.
  std::array<float, 18> c;
  for (int i = 0; i < 18; ++i) c[i] = 10.0f + static_cast<float>(i);
  std::array<float, 18> before = c;
  AppliedDecision r = applyToCostTable(decisionOf({{A::Pat, P::Simple}}), c.data(), 6, 3, nullptr);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(c, before);
  applyToCostTable(decisionOf({{A::Pat, P::Simple}, {A::NvlsTree, P::Simple}}), c.data(), 6, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 6, 3), std::pair(int{kAlgoNvlsTree}, int{kProtoSimple}));
  std::array<float, 18> any = before;
  applyToCostTable(decisionOf({{kAny, P::LL}}), any.data(), 6, 3, nullptr);
  EXPECT_EQ(ncclPick(any.data(), 6, 3), std::pair(int{kAlgoTree}, int{kProtoLL}));
}

TEST(CostTable, EarlierZeroCostEntriesDoNotStealTheSelection) {
  Costs c = realisticCosts();
  c[kAlgoTree * 3 + kProtoLL] = 0.0f;
  applyToCostTable(decisionOf({{A::Ring, P::Simple}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(ncclPick(c.data(), 7, 3), std::pair(int{kAlgoRing}, int{kProtoSimple}));
  EXPECT_GT(c[kAlgoTree * 3 + kProtoLL], 0.0f);
}

TEST(CostTable, NaNCountsAsUnavailableAndNullTablesAreSafe) {
  Costs c = realisticCosts();
  c[kAlgoRing * 3 + kProtoLL] = std::numeric_limits<float>::quiet_NaN();
  AppliedDecision r = applyToCostTable(decisionOf({{A::Ring, P::LL}}), c.data(), 7, 3, nullptr);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  int channels = 0;
  r = applyToCostTable(decisionOf({{A::Ring, P::LL}}, 4), nullptr, 7, 3, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(channels, 0);
}

TEST(V2, FullySpecifiedChoicesOnlyAndSupportFlags) {
  int algorithm = -1, protocol = -1, channels = 0;
  AppliedDecision r = applyToV2(decisionOf({{A::Nvls, P::Simple}, {A::Ring, P::LL128}}, 4), 0, 0, &algorithm,
                                &protocol, &channels);
  EXPECT_EQ(r.choice, 1);
  EXPECT_EQ(r.selected, (Choice{A::Ring, P::LL128}));
  EXPECT_EQ(algorithm, kAlgoRing);
  EXPECT_EQ(protocol, kProtoLL128);
  EXPECT_EQ(channels, 4);

  algorithm = protocol = -1;
  channels = 0;
  applyToV2(decisionOf({{A::Nvls, P::Simple}}), 0, 1, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, kAlgoNvls);

  algorithm = protocol = -1;
  r = applyToV2(
      decisionOf({{A::CollNetDirect, P::Simple}, {A::Pat, P::Simple}, {kAny, P::LL}, {A::Nvls, P::LL}}, 9), 0,
      1, &algorithm, &protocol, &channels);
  EXPECT_EQ(r.outcome, DecisionOutcome::AllUnavailable);
  EXPECT_EQ(algorithm, -1);
  EXPECT_EQ(protocol, -1);
  EXPECT_EQ(channels, 0);

  applyToV2(decisionOf({{A::CollNetChain, P::Simple}}), 1, 0, &algorithm, &protocol, &channels);
  EXPECT_EQ(algorithm, kAlgoCollNetChain);
}

TEST(ChunkSize, OnlyWhenSetAndForAnAllowedChoice) {
  CompiledDecision d = decisionOf({{A::Ring, P::LL128}, {kAny, P::Simple}}, 0, 1 << 19);
  EXPECT_EQ(chunkSizeFor(d, A::Ring, P::LL128), 1u << 19);
  EXPECT_EQ(chunkSizeFor(d, A::Tree, P::Simple), 1u << 19);
  EXPECT_EQ(chunkSizeFor(d, A::Tree, P::LL), 0u);
  EXPECT_EQ(chunkSizeFor(decisionOf({{A::Ring, P::LL}}), A::Ring, P::LL), 0u);
  EXPECT_EQ(chunkSizeFor(decisionOf({}, 0, 4096), A::Tree, P::LL), 4096u);
}

TEST(FormatChoice, Names) {
  char text[32];
  EXPECT_STREQ(formatChoice({A::NvlsTree, P::Simple}, text, sizeof text), "NVLS_TREE/SIMPLE");
  EXPECT_STREQ(formatChoice({kAny, P::LL}, text, sizeof text), "any/LL");
  char tiny[4];
  EXPECT_STREQ(formatChoice({A::Ring, P::LL}, tiny, sizeof tiny), "RIN");
}

}  // namespace
}  // namespace tuccl
