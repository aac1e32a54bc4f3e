// The MSCCL XML exporter: options and plans it refuses, the limits it reports per runtime, the
// runtimes' lexical rules and spellings, and the cut of multi-connection TBs into MSCCL TBs. The
// semantics of every example's export are proved by tests/tools/msccl_semantics.py (ctest
// msccl_export.semantics).
#include "plan/msccl_export.h"

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

Plan examplePlan(const std::string& file, RescclParameters parameters, TbPolicy policy = TbPolicy::StateBased) {
  const fs::path source = fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms" / (file + ".resccl");
  Expected<Algorithm> algorithm = loadRescclAlgorithm(source.string(), parameters);
  EXPECT_TRUE(algorithm.ok()) << algorithm.status().toString();
  PlanRequest request;
  request.tbAllocation = TbRequest{policy, false};
  request.fuse = false;  // separate send and receive TBs: the TB counts and dependencies checked here
  return buildPlan(*algorithm, request).value();
}

Plan ringAllReduce(int32_t ranks, TbPolicy policy = TbPolicy::StateBased) {
  return examplePlan("ring_allreduce", {{"nRanks", ranks}, {"GPUPerNode", ranks}}, policy);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(MscclExport, RuntimeNamesRoundTrip) {
  for (int i = 0; i < kMscclRuntimes; ++i) {
    const auto runtime = static_cast<MscclRuntime>(i);
    EXPECT_EQ(parseMscclRuntime(mscclRuntimeName(runtime)), runtime);
  }
  EXPECT_EQ(parseMscclRuntime("msccl-executor-nccl"), MscclRuntime::Executor);
  EXPECT_FALSE(parseMscclRuntime("nccl"));
}

TEST(MscclExport, RefusesBadOptions) {
  const Plan plan = ringAllReduce(4);
  MscclExportOptions options;
  options.replicas = -1;
  Expected<std::string> xml = exportMscclXml(plan, options);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(xml.status().message().find("replicas -1"), std::string::npos);

  options = {};
  options.minBytes = 1024;
  options.maxBytes = 512;
  xml = exportMscclXml(plan, options);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(xml.status().message().find("minBytes 1024 is larger than maxBytes 512"), std::string::npos);
}

TEST(MscclExport, RefusesCallLayoutsThePlanCannotServe) {
  Plan outOfPlace = ringAllReduce(4);
  outOfPlace.inPlace = false;
  Expected<std::string> xml = exportMscclXml(outOfPlace, {});
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(xml.status().message().find("cannot serve in-place calls"), std::string::npos);

  const Plan reduceScatter = examplePlan("ring_reducescatter", {{"nRanks", 4}, {"GPUPerNode", 4}});
  MscclExportOptions options;
  options.inPlace = false;
  xml = exportMscclXml(reduceScatter, options);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(xml.status().message().find("cannot serve out-of-place calls"), std::string::npos);
}

TEST(MscclExport, RefusesAnInvalidPlan) {
  Plan plan = ringAllReduce(4);
  plan.ranks[1].tbs.back().entries.pop_back();  // a send or receive loses its partner
  Expected<std::string> xml = exportMscclXml(plan, {});
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::InvalidInput);
}

TEST(MscclExport, ReportsEveryLimitOfTheTargetRuntime) {
  // 70 chunks down a chain: each TB runs 70 steps; the executor and RCCL run 64, microsoft/msccl 256.
  const Plan plan = examplePlan("chain_broadcast", {{"nRanks", 4}, {"GPUPerNode", 4}, {"nChunks", 70}},
                                TbPolicy::ConnectionBased);
  Expected<MscclAlgorithm> algorithm = lowerToMsccl(plan, {});
  ASSERT_TRUE(algorithm.ok()) << algorithm.status().toString();
  EXPECT_TRUE(checkMscclLimits(*algorithm, MscclRuntime::Msccl).empty());
  const std::vector<MscclLimitViolation> violations = checkMscclLimits(*algorithm, MscclRuntime::Executor);
  ASSERT_FALSE(violations.empty());
  EXPECT_EQ(violations.front().limit, "steps per tb");
  EXPECT_EQ(violations.front().value, 70);
  EXPECT_EQ(violations.front().maximum, 64);
  EXPECT_EQ(violations.front().message(), "executor: gpu 0 tb 0: steps per tb is 70, the most is 64");
  EXPECT_EQ(checkMscclLimits(*algorithm, MscclRuntime::Rccl).size(), violations.size());

  MscclExportOptions options;
  Expected<std::string> xml = exportMscclXml(plan, options);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), ErrorCode::ResourceExhausted);
  EXPECT_NE(xml.status().message().find("limits of executor:\n  executor: gpu 0 tb 0: steps per tb is 70"), std::string::npos);
  options.runtime = MscclRuntime::Msccl;
  EXPECT_TRUE(exportMscclXml(plan, options).ok());

  // A 40-rank ring: 6,000 steps in one file, more than the 4,096 elements the readers take.
  xml = exportMscclXml(ringAllReduce(40, TbPolicy::ConnectionBased), options);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("msccl: algo: elements per file is 6361, the most is 4096"), std::string::npos)
      << xml.status().message();

  // 33 replicas need 33 channels (two TBs per rank and replica: replica 32 starts at tb 64).
  const Plan small = ringAllReduce(4);
  options = {};
  options.replicas = 33;
  xml = exportMscclXml(small, options);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("algo: channels is 33, the most is 32"), std::string::npos);
  EXPECT_NE(xml.status().message().find("tb 64: channel is 32, the most is 31"), std::string::npos);
}

