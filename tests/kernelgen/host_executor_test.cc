// The host executor as a runtime uses it: the caller owns the rank buffers, runs the ranks in
// several concurrent calls sharing one staging, and gets a Status with every stopped TB when a
// plan hangs or when only some of the ranks it needs are run.
#include "kernelgen/host_executor.h"

#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "kernelgen/codegen.h"
#include "kernelgen/element_values.h"
#include "kernelgen/output_compare.h"
#include "plan_fixtures.h"

namespace tuccl {
namespace {

using testing::compileExample;

std::shared_ptr<const HostKernels> hostKernels(const Plan& plan) {
  Targets host;
  host.hostKernels = true;
  Expected<CompiledPlan> compiled = compilePlan(plan, host);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return compiled ? compiled->host : nullptr;
}

CollectiveCall callFor(const Plan& plan, const KernelLayout& layout, DataType type, int64_t count) {
  CollectiveCall call;
  call.collective = layout.collective;
  call.nRanks = plan.nRanks;
  call.root = plan.root;
  call.dataType = type;
  call.count = count;
  return call;
}

// The caller's memory: per rank one in-place storage buffer (input = output for AllReduce and
// Broadcast) and a scratch buffer, filled with random values the type stores exactly.
struct CallerMemory {
  std::vector<std::vector<float>> storage, scratch;
  std::vector<std::vector<double>> inputs;
  std::vector<RankBuffers> buffers;
};

CallerMemory callerMemory(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call, uint64_t seed) {
  CallerMemory memory;
  std::mt19937_64 random(seed);
  const RankBufferElements elements = planBufferElements(plan, layout, call.count);
  for (int32_t r = 0; r < call.nRanks; ++r) {
    std::vector<float>& storage = memory.storage.emplace_back(static_cast<size_t>(outputElements(call)));
    std::vector<double>& input = memory.inputs.emplace_back();
    for (float& value : storage) {
      value = static_cast<float>(1 + random() % 64) / 8.0f;
      input.push_back(value);
    }
    std::vector<float>& scratch = memory.scratch.emplace_back(static_cast<size_t>(elements.scratch));
    memory.buffers.push_back(RankBuffers{storage.data(), storage.data(), scratch.data()});
  }
  return memory;
}

void expectReference(const CollectiveCall& call, const CallerMemory& memory) {
  Expected<RankOutputs> expected = referenceOutputs(call, memory.inputs);
  ASSERT_TRUE(expected) << expected.status().toString();
  std::vector<const void*> outputs;
  for (const RankBuffers& b : memory.buffers) outputs.push_back(b.output);
  for (const RankComparison& rank : compareOutputs(call, *expected, outputs)) {
    EXPECT_TRUE(rank.ok()) << "rank " << rank.rank << ": "
                           << (rank.mismatches.first.empty() ? "" : rank.mismatches.first.front());
  }
}

TEST(HostExecutor, RunsAPlanOnTheCallersBuffers) {
  const auto& example = compileExample("ring_allreduce");
  const KernelLayout layout = layoutKernels(example.plan).value();
  auto kernels = hostKernels(example.plan);
  ASSERT_TRUE(kernels);
  const CollectiveCall call = callFor(example.plan, layout, DataType::Float32, 1000);
  CallerMemory memory = callerMemory(example.plan, layout, call, 7);
  HostStaging staging(layout, callGeometry(example.plan, layout, call, 64, 2));
  EXPECT_EQ(staging.geometry().sliceElems, 16);
  EXPECT_EQ(staging.geometry().microBatches, 8);  // 1000 elements in 8 chunks of 125
  Expected<HostRun> run = runPlanOnHost(*kernels, example.plan, layout, call, memory.buffers, staging);
  ASSERT_TRUE(run) << run.status().toString();
  EXPECT_TRUE(run->completed) << run->status().toString();
  EXPECT_TRUE(run->status().ok());
  EXPECT_TRUE(staging.overrunRings().empty());
  expectReference(call, memory);
}

TEST(HostExecutor, RanksRunByConcurrentCallsSharingTheStaging) {
  // As a runtime with one thread per rank group: two calls, ranks 0-3 and 4-7, one staging.
  const auto& example = compileExample("chain_broadcast", "hpds", true, 8, 4, 5);
  const KernelLayout layout = layoutKernels(example.plan).value();
  auto kernels = hostKernels(example.plan);
  ASSERT_TRUE(kernels);
  const CollectiveCall call = callFor(example.plan, layout, DataType::Float32, 777);
  ASSERT_EQ(call.root, 5);
  CallerMemory memory = callerMemory(example.plan, layout, call, 11);
  HostStaging staging(layout, callGeometry(example.plan, layout, call, 40, 4));
  Expected<HostRun> low = makeError(ErrorCode::Internal, "not run");
  Expected<HostRun> high = makeError(ErrorCode::Internal, "not run");
  std::thread other([&] {
    HostRunOptions options;
    options.ranks = {4, 5, 6, 7};
    high = runPlanOnHost(*kernels, example.plan, layout, call, memory.buffers, staging, options);
  });
  HostRunOptions options;
  options.ranks = {0, 1, 2, 3};
  low = runPlanOnHost(*kernels, example.plan, layout, call, memory.buffers, staging, options);
  other.join();
  ASSERT_TRUE(low && high) << low.status().toString() << high.status().toString();
  EXPECT_TRUE(low->completed && high->completed) << low->status().toString() << high->status().toString();
  expectReference(call, memory);
}

TEST(HostExecutor, ASubsetWithoutItsPeersIsADiagnosedHang) {
  const auto& example = compileExample("ring_allreduce");
  const KernelLayout layout = layoutKernels(example.plan).value();
  auto kernels = hostKernels(example.plan);
  ASSERT_TRUE(kernels);
  const CollectiveCall call = callFor(example.plan, layout, DataType::Float32, 256);
  CallerMemory memory = callerMemory(example.plan, layout, call, 3);
  HostStaging staging(layout, callGeometry(example.plan, layout, call, 0, 4));
  HostRunOptions options;
  options.ranks = {2, 3};
  options.timeoutSeconds = 0.5;
  Expected<HostRun> run = runPlanOnHost(*kernels, example.plan, layout, call, memory.buffers, staging, options);
  ASSERT_TRUE(run) << run.status().toString();
  EXPECT_FALSE(run->completed);
  EXPECT_TRUE(run->hang);
  EXPECT_FALSE(run->watchdogFired) << "the kernels' own bounded waits end the run";
  ASSERT_FALSE(run->stopped.empty());
  for (const StoppedTb& tb : run->stopped) EXPECT_TRUE(tb.rank == 2 || tb.rank == 3) << tb.description;
  const Status status = run->status();
  EXPECT_EQ(status.code(), ErrorCode::Timeout);
  // Rank 2 receives from rank 1, which is not running: it waits for data that never comes.
  EXPECT_NE(status.message().find("rank 2 tb"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("waiting for data on ring"), std::string::npos) << status.message();
}

TEST(HostExecutor, ADeadlockedPlanIsDiagnosedWithinTheTimeout) {
  // Unfused: a send TB and a receive TB per rank.
  Plan plan = compileExample("ring_allreduce", "hpds", true, 8, 4, -1, false).plan;
  // Rank 2's first receive waits for its last send, which waits (through TB order and the
  // send's dependencies) for that receive: a cycle.
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
  const KernelLayout layout = layoutKernels(plan).value();
  auto kernels = hostKernels(plan);
  ASSERT_TRUE(kernels);
  const CollectiveCall call = callFor(plan, layout, DataType::Float32, 256);
  CallerMemory memory = callerMemory(plan, layout, call, 5);
  HostStaging staging(layout, callGeometry(plan, layout, call, 64, 4));
  HostRunOptions options;
  options.timeoutSeconds = 1;
  Expected<HostRun> run = runPlanOnHost(*kernels, plan, layout, call, memory.buffers, staging, options);
  ASSERT_TRUE(run) << run.status().toString();
  EXPECT_TRUE(run->hang);
  EXPECT_FALSE(run->watchdogFired);
  int32_t timedOut = 0;
  for (const StoppedTb& tb : run->stopped) timedOut += tb.report.state == dev::kTbTimedOut ? 1 : 0;
  EXPECT_GE(timedOut, 1);
  const std::string message = run->status().message();
  EXPECT_NE(message.find("rank 2 tb " + std::to_string(recvTb) + " entry 0"), std::string::npos) << message;
  EXPECT_NE(message.find("waiting for tb " + std::to_string(sendTb) + " entry " + std::to_string(last)),
            std::string::npos)
      << message;
}

TEST(HostExecutor, MalformedRequestsAreRefusedBeforeAnythingRuns) {
  const auto& example = compileExample("chain_reduce", "hpds", true, 8, 4, 2);
  const KernelLayout layout = layoutKernels(example.plan).value();
  auto kernels = hostKernels(example.plan);
  ASSERT_TRUE(kernels);
  const CollectiveCall call = callFor(example.plan, layout, DataType::Float32, 64);
  CallerMemory memory = callerMemory(example.plan, layout, call, 1);
  HostStaging staging(layout, callGeometry(example.plan, layout, call, 64, 4));
  auto refusal = [&](const CollectiveCall& c, std::span<const RankBuffers> buffers, std::vector<int32_t> ranks) {
    HostRunOptions options;
    options.ranks = std::move(ranks);
    Expected<HostRun> run = runPlanOnHost(*kernels, example.plan, layout, c, buffers, staging, options);
    EXPECT_FALSE(run);
    return run ? std::string() : run.status().message();
  };
  EXPECT_NE(refusal(call, memory.buffers, {0, 8}).find("rank 8 is not a rank"), std::string::npos);
  EXPECT_NE(refusal(call, memory.buffers, {1, 1}).find("listed twice"), std::string::npos);
  EXPECT_NE(refusal(call, std::span(memory.buffers).first(4), {}).find("4 rank buffers for 8 ranks"),
            std::string::npos);
  std::vector<RankBuffers> missing = memory.buffers;
  missing[6].output = nullptr;
  EXPECT_NE(refusal(call, missing, {}).find("rank 6 has no output buffer"), std::string::npos);
  CollectiveCall otherRoot = call;
  otherRoot.root = 3;
  EXPECT_NE(refusal(otherRoot, memory.buffers, {}).find("the plan's root is rank 2"), std::string::npos);
  CollectiveCall otherCount = call;
  otherCount.count = 6400;
  EXPECT_NE(refusal(otherCount, memory.buffers, {}).find("another layout or count"), std::string::npos);
  // Nothing ran: the staging is untouched and the run that follows completes.
  Expected<HostRun> run = runPlanOnHost(*kernels, example.plan, layout, call, memory.buffers, staging);
  ASSERT_TRUE(run) << run.status().toString();
  EXPECT_TRUE(run->completed) << run->status().toString();
  expectReference(call, memory);
}

}  // namespace
}  // namespace tuccl
