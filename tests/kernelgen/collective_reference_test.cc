// The reference outputs from the collectives' definitions: hand-computed results for three ranks
// (including non-zero roots), integer wrap-around, the relations between collectives on random
// inputs, and malformed calls.
#include "kernelgen/collective_reference.h"

#include <random>

#include <gtest/gtest.h>

namespace tuccl {
namespace {

using Values = std::vector<double>;

CollectiveCall callOf(Collective collective, int64_t count, ReduceOp op = ReduceOp::Sum, int32_t root = -1,
                      DataType type = DataType::Int32, int32_t nRanks = 3) {
  CollectiveCall call;
  call.collective = collective;
  call.nRanks = nRanks;
  call.root = root;
  call.dataType = type;
  call.op = op;
  call.count = count;
  return call;
}

RankOutputs reference(const CollectiveCall& call, const std::vector<Values>& inputs) {
  Expected<RankOutputs> outputs = referenceOutputs(call, inputs);
  EXPECT_TRUE(outputs) << outputs.status().toString();
  return outputs ? *outputs : RankOutputs{};
}

RankOutputs everyRank(const Values& values, int32_t n = 3) { return RankOutputs(static_cast<size_t>(n), values); }

// count 2 per rank (AllReduce, Broadcast, Reduce, AllGather)
const std::vector<Values> kUnitInputs = {{3, -1}, {5, 4}, {-2, 7}};
// count 2 per peer: 6 elements per rank (ReduceScatter, AllToAll)
const std::vector<Values> kBlockInputs = {{1, 2, 3, 4, 5, 6}, {10, 20, 30, 40, 50, 60}, {-1, -2, -3, -4, -5, -6}};

TEST(CollectiveReference, AllReduceEveryOperation) {
  EXPECT_EQ(reference(callOf(Collective::AllReduce, 2), kUnitInputs), everyRank({6, 10}));
  EXPECT_EQ(reference(callOf(Collective::AllReduce, 2, ReduceOp::Prod), kUnitInputs), everyRank({-30, -28}));
  EXPECT_EQ(reference(callOf(Collective::AllReduce, 2, ReduceOp::Min), kUnitInputs), everyRank({-2, -1}));
  EXPECT_EQ(reference(callOf(Collective::AllReduce, 2, ReduceOp::Max), kUnitInputs), everyRank({5, 7}));
  EXPECT_EQ(reference(callOf(Collective::AllReduce, 2, ReduceOp::Avg), kUnitInputs), everyRank({2, 3}));  // 6/3, 10/3
  const CollectiveCall floats = callOf(Collective::AllReduce, 2, ReduceOp::Avg, -1, DataType::Float32);
  EXPECT_EQ(reference(floats, {{0.5, 1}, {1.5, 1}, {1, 1.25}}), everyRank({1, 3.25 / 3}));
}

TEST(CollectiveReference, AllGatherConcatenatesInRankOrder) {
  EXPECT_EQ(reference(callOf(Collective::AllGather, 2), kUnitInputs), everyRank({3, -1, 5, 4, -2, 7}));
}

TEST(CollectiveReference, ReduceScatterGivesEachRankItsBlock) {
  const RankOutputs expected = {Values{10, 20}, Values{30, 40}, Values{50, 60}};
  EXPECT_EQ(reference(callOf(Collective::ReduceScatter, 2), kBlockInputs), expected);
  const RankOutputs maxima = {Values{10, 20}, Values{30, 40}, Values{50, 60}};
  EXPECT_EQ(reference(callOf(Collective::ReduceScatter, 2, ReduceOp::Max), kBlockInputs), maxima);
  const RankOutputs minima = {Values{-1, -2}, Values{-3, -4}, Values{-5, -6}};
  EXPECT_EQ(reference(callOf(Collective::ReduceScatter, 2, ReduceOp::Min), kBlockInputs), minima);
}

TEST(CollectiveReference, AllToAllTransposesBlocks) {
  const RankOutputs expected = {Values{1, 2, 10, 20, -1, -2}, Values{3, 4, 30, 40, -3, -4},
                                Values{5, 6, 50, 60, -5, -6}};
  EXPECT_EQ(reference(callOf(Collective::AllToAll, 2), kBlockInputs), expected);
}

TEST(CollectiveReference, BroadcastCopiesTheRootsInput) {
  EXPECT_EQ(reference(callOf(Collective::Broadcast, 2, ReduceOp::Sum, 0), kUnitInputs), everyRank({3, -1}));
  EXPECT_EQ(reference(callOf(Collective::Broadcast, 2, ReduceOp::Sum, 2), kUnitInputs), everyRank({-2, 7}));
}

TEST(CollectiveReference, ReduceLandsOnTheRootOnly) {
  const RankOutputs sum = {std::nullopt, Values{6, 10}, std::nullopt};
  EXPECT_EQ(reference(callOf(Collective::Reduce, 2, ReduceOp::Sum, 1), kUnitInputs), sum);
  const RankOutputs max = {std::nullopt, std::nullopt, Values{5, 7}};
  EXPECT_EQ(reference(callOf(Collective::Reduce, 2, ReduceOp::Max, 2), kUnitInputs), max);
  const RankOutputs prod = {Values{-30, -28}, std::nullopt, std::nullopt};
  EXPECT_EQ(reference(callOf(Collective::Reduce, 2, ReduceOp::Prod, 0), kUnitInputs), prod);
}

TEST(CollectiveReference, IntegersWrapLikeTheKernels) {
  const CollectiveCall bytes = callOf(Collective::AllReduce, 1, ReduceOp::Sum, -1, DataType::Uint8, 2);
  EXPECT_EQ(reference(bytes, {{200}, {100}}), everyRank({44}, 2));  // 300 mod 256
  const CollectiveCall words = callOf(Collective::Reduce, 1, ReduceOp::Sum, 1, DataType::Int32, 2);
  const RankOutputs wrapped = {std::nullopt, Values{-2147483648.0}};
  EXPECT_EQ(reference(words, {{2147483647.0}, {1}}), wrapped);
  const CollectiveCall average = callOf(Collective::AllReduce, 1, ReduceOp::Avg, -1, DataType::Int32, 2);
  EXPECT_EQ(reference(average, {{-3}, {0}}), everyRank({-1}, 2));  // truncates toward zero
}

// int8, uint32 and uint64 wrap at their width; avg divides the wrapped sum (truncating toward
// zero); min and max of unsigned types compare unsigned, also for inputs given as negative values
// (which the type holds wrapped: -1 is the largest).
TEST(CollectiveReference, Int8Uint32AndUint64WrapLikeTheKernels) {
  const CollectiveCall int8Sum = callOf(Collective::AllReduce, 2, ReduceOp::Sum, -1, DataType::Int8, 2);
  EXPECT_EQ(reference(int8Sum, {{100, -100}, {100, -100}}), everyRank({-56, 56}, 2));  // 200, -200 mod 256
  const CollectiveCall int8Prod = callOf(Collective::AllReduce, 1, ReduceOp::Prod, -1, DataType::Int8, 3);
  EXPECT_EQ(reference(int8Prod, {{-128}, {-1}, {3}}), everyRank({-128}));  // 384 mod 256 = 128 = -128
  const CollectiveCall int8Avg = callOf(Collective::AllReduce, 2, ReduceOp::Avg, -1, DataType::Int8, 2);
  EXPECT_EQ(reference(int8Avg, {{127, -127}, {1, -2}}), everyRank({-64, 63}, 2));  // -128 / 2; 127 / 2
  const CollectiveCall uint32Sum = callOf(Collective::AllReduce, 1, ReduceOp::Sum, -1, DataType::Uint32, 2);
  EXPECT_EQ(reference(uint32Sum, {{4294967295.0}, {3}}), everyRank({2}, 2));
  const CollectiveCall uint32Max = callOf(Collective::AllReduce, 1, ReduceOp::Max, -1, DataType::Uint32, 2);
  EXPECT_EQ(reference(uint32Max, {{-1}, {3}}), everyRank({4294967295.0}, 2));
  const CollectiveCall uint64Min = callOf(Collective::AllReduce, 1, ReduceOp::Min, -1, DataType::Uint64, 2);
  EXPECT_EQ(reference(uint64Min, {{0x1p63}, {5}}), everyRank({5}, 2));
  const CollectiveCall uint64Max = callOf(Collective::AllReduce, 1, ReduceOp::Max, -1, DataType::Uint64, 2);
  EXPECT_EQ(reference(uint64Max, {{0x1p63}, {5}}), everyRank({0x1p63}, 2));
  const CollectiveCall uint64Sum = callOf(Collective::AllReduce, 1, ReduceOp::Sum, -1, DataType::Uint64, 2);
  EXPECT_EQ(reference(uint64Sum, {{0x1p63}, {0x1p63}}), everyRank({0}, 2));  // 2^64 wraps
  const CollectiveCall uint64Avg = callOf(Collective::AllReduce, 1, ReduceOp::Avg, -1, DataType::Uint64, 2);
  EXPECT_EQ(reference(uint64Avg, {{0x1p63}, {0x1p62}}), everyRank({0x1.8p62}, 2));  // unsigned: 3 * 2^62 / 2
}

TEST(CollectiveReference, CollectivesAgreeWithEachOtherOnRandomInputs) {
  std::mt19937_64 random(2024);
  const int32_t n = 5;
  const int64_t count = 7;
  auto randomInputs = [&](int64_t elements) {
    std::vector<Values> inputs(n);
    for (Values& input : inputs) {
      for (int64_t i = 0; i < elements; ++i) input.push_back(static_cast<double>(random() % 1000) - 500);
    }
    return inputs;
  };
  const std::vector<Values> units = randomInputs(count);
  const std::vector<Values> blocks = randomInputs(n * count);
  const RankOutputs allReduce = reference(callOf(Collective::AllReduce, count, ReduceOp::Sum, -1, DataType::Int64, n), units);
  const RankOutputs allGather = reference(callOf(Collective::AllGather, count, ReduceOp::Sum, -1, DataType::Int64, n), units);
  const RankOutputs blockSums =
      reference(callOf(Collective::AllReduce, n * count, ReduceOp::Sum, -1, DataType::Int64, n), blocks);
  const RankOutputs scattered =
      reference(callOf(Collective::ReduceScatter, count, ReduceOp::Sum, -1, DataType::Int64, n), blocks);
  const RankOutputs transposed = reference(callOf(Collective::AllToAll, count, ReduceOp::Sum, -1, DataType::Int64, n), blocks);
  std::vector<Values> transposedInputs;
  for (const auto& output : transposed) transposedInputs.push_back(*output);
  const RankOutputs back =
      reference(callOf(Collective::AllToAll, count, ReduceOp::Sum, -1, DataType::Int64, n), transposedInputs);
  for (int32_t root : {0, 3}) {
    const RankOutputs reduced = reference(callOf(Collective::Reduce, count, ReduceOp::Sum, root, DataType::Int64, n), units);
    const RankOutputs broadcast =
        reference(callOf(Collective::Broadcast, count, ReduceOp::Sum, root, DataType::Int64, n), units);
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_EQ(reduced[r].has_value(), r == root);
      EXPECT_EQ(*broadcast[r], units[root]);
    }
    EXPECT_EQ(*reduced[root], *allReduce[0]);
  }
  for (int32_t r = 0; r < n; ++r) {
    double sum = 0;
    for (int32_t q = 0; q < n; ++q) sum += units[q][3];
    EXPECT_EQ((*allReduce[r])[3], sum);
    EXPECT_EQ(Values(allGather[r]->begin() + 2 * count, allGather[r]->begin() + 3 * count), units[2]);
    EXPECT_EQ(*scattered[r], Values(blockSums[r]->begin() + r * count, blockSums[r]->begin() + (r + 1) * count));
    EXPECT_EQ(*back[r], blocks[r]) << "AllToAll twice is the identity";
  }
}

TEST(CollectiveReference, MalformedCallsAreRefused) {
  auto refusal = [](const CollectiveCall& call, const std::vector<Values>& inputs) {
    Expected<RankOutputs> outputs = referenceOutputs(call, inputs);
    EXPECT_FALSE(outputs);
    if (outputs) return std::string();
    EXPECT_EQ(outputs.status().code(), ErrorCode::InvalidArgument);
    return outputs.status().message();
  };
  EXPECT_NE(refusal(callOf(Collective::Broadcast, 2), kUnitInputs).find("root -1 is not a rank in [0, 3)"),
            std::string::npos);
  EXPECT_NE(refusal(callOf(Collective::Reduce, 2, ReduceOp::Sum, 3), kUnitInputs).find("root 3"), std::string::npos);
  EXPECT_NE(refusal(callOf(Collective::AllReduce, -1), kUnitInputs).find("negative"), std::string::npos);
  EXPECT_NE(refusal(callOf(Collective::AllReduce, 2), {{1, 2}}).find("1 inputs for 3 ranks"), std::string::npos);
  EXPECT_NE(refusal(callOf(Collective::ReduceScatter, 2), kUnitInputs).find("rank 0 has 2 input elements, not 6"),
            std::string::npos);
  EXPECT_TRUE(referenceOutputs(callOf(Collective::AllReduce, 2, ReduceOp::Sum, 7), kUnitInputs))
      << "collectives without a root ignore it";
}

TEST(CollectiveReference, BufferSizesFollowNccl) {
  for (Collective collective : {Collective::Broadcast, Collective::Reduce, Collective::AllGather,
                                Collective::ReduceScatter, Collective::AllReduce, Collective::AllToAll}) {
    const CollectiveCall call = callOf(collective, 10, ReduceOp::Sum, 0, DataType::Int32, 4);
    const bool gathers = collective == Collective::AllGather || collective == Collective::AllToAll;
    const bool scatters = collective == Collective::ReduceScatter || collective == Collective::AllToAll;
    EXPECT_EQ(inputElements(call), scatters ? 40 : 10) << collectiveName(collective);
    EXPECT_EQ(outputElements(call), gathers ? 40 : 10) << collectiveName(collective);
  }
}

}  // namespace
}  // namespace tuccl
