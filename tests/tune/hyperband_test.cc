#include "tune/hyperband.h"

#include <gtest/gtest.h>

namespace tuccl {
namespace {

std::vector<std::vector<Rung>> rungs(const std::vector<Bracket>& brackets) {
  std::vector<std::vector<Rung>> out;
  for (const Bracket& b : brackets) out.push_back(b.rungs);
  return out;
}

TEST(Hyperband, SMax) {
  EXPECT_EQ(hyperbandSMax(81, 3), 4);
  EXPECT_EQ(hyperbandSMax(80, 3), 3);
  EXPECT_EQ(hyperbandSMax(27, 3), 3);
  EXPECT_EQ(hyperbandSMax(1, 3), 0);
  EXPECT_EQ(hyperbandSMax(64, 2), 6);
  EXPECT_THROW(hyperbandSMax(0, 3), std::invalid_argument);
  EXPECT_THROW(hyperbandSMax(81, 1), std::invalid_argument);
}

// R_max = 81, eta = 3 with Li et al.'s floor rounding: Table 1 of the Hyperband paper.
TEST(Hyperband, BracketsMatchLiEtAlTable1) {
  std::vector<Bracket> b = hyperbandBrackets(81, 3, RungRounding::Floor);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].s, 4);
  EXPECT_EQ(b[4].s, 0);
  std::vector<std::vector<Rung>> expected = {
      {{81, 1}, {27, 3}, {9, 9}, {3, 27}, {1, 81}},
      {{34, 3}, {11, 9}, {3, 27}, {1, 81}},
      {{15, 9}, {5, 27}, {1, 81}},
      {{8, 27}, {2, 81}},
      {{5, 81}},
  };
  EXPECT_EQ(rungs(b), expected);
}

// The same with Algorithm 1 line 9 / Eq. 4's ceil(n_s eta^-i) (the default).
TEST(Hyperband, BracketsMatchAlgorithm1Ceil) {
  std::vector<Bracket> b = hyperbandBrackets(81, 3);
  std::vector<std::vector<Rung>> expected = {
      {{81, 1}, {27, 3}, {9, 9}, {3, 27}, {1, 81}},
      {{34, 3}, {12, 9}, {4, 27}, {2, 81}},
      {{15, 9}, {5, 27}, {2, 81}},
      {{8, 27}, {3, 81}},
      {{5, 81}},
  };
  EXPECT_EQ(rungs(b), expected);
  EXPECT_EQ(b[0].cost(), 5 * 81);
  EXPECT_EQ(b[1].cost(), 34 * 3 + 12 * 9 + 4 * 27 + 2 * 81);
}

// The default R_max = 27, eta = 3 (docs/tuning.md) and eta = 2.
TEST(Hyperband, DefaultsAndEtaTwo) {
  std::vector<std::vector<Rung>> expected27 = {
      {{27, 1}, {9, 3}, {3, 9}, {1, 27}},
      {{12, 3}, {4, 9}, {2, 27}},
      {{6, 9}, {2, 27}},
      {{4, 27}},
  };
  EXPECT_EQ(rungs(hyperbandBrackets(27, 3)), expected27);
  std::vector<std::vector<Rung>> expected8 = {
      {{8, 1}, {4, 2}, {2, 4}, {1, 8}},
      {{6, 2}, {3, 4}, {2, 8}},
      {{4, 4}, {2, 8}},
      {{4, 8}},
  };
  EXPECT_EQ(rungs(hyperbandBrackets(8, 2)), expected8);
}

// R_max not a power of eta: the resources are floored, the last rung is R_max itself.
TEST(Hyperband, NonPowerResource) {
  std::vector<Bracket> b = hyperbandBrackets(100, 3);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b[0].rungs.front().resource, 1);   // floor(100 / 81)
  EXPECT_EQ(b[0].rungs[3].resource, 33);       // floor(100 / 3)
  for (const Bracket& x : b) EXPECT_EQ(x.rungs.back().resource, 100);
}

}  // namespace
}  // namespace tuccl
