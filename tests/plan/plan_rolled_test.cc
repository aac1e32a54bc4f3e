// Plan JSON versions 3 and 4 (plan/plan_rolled.h, plan/plan_json.h): every example program under every
// scheduler and TB policy, and random plans, expand back to exactly the plan they were rolled
// from; the text is deterministic and small; bad rolled documents are refused with the path of
// the field.
#include "plan/plan_rolled.h"

#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "plan/plan_json.h"
#include "sample_plans.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"

namespace tuccl {
namespace {

struct Example {
  std::string file;
  RescclParameters parameters;
};

const std::vector<Example> kExamples = {
    {"ring_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_reducescatter", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"direct_allgather", {{"nRanks", 6}, {"GPUPerNode", 3}}},
    {"direct_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 16}}},
    {"direct_alltoall", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 4}}},
    {"hm_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"hm_allreduce", {{"nRanks", 16}, {"GPUPerNode", 4}}},
    {"chain_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"binomial_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"chain_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
    {"binomial_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
};

Algorithm loadExample(const Example& example) {
  const std::string path = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + example.file + ".resccl";
  Expected<Algorithm> algorithm = loadRescclAlgorithm(path, example.parameters);
  EXPECT_TRUE(algorithm.ok()) << algorithm.status().toString();
  return *algorithm;
}

// Rolled and expanded rank by rank, without the JSON text.
std::vector<PlanRank> expandAll(const RolledPlan& rolled) {
  std::vector<PlanRank> ranks;
  for (const RolledRank& rank : rolled.ranks) {
    Expected<PlanRank> expanded = expandRolledRank(rolled.templates.at(rank.templateIndex), rank, "plan.templates");
    EXPECT_TRUE(expanded.ok()) << expanded.status().toString();
    if (expanded) ranks.push_back(std::move(*expanded));
  }
  return ranks;
}

void expectRoundTrip(const Plan& plan, const std::string& what) {
  const std::string text = writePlanJson(plan);
  EXPECT_NE(text.find("\"version\": " + std::to_string(kPlanFormatVersion)), std::string::npos) << what;
  EXPECT_EQ(writePlanJson(plan), text) << what;  // deterministic
  std::ostringstream streamed;
  writePlanJson(streamed, plan);
  EXPECT_EQ(streamed.str(), text) << what;
  const Expected<Plan> back = readPlanJson(SourceText("plan.json", text));
  ASSERT_TRUE(back.ok()) << what << ": " << back.status().toString();
  EXPECT_TRUE(*back == plan) << what;
  EXPECT_EQ(writePlanJson(*back, 2), writePlanJson(plan, 2)) << what;
  EXPECT_EQ(writePlanJson(*back), text) << what;
}

TEST(RolledPlan, EveryExampleUnderEverySchedulerRoundTrips) {
  const std::vector<Scheduler> schedulers = {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel,
                                             Scheduler::StageLevel};
  for (const Example& example : kExamples) {
    const Algorithm algorithm = loadExample(example);
    for (Scheduler scheduler : schedulers) {
      for (TbPolicy policy : {TbPolicy::ConnectionBased, TbPolicy::StateBased, TbPolicy::Single}) {
        for (bool channels : {false, true}) {
          if (channels && policy != TbPolicy::ConnectionBased) continue;
          PlanRequest request;
          request.scheduler = scheduler;
          request.tbAllocation = {policy, channels};
          const Plan plan = buildPlan(algorithm, request).value();
          const std::string what = example.file + " " + std::string(schedulerName(scheduler)) + " " +
                                   std::string(tbPolicyName(policy)) + (channels ? " channels" : "");
          expectRoundTrip(plan, what);
          EXPECT_TRUE(expandAll(rollPlan(plan)) == plan.ranks) << what;
        }
      }
    }
  }
}

TEST(RolledPlan, SizeGrowsWithTheDistinctWork) {
  // HM AllReduce at 8 and 32 nodes of 4: 16x the entries.
  Example small = {"hm_allreduce", {{"nRanks", 32}, {"GPUPerNode", 4}}};
  Example large = {"hm_allreduce", {{"nRanks", 128}, {"GPUPerNode", 4}}};
  const Plan a = buildPlan(loadExample(small), PlanRequest{}).value();
  const Plan b = buildPlan(loadExample(large), PlanRequest{}).value();
  const size_t v2a = writePlanJson(a, 2).size(), v2b = writePlanJson(b, 2).size();
  const size_t v3a = writePlanJson(a).size(), v3b = writePlanJson(b).size();
  EXPECT_LT(v3a * 5, v2a) << v3a << " vs " << v2a;
  EXPECT_LT(v3b * 20, v2b) << v3b << " vs " << v2b;
  EXPECT_GT(v2b, 12 * v2a);  // the entries grow 16x ...
  EXPECT_LT(v3b, 8 * v3a);   // ... the rolled text far less
}

TEST(RolledPlan, SingleRanksAndHandWrittenPlansRoundTrip) {
  for (const Plan& plan : {testing::twoRankAllGather(), testing::chainBroadcast()}) expectRoundTrip(plan, plan.algorithm);
  const std::string empty = writePlanJson(Plan{});
  EXPECT_NE(empty.find("\"ranks\": []"), std::string::npos);
  EXPECT_NE(empty.find("\"templates\": []"), std::string::npos);
}

// Random TBs: runs of entries whose fields step affinely (some wrapping around the plan's sizes),
// broken by random entries, random shapes and random dependencies; ranks share shapes with
// rank-affine, wrapped and arbitrary differences.
Plan randomPlan(std::mt19937& random) {
  auto pick = [&](int32_t low, int32_t high) { return std::uniform_int_distribution<int32_t>(low, high)(random); };
  Plan plan;
  plan.nRanks = pick(1, 12);
  plan.bufferChunks = {pick(0, 40), pick(1, 40), pick(0, 9)};
  const int32_t shapes = pick(1, 3);
  plan.ranks.resize(plan.nRanks);
  const int32_t tbs = pick(0, 4);
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    PlanRank& rank = plan.ranks[r];
    rank.rank = r;
    const int32_t shape = r % shapes;
    std::mt19937 shaped(static_cast<uint32_t>(shape * 7919 + tbs));  // same structure for one shape
    auto shapedPick = [&](int32_t low, int32_t high) {
      return std::uniform_int_distribution<int32_t>(low, high)(shaped);
    };
    for (int32_t b = 0; b < tbs + shape % 2; ++b) {
      PlanTb tb;
      tb.id = b;
      tb.sendPeer = pick(-2, plan.nRanks - 1);
      tb.recvPeer = (r + b) % plan.nRanks;
      const int32_t runs = shapedPick(0, 5);
      for (int32_t k = 0; k < runs; ++k) {
        const int32_t length = shapedPick(1, 9);
        PlanEntry head;
        head.kind = static_cast<PrimitiveKind>(shapedPick(0, 7));  // the fused kinds too
        if (isFused(head.kind)) head.next.dstBuffer = static_cast<BufferKind>(shapedPick(0, 2));
        head.srcBuffer = static_cast<BufferKind>(shapedPick(0, 2));
        head.dstBuffer = static_cast<BufferKind>(shapedPick(0, 2));
        head.hasDependents = shapedPick(0, 1) == 1;
        head.deps.resize(shapedPick(0, 2));
        const int32_t m = plan.bufferChunks[1];
        const int32_t strideIndex = shapedPick(-3, 3), strideStep = shapedPick(0, 2);
        const int32_t base = pick(0, m - 1);
        for (int32_t i = 0; i < length; ++i) {
          PlanEntry entry = head;
          entry.peer = (r + 1 + k) % plan.nRanks;
          entry.srcIndex = ((base + i * strideIndex) % m + m) % m;
          entry.dstIndex = shapedPick(0, 1) == 0 ? entry.srcIndex : pick(0, 1000);
          entry.count = 1 + i % 2 * shapedPick(0, 1);
          entry.step = r * 3 + i * strideStep;
          // Extremes too: strides and rank coefficients beyond 32 bits must stay values.
          entry.op = pick(0, 5) == 0 ? (pick(0, 1) == 0 ? INT32_MAX : 0) : pick(0, 3) == 0 ? pick(0, 1 << 30) : 100 * k + 7 * i + r;
          entry.subPipeline = i;
          entry.loc = SourceLoc{static_cast<uint32_t>(shapedPick(0, 50)), static_cast<uint32_t>(pick(0, 3) == 0 ? 1u : 0u)};
          if (isFused(entry.kind)) {
            entry.next.peer = (r + 2 + k) % plan.nRanks;
            entry.next.dstIndex = pick(0, 1) == 0 ? entry.srcIndex : pick(0, 1000);
            entry.next.step = entry.step + 1;
            entry.next.op = pick(0, 3) == 0 ? pick(0, 1 << 30) : 100 * k + 7 * i + r + 1;
            entry.next.subPipeline = i + pick(0, 1);
            entry.next.loc = SourceLoc{static_cast<uint32_t>(shapedPick(0, 50)), 2u};
          }
          for (size_t d = 0; d < entry.deps.size(); ++d) {
            entry.deps[d] = EntryRef{(b + 1 + static_cast<int32_t>(d)) % 5, pick(0, 2) == 0 ? pick(0, 99) : i + k};
          }
          tb.entries.push_back(entry);
        }
      }
      rank.tbs.push_back(std::move(tb));
    }
  }
  return plan;
}

TEST(RolledPlan, RandomPlansExpandToThemselves) {
  std::mt19937 random(20261123);
  for (int trial = 0; trial < 400; ++trial) {
    const Plan plan = randomPlan(random);
    const RolledPlan rolled = rollPlan(plan);
    ASSERT_EQ(rolled.ranks.size(), plan.ranks.size());
    EXPECT_TRUE(expandAll(rolled) == plan.ranks) << "trial " << trial;
    for (const RankTemplate& tmpl : rolled.templates) {
      for (const RolledTb& tb : tmpl.tbs) {
        for (const RolledRun& run : tb.runs) {
          for (const std::vector<RankValue>* values : {&run.base, &run.stride, &run.modulo}) {
            for (const RankValue& value : *values) {
              EXPECT_TRUE(value.a >= INT32_MIN && value.a <= INT32_MAX && value.b >= INT32_MIN && value.b <= INT32_MAX)
                  << "trial " << trial;  // what the reader accepts
            }
          }
        }
      }
    }
  }
}

// The diagnostic of a refused text, "" when it loads.
std::string errorOf(const std::string& text, const PlanReadLimits& limits = {}) {
  const Expected<Plan> plan = readPlanJson(SourceText("bad.json", text), limits);
  return plan.ok() ? "" : plan.status().toString();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// `text` with the number after the first `key` following the first `anchor` replaced by `number`.
std::string withNumber(std::string text, const std::string& anchor, const std::string& key, const std::string& number) {
  const size_t at = text.find(key, text.find(anchor)) + key.size();
  text.replace(at, text.find_first_of(",}", at) - at, number);
  return text;
}

// A rolled HM AllReduce of 2 nodes x 4: runs, rank-affine and per-rank values.
std::string rolledHm() {
  return writePlanJson(buildPlan(loadExample({"hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}}), PlanRequest{}).value());
}

TEST(RolledPlan, BadDocumentsAreNamedByTheirPath) {
  const std::string good = rolledHm();
  ASSERT_EQ(errorOf(good), "");
  ASSERT_NE(good.find("\"repeat\": 2"), std::string::npos) << good;
  ASSERT_NE(good.find("{\"perRank\": 0}"), std::string::npos) << good;
  const struct {
    std::string from, to, expected;
  } cases[] = {
      {"\"kind\": \"send\"", "\"kind\": \"teleport\"", "plan.templates[0].tbs[0].runs[0].entry.kind \"teleport\" is not"},
      {"\"repeat\": 2", "\"repeat\": 0", "plan.templates[0].tbs[0].runs[0].repeat = 0 is out of range [1, 67108864]"},
      {"\"repeat\": 2", "\"repeat\": 4000000000", "repeat = 4000000000 is out of range"},
      {"\"repeat\": 2", "\"repeat\": \"2\"", "plan.templates[0].tbs[0].runs[0].repeat is not an integer"},
      {"\"stride\": {", "\"stride\": {\"speed\": 1, ", "runs[0].stride has an unknown field \"speed\""},
      {"\"stride\": {", "\"stride\": {\"deps\": [[1, 1], [1, 1], [1, 1]], ", "stride.deps has 3 pairs, the entry has"},
      {"\"perRankValues\": ", "\"perRankValues\": -", "plan.templates[0].perRankValues = -"},
      {"{\"perRank\": 0}", "{\"perRank\": 99}", ".perRank = 99 is out of range"},
      {"{\"perRank\": 0}", "{\"slot\": 0}", "is not an integer, {\"a\": A, \"b\": B[, \"m\": M]} or {\"perRank\": k}"},
      {"\"template\": 0", "\"template\": 7", "plan.ranks[0].template = 7 is out of range"},
      {"\"values\": [", "\"values\": [1, ", "plan.ranks[0].values has"},
      {"\"values\": [", "\"values\": [\"x\", ", "plan.ranks[0].values has 59 values, template 0 needs 58"},
      {"\"hasDependents\": true", "\"hasDependents\": 1", ".entry.hasDependents is not a boolean"},
      {"\"entry\": {", "\"entry\": {\"peer\": -5, ", ""},  // a duplicate key: the last one counts
      {"\"id\": 0,", "\"id\": 9,", "the TB ids of rank"},
      {"\"templates\": [", "\"templates\": 3, \"x\": [", "plan.templates is not an array"},
  };
  for (const auto& c : cases) {
    const std::string error = errorOf(replaced(good, c.from, c.to));
    if (c.expected.empty()) continue;
    EXPECT_EQ(error.rfind("bad.json: error: plan", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.to << "\n" << error;
  }
  std::string text = good;
  const size_t value = text.find("\"values\": [") + 11;
  text.replace(value, text.find(',', value) - value, "\"x\"");
  EXPECT_NE(errorOf(text).find("plan.ranks[0].values[0] is not an integer"), std::string::npos) << errorOf(text);
  // A value that expands out of its field's range names the run, the position and the rank.
  const std::string negative = withNumber(good, "\"stride\": {", "\"srcIndex\": ", "-100");
  EXPECT_NE(errorOf(negative).find("has srcIndex = -"), std::string::npos) << errorOf(negative);
  EXPECT_NE(errorOf(negative).find("plan.templates[0].tbs[0].runs[0]: entry 1 of the run on rank"), std::string::npos)
      << errorOf(negative);
  // An expanded plan that is not valid is refused as version 2 refuses it.
  const std::string unpaired = withNumber(good, "\"stride\": {", "\"op\": ", "1000");
  EXPECT_NE(errorOf(unpaired).find("bad.json: error: invalid plan:"), std::string::npos) << errorOf(unpaired);
}

TEST(RolledPlan, AbsurdExpansionsAreRefusedBeforeExpanding) {
  const std::string good = rolledHm();
  const std::string huge = replaced(good, "\"repeat\": 2", "\"repeat\": 60000000");
  EXPECT_NE(errorOf(huge).find("the plan expands to more than 67108864 entries and dependencies"), std::string::npos)
      << errorOf(huge);
  PlanReadLimits tight;
  tight.maxExpandedItems = 10;
  EXPECT_NE(errorOf(good, tight).find("expands to more than 10 entries"), std::string::npos) << errorOf(good, tight);
  // Values beyond 32 bits are refused where they are read, so no expansion overflows.
  EXPECT_NE(errorOf(replaced(good, "{\"perRank\": 0}", "{\"a\": 3000000000, \"b\": 0}")).find("out of range"),
            std::string::npos);
}

TEST(RolledPlan, RankAffineValuesWrapAroundThePlanSizes) {
  // A ring AllGather: each rank's chunks and peers are (rank + k) mod n.
  const Plan plan = buildPlan(loadExample({"ring_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}}), PlanRequest{}).value();
  const RolledPlan rolled = rollPlan(plan);
  bool wrapped = false;
  for (const RankTemplate& tmpl : rolled.templates) {
    for (const RolledTb& tb : tmpl.tbs) {
      wrapped = wrapped || (tb.sendPeer.form == RankValue::Form::RankAffine && tb.sendPeer.m == 8);
    }
  }
  EXPECT_TRUE(wrapped);
  EXPECT_EQ(rolled.templates.size(), 1u);
}

}  // namespace
}  // namespace tuccl
