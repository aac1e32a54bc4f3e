// CPU execution of the generated kernels: every datatype and operation, exact remainders, and
// the deliberately wrong plans (removed dependency, mismatched send/recv order, a deadlock) —
// each is refused statically or diagnosed at run time, never a silent pass.
#include "kernelgen/cpu_verify.h"

#include <iostream>
#include <iterator>

#include <gtest/gtest.h>

#include "plan_fixtures.h"

namespace tuccl {
namespace {

using testing::compileExample;

// Every datatype: NCCL's twelve (fp8 included).
constexpr DataType kEveryType[] = {DataType::Float32, DataType::Float16, DataType::BFloat16,   DataType::Float64,
                                   DataType::Int32,   DataType::Int64,   DataType::Uint8,      DataType::Int8,
                                   DataType::Uint32,  DataType::Uint64,  DataType::Float8E4M3, DataType::Float8E5M2};
static_assert(std::size(kEveryType) == kDataTypes);

VerifyOptions optionsFor(DataType type, int64_t count, int64_t chunkSize) {
  VerifyOptions options;
  options.dataType = type;
  options.count = count;
  options.chunkSize = chunkSize;
  options.timeoutSeconds = 60;
  return options;
}

TEST(CpuVerify, EveryDatatypeAndOperation) {
  const auto& example = compileExample("ring_allreduce");
  for (DataType type : kEveryType) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      VerifyOptions options = optionsFor(type, 333, 24);
      options.op = op;
      options.inPlace = (static_cast<int>(type) + static_cast<int>(op)) % 2 == 0;
      CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
      EXPECT_TRUE(report.ok) << dataTypeName(type) << " " << reduceOpName(op) << "\n" << report.summary();
    }
  }
}

// LL and LL128 carry every datatype and operation through their lines: the receive-and-reduce
// path decodes lines a piece at a time; odd element sizes end mid-line. The plan's kernels take
// the protocol at run time, so the one host build serves every protocol.
class CpuVerifyProtocol : public ::testing::TestWithParam<Protocol> {};

TEST_P(CpuVerifyProtocol, EveryDatatypeAndOperation) {
  const auto& example = compileExample("ring_allreduce");
  for (DataType type : kEveryType) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      VerifyOptions options = optionsFor(type, 333, 24);
      options.op = op;
      options.inPlace = (static_cast<int>(type) + static_cast<int>(op)) % 2 == 1;
      options.protocol = GetParam();
      CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
      EXPECT_TRUE(report.ok) << dataTypeName(type) << " " << reduceOpName(op) << "\n" << report.summary();
      EXPECT_EQ(report.protocol, GetParam());
    }
  }
}

// Slices larger than the reduce buffer of an LL / LL128 receiver (3840 bytes), and AllGather's
// plain receives of every width.
TEST_P(CpuVerifyProtocol, LargeSlicesAndEveryWidth) {
  VerifyOptions options = optionsFor(DataType::Float64, 12000, 6000 * 8);
  options.protocol = GetParam();
  CpuVerifyReport report = verifyPlanOnCpu(compileExample("ring_allreduce").plan, options);
  EXPECT_TRUE(report.ok) << report.summary();
  for (DataType type : {DataType::Float16, DataType::Int64, DataType::Uint8}) {
    options = optionsFor(type, 1001, 40);
    options.protocol = GetParam();
    report = verifyPlanOnCpu(compileExample("hm_allgather").plan, options);
    EXPECT_TRUE(report.ok) << dataTypeName(type) << "\n" << report.summary();
  }
}

