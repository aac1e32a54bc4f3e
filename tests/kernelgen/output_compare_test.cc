// The comparison of actual outputs with the reference: exact where no arithmetic rounds, within
// (nRanks + 2)·u for float sums, products and averages; the first mismatches listed; unspecified
// ranks skipped.
#include "kernelgen/output_compare.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kernelgen/element_values.h"

namespace tuccl {
namespace {

CollectiveCall callOf(Collective collective, DataType type, ReduceOp op = ReduceOp::Sum, int32_t nRanks = 8) {
  CollectiveCall call;
  call.collective = collective;
  call.nRanks = nRanks;
  call.root = 0;
  call.dataType = type;
  call.op = op;
  call.count = 4;
  return call;
}

// `values` stored in `type`.
std::vector<unsigned char> stored(DataType type, const std::vector<double>& values) {
  std::vector<unsigned char> bytes(values.size() * static_cast<size_t>(dataTypeSize(type)));
  for (size_t i = 0; i < values.size(); ++i) writeElement(type, bytes.data() + i * dataTypeSize(type), values[i]);
  return bytes;
}

TEST(OutputCompare, ToleranceByDatatypeAndOperation) {
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Int32)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllGather, DataType::Float32)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::Broadcast, DataType::BFloat16)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Float16, ReduceOp::Max)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::Reduce, DataType::Float32, ReduceOp::Min)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Float32)), 10 * std::ldexp(1.0, -24));
  EXPECT_EQ(relativeTolerance(callOf(Collective::ReduceScatter, DataType::BFloat16, ReduceOp::Avg, 6)),
            8 * std::ldexp(1.0, -8));
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Float8E4M3, ReduceOp::Sum, 2)), 4 * std::ldexp(1.0, -4));
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Float8E5M2, ReduceOp::Prod, 2)), 4 * std::ldexp(1.0, -3));
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Float8E5M2, ReduceOp::Max, 2)), 0);
  EXPECT_EQ(relativeTolerance(callOf(Collective::AllReduce, DataType::Uint64, ReduceOp::Sum, 2)), 0);
}

TEST(OutputCompare, FloatSumsWithinTheBoundPassAndBeyondItFail) {
  const CollectiveCall call = callOf(Collective::AllReduce, DataType::Float64);  // tolerance 10 u
  const double u = std::ldexp(1.0, -53);
  const std::vector<double> expected = {1, 2, 4, 8};
  const auto actual = stored(DataType::Float64, {1 + 8 * u, 2 - 16 * u, 4, 8 * (1 + 12 * u)});
  const ElementMismatches result = compareElements(DataType::Float64, relativeTolerance(call), expected, actual.data());
  EXPECT_EQ(result.count, 1);
  EXPECT_EQ(result.firstIndex, 3);
  ASSERT_EQ(result.first.size(), 1u);
  EXPECT_EQ(result.first[0].rfind("result[3]: expected 8, got 8.00000000000001", 0), 0u) << result.first[0];
}

TEST(OutputCompare, MovedDataMustBeExact) {
  const std::vector<double> expected = {1.5, 0.75};
  const float nextAfter = std::nextafter(1.5f, 2.0f);
  const auto actual = stored(DataType::Float32, {nextAfter, 0.75});
  const CollectiveCall call = callOf(Collective::AllGather, DataType::Float32);
  EXPECT_EQ(compareElements(DataType::Float32, relativeTolerance(call), expected, actual.data()).count, 1);
  EXPECT_EQ(compareElements(DataType::Float32, 1e-6, expected, actual.data()).count, 0) << "one ulp is 1.2e-7";
}

TEST(OutputCompare, IntegersExactAndTheFirstMismatchesListed) {
  const std::vector<double> expected = {1, 2, 3, 4, 5, 6, 7};
  const auto actual = stored(DataType::Int32, {1, 0, 3, -4, 0, 0, 0});
  const ElementMismatches result = compareElements(DataType::Int32, 0, expected, actual.data(), "result", 3);
  EXPECT_EQ(result.count, 5);
  EXPECT_EQ(result.firstIndex, 1);
  EXPECT_EQ(result.first, (std::vector<std::string>{"result[1]: expected 2, got 0", "result[3]: expected 4, got -4",
                                                     "result[4]: expected 5, got 0"}));
}

TEST(OutputCompare, NanAndInfinityNeverMatch) {
  const std::vector<double> expected = {1, 1};
  const auto actual = stored(DataType::Float32, {std::numeric_limits<double>::quiet_NaN(),
                                                 std::numeric_limits<double>::infinity()});
  EXPECT_EQ(compareElements(DataType::Float32, 1.0, expected, actual.data()).count, 2);
}

TEST(OutputCompare, EveryRankAndUnspecifiedRanksSkipped) {
  CollectiveCall call = callOf(Collective::Reduce, DataType::Int64, ReduceOp::Sum, 3);
  call.root = 1;
  const RankOutputs expected = {std::nullopt, std::vector<double>{6, 10}, std::nullopt};
  const auto good = stored(DataType::Int64, {6, 10});
  const auto bad = stored(DataType::Int64, {6, 11});
  const std::vector<const void*> rightRoot = {bad.data(), good.data(), nullptr};
  std::vector<RankComparison> ranks = compareOutputs(call, expected, rightRoot);
  ASSERT_EQ(ranks.size(), 3u);
  for (const RankComparison& rank : ranks) EXPECT_TRUE(rank.ok()) << rank.rank;
  EXPECT_FALSE(ranks[0].specified);
  EXPECT_TRUE(ranks[1].specified);
  const std::vector<const void*> wrongRoot = {good.data(), bad.data(), good.data()};
  ranks = compareOutputs(call, expected, wrongRoot);
  EXPECT_TRUE(ranks[0].ok() && ranks[2].ok());
  EXPECT_FALSE(ranks[1].ok());
  EXPECT_EQ(ranks[1].mismatches.first.at(0), "result[1]: expected 10, got 11");
  const std::vector<const void*> noRoot = {good.data(), nullptr, good.data()};
  ranks = compareOutputs(call, expected, noRoot);
  EXPECT_EQ(ranks[1].mismatches.count, 2);
  EXPECT_EQ(ranks[1].mismatches.first.at(0), "no output buffer");
}

}  // namespace
}  // namespace tuccl
