// Rerolling and rank roles (kernel_roles.h): runs of affine entries become loops, ranks of one
// structure share a kernel, and every rank's values (literals, rank-affine, its table) give back
// exactly the constants of its own straight-line code.
#include "kernelgen/kernel_roles.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "kernelgen/codegen.h"
#include "kernelgen/cpu_verify.h"
#include "plan_fixtures.h"

namespace tuccl {
namespace {

using testing::compileExample;

std::vector<EntryCode> entriesOf(int32_t shape, const std::vector<std::vector<int32_t>>& values) {
  std::vector<EntryCode> entries;
  for (const auto& v : values) entries.push_back(EntryCode{shape, v});
  return entries;
}

TEST(Reroll, AffineRunBecomesOneLoop) {
  // (entry, ring, chunk) = (4 + i, 7, 2 + 8i): one run of five.
  const auto entries = entriesOf(0, {{4, 7, 2}, {5, 7, 10}, {6, 7, 18}, {7, 7, 26}, {8, 7, 34}});
  const std::vector<EntryRun> runs = rerollEntries(entries, 4);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].count, 5);
  EXPECT_EQ(runs[0].firstEntry, 4);
  EXPECT_EQ(runs[0].base, (std::vector<int32_t>{4, 7, 2}));
  EXPECT_EQ(runs[0].stride, (std::vector<int32_t>{1, 0, 8}));
  EXPECT_EQ(rerollEntries(entries, 4, false).size(), 5u) << "rerolling off: every entry alone";
}

TEST(Reroll, NonAffineOrOtherTemplatesBreakRuns) {
  // The chunk jumps after the third entry (2, 10, 18, 19): not affine; the next run starts there.
  const auto jumps = entriesOf(0, {{0, 2}, {1, 10}, {2, 18}, {3, 19}, {4, 20}});
  const std::vector<EntryRun> runs = rerollEntries(jumps, 0);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].count, 3);
  EXPECT_EQ(runs[1].count, 2);
  EXPECT_EQ(runs[1].base, (std::vector<int32_t>{3, 19}));
  // Another template (another primitive or dependency count) never joins a run.
  std::vector<EntryCode> mixed = entriesOf(0, {{0, 1}, {1, 2}});
  mixed.push_back(EntryCode{1, {2, 3}});
  const std::vector<EntryRun> split = rerollEntries(mixed, 0);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[1].shape, 1);
  EXPECT_EQ(split[1].count, 1);
  EXPECT_TRUE(split[1].stride.empty());
}

TEST(Roles, RingIsOneRoleAndRootedTreesAreSeveral) {
  const Plan& ring = compileExample("ring_allreduce").plan;
  EXPECT_EQ(testing::kernelsOf(ring).kernels.size(), 1u);
  const Plan& tree = compileExample("binomial_broadcast").plan;
  const GeneratedKernels kernels = testing::kernelsOf(tree);
  EXPECT_GT(kernels.kernels.size(), 1u) << "the root, inner and leaf ranks of a tree differ";
  EXPECT_LT(kernels.kernels.size(), static_cast<size_t>(tree.nRanks) + 1);
  size_t ranks = 0;
  for (const GeneratedKernel& kernel : kernels.kernels) ranks += kernel.ranks.size();
  EXPECT_EQ(ranks, static_cast<size_t>(tree.nRanks));
}

// Every rank's role, with its table, reproduces the rank's own constants entry by entry, and the
// text of each entry equals its straight-line rendering.
void expectRolesReproduceRanks(const Plan& plan, const std::string& what) {
  SCOPED_TRACE(what);
  const KernelLayout layout = layoutKernels(plan).value();
  EntryTemplates templates;
  const RoleAssignment roles = assignRoles(plan, layout, templates, true, true);
  ASSERT_EQ(roles.roleOfRank.size(), static_cast<size_t>(plan.nRanks));
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    const KernelRole& role = roles.roles[roles.roleOfRank[r]];
    ASSERT_EQ(roles.tables[r].size(), static_cast<size_t>(role.tableSize)) << "rank " << r;
    const RankCode code = withValues(role.code, roleValuesFor(role, r, roles.tables[r]));
    const std::vector<std::vector<EntryCode>> straight = encodeEntries(plan, layout, r, templates);
    const RankCode own = encodeRank(plan, layout, r, templates, false);
    EXPECT_EQ(code.frame, own.frame) << "rank " << r;
    ASSERT_EQ(code.tbs.size(), straight.size()) << "rank " << r;
    for (size_t c = 0; c < straight.size(); ++c) {
      const size_t tb = static_cast<size_t>(code.tbs[c].tb);  // TBs are in canonical order
      ASSERT_LT(tb, straight.size());
      const std::vector<EntryCode> unrolled = unrollTb(code.tbs[c]);
      ASSERT_EQ(unrolled.size(), straight[tb].size()) << "rank " << r << " tb " << tb;
      for (size_t e = 0; e < unrolled.size(); ++e) {
        ASSERT_EQ(unrolled[e], straight[tb][e]) << "rank " << r << " tb " << tb << " entry " << e;
        std::vector<std::string> holes;
        for (int32_t v : unrolled[e].values) holes.push_back(std::to_string(v));
        std::vector<std::string> expected;
        for (int32_t v : straight[tb][e].values) expected.push_back(std::to_string(v));
        EXPECT_EQ(fillTemplate(templates.text(unrolled[e].shape), holes),
                  fillTemplate(templates.text(straight[tb][e].shape), expected));
      }
    }
  }
}

