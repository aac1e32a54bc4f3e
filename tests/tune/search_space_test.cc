#include "tune/search_space.h"

#include <gtest/gtest.h>

#include <random>

namespace tuccl {
namespace {

Configuration make(const SearchSpace& space, const std::string& protocol, int64_t channels, int64_t threads,
                   int64_t chunk = 65536) {
  nlohmann::json j = {{"protocol", protocol}, {"nChannels", channels}, {"nThreads", threads},
                      {"chunkBytes", chunk},  {"algorithm", "ring"},   {"scheduler", "hpds"}};
  return space.configurationFromJson(j);
}

TEST(SearchSpace, DefaultMatchesTableIV) {
  SearchSpace space = defaultSearchSpace();
  ASSERT_EQ(space.dimensionCount(), 6u);
  EXPECT_EQ(space.dimension(space.dimensionIndex("protocol")).size(), 3u);
  EXPECT_EQ(space.dimension(space.dimensionIndex("nChannels")).levels, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  const Dimension& threads = space.dimension(space.dimensionIndex("nThreads"));
  EXPECT_EQ(threads.levels.size(), 20u);
  EXPECT_EQ(threads.levels.front(), 32);
  EXPECT_EQ(threads.levels.back(), 640);
  const Dimension& chunk = space.dimension(space.dimensionIndex("chunkBytes"));
  EXPECT_EQ(chunk.levels.front(), 256);
  EXPECT_EQ(chunk.levels.back(), 8 << 20);
  EXPECT_EQ(chunk.levels.size(), 16u);
  EXPECT_TRUE(chunk.logScale);
  EXPECT_EQ(space.rawSize(), 3u * 5 * 20 * 16 * 1 * 4);
  // LL and Simple: 53 (channels, threads) pairs each, LL128: 66 (see docs/tuning.md).
  EXPECT_EQ(space.validCount(), (53u + 53 + 66) * 16 * 4);
  EXPECT_EQ(space.enumerateValid().size(), space.validCount());
}

TEST(SearchSpace, ConstraintsRejectInvalidConfigurations) {
  SearchSpace space = defaultSearchSpace();
  EXPECT_TRUE(space.isValid(make(space, "Simple", 4, 256)));
  // TuCCL §III-C: nThreads < 32 × nChannels stalls.
  EXPECT_FALSE(space.isValid(make(space, "Simple", 16, 256)));
  EXPECT_EQ(space.violations(make(space, "Simple", 16, 256)), std::vector<std::string>{"threads-per-channel"});
  EXPECT_TRUE(space.isValid(make(space, "Simple", 16, 512)));
  // NCCL: LL/Simple 64..512, LL128 160..640.
  EXPECT_FALSE(space.isValid(make(space, "LL", 1, 32)));
  EXPECT_FALSE(space.isValid(make(space, "Simple", 1, 640)));
  EXPECT_TRUE(space.isValid(make(space, "LL128", 1, 640)));
  EXPECT_FALSE(space.isValid(make(space, "LL128", 1, 128)));
  EXPECT_EQ(space.violations(make(space, "LL128", 8, 128)),
            (std::vector<std::string>{"threads-per-channel", "ll128-threads"}));
  Configuration broken{{0, 0, 0}};
  EXPECT_FALSE(space.isValid(broken));
  EXPECT_EQ(space.violations(broken), std::vector<std::string>{"index out of range"});
}

TEST(SearchSpace, SamplesAreValidAndSeeded) {
  SearchSpace space = defaultSearchSpace();
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 200; ++i) {
    Configuration x = space.sampleValid(a);
    EXPECT_TRUE(space.isValid(x));
    EXPECT_EQ(x, space.sampleValid(b));
  }
}

TEST(SearchSpace, JsonRestrictsAndExtends) {
  SearchSpace base = defaultSearchSpace({"ring", "hm"});
  nlohmann::json spec = nlohmann::json::parse(R"({
    "dimensions": [{"name": "protocol", "values": ["LL128", "Simple"]},
                   {"name": "nChannels", "values": [2, 1]},
                   {"name": "unroll", "kind": "ordinal", "values": [1, 2, 4], "log": true}],
    "remove": ["scheduler"],
    "dropConstraints": ["ll128-threads"],
    "constraints": [{"name": "no-big-unroll-with-ll128", "kind": "range", "when": {"protocol": "LL128"},
                     "dimension": "unroll", "max": 2}]
  })");
  SearchSpace space = searchSpaceFromJson(spec, base);
  EXPECT_EQ(space.dimensionIndex("scheduler"), SearchSpace::npos);
  EXPECT_EQ(space.dimension(space.dimensionIndex("protocol")).categories, (std::vector<std::string>{"LL128", "Simple"}));
  EXPECT_EQ(space.dimension(space.dimensionIndex("nChannels")).levels, (std::vector<int64_t>{1, 2}));
  const Dimension& unroll = space.dimension(space.dimensionIndex("unroll"));
  EXPECT_TRUE(unroll.logScale);
  nlohmann::json c = {{"protocol", "LL128"}, {"nChannels", 1}, {"nThreads", 32}, {"chunkBytes", 256},
                      {"algorithm", "hm"},   {"unroll", 4}};
  EXPECT_EQ(space.violations(space.configurationFromJson(c)), std::vector<std::string>{"no-big-unroll-with-ll128"});
  c["unroll"] = 2;
  EXPECT_TRUE(space.isValid(space.configurationFromJson(c)));  // ll128-threads dropped

  // Round trip.
  SearchSpace again = searchSpaceFromJson(searchSpaceToJson(space), SearchSpace{});
  EXPECT_EQ(searchSpaceToJson(again), searchSpaceToJson(space));
}

TEST(SearchSpace, JsonErrorsNameTheProblem) {
  SearchSpace base = defaultSearchSpace();
  auto message = [&](const char* text) {
    try {
      searchSpaceFromJson(nlohmann::json::parse(text), base);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"dimension": []})").find("unknown key 'dimension'"), std::string::npos);
  EXPECT_NE(message(R"({"remove": ["colour"]})").find("'colour'"), std::string::npos);
  EXPECT_NE(message(R"({"dimensions": [{"name": "nThreads", "values": ["many"]}]})").find("integers"),
            std::string::npos);
  EXPECT_NE(message(R"({"dimensions": [{"name": "x", "values": [1]}]})").find("needs a \"kind\""), std::string::npos);
  EXPECT_NE(message(R"({"constraints": [{"name": "c", "dimension": "warps", "min": 1}]})").find("'warps'"),
            std::string::npos);
  EXPECT_NE(message(R"({"dimensions": [{"name": "nChannels", "values": [1, 1]}]})").find("ascending"),
            std::string::npos);
}

TEST(SearchSpace, DescribeAndJsonOfAConfiguration) {
  SearchSpace space = defaultSearchSpace();
  Configuration c = make(space, "LL128", 8, 256, 131072);
  EXPECT_EQ(space.describe(c), "protocol=LL128 nChannels=8 nThreads=256 chunkBytes=131072 algorithm=ring scheduler=hpds");
  EXPECT_EQ(space.configurationFromJson(space.configurationToJson(c)), c);
  EXPECT_EQ(space.levelOf(c, "nThreads"), 256);
  EXPECT_EQ(space.valueOf(c, "protocol"), "LL128");
  EXPECT_THROW(space.configurationFromJson({{"protocol", "LL"}}), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
