#include "tune/size_grid.h"

#include <gtest/gtest.h>

namespace tuccl {
namespace {

TEST(SizeGrid, ParsesSizesAndRanges) {
  EXPECT_EQ(parseSizeText("1048576"), 1 << 20);
  EXPECT_EQ(parseSizeText("64K"), 64 << 10);
  EXPECT_EQ(parseSizeText("1MiB"), 1 << 20);
  EXPECT_EQ(parseSizeText("2g"), int64_t{2} << 30);
  EXPECT_THROW(parseSizeText("1Q"), std::invalid_argument);
  EXPECT_THROW(parseSizeText("K"), std::invalid_argument);
  EXPECT_EQ(parseSizeRange("1K:1G"), std::make_pair(int64_t{1024}, int64_t{1} << 30));
  EXPECT_EQ(parseSizeRange("4M"), std::make_pair(int64_t{4} << 20, int64_t{4} << 20));
  EXPECT_THROW(parseSizeRange("1G:1K"), std::invalid_argument);
}

TEST(SizeGrid, PowersOfTwoByDefault) {
  const auto sizes = sizeGrid(1024, 1 << 20);
  ASSERT_EQ(sizes.size(), 11u);
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], int64_t{1024} << i);
  EXPECT_EQ(sizeGrid(1024, 1 << 20, 4).size(), 6u);
  EXPECT_EQ(sizeGrid(1000, 1000), std::vector<int64_t>{1000});
  EXPECT_THROW(sizeGrid(1024, 2048, 1.0), std::invalid_argument);
}

TEST(SizeGrid, MergesAdjacentSizesWithTheSameWinner) {
  const std::vector<int64_t> sizes = {1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14};
  const auto ranges = mergeSizeRanges(sizes, {"a", "a", "b", "b", "a"});
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].first, 0u);
  EXPECT_EQ(ranges[0].last, 1u);
  EXPECT_EQ(ranges[0].minBytes, 0u);  // the first range starts at 0
  EXPECT_EQ(ranges[0].maxBytes, (1u << 12) - 1);
  EXPECT_EQ(ranges[1].minBytes, 1u << 12);
  EXPECT_EQ(ranges[1].maxBytes, (1u << 14) - 1);
  EXPECT_EQ(ranges[2].first, 4u);
  EXPECT_EQ(ranges[2].minBytes, 1u << 14);
  EXPECT_EQ(ranges[2].maxBytes, UINT64_MAX);  // the last has no bound
  // A winner that comes back is not merged across a different one.
  EXPECT_EQ(mergeSizeRanges(sizes, {"a", "a", "a", "a", "a"}).size(), 1u);
  EXPECT_EQ(mergeSizeRanges(sizes, {"a", "b", "c", "d", "e"}).size(), 5u);
  EXPECT_THROW(mergeSizeRanges(sizes, {"a"}), std::invalid_argument);
  EXPECT_THROW(mergeSizeRanges({2, 1}, {"a", "a"}), std::invalid_argument);
}

TEST(SizeGrid, ChunkLevelsBoundTheMicroBatches) {
  std::vector<int64_t> levels;
  for (int64_t c = 256; c <= (8 << 20); c *= 2) levels.push_back(c);
  // 1 MiB over 8 ranks: 128 KiB per chunk; at most 64 micro-batches: 2 KiB .. 128 KiB.
  auto kept = chunkLevelsFor(levels, 1 << 20, 8, 64);
  EXPECT_EQ(kept.front(), 2048);
  EXPECT_EQ(kept.back(), 128 << 10);
  EXPECT_EQ(kept.size(), 7u);
  // 1 GiB over 8 ranks: 128 MiB per chunk; from 2 MiB to the largest level.
  kept = chunkLevelsFor(levels, int64_t{1} << 30, 8, 64);
  EXPECT_EQ(kept, (std::vector<int64_t>{2 << 20, 4 << 20, 8 << 20}));
  // 1 KiB: every level holds a whole chunk; the smallest is kept.
  EXPECT_EQ(chunkLevelsFor(levels, 1024, 8, 64), std::vector<int64_t>{256});
  // 1 TiB: every level is too small; the largest is kept.
  EXPECT_EQ(chunkLevelsFor(levels, int64_t{1} << 40, 8, 64), std::vector<int64_t>{8 << 20});
}

}  // namespace
}  // namespace tuccl
