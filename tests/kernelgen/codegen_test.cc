// Kernel generation: structure and readability of the generated source, layout and the static
// race check.
#include "kernelgen/codegen.h"

#include <gtest/gtest.h>

#include "kernelgen/kernel_layout.h"
#include "plan/plan_validate.h"
#include "plan_fixtures.h"

namespace tuccl {
namespace {

using testing::compileExample;

TEST(Codegen, StraightLineKernelsNameEveryEntry) {
  const auto& example = compileExample("ring_allreduce");
  // Without rerolling and roles: one kernel per rank, one block per entry.
  const GeneratedKernels generated = testing::kernelsOf(example.plan, KernelGenOptions{false, false});
  const std::vector<GeneratedKernel>& kernels = generated.kernels;
  ASSERT_EQ(kernels.size(), 8u);
  for (const GeneratedKernel& kernel : kernels) {
    ASSERT_EQ(kernel.ranks.size(), 1u);
    EXPECT_EQ(generated.ranks[kernel.ranks[0]].kernel, kernel.id);
    EXPECT_EQ(kernel.fileName, "kernel" + std::to_string(kernel.id) + ".cu");
    // Bounded to the threads the kernel is launched with (the plan's nThreads).
    EXPECT_NE(kernel.source.find("TUCCL_KERNEL_THREADS(" + std::to_string(example.plan.config.nThreads) + ") " +
                                 kernel.kernelName + "(tuccl::dev::KernelArgs args)"),
              std::string::npos);
    EXPECT_NE(kernel.source.find("switch (t.baseTb)"), std::string::npos);
    EXPECT_NE(kernel.source.find("ring_allreduce.resccl:"), std::string::npos) << "source lines in comments";
    EXPECT_NE(kernel.source.find("for (int64_t mb = 0; mb < t.nMicroBatches; ++mb)"), std::string::npos);
    EXPECT_EQ(kernel.source.find("for (int32_t i = 0;"), std::string::npos) << "no rerolled loop";
    EXPECT_EQ(kernel.nTbs, static_cast<int32_t>(example.plan.ranks[kernel.ranks[0]].tbs.size()));
    EXPECT_EQ(kernel.tableSize, 0);
  }
  // Every plan entry appears once, with its primitive.
  const GeneratedKernel& rank3 = generated.kernelOf(3);
  size_t entries = 0;
  for (const PlanTb& tb : example.plan.ranks[3].tbs) entries += tb.entries.size();
  size_t calls = 0;
  for (size_t at = 0; (at = rank3.source.find("t.at(", at)) != std::string::npos; ++at) ++calls;
  EXPECT_EQ(calls, entries);
  EXPECT_NE(rank3.source.find("TUCCL_TRY(send(t, "), std::string::npos);
  // The ring as lowered: its receives fused with the sends of their results.
  EXPECT_NE(rank3.source.find("TUCCL_TRY(recvReduceSend(t, "), std::string::npos);
  EXPECT_NE(rank3.source.find("TUCCL_TRY(recvReduceCopySend(t, "), std::string::npos);
  EXPECT_NE(rank3.source.find("TUCCL_TRY(recvCopySend(t, "), std::string::npos);
  EXPECT_NE(rank3.source.find("TUCCL_TRY(recv(t, "), std::string::npos);
  EXPECT_NE(rank3.source.find(": recvReduceSend <- rank 2 -> rank 4, op "), std::string::npos) << rank3.source;
  EXPECT_NE(rank3.source.find("//   then op "), std::string::npos) << "the forwarded task is named";
}

TEST(Codegen, RerolledKernelsLoopOverAffineRuns) {
  const auto& example = compileExample("ring_allreduce");
  const GeneratedKernels generated = testing::kernelsOf(example.plan);
  ASSERT_EQ(generated.ranks.size(), 8u);
  // A ring is symmetric: every rank runs one kernel, its values computed from the rank.
  EXPECT_EQ(generated.kernels.size(), 1u);
  const std::string& source = generated.kernelOf(0).source;
  EXPECT_NE(source.find("for (int32_t i = 0; i < "), std::string::npos) << source;
  EXPECT_NE(source.find(", rerolled): "), std::string::npos) << "loops name their entries";
  EXPECT_NE(source.find("//   source "), std::string::npos) << "and their source lines";
  EXPECT_NE(source.find("rank"), std::string::npos);
  EXPECT_LT(source.size(), testing::kernelsOf(example.plan, KernelGenOptions{false, false}).kernelOf(0).source.size());
}

TEST(Codegen, DependenciesBecomeFlagWaits) {
  const auto& example = compileExample("hm_allreduce");
  const GeneratedKernels kernels = testing::kernelsOf(example.plan);
  bool sawDep = false;
  for (const PlanTb& tb : example.plan.ranks[0].tbs) {
    for (const PlanEntry& entry : tb.entries) sawDep = sawDep || !entry.deps.empty();
  }
  ASSERT_TRUE(sawDep);
  EXPECT_NE(kernels.kernelOf(0).source.find("TUCCL_TRY(waitEntry(t, "), std::string::npos);
  EXPECT_NE(kernels.kernelOf(0).source.find("postEntry(t, "), std::string::npos);
}

TEST(Codegen, ReplayLevelsLoopMicroBatchesOutsideEntries) {
  const auto& example = compileExample("ring_allgather", "algorithm");
  const GeneratedKernels kernels = testing::kernelsOf(example.plan);
  EXPECT_NE(kernels.kernelOf(0).source.find("replayed per micro-batch"), std::string::npos);
}

TEST(Codegen, RankRangesAreCompact) {
  EXPECT_EQ(rankRanges({0, 1, 2, 3, 5, 8, 9}), "0-3, 5, 8-9");
  EXPECT_EQ(rankRanges({}), "");
  EXPECT_EQ(rankRanges({0, 2, 4, 6}, 2), "0, 2, ...");
}

TEST(KernelLayout, RingsPairSendsWithReceives) {
  const auto& example = compileExample("hm_allgather");
  KernelLayout layout = layoutKernels(example.plan).value();
  EXPECT_EQ(layout.chunksPerUnit, 1);
  int64_t sends = 0;
  for (const PlanRank& rank : example.plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
        const PlanEntry& entry = tb.entries[e];
        const EntryLayout& where = layout.at(rank.rank, tb.id, e);
        if (entry.kind == PrimitiveKind::Copy || entry.kind == PrimitiveKind::Reduce) {
          EXPECT_EQ(where.ring, -1);
          continue;
        }
        // A receive (fused or not) reads the ring its sender pushes into, a send (or a fused
        // entry's send) pushes into the ring its receiver reads.
        if (isReceive(entry.kind)) {
          ASSERT_GE(where.ring, 0);
          const PlanEntry& sender = example.plan.ranks[entry.peer].tbs[where.peer.tb].entries[where.peer.entry];
          EXPECT_EQ(sendSideOf(sender).op, entry.op);
          const EntryLayout& theirs = layout.at(entry.peer, where.peer.tb, where.peer.entry);
          EXPECT_EQ(isFused(sender.kind) ? theirs.outRing : theirs.ring, where.ring);
        }
        if (isSending(entry.kind)) {
          const bool fused = isFused(entry.kind);
          const int32_t ring = fused ? where.outRing : where.ring;
          const EntryRef to = fused ? where.outPeer : where.peer;
          const int32_t receiver = sendSideOf(entry).peer;
          ASSERT_GE(ring, 0);
          EXPECT_EQ(example.plan.ranks[receiver].tbs[to.tb].entries[to.entry].op, sendSideOf(entry).op);
          EXPECT_EQ(layout.at(receiver, to.tb, to.entry).ring, ring);
          ++sends;
        }
      }
    }
  }
  int64_t messages = 0;
  for (const RingInfo& ring : layout.rings) messages += ring.messages;
  EXPECT_EQ(messages, sends);
}

