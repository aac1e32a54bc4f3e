// The one reader of the environment: an empty value is unset, typed reads accept their grammar and
// name the variable, its value and what it accepts when they refuse.
#include "support/environment.h"

#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace tuccl {
namespace {

constexpr const char* kName = "TUCCL_ENVIRONMENT_TEST_VALUE";
constexpr const char* kOther = "TUCCL_ENVIRONMENT_TEST_OTHER";

class Environment : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv(kName);
    ::unsetenv(kOther);
  }
  void TearDown() override { SetUp(); }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }
};

TEST_F(Environment, AnEmptyValueIsUnset) {
  EXPECT_FALSE(env::text(kName));
  EXPECT_FALSE(env::isSet(kName));
  set(kName, "");
  EXPECT_FALSE(env::text(kName));
  EXPECT_FALSE(env::isSet(kName));
  Expected<std::optional<int64_t>> number = env::integer(kName, 1, 4);
  ASSERT_TRUE(number.ok());
  EXPECT_FALSE(number->has_value());
  set(kName, " x ");
  EXPECT_EQ(env::text(kName).value_or(""), " x ");
}

TEST_F(Environment, FirstOfTakesTheFirstSetName) {
  EXPECT_FALSE(env::firstOf({kName, kOther}));
  set(kOther, "nccl");
  auto found = env::firstOf({kName, kOther});
  ASSERT_TRUE(found);
  EXPECT_STREQ(found->first, kOther);
  EXPECT_EQ(found->second, "nccl");
  set(kName, "");  // empty: the next name still speaks
  EXPECT_STREQ(env::firstOf({kName, kOther})->first, kOther);
  set(kName, "tuccl");
  EXPECT_STREQ(env::firstOf({kName, kOther})->first, kName);
}

TEST_F(Environment, IntegersWithinTheirRange) {
  set(kName, "64");
  EXPECT_EQ(env::integer(kName, 1, 64)->value_or(0), 64);
  for (const char* bad : {"65", "0", "1.5", "x", "6 4"}) {
    set(kName, bad);
    Expected<std::optional<int64_t>> read = env::integer(kName, 1, 64);
    ASSERT_FALSE(read.ok()) << bad;
    EXPECT_EQ(read.status().code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(read.status().message(),
              std::string(kName) + "='" + bad + "': expected a whole number from 1 to 64");
  }
}

TEST_F(Environment, NumbersAndByteSizes) {
  set(kName, "2.5");
  EXPECT_DOUBLE_EQ(env::number(kName, 0.1, 50)->value_or(0), 2.5);
  set(kName, "nan");
  EXPECT_EQ(env::number(kName, 0.1, 50).status().message(), std::string(kName) + "='nan': expected a number from 0.1 to 50");
  set(kName, "4M");
  EXPECT_EQ(env::byteSize(kName, 1 << 20, uint64_t{1} << 40)->value_or(0), uint64_t{4} << 20);
  set(kName, "512K");
  EXPECT_EQ(env::byteSize(kName, 1 << 20, uint64_t{1} << 40).status().message(),
            std::string(kName) + "='512K': expected a byte size from 1M to 1T");
}

TEST_F(Environment, FlagsAndChoicesIgnoreCase) {
  for (const char* yes : {"1", "TRUE", "yes", "On"}) {
    set(kName, yes);
    EXPECT_EQ(env::flag(kName)->value_or(false), true) << yes;
  }
  for (const char* no : {"0", "false", "NO", "off"}) {
    set(kName, no);
    EXPECT_EQ(env::flag(kName)->value_or(true), false) << no;
  }
  set(kName, "maybe");
  EXPECT_EQ(env::flag(kName).status().message(),
            std::string(kName) + "='maybe': expected 1, true, yes or on; 0, false, no or off");
  set(kName, "CPU");
  EXPECT_EQ(env::choice(kName, {"auto", "cpu", "cuda"})->value_or(""), "cpu");
  set(kName, "gpu");
  EXPECT_EQ(env::choice(kName, {"auto", "cpu", "cuda"}).status().message(),
            std::string(kName) + "='gpu': expected auto, cpu or cuda");
}

}  // namespace
}  // namespace tuccl