TEST(Roles, TablesReproduceEveryRanksConstants) {
  std::vector<std::string> names = testing::exampleAlgorithms();
  for (const std::string& rooted : testing::rootedExampleAlgorithms()) names.push_back(rooted);
  for (const std::string& name : names) {
    for (const std::string& scheduler : testing::schedulers()) {
      expectRolesReproduceRanks(compileExample(name, scheduler).plan, name + " " + scheduler);
    }
  }
  expectRolesReproduceRanks(compileExample("hm_allreduce", "hpds", true, 32, 8).plan, "hm_allreduce 4x8");
}

TEST(Roles, SharedKernelsVerifyOnTheCpuLikeOneKernelPerRank) {
  for (bool share : {true, false}) {
    VerifyOptions options;
    options.count = 1001;
    options.chunkSize = 256;
    options.kernelGen.shareRoles = share;
    options.kernelGen.reroll = share;
    const CpuVerifyReport report = verifyPlanOnCpu(compileExample("hm_allreduce", "hpds", true, 16, 8).plan, options);
    EXPECT_TRUE(report.ok) << (share ? "roles\n" : "one kernel per rank\n") << report.summary();
  }
}

// HPDS orders each node's inter-node ring entries by the global chunk queue, so the loops of node n
// turn around after about n entries: loop lengths are values, the first nodes (whose loops are
// shorter or missing) are re-cut to the middle nodes' skeleton, and only the last node, whose
// runs come in another order, keeps a kernel of its own. The number of kernels and their size
// stop growing with the nodes, and every rank's values give back its own constants.
TEST(Roles, HmAllReduceKernelsDoNotGrowWithTheNodes) {
  const GeneratedKernels fourNodes = testing::kernelsOf(compileExample("hm_allreduce", "hpds", true, 32, 8).plan);
  const GeneratedKernels eightNodes = testing::kernelsOf(compileExample("hm_allreduce", "hpds", true, 64, 8).plan);
  const GeneratedKernels sixteenNodes = testing::kernelsOf(compileExample("hm_allreduce", "hpds", true, 128, 8).plan);
  const GeneratedKernels thirtyTwoNodes = testing::kernelsOf(compileExample("hm_allreduce", "hpds", true, 256, 8).plan);
  EXPECT_LE(fourNodes.kernels.size(), 4u);
  EXPECT_LE(eightNodes.kernels.size(), 3u);
  EXPECT_EQ(sixteenNodes.kernels.size(), 2u);
  EXPECT_EQ(thirtyTwoNodes.kernels.size(), 2u);
  size_t largest16 = 0;
  size_t largest32 = 0;
  for (const GeneratedKernel& kernel : sixteenNodes.kernels) largest16 = std::max(largest16, kernel.source.size());
  for (const GeneratedKernel& kernel : thirtyTwoNodes.kernels) largest32 = std::max(largest32, kernel.source.size());
  EXPECT_LT(largest32, largest16 + largest16 / 20) << "a kernel's source grows with the nodes";
  // All nodes but the last share one kernel.
  size_t most = 0;
  for (const GeneratedKernel& kernel : thirtyTwoNodes.kernels) most = std::max(most, kernel.ranks.size());
  EXPECT_EQ(most, 256u - 8u);
  for (int32_t nRanks : {32, 64, 128}) {
    expectRolesReproduceRanks(compileExample("hm_allreduce", "hpds", true, nRanks, 8).plan,
                              "hm_allreduce " + std::to_string(nRanks / 8) + "x8");
  }
}

TEST(Roles, HmAllReduceSharedKernelsVerifyOnTheCpu) {
  for (int32_t nRanks : {32, 128}) {
    const Plan& plan = compileExample("hm_allreduce", "hpds", true, nRanks, 8).plan;
    const GeneratedKernels kernels = testing::kernelsOf(plan);
    EXPECT_LE(kernels.kernels.size(), nRanks == 32 ? 4u : 2u) << nRanks << " ranks";
    VerifyOptions options;
    options.count = 16 * nRanks + 5;  // a remainder: the last chunk is short
    options.chunkSize = 32;           // several micro-batches per chunk
    options.timeoutSeconds = 120;
    const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
    EXPECT_TRUE(report.ok) << nRanks << " ranks\n" << report.summary();
    EXPECT_EQ(report.ranks.size(), static_cast<size_t>(plan.nRanks));
    EXPECT_GT(report.microBatches, 1);
  }
}

}  // namespace
}  // namespace tuccl
