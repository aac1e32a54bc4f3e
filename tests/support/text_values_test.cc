// Byte sizes, lists and case: the one grammar every tool and reader uses for them.
#include "support/text_values.h"

#include <gtest/gtest.h>

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
