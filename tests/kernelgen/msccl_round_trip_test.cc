// MSCCL XML round trips, proved by running them.
//  - import(export(x)): every bundled example at two shapes, every TB policy, exported for in-place
//    and out-of-place calls, imported again; the import passes the semantic checker, its plan runs
//    correctly on the CPU (in place and out of place where the call layout allows), and the
//    in-place export is semantically equal to the example itself. The same for every valid file of
//    tests/data/msccl: the plan built from its import is exported and imported again.
//  - export(import(xml)): the re-import of every valid test file's export is semantically equal
//    (lang/algorithm_equivalence.h) to the file's own import.
// ctest msccl_round_trip.semantics runs tests/tools/msccl_semantics.py over the same re-exports
// (written by tests/plan/msccl_export_files.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "kernelgen/cpu_verify.h"
#include "lang/algorithm_equivalence.h"
#include "lang/msccl_xml.h"
#include "lang/semantic_check.h"
#include "plan/msccl_export.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

struct Example {
  std::string file;
  RescclParameters parameters;
};

// Two shapes per example, inside every runtime's limits.
const std::vector<Example> kExamples = {
    {"ring_allgather", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"ring_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"ring_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_reducescatter", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"ring_reducescatter", {{"nRanks", 6}, {"GPUPerNode", 3}}},
    {"direct_allgather", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"direct_allgather", {{"nRanks", 6}, {"GPUPerNode", 3}}},
    {"direct_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 16}}},
    {"direct_allreduce", {{"nRanks", 2}, {"GPUPerNode", 2}, {"nScratch", 4}}},
    {"direct_alltoall", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 4}}},
    {"direct_alltoall", {{"nRanks", 6}, {"GPUPerNode", 3}, {"nScratch", 6}}},
    {"hm_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"hm_allgather", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"hm_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"chain_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"chain_broadcast", {{"nRanks", 4}, {"GPUPerNode", 2}, {"Root", 0}}},
    {"binomial_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"binomial_broadcast", {{"nRanks", 8}, {"GPUPerNode", 4}, {"Root", 5}}},
    {"chain_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
    {"chain_reduce", {{"nRanks", 4}, {"GPUPerNode", 2}, {"Root", 0}}},
    {"binomial_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
    {"binomial_reduce", {{"nRanks", 8}, {"GPUPerNode", 4}, {"Root", 1}}},
};

// gtest prints a parameter with this (its name in ctest's list).
void PrintTo(const Example& example, std::ostream* out) {
  *out << example.file;
  for (const auto& parameter : example.parameters) *out << " " << parameter.first << "=" << parameter.second;
}

struct Policy {
  const char* name;
  Scheduler scheduler;
  TbRequest tbs;
};

const Policy kPolicies[] = {
    {"state", Scheduler::Hpds, {TbPolicy::StateBased, false}},
    {"connection", Scheduler::Hpds, {TbPolicy::ConnectionBased, false}},
    {"channels", Scheduler::AlgorithmLevel, {TbPolicy::ConnectionBased, true}},
    {"single", Scheduler::RoundRobin, {TbPolicy::Single, false}},
};

Plan planOf(const Algorithm& algorithm, const Policy& policy) {
  PlanRequest request;
  request.scheduler = policy.scheduler;
  request.tbAllocation = policy.tbs;
  return buildPlan(algorithm, request).value();
}

// The plan of `algorithm` runs correctly on the CPU in every call layout it allows.
void expectRunsOnCpu(const Algorithm& algorithm, const std::string& what) {
  const Plan plan = planOf(algorithm, kPolicies[0]);
  for (bool inPlace : {true, false}) {
    if (inPlace && !algorithm.inPlace) continue;
    if (!inPlace && algorithm.inPlace && algorithm.collective == Collective::ReduceScatter) continue;
    VerifyOptions options;
    options.dataType = DataType::Int32;
    options.count = 301;
    options.chunkSize = 64;
    options.inPlace = inPlace;
    options.seed = 7;
    options.timeoutSeconds = 60;
    const CpuVerifyReport report = verifyPlanOnCpu(plan, options);
    EXPECT_TRUE(report.ok) << what << (inPlace ? ", in place\n" : ", out of place\n") << report.summary();
  }
}

// export(plan) for one call layout, imported again; the import passes the semantic checker.
Expected<ImportedMscclAlgorithm> exportAndImport(const Plan& plan, bool inPlace, const std::string& what) {
  MscclExportOptions options;
  options.inPlace = inPlace;
  options.replicas = 1;
  Expected<std::string> xml = exportMscclXml(plan, options);
  if (!xml) return xml.status();
  Expected<ImportedMscclAlgorithm> imported = importMscclXml(what, *xml);
  if (imported) {
    const CheckReport check = checkAlgorithm(imported->algorithm);
    EXPECT_TRUE(check.ok()) << what << ": "
                            << (check.ok() ? "" : std::string(violationName(check.violation->kind)));
  }
  return imported;
}

std::vector<fs::path> validTestFiles() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(TUCCL_SOURCE_DIR) / "tests/data/msccl")) {
    if (entry.is_regular_file() && entry.path().extension() == ".xml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class ExampleRoundTrip : public ::testing::TestWithParam<Example> {};

TEST_P(ExampleRoundTrip, ExportThenImportRunsCorrectly) {
  const Example& example = GetParam();
  const fs::path source = fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms" / (example.file + ".resccl");
  Expected<Algorithm> algorithm = loadRescclAlgorithm(source.string(), example.parameters);
  ASSERT_TRUE(algorithm.ok()) << algorithm.status().toString();
  const std::string shape = example.file + " nRanks=" + std::to_string(algorithm->nRanks);
  for (const Policy& policy : kPolicies) {
    const Plan plan = planOf(*algorithm, policy);
    for (bool inPlace : {true, false}) {
      if (!inPlace && plan.collective == Collective::ReduceScatter) continue;  // refused by the exporter
      const std::string what = shape + " " + policy.name + (inPlace ? " inplace" : " outofplace");
      Expected<ImportedMscclAlgorithm> imported = exportAndImport(plan, inPlace, what);
      ASSERT_TRUE(imported.ok()) << what << ": " << imported.status().toString();
      EXPECT_EQ(imported->algorithm.inPlace, inPlace) << what;
      if (inPlace) {
        // In the same call layout the file is the example itself, up to scratch and steps.
        const Status same = compareAlgorithmSemantics(*algorithm, imported->algorithm);
        EXPECT_TRUE(same.ok()) << what << ": " << same.message();
      }
      // CPU runs are the expensive part: two TB policies per example and layout run them.
      if (policy.tbs.policy == TbPolicy::StateBased || policy.tbs.policy == TbPolicy::Single) {
        expectRunsOnCpu(imported->algorithm, what);
      }
    }
  }
}

std::string exampleName(const ::testing::TestParamInfo<Example>& info) {
  return info.param.file + "_" + std::to_string(info.param.parameters.front().second) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(MscclRoundTrip, ExampleRoundTrip, ::testing::ValuesIn(kExamples), exampleName);

TEST(MscclRoundTrip, EveryValidTestFileIsCovered) { EXPECT_GE(validTestFiles().size(), 10u); }

class TestFileRoundTrip : public ::testing::TestWithParam<fs::path> {};

TEST_P(TestFileRoundTrip, ImportExportImportIsTheSameAlgorithm) {
  const fs::path& file = GetParam();
  Expected<ImportedMscclAlgorithm> original = importMscclXmlFile(file.string());
  ASSERT_TRUE(original.ok()) << original.status().toString();
  for (const Policy& policy : kPolicies) {
    const std::string what = file.filename().string() + " " + policy.name;
    const Plan plan = planOf(original->algorithm, policy);
    Expected<ImportedMscclAlgorithm> again = exportAndImport(plan, original->algorithm.inPlace, what);
    ASSERT_TRUE(again.ok()) << what << ": " << again.status().toString();
    const Status same = compareAlgorithmSemantics(original->algorithm, again->algorithm);
    EXPECT_TRUE(same.ok()) << what << ": " << same.message();
    if (policy.tbs.policy == TbPolicy::StateBased) expectRunsOnCpu(again->algorithm, what);
    // Every runtime's spelling reads back as the same algorithm.
    for (MscclRuntime runtime : {MscclRuntime::Msccl, MscclRuntime::Rccl}) {
      if (policy.tbs.policy != TbPolicy::StateBased) break;
      MscclExportOptions options;
      options.runtime = runtime;
      options.inPlace = original->algorithm.inPlace;
      options.replicas = 1;
      Expected<std::string> xml = exportMscclXml(plan, options);
      ASSERT_TRUE(xml.ok()) << what << ": " << xml.status().toString();
      Expected<ImportedMscclAlgorithm> spelled = importMscclXml(what, *xml);
      ASSERT_TRUE(spelled.ok()) << what << " " << mscclRuntimeName(runtime) << ": " << spelled.status().toString();
      const Status spelledSame = compareAlgorithmSemantics(original->algorithm, spelled->algorithm);
      EXPECT_TRUE(spelledSame.ok()) << what << " " << mscclRuntimeName(runtime) << ": " << spelledSame.message();
    }
    // Two replicas (MSCCL's instances): chunk j of replica c is chunk j * 2 + c, each on its own
    // channel; the import is a different algorithm over twice the chunks, proved and run.
    if (policy.tbs.policy == TbPolicy::StateBased) {
      MscclExportOptions options;
      options.inPlace = original->algorithm.inPlace;
      options.replicas = 2;
      Expected<std::string> xml = exportMscclXml(plan, options);
      ASSERT_TRUE(xml.ok()) << what << ": " << xml.status().toString();
      Expected<ImportedMscclAlgorithm> doubled = importMscclXml(what + " 2 replicas", *xml);
      ASSERT_TRUE(doubled.ok()) << what << " 2 replicas: " << doubled.status().toString();
      EXPECT_EQ(doubled->algorithm.chunks(BufferKind::Input), 2 * original->algorithm.chunks(BufferKind::Input));
      EXPECT_TRUE(checkAlgorithm(doubled->algorithm).ok()) << what << " 2 replicas";
      expectRunsOnCpu(doubled->algorithm, what + " 2 replicas");
    }
    // An in-place file also serves out-of-place calls after the exporter's pre-copy.
    if (original->algorithm.inPlace && original->algorithm.collective != Collective::ReduceScatter &&
        policy.tbs.policy == TbPolicy::StateBased) {
      Expected<ImportedMscclAlgorithm> outOfPlace = exportAndImport(plan, false, what + " outofplace");
      ASSERT_TRUE(outOfPlace.ok()) << what << ": " << outOfPlace.status().toString();
      expectRunsOnCpu(outOfPlace->algorithm, what + " outofplace");
    }
  }
}

std::string fileName(const ::testing::TestParamInfo<fs::path>& info) {
  std::string name = info.param.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(MscclRoundTrip, TestFileRoundTrip, ::testing::ValuesIn(validTestFiles()), fileName);

// The comparison itself finds differences: a lost contribution, a changed root, another layout.
TEST(AlgorithmSemantics, FindsWhatDiffers) {
  Expected<ImportedMscclAlgorithm> ring =
      importMscclXmlFile(std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/ring_allreduce_1ch.xml");
  ASSERT_TRUE(ring.ok()) << ring.status().toString();
  const Algorithm& original = ring->algorithm;
  EXPECT_TRUE(compareAlgorithmSemantics(original, original).ok());

  // Renumbered steps and reordered operations are the same algorithm.
  Algorithm renumbered = original;
  for (Operation& op : renumbered.ops) op.step = op.step * 3 + 5;
  std::reverse(renumbered.ops.begin(), renumbered.ops.end());
  EXPECT_TRUE(compareAlgorithmSemantics(original, renumbered).ok());

  // A reduce turned into a copy loses contributions.
  Algorithm lossy = original;
  for (Operation& op : lossy.ops) {
    if (op.kind == OpKind::Reduce) {
      op.kind = OpKind::Copy;
      break;
    }
  }
  const Status lost = compareAlgorithmSemantics(original, lossy);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.message().find("rank "), std::string::npos) << lost.message();

  // The last operation dropped: its destination keeps an older value.
  Algorithm shorter = original;
  shorter.ops.erase(std::max_element(shorter.ops.begin(), shorter.ops.end(),
                                     [](const Operation& a, const Operation& b) { return a.step < b.step; }));
  EXPECT_FALSE(compareAlgorithmSemantics(original, shorter).ok());

  Algorithm outOfPlace = original;
  outOfPlace.inPlace = false;
  const Status layout = compareAlgorithmSemantics(original, outOfPlace);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.message().find("call layout: in place vs out of place"), std::string::npos) << layout.message();

  Algorithm bigger = original;
  bigger.nRanks += 1;
  EXPECT_FALSE(compareAlgorithmSemantics(original, bigger).ok());
}

}  // namespace
}  // namespace tuccl
