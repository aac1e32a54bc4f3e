// Status and Expected: the one way a TuCCL function reports a failure a user can cause.
#include "support/status.h"

#include <gtest/gtest.h>

#include <string>

namespace tuccl {
namespace {

Expected<int> half(int value) {
  if (value % 2 != 0) return makeError(ErrorCode::InvalidArgument, "odd value " + std::to_string(value));
  return value / 2;
}

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::Ok);
  EXPECT_EQ(status.toString(), "ok");
}

TEST(Status, CarriesCodeAndLocatedDiagnostic) {
  Status status = makeError(ErrorCode::InvalidInput, "plan.json", SourceLoc{3, 7}, "unknown protocol 'LL256'");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
  EXPECT_EQ(status.diagnostic().file, "plan.json");
  EXPECT_EQ(status.toString(), "plan.json:3:7: error: unknown protocol 'LL256'\n");
  EXPECT_EQ(errorCodeName(status.code()), "invalid input");
}

TEST(Expected, HoldsAValueOrAStatus) {
  auto good = half(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  EXPECT_TRUE(good.status().ok());
  auto bad = half(7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.diagnostic().message, "odd value 7");
}

TEST(Expected, ThrowIfErrorBridgesToDiagnosticError) {
  EXPECT_NO_THROW(throwIfError(Status()));
  try {
    throwIfError(makeError(ErrorCode::NotFound, "topo.xml", SourceLoc{1, 1}, "no such preset"));
    FAIL() << "expected a DiagnosticError";
  } catch (const DiagnosticError& error) {
    EXPECT_EQ(error.diagnostic().file, "topo.xml");
    EXPECT_EQ(statusFromDiagnostic(error).code(), ErrorCode::InvalidInput);
  }
}

// Reading the value of an error says the error, not the library's variant internals.
TEST(Expected, TheValueOfAnErrorThrowsItsStatus) {
  Expected<int> missing = makeError(ErrorCode::NotFound, "no such preset");
  try {
    (void)missing.value();
    FAIL() << "no exception";
  } catch (const StatusError& error) {
    EXPECT_EQ(error.status().code(), ErrorCode::NotFound);
    EXPECT_EQ(error.status().message(), "no such preset");
  }
  const Expected<int>& constant = missing;
  EXPECT_THROW((void)*constant, StatusError);
  EXPECT_THROW((void)std::move(missing).value(), StatusError);
  Expected<int> present = 7;
  EXPECT_EQ(*present, 7);
}

}  // namespace
}  // namespace tuccl
