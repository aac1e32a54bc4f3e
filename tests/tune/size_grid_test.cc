#include "tune/size_grid.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>

#include <algorithm>

namespace tuccl {
namespace {

TEST(SizeGrid, ParsesRanges) {
  EXPECT_EQ(*parseSizeRange("1K:1G"), std::make_pair(int64_t{1024}, int64_t{1} << 30));
  EXPECT_EQ(*parseSizeRange("4M"), std::make_pair(int64_t{4} << 20, int64_t{4} << 20));
  EXPECT_EQ(*parseSizeRange("1.5K:2MiB"), std::make_pair(int64_t{1536}, int64_t{2} << 20));
  Expected<std::pair<int64_t, int64_t>> reversed = parseSizeRange("1G:1K");
  ASSERT_FALSE(reversed);
  EXPECT_EQ(reversed.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(reversed.status().message(), "size range '1G:1K' wants MIN:MAX with 0 < MIN <= MAX");
  EXPECT_NE(parseSizeRange("1K:1Q").status().message().find("'1Q' is not a byte size"), std::string::npos);
  EXPECT_FALSE(parseSizeRange("0:1K"));
  EXPECT_FALSE(parseSizeRange("K"));
  EXPECT_FALSE(parseSizeRange("1K:"));
  EXPECT_NE(parseSizeRange("1:9000000000T").status().message().find("too large"), std::string::npos);
}

TEST(SizeGrid, PowersOfTwoByDefault) {
  const auto sizes = *sizeGrid(1024, 1 << 20);
  ASSERT_EQ(sizes.size(), 11u);
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], int64_t{1024} << i);
  EXPECT_EQ(sizeGrid(1024, 1 << 20, 4)->size(), 6u);
  EXPECT_EQ(*sizeGrid(1000, 1000), std::vector<int64_t>{1000});
  EXPECT_FALSE(sizeGrid(1024, 2048, 1.0));
  EXPECT_FALSE(sizeGrid(2048, 1024, 2.0));
  EXPECT_EQ(*parseSizeGrid("1K:4K"), (std::vector<int64_t>{1024, 2048, 4096}));
  EXPECT_NE(parseSizeGrid("1K:4K", 0.5).status().message().find("greater than 1"), std::string::npos);
}

TEST(SizeGrid, AFactorMakingMillionsOfSizesIsRefusedWithOneThatFits) {
  Expected<std::vector<int64_t>> fine = parseSizeGrid("1K:4G", 1.0000001);
  ASSERT_FALSE(fine);
  const std::string message = fine.status().message();
  EXPECT_NE(message.find("the size factor 1.0000001 makes about"), std::string::npos) << message;
  EXPECT_NE(message.find("from 1 KiB to 4 GiB; at most 1,024 are allowed: use a factor of at least 1.0151"),
            std::string::npos)
      << message;
  // The suggested factor is accepted and stays within the limit.
  Expected<std::vector<int64_t>> suggested = parseSizeGrid("1K:4G", 1.0151);
  ASSERT_TRUE(suggested) << suggested.status().message();
  EXPECT_LE(suggested->size(), static_cast<size_t>(kMaxGridSizes));
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -2.0}) {
    EXPECT_FALSE(sizeGrid(1024, 4096, bad)) << bad;
  }
}

// Messages say what is wrong, not which function found it.
TEST(SizeGrid, MergeRefusesUnsortedSizesInWordsForPeople) {
  try {
    mergeSizeRanges({2048, 1024}, {"a", "b"});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()).find("mergeSizeRanges"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("strictly ascending"), std::string::npos) << error.what();
  }
}

TEST(SizeGrid, RoundsToWholeBytesAndNeverRepeatsASize) {
  // 1000 * 2.5^k: 39062.5 rounds to 39063.
  EXPECT_EQ(*sizeGrid(1000, 100000, 2.5), (std::vector<int64_t>{1000, 2500, 6250, 15625, 39063, 97656}));
  const auto fine = *sizeGrid(1, 8, 1.1);
  EXPECT_TRUE(std::adjacent_find(fine.begin(), fine.end()) == fine.end());
  EXPECT_TRUE(std::is_sorted(fine.begin(), fine.end()));
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