// Empty slices still carry a line and its flag; one slot per ring reuses it every slice.
TEST_P(CpuVerifyProtocol, TinyAndEmptyChunksAndOneStagingSlot) {
  const auto& example = compileExample("hm_allreduce");
  for (int64_t count : {0, 1, 7, 9}) {
    VerifyOptions options = optionsFor(DataType::Int32, count, 4);
    options.stagingSlots = 1;
    options.protocol = GetParam();
    CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
    EXPECT_TRUE(report.ok) << count << "\n" << report.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(LowLatency, CpuVerifyProtocol, ::testing::Values(Protocol::LL, Protocol::LL128),
                         [](const ::testing::TestParamInfo<Protocol>& p) { return std::string(protocolName(p.param)); });

// Without an override the plan's config.protocol runs.
TEST(CpuVerify, ThePlansProtocolRuns) {
  Plan plan = compileExample("ring_allgather").plan;
  plan.config.protocol = Protocol::LL;
  CpuVerifyReport report = verifyPlanOnCpu(plan, optionsFor(DataType::Float32, 100, 16));
  EXPECT_TRUE(report.ok) << report.summary();
  EXPECT_EQ(report.protocol, Protocol::LL);
  EXPECT_NE(report.summary().find("protocol LL,"), std::string::npos) << report.summary();
}

TEST(CpuVerify, AllGatherMovesEveryDatatypeExactly) {
  const auto& example = compileExample("hm_allgather");
  for (DataType type : {DataType::Float16, DataType::Float64, DataType::Int64, DataType::Uint8, DataType::Uint32,
                        DataType::Float8E5M2}) {
    CpuVerifyReport report = verifyPlanOnCpu(example.plan, optionsFor(type, 1001, 40));
    EXPECT_TRUE(report.ok) << dataTypeName(type) << "\n" << report.summary();
  }
}

TEST(CpuVerify, TinyAndEmptyChunksAndOneStagingSlot) {
  const auto& example = compileExample("hm_allreduce");
  for (int64_t count : {0, 1, 7, 9}) {
    VerifyOptions options = optionsFor(DataType::Int32, count, 4);
    options.stagingSlots = 1;
    CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
    EXPECT_TRUE(report.ok) << count << "\n" << report.summary();
  }
}

TEST(CpuVerify, FreshSeedPerRun) {
  const auto& example = compileExample("ring_allgather");
  VerifyOptions options = optionsFor(DataType::Float32, 100, 1 << 20);
  CpuVerifyReport a = verifyPlanOnCpu(example.plan, options);
  CpuVerifyReport b = verifyPlanOnCpu(example.plan, options);
  EXPECT_TRUE(a.ok && b.ok);
  EXPECT_NE(a.seed, b.seed);
}

TEST(CpuVerify, ReduceAtANonZeroRootEveryDatatypeAndOperation) {
  const auto& example = compileExample("chain_reduce", "hpds", true, 8, 4, 5);
  ASSERT_EQ(example.plan.root, 5);
  for (DataType type : {DataType::Float16, DataType::Float64, DataType::Int64, DataType::Uint8, DataType::Int8,
                        DataType::Uint64, DataType::Float8E4M3}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      VerifyOptions options = optionsFor(type, 301, 16);
      options.op = op;
      options.inPlace = (static_cast<int>(type) + static_cast<int>(op)) % 2 == 0;
      CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
      EXPECT_TRUE(report.ok) << dataTypeName(type) << " " << reduceOpName(op) << "\n" << report.summary();
      ASSERT_EQ(report.ranks.size(), 8u);
      for (const RankVerifyReport& rank : report.ranks) EXPECT_EQ(rank.compared, rank.rank == 5);
    }
  }
}

TEST(CpuVerify, BroadcastFromEveryRoot) {
  for (int32_t root = 0; root < 8; ++root) {
    const auto& example = compileExample("binomial_broadcast", "hpds", true, 8, 4, root);
    VerifyOptions options = optionsFor(root % 2 ? DataType::BFloat16 : DataType::Int32, 203, 12);
    options.inPlace = root % 3 != 0;
    CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
    EXPECT_TRUE(report.ok) << "root " << root << "\n" << report.summary();
    for (const RankVerifyReport& rank : report.ranks) EXPECT_TRUE(rank.compared);
  }
}

TEST(CpuVerify, APlanDeliveringToAnotherRootFails) {
  // The reference comes from the collective and the root, never from the plan's operations: a
  // plan that reduces to rank 0 but claims root 3 must fail at rank 3.
  Plan reduce = compileExample("chain_reduce").plan;
  ASSERT_EQ(reduce.root, 0);
  reduce.root = 3;
  CpuVerifyReport report = verifyPlanOnCpu(reduce, optionsFor(DataType::Int32, 64, 64));
  EXPECT_FALSE(report.ok);
  EXPECT_FALSE(report.refused()) << report.summary();
  ASSERT_EQ(report.ranks.size(), 8u);
  EXPECT_FALSE(report.ranks[3].ok) << report.summary();
  EXPECT_GT(report.ranks[3].mismatches, 0);
  EXPECT_FALSE(report.ranks[0].compared);
  // A broadcast from rank 0 claiming root 2 leaves every rank with the wrong data.
  Plan broadcast = compileExample("chain_broadcast").plan;
  broadcast.root = 2;
  report = verifyPlanOnCpu(broadcast, optionsFor(DataType::Float32, 64, 64));
  EXPECT_FALSE(report.ok);
  EXPECT_FALSE(report.refused()) << report.summary();
  ASSERT_EQ(report.ranks.size(), 8u);
  for (const RankVerifyReport& rank : report.ranks) EXPECT_GT(rank.mismatches, 0) << report.summary();
}

TEST(CpuVerify, ARootedPlanWithoutARootIsRefused) {
  Plan plan = compileExample("chain_broadcast").plan;
  plan.root = -1;
  VerifyOptions options = optionsFor(DataType::Float32, 64, 64);
  CpuVerifyReport report = verifyPlanOnCpu(plan, options);
  EXPECT_TRUE(report.refused());
  EXPECT_EQ(report.refusal.code(), ErrorCode::InvalidInput);
  EXPECT_NE(report.summary().find("refused: the plan fails its static check: root -1 of the Broadcast is out of range [0, 8)"),
            std::string::npos)
      << report.summary();
  options.staticChecks = false;
  report = verifyPlanOnCpu(plan, options);
  EXPECT_EQ(report.refusal.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(report.refusal.message().find("root -1 is not a rank in [0, 8)"), std::string::npos)
      << report.summary();
}

TEST(CpuVerify, UnsupportedCallsAreRefusedWithAStatus) {
  const auto& example = compileExample("ring_allreduce");
  VerifyOptions options = optionsFor(DataType::Float32, -1, 64);
  CpuVerifyReport report = verifyPlanOnCpu(example.plan, options);
  EXPECT_EQ(report.refusal.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(report.refusal.message().find("negative"), std::string::npos);
  Plan outOfPlace = example.plan;
  outOfPlace.inPlace = false;
  options.count = 64;
  report = verifyPlanOnCpu(outOfPlace, options);
  EXPECT_EQ(report.refusal.code(), ErrorCode::Unsupported);
  EXPECT_EQ(report.summary(), "refused: an in-place call of an out-of-place plan is not supported\n");
}

// Swaps entries i and j of one TB and keeps every dependency pointing at the same entries.
void swapEntries(Plan& plan, int32_t rank, int32_t tb, int32_t i, int32_t j) {
  std::swap(plan.ranks[rank].tbs[tb].entries[i], plan.ranks[rank].tbs[tb].entries[j]);
  for (PlanTb& other : plan.ranks[rank].tbs) {
    for (PlanEntry& entry : other.entries) {
      for (EntryRef& dep : entry.deps) {
        if (dep.tb != tb) continue;
        if (dep.entry == i) {
          dep.entry = j;
        } else if (dep.entry == j) {
          dep.entry = i;
        }
      }
    }
  }
}

TEST(CpuVerify, MismatchedSendRecvOrderIsCaught) {
  // Unfused: a receive TB of plain receives, two of which are swapped.
  const auto& example = compileExample("ring_allgather", "hpds", true, 8, 4, -1, false);
  Plan plan = example.plan;
  // Rank 3's receive TB takes two slices from rank 2 in the wrong order.
  int32_t tb = -1;
  for (const PlanTb& candidate : plan.ranks[3].tbs) {
    if (candidate.recvPeer == 2) tb = candidate.id;
  }
  ASSERT_GE(tb, 0);
  int32_t first = -1;
  for (int32_t e = 0; e + 1 < static_cast<int32_t>(plan.ranks[3].tbs[tb].entries.size()); ++e) {
    if (plan.ranks[3].tbs[tb].entries[e].kind == PrimitiveKind::Recv &&
        plan.ranks[3].tbs[tb].entries[e + 1].kind == PrimitiveKind::Recv) {
      first = e;
      break;
    }
  }
  ASSERT_GE(first, 0);
  swapEntries(plan, 3, tb, first, first + 1);
  VerifyOptions options = optionsFor(DataType::Float32, 512, 64);
  options.timeoutSeconds = 2;
  CpuVerifyReport refused = verifyPlanOnCpu(plan, options);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.refusal.message().find("static check"), std::string::npos) << refused.summary();
  // Without the static checks the run itself catches it.
  options.staticChecks = false;
  CpuVerifyReport run = verifyPlanOnCpu(plan, options);
  EXPECT_FALSE(run.ok);
  EXPECT_FALSE(run.refused()) << run.refusal.message();
  EXPECT_TRUE(run.orderMismatch || run.hang) << run.summary();
  std::cout << run.summary();
  EXPECT_NE(run.summary().find("rank 3 tb " + std::to_string(tb)), std::string::npos) << run.summary();
  // LL and LL128 check the tag once the lines arrived: the same diagnosis.
  for (Protocol protocol : {Protocol::LL, Protocol::LL128}) {
    options.protocol = protocol;
    CpuVerifyReport lines = verifyPlanOnCpu(plan, options);
    EXPECT_FALSE(lines.ok);
    EXPECT_TRUE(lines.orderMismatch || lines.hang) << lines.summary();
    EXPECT_NE(lines.summary().find("rank 3 tb " + std::to_string(tb)), std::string::npos) << lines.summary();
  }
}

TEST(CpuVerify, RemovedDependencyIsRefused) {
  Plan plan = compileExample("hm_allreduce").plan;
  // Drop every dependency of rank 5's sends: they would read chunks before they are reduced.
  for (PlanTb& tb : plan.ranks[5].tbs) {
    for (PlanEntry& entry : tb.entries) {
      if (entry.kind == PrimitiveKind::Send) entry.deps.clear();
    }
  }
  for (PlanTb& tb : plan.ranks[5].tbs) {
    for (PlanEntry& entry : tb.entries) entry.hasDependents = false;
  }
  for (PlanTb& tb : plan.ranks[5].tbs) {
    for (PlanEntry& entry : tb.entries) {
      for (const EntryRef& dep : entry.deps) plan.ranks[5].tbs[dep.tb].entries[dep.entry].hasDependents = true;
    }
  }
  ASSERT_TRUE(validatePlan(plan).ok()) << "the plan is structurally fine";
  CpuVerifyReport report = verifyPlanOnCpu(plan, optionsFor(DataType::Float32, 512, 64));
  EXPECT_FALSE(report.ok);
  EXPECT_NE(report.refusal.message().find("race on rank 5"), std::string::npos) << report.summary();
}

TEST(CpuVerify, DeadlockBecomesADiagnosedHang) {
  // Unfused: a send TB and a receive TB per rank.
  const auto& example = compileExample("ring_allreduce", "hpds", true, 8, 4, -1, false);
  Plan plan = example.plan;
  // Rank 2: the first receive waits for the last send, which (through the TB order and the
  // send's own dependencies) waits for that receive: a cycle.
  PlanRank& rank = plan.ranks[2];
  int32_t recvTb = -1, sendTb = -1;
  for (const PlanTb& tb : rank.tbs) {
    if (tb.recvPeer == 1) recvTb = tb.id;
    if (tb.sendPeer == 3) sendTb = tb.id;
  }
  ASSERT_TRUE(recvTb >= 0 && sendTb >= 0 && recvTb != sendTb);
  const int32_t last = static_cast<int32_t>(rank.tbs[sendTb].entries.size()) - 1;
  rank.tbs[recvTb].entries[0].deps.push_back(EntryRef{sendTb, last});
  rank.tbs[sendTb].entries[last].hasDependents = true;
  EXPECT_FALSE(validatePlan(plan).ok()) << "the static deadlock check sees the cycle";
  VerifyOptions options = optionsFor(DataType::Float32, 256, 64);
  options.staticChecks = false;
  options.timeoutSeconds = 1;
  CpuVerifyReport report = verifyPlanOnCpu(plan, options);
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(report.hang) << report.summary();
  const std::string summary = report.summary();
  EXPECT_NE(summary.find("rank 2 tb " + std::to_string(recvTb) + " entry 0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("waiting for tb " + std::to_string(sendTb) + " entry " + std::to_string(last)),
            std::string::npos)
      << summary;
  EXPECT_LT(report.runSeconds, 10);
  std::cout << summary;
}

}  // namespace
}  // namespace tuccl
