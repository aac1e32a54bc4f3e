// The shared vocabulary: every name parses back to its enum, aliases from NCCL, MSCCL and
// ResCCLang are accepted, junk is refused, and the NCCL numberings hold.
#include "support/vocabulary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tuccl {
namespace {

template <typename Enum, typename Name, typename Parse>
void expectRoundTrip(int count, Name name, Parse parse) {
  for (int i = 0; i < count; ++i) {
    const auto value = static_cast<Enum>(i);
    const auto parsed = parse(name(value));
    ASSERT_TRUE(parsed.has_value()) << name(value);
    EXPECT_EQ(*parsed, value) << name(value);
  }
}

TEST(Vocabulary, EveryNameRoundTrips) {
  expectRoundTrip<Collective>(kCollectives, collectiveName, parseCollective);
  expectRoundTrip<Protocol>(kProtocols, protocolName, parseProtocol);
  expectRoundTrip<DataType>(kDataTypes, dataTypeName, parseDataType);
  expectRoundTrip<ReduceOp>(kReduceOps, reduceOpName, parseReduceOp);
  expectRoundTrip<Scheduler>(kSchedulers, schedulerName, parseScheduler);
  expectRoundTrip<ExecutionLevel>(kExecutionLevels, executionLevelName, parseExecutionLevel);
  expectRoundTrip<TbPolicy>(kTbPolicies, tbPolicyName, parseTbPolicy);
  expectRoundTrip<BufferKind>(kBufferKinds, bufferName, parseBufferKind);
}

TEST(Vocabulary, ShortNamesRoundTrip) {
  expectRoundTrip<Scheduler>(kSchedulers, schedulerShortName, parseScheduler);
  expectRoundTrip<TbPolicy>(kTbPolicies, tbPolicyShortName, parseTbPolicy);
}

// The ...Names() lists: every name in enum order, each parsing back to its enum.
template <typename Enum, typename Parse>
void expectNamesInEnumOrder(const std::vector<std::string>& names, int count, Parse parse) {
  ASSERT_EQ(names.size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) EXPECT_EQ(parse(names[i]), static_cast<Enum>(i)) << names[i];
}

TEST(Vocabulary, NameListsFollowTheEnums) {
  expectNamesInEnumOrder<Protocol>(protocolNames(), kProtocols, parseProtocol);
  expectNamesInEnumOrder<DataType>(dataTypeNames(), kDataTypes, parseDataType);
  expectNamesInEnumOrder<ReduceOp>(reduceOpNames(), kReduceOps, parseReduceOp);
  expectNamesInEnumOrder<Scheduler>(schedulerShortNames(), kSchedulers, parseScheduler);
  // The spellings the tools offer and list in --help.
  EXPECT_EQ(protocolNames(), (std::vector<std::string>{"LL", "LL128", "Simple"}));
  EXPECT_EQ(dataTypeNames(),
            (std::vector<std::string>{"float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8",
                                      "uint32", "uint64", "float8e4m3", "float8e5m2"}));
  EXPECT_EQ(reduceOpNames(), (std::vector<std::string>{"sum", "prod", "min", "max", "avg"}));
  EXPECT_EQ(schedulerShortNames(), (std::vector<std::string>{"hpds", "rr", "algorithm", "stage", "as-written"}));
  EXPECT_EQ(tbPolicyShortName(TbPolicy::ConnectionBased), "connection");
  EXPECT_EQ(tbPolicyShortName(TbPolicy::StateBased), "state");
}

TEST(Vocabulary, CollectivesKeepNcclNumberingAndSpellings) {
  // ncclFunc_t: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4.
  EXPECT_EQ(static_cast<int>(Collective::Broadcast), 0);
  EXPECT_EQ(static_cast<int>(Collective::AllReduce), 4);
  EXPECT_EQ(collectiveName(Collective::AllReduce), "AllReduce");
  EXPECT_EQ(parseCollective("allreduce"), Collective::AllReduce);
  EXPECT_EQ(parseCollective("reduce_scatter"), Collective::ReduceScatter);
  EXPECT_EQ(parseCollective("ReduceScatter"), Collective::ReduceScatter);
  EXPECT_EQ(parseCollective("all-to-all"), Collective::AllToAll);
  EXPECT_EQ(parseCollective("ncclAllGather"), Collective::AllGather);
  EXPECT_FALSE(parseCollective("allgatherv"));
  EXPECT_FALSE(parseCollective(""));
  EXPECT_TRUE(hasRoot(Collective::Broadcast));
  EXPECT_TRUE(hasRoot(Collective::Reduce));
  EXPECT_FALSE(hasRoot(Collective::AllReduce));
  EXPECT_TRUE(isReduction(Collective::Reduce));
  EXPECT_FALSE(isReduction(Collective::AllToAll));
}

TEST(Vocabulary, ProtocolsKeepNcclNumbering) {
  EXPECT_EQ(static_cast<int>(Protocol::LL), 0);  // NCCL_PROTO_LL
  EXPECT_EQ(static_cast<int>(Protocol::LL128), 1);
  EXPECT_EQ(static_cast<int>(Protocol::Simple), 2);
  EXPECT_EQ(parseProtocol("SIMPLE"), Protocol::Simple);
  EXPECT_EQ(parseProtocol("ll128"), Protocol::LL128);
  EXPECT_FALSE(parseProtocol("LL256"));
  EXPECT_FALSE(parseProtocol("any"));
}

TEST(Vocabulary, DataTypesAndOpsAcceptNcclNames) {
  EXPECT_EQ(parseDataType("ncclFloat32"), DataType::Float32);
  EXPECT_EQ(parseDataType("half"), DataType::Float16);
  EXPECT_EQ(parseDataType("bf16"), DataType::BFloat16);
  EXPECT_EQ(parseDataType("double"), DataType::Float64);
  EXPECT_EQ(parseDataType("int"), DataType::Int32);
  EXPECT_FALSE(parseDataType("float128"));
  EXPECT_EQ(dataTypeSize(DataType::BFloat16), 2);
  EXPECT_EQ(dataTypeSize(DataType::Int64), 8);
  EXPECT_EQ(dataTypeSize(DataType::Uint8), 1);
  EXPECT_EQ(parseDataType("ncclChar"), DataType::Int8);
  EXPECT_EQ(parseDataType("ncclUint32"), DataType::Uint32);
  EXPECT_EQ(parseDataType("u64"), DataType::Uint64);
  EXPECT_EQ(parseDataType("ncclFloat8e4m3"), DataType::Float8E4M3);
  EXPECT_EQ(parseDataType("f8e5m2"), DataType::Float8E5M2);
  EXPECT_EQ(dataTypeSize(DataType::Int8), 1);
  EXPECT_EQ(dataTypeSize(DataType::Uint32), 4);
  EXPECT_EQ(dataTypeSize(DataType::Uint64), 8);
  EXPECT_EQ(dataTypeSize(DataType::Float8E4M3), 1);
  EXPECT_EQ(dataTypeSize(DataType::Float8E5M2), 1);
  EXPECT_EQ(parseReduceOp("ncclSum"), ReduceOp::Sum);
  EXPECT_EQ(parseReduceOp("MAX"), ReduceOp::Max);
  EXPECT_FALSE(parseReduceOp("xor"));
}

TEST(Vocabulary, SchedulerAliasesAndLevels) {
  EXPECT_EQ(parseScheduler("algorithm"), Scheduler::AlgorithmLevel);
  EXPECT_EQ(parseScheduler("stage"), Scheduler::StageLevel);
  EXPECT_EQ(parseScheduler("round-robin"), Scheduler::RoundRobin);
  EXPECT_EQ(parseScheduler("as-written"), Scheduler::AsWritten);
  EXPECT_EQ(parseScheduler("as_written"), Scheduler::AsWritten);
  EXPECT_EQ(parseScheduler("msccl"), Scheduler::AsWritten);
  EXPECT_FALSE(parseScheduler("fifo"));
  EXPECT_EQ(executionLevelOf(Scheduler::AsWritten), ExecutionLevel::Algorithm);
  EXPECT_EQ(executionLevelOf(Scheduler::Hpds), ExecutionLevel::Task);
  EXPECT_EQ(executionLevelOf(Scheduler::RoundRobin), ExecutionLevel::Task);
  EXPECT_EQ(executionLevelOf(Scheduler::AlgorithmLevel), ExecutionLevel::Algorithm);
  EXPECT_EQ(executionLevelOf(Scheduler::StageLevel), ExecutionLevel::Stage);
  EXPECT_EQ(parseTbPolicy("state"), TbPolicy::StateBased);
  EXPECT_EQ(parseTbPolicy("Connection"), TbPolicy::ConnectionBased);  // case-insensitive, as before
  EXPECT_EQ(parseTbPolicy("connection-based"), TbPolicy::ConnectionBased);
  EXPECT_EQ(parseTbPolicy("single"), TbPolicy::Single);
  EXPECT_FALSE(parseTbPolicy("greedy"));
}

}  // namespace
}  // namespace tuccl