TEST(MscclExport, ReportsTheTbsOfAGpuAndTheElementsOfAFile) {
  MscclAlgorithm algorithm;
  algorithm.gpus.resize(2);
  algorithm.gpus[0].tbs.resize(217);
  for (int32_t t = 0; t < 217; ++t) {
    algorithm.gpus[0].tbs[t].sendPeer = 1;
    algorithm.gpus[0].tbs[t].channel = t % 4;
  }
  algorithm.gpus[1].id = 1;
  algorithm.gpus[1].tbs.resize(1);
  algorithm.gpus[1].tbs[0].steps.resize(4000);
  algorithm.gpus[1].tbs[0].steps[3].count = 72;
  std::set<std::string> limits;
  for (const MscclLimitViolation& v : checkMscclLimits(algorithm, MscclRuntime::Msccl)) limits.insert(v.limit + " @ " + v.where);
  EXPECT_TRUE(limits.count("tbs per gpu @ gpu 0"));
  EXPECT_TRUE(limits.count("tbs with a send peer per channel @ gpu 0 channel 0"));
  EXPECT_TRUE(limits.count("steps per tb @ gpu 1 tb 0"));
  EXPECT_TRUE(limits.count("cnt @ gpu 1 tb 0 step 3"));
  EXPECT_TRUE(limits.count("elements per file @ algo"));
  for (const MscclLimitViolation& v : checkMscclLimits(algorithm, MscclRuntime::Executor)) {
    EXPECT_NE(v.limit, "tbs per gpu");  // the executor runs 1024
  }
}

TEST(MscclExport, FollowsTheRuntimesLexicalRules) {
  Plan plan = examplePlan("hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}});
  plan.algorithm = "HM \"all<reduce>\" & more";
  MscclExportOptions options;
  options.replicas = 2;
  Expected<std::string> xml = exportMscclXml(plan, options);
  ASSERT_TRUE(xml.ok()) << xml.status().toString();
  const std::vector<std::string> all = lines(*xml);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().rfind("<algo name=\"HM__all_reduce_____more\" proto=\"Simple\"", 0), 0u) << all.front();
  const std::regex tag(R"(^ *(</[a-z]+>|<[a-z]+( [A-Za-z_]+="[^" <>&]*")+/?>)$)");
  for (const std::string& line : all) {
    EXPECT_TRUE(std::regex_match(line, tag)) << line;
    size_t attributes = 0;
    for (char c : line) attributes += c == '=';
    EXPECT_LE(attributes, 16u) << line;
  }
  EXPECT_EQ(xml->find("<?xml"), std::string::npos);
  EXPECT_NE(xml->find("nchannels=\"2\" nchunksperloop=\"16\" ngpus=\"8\" coll=\"allreduce\" inplace=\"1\" outofplace=\"0\""),
            std::string::npos);
  EXPECT_NE(xml->find("<gpu id=\"7\" i_chunks=\"16\" o_chunks=\"16\" s_chunks=\"0\">"), std::string::npos);
  // In-place AllReduce addresses the input only (MSCCLang's convention).
  EXPECT_EQ(xml->find("buf=\"o\""), std::string::npos);
}

