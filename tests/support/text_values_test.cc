// Byte sizes, lists and case: the one grammar every tool and reader uses for them.
#include "support/text_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tuccl {
namespace {

uint64_t bytes(std::string_view text) {
  Expected<uint64_t> parsed = parseByteSize(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.status().message();
  return parsed ? *parsed : 0;
}

TEST(ByteSize, UnitsAndSpellings) {
  EXPECT_EQ(bytes("1048576"), 1048576u);
  EXPECT_EQ(bytes("1M"), 1048576u);
  EXPECT_EQ(bytes("64k"), 65536u);
  EXPECT_EQ(bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(bytes("2gib"), 2ull << 30);
  EXPECT_EQ(bytes("512KB"), 512u << 10);
  EXPECT_EQ(bytes("7B"), 7u);
  EXPECT_EQ(bytes("8b"), 8u);
  EXPECT_EQ(bytes("4T"), 4ull << 40);
  EXPECT_EQ(bytes("0"), 0u);
  EXPECT_EQ(bytes("18446744073709551615"), UINT64_MAX);
}

TEST(ByteSize, FractionsMustBeWholeBytes) {
  EXPECT_EQ(bytes("1.5M"), 3u << 19);
  EXPECT_EQ(bytes("1.5K"), 1536u);
  EXPECT_EQ(bytes("0.25K"), 256u);
  EXPECT_EQ(bytes("2.0"), 2u);
  EXPECT_EQ(bytes("1.000000000000000000"), 1u) << "trailing zeros are fine";
  Expected<uint64_t> part = parseByteSize("1.3K");
  ASSERT_FALSE(part);
  EXPECT_EQ(part.status().message(),
            "'1.3K' is not a byte size: not a whole number of bytes (e.g. 1048576, 64K, 1M, 1.5G)");
  EXPECT_FALSE(parseByteSize("0.5"));
  EXPECT_FALSE(parseByteSize("1."));
  EXPECT_FALSE(parseByteSize(".5K"));
  EXPECT_FALSE(parseByteSize("1.0000000000000000001")) << "too many decimals";
}

TEST(ByteSize, JunkAndOverflowAreErrors) {
  for (std::string_view text : {"", "-1", "1X", "K", "1KK", "1 K", " 1K", "1Mx", "lots", "1e6", "0x10"}) {
    Expected<uint64_t> parsed = parseByteSize(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(parsed.status().message().find("'" + std::string(text) + "' is not a byte size"),
              std::string::npos);
  }
  EXPECT_NE(parseByteSize("99999999999999999999").status().message().find("too large"), std::string::npos);
  EXPECT_NE(parseByteSize("20000000000T").status().message().find("too large"), std::string::npos);
  EXPECT_NE(parseByteSize("16777215.99999T").status().message().find("not a whole number"),
            std::string::npos);
  EXPECT_EQ(bytes("16777215.75T"), (16777215ull << 40) + (3ull << 38));
  EXPECT_FALSE(parseByteSize("18446744073709551616"));
}

TEST(ByteSize, FormatRoundTrips) {
  EXPECT_EQ(formatByteSize(1048576), "1M");
  EXPECT_EQ(formatByteSize(1000), "1000");
  EXPECT_EQ(formatByteSize(1536), "1536");
  EXPECT_EQ(formatByteSize(4ull << 30), "4G");
  EXPECT_EQ(formatByteSize(0), "0");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t value = (rng() >> (rng() % 64)) << (rng() % 20);
    EXPECT_EQ(bytes(formatByteSize(value)), value) << formatByteSize(value);
  }
}

TEST(SplitList, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(splitList("allreduce,allgather"), (std::vector<std::string>{"allreduce", "allgather"}));
  EXPECT_EQ(splitList(" a , ,b,, c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(splitList(""), std::vector<std::string>{});
  EXPECT_EQ(splitList(",,"), std::vector<std::string>{});
  EXPECT_EQ(splitList("x;y z;", ';'), (std::vector<std::string>{"x", "y z"}));
}

TEST(Case, ConvertsAndComparesAscii) {
  EXPECT_EQ(toLowerCase("AllReduce"), "allreduce");
  EXPECT_EQ(toUpperCase("Simple"), "SIMPLE");
  EXPECT_TRUE(equalsIgnoreCase("LL128", "ll128"));
  EXPECT_FALSE(equalsIgnoreCase("LL", "LL128"));
}

}  // namespace
}  // namespace tuccl

namespace {

TEST(TextValuesRange, BytesForPeople) {
  EXPECT_EQ(tuccl::formatBytesForPeople(0), "0 B");
  EXPECT_EQ(tuccl::formatBytesForPeople(512), "512 B");
  EXPECT_EQ(tuccl::formatBytesForPeople(1024), "1 KiB");
  EXPECT_EQ(tuccl::formatBytesForPeople(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(tuccl::formatBytesForPeople(uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(tuccl::formatBytesForPeople(1000), "1000 B");
  EXPECT_EQ(tuccl::formatBytesForPeople(1025), "~1.001 KiB");
}

TEST(TextValuesRange, NumbersForPeople) {
  EXPECT_EQ(tuccl::formatNumberForPeople(1.01), "1.01");
  EXPECT_EQ(tuccl::formatNumberForPeople(1048576), "1,048,576");
  EXPECT_EQ(tuccl::formatNumberForPeople(-64), "-64");
  EXPECT_EQ(tuccl::formatNumberForPeople(1.0000001), "1.0000001");
}

TEST(TextValuesRange, ByteSizesOutOfRangeStateTheRange) {
  EXPECT_EQ(*tuccl::parseByteSizeInRange("64K", 1024, uint64_t{1} << 30), 65536u);
  auto small = tuccl::parseByteSizeInRange("1", 1024, uint64_t{1} << 30);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().message(), "'1' is out of range: must be between 1 KiB and 1 GiB");
  auto huge = tuccl::parseByteSizeInRange("99999999999999999999999", 1024, uint64_t{1} << 30);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("between 1 KiB and 1 GiB"), std::string::npos);
  EXPECT_FALSE(tuccl::parseByteSizeInRange("-1", 0, 10).ok());
  EXPECT_FALSE(tuccl::parseByteSizeInRange("nan", 0, 10).ok());
}

TEST(TextValuesRange, IntegersRefuseJunkAndHugeValues) {
  EXPECT_EQ(*tuccl::parseIntegerInRange("42", 0, 100), 42);
  EXPECT_EQ(*tuccl::parseIntegerInRange("-3", -5, 5), -3);
  EXPECT_FALSE(tuccl::parseIntegerInRange("1e14", 0, 100).ok());
  EXPECT_FALSE(tuccl::parseIntegerInRange("4x", 0, 100).ok());
  auto huge = tuccl::parseIntegerInRange("4611686018427387904999", 0, int64_t{1} << 40);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(), "'4611686018427387904999' is out of range: must be between 0 and 1,099,511,627,776");
  auto negative = tuccl::parseIntegerInRange("-1", 1, std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(), "'-1' is out of range: must be at least 1");
}

TEST(TextValuesRange, NumbersRefuseNanInfinityAndOutOfRange) {
  EXPECT_DOUBLE_EQ(*tuccl::parseNumberInRange("1.5", 1.01, 1024), 1.5);
  EXPECT_DOUBLE_EQ(*tuccl::parseNumberInRange("2e1", 1.01, 1024), 20);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1.5x", "", "0x10"}) {
    EXPECT_FALSE(tuccl::parseNumberInRange(bad, -1e9, 1e9).ok()) << bad;
  }
  auto tight = tuccl::parseNumberInRange("1.0000001", 1.01, std::numeric_limits<double>::max());
  ASSERT_FALSE(tight.ok());
  EXPECT_EQ(tight.status().message(), "'1.0000001' is out of range: must be at least 1.01");
  auto overflow = tuccl::parseNumberInRange("1e999", 0, 10);
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().message(), "'1e999' is out of range: must be between 0 and 10");
  EXPECT_FALSE(tuccl::checkNumberInRange("the sigma", std::nan(""), 0, 1).ok());
  EXPECT_EQ(tuccl::checkNumberInRange("the sigma", -1, 0, 1).message(),
            "the sigma -1 is out of range: must be between 0 and 1");
}

TEST(TextValuesRange, DistinctListsRefuseRepeatsAndEmptyLists) {
  EXPECT_EQ(tuccl::splitDistinctList("allreduce,allgather")->size(), 2u);
  auto twice = tuccl::splitDistinctList("allreduce, AllReduce");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "'AllReduce' is listed twice");
  EXPECT_FALSE(tuccl::splitDistinctList(" , ").ok());
}

}  // namespace