TEST(KernelLayout, LoweredPlansAreRaceFree) {
  std::vector<std::string> names = testing::exampleAlgorithms();
  for (const std::string& rooted : testing::rootedExampleAlgorithms()) names.push_back(rooted);
  for (const std::string& name : names) {
    for (const std::string& scheduler : testing::schedulers()) {
      const auto& example = compileExample(name, scheduler);
      EXPECT_TRUE(checkPlanRaceFree(example.plan).ok()) << name << " " << scheduler;
    }
  }
}

TEST(KernelLayout, RemovedDependencyIsARace) {
  // Unfused: a send TB whose entries depend on the receive TB's.
  Plan plan = compileExample("ring_allreduce", "hpds", true, 8, 4, -1, false).plan;
  bool removed = false;
  for (PlanTb& tb : plan.ranks[2].tbs) {
    for (PlanEntry& entry : tb.entries) {
      // A send's dependency on the receive that reduced its chunk (a receive's WAR dependency
      // on an earlier send is also implied by the ring's own causality).
      if (!removed && entry.kind == PrimitiveKind::Send && !entry.deps.empty()) {
        const EntryRef dep = entry.deps.front();
        entry.deps.erase(entry.deps.begin());
        removed = true;
        // Keep hasDependents consistent so only the ordering is wrong.
        bool still = false;
        for (const PlanTb& other : plan.ranks[2].tbs) {
          for (const PlanEntry& e : other.entries) {
            for (const EntryRef& d : e.deps) still = still || d == dep;
          }
        }
        plan.ranks[2].tbs[dep.tb].entries[dep.entry].hasDependents = still;
      }
    }
  }
  ASSERT_TRUE(removed);
  const Status race = checkPlanRaceFree(plan);
  ASSERT_FALSE(race.ok());
  EXPECT_NE(race.message().find("race on rank 2"), std::string::npos) << race.message();
}

TEST(KernelLayout, UnpairedSendIsRefused) {
  Plan plan = compileExample("ring_allgather").plan;
  for (PlanTb& tb : plan.ranks[1].tbs) {
    for (size_t e = 0; e < tb.entries.size(); ++e) {
      if (tb.entries[e].kind == PrimitiveKind::Recv && tb.entries[e].deps.empty() && !tb.entries[e].hasDependents) {
        tb.entries.erase(tb.entries.begin() + static_cast<std::ptrdiff_t>(e));
        EXPECT_EQ(layoutKernels(plan).status().code(), ErrorCode::InvalidInput);
        return;
      }
    }
  }
  GTEST_SKIP() << "no independent receive to remove";
}

}  // namespace
}  // namespace tuccl