TEST(MscclExport, SpellsCollAndSizeBoundsPerRuntime) {
  const Plan plan = examplePlan("ring_reducescatter", {{"nRanks", 4}, {"GPUPerNode", 4}});
  MscclExportOptions options;
  options.maxBytes = 1 << 20;
  options.minBytes = 4096;
  Expected<std::string> executor = exportMscclXml(plan, options);
  ASSERT_TRUE(executor.ok());
  EXPECT_NE(executor->find("coll=\"reducescatter\""), std::string::npos);
  EXPECT_NE(executor->find("minBytes=\"4096\" maxBytes=\"1048576\""), std::string::npos);
  // In-place ReduceScatter addresses the input only; o_chunks is nchunksperloop / ngpus.
  EXPECT_EQ(executor->find("buf=\"o\""), std::string::npos);
  EXPECT_NE(executor->find("nchunksperloop=\"4\""), std::string::npos);
  EXPECT_NE(executor->find("i_chunks=\"4\" o_chunks=\"1\""), std::string::npos);
  options.runtime = MscclRuntime::Msccl;
  Expected<std::string> msccl = exportMscclXml(plan, options);
  ASSERT_TRUE(msccl.ok());
  EXPECT_NE(msccl->find("coll=\"reduce_scatter\""), std::string::npos);
  EXPECT_NE(msccl->find("maxBytes=\"1048577\""), std::string::npos);  // msccl's bound is exclusive
  options.maxBytes = 0;
  EXPECT_NE(exportMscclXml(plan, options)->find("maxBytes=\"4611686018427387904\""), std::string::npos);
}

TEST(MscclExport, OutOfPlaceCopiesTheInputIntoTheOutputFirst) {
  const Plan plan = examplePlan("ring_allgather", {{"nRanks", 4}, {"GPUPerNode", 4}});
  MscclExportOptions options;
  options.inPlace = false;
  Expected<MscclAlgorithm> algorithm = lowerToMsccl(plan, options);
  ASSERT_TRUE(algorithm.ok());
  for (const MscclGpu& gpu : algorithm->gpus) {
    const MscclTb& prologue = gpu.tbs.back();
    ASSERT_EQ(prologue.steps.size(), 1u);
    const MscclStep& copy = prologue.steps[0];
    EXPECT_EQ(copy.type, MscclStepType::Copy);
    EXPECT_EQ(copy.srcBuffer, BufferKind::Input);
    EXPECT_EQ(copy.dstBuffer, BufferKind::Output);
    EXPECT_EQ(copy.dstOffset, gpu.id);  // AllGather: the own block of the output
    EXPECT_TRUE(copy.hasDependents);
    // Every other TB waits for it before its first step.
    for (size_t t = 0; t + 1 < gpu.tbs.size(); ++t) EXPECT_EQ(gpu.tbs[t].steps.front().depTb, prologue.id);
  }
}

// A single-TB plan serves every connection of a rank in one TB: the export cuts it into TBs of
// one send and one receive peer, with one TB per connection and channel.
TEST(MscclExport, CutsMultiConnectionTbsIntoMscclTbs) {
  const Plan plan = examplePlan("hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}, TbPolicy::Single);
  ASSERT_EQ(plan.ranks[0].tbs.size(), 1u);
  ASSERT_EQ(plan.ranks[0].tbs[0].sendPeer, -2);
  Expected<MscclAlgorithm> algorithm = lowerToMsccl(plan, {});
  ASSERT_TRUE(algorithm.ok()) << algorithm.status().toString();
  std::map<MscclStepType, int> types;
  for (const MscclGpu& gpu : algorithm->gpus) {
    EXPECT_GT(gpu.tbs.size(), 1u);
    std::set<std::tuple<bool, int32_t, int32_t>> connections;
    for (const MscclTb& tb : gpu.tbs) {
      if (tb.sendPeer >= 0) { EXPECT_TRUE(connections.insert({true, tb.sendPeer, tb.channel}).second); }
      if (tb.recvPeer >= 0) { EXPECT_TRUE(connections.insert({false, tb.recvPeer, tb.channel}).second); }
      bool afterNop = false;
      for (const MscclStep& step : tb.steps) {
        ++types[step.type];
        if (step.depTb >= 0) {
          ASSERT_LT(step.depTb, static_cast<int32_t>(gpu.tbs.size()));
          EXPECT_NE(step.depTb, tb.id);
          EXPECT_TRUE(gpu.tbs[step.depTb].steps.at(step.depStep).hasDependents);
        }
        if (step.type == MscclStepType::Nop) { EXPECT_GE(step.depTb, 0); }
        if (afterNop && step.type != MscclStepType::Nop) { EXPECT_GE(step.depTb, 0); }
        afterNop = step.type == MscclStepType::Nop;
      }
    }
  }
  EXPECT_GT(types[MscclStepType::RecvReduceCopySend] + types[MscclStepType::RecvCopySend], 0);
  // Without fusion, the same plan uses only the plain types.
  MscclExportOptions options;
  options.fuse = false;
  Expected<MscclAlgorithm> plain = lowerToMsccl(plan, options);
  ASSERT_TRUE(plain.ok());
  for (const MscclGpu& gpu : plain->gpus) {
    for (const MscclTb& tb : gpu.tbs) {
      for (const MscclStep& step : tb.steps) {
        EXPECT_NE(step.type, MscclStepType::RecvCopySend);
        EXPECT_NE(step.type, MscclStepType::RecvReduceCopySend);
      }
    }
  }
}

}  // namespace
}  // namespace tuccl
