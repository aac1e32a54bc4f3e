// The plan's JSON format (plan/plan_json.h): version-2 round trip and determinism, version-1
// plans still load, other versions and version-1 rooted plans are refused, and every bad field is
// named by its path (a syntax error by file:line:col). Version 3: plan_rolled_test.cc.
#include "plan/plan_json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "sample_plans.h"

namespace tuccl {
namespace {

std::string fileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The diagnostic of a refused text, "" when it loads.
std::string errorOf(const std::string& text) {
  const Expected<Plan> plan = readPlanJson(SourceText("bad.json", text));
  return plan.ok() ? "" : plan.status().toString();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(PlanJson, VersionTwoRoundTripsByteIdentically) {
  for (const Plan& plan : {testing::twoRankAllGather(), testing::chainBroadcast()}) {
    const std::string text = writePlanJson(plan, 2);
    const Expected<Plan> back = readPlanJson(SourceText("plan.json", text));
    ASSERT_TRUE(back.ok()) << back.status().toString();
    EXPECT_TRUE(*back == plan);
    EXPECT_EQ(writePlanJson(*back, 2), text);
  }
  const std::string text = writePlanJson(testing::chainBroadcast(), 2);
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"root\": 0"), std::string::npos);
  const Expected<Plan> pair = readPlanJson(SourceText("plan.json", writePlanJson(testing::twoRankAllGather(), 2)));
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->sourceName, "ag.resccl");
  EXPECT_EQ(pair->root, -1);
  EXPECT_EQ(pair->ranks[1].tbs[0].entries[1].loc, (SourceLoc{6, 3}));
}

TEST(PlanJson, StreamedTextIsTheSame) {
  for (const Plan& plan : {testing::twoRankAllGather(), testing::chainBroadcast(), Plan{}}) {
    for (int version : {2, 3, 4}) {
      std::ostringstream out;
      writePlanJson(out, plan, version);
      EXPECT_EQ(out.str(), writePlanJson(plan, version));
    }
  }
  EXPECT_THROW(writePlanJson(Plan{}, 1), std::invalid_argument);
  EXPECT_THROW(writePlanJson(Plan{}, 5), std::invalid_argument);
}

TEST(PlanJson, EqualPlansGiveEqualText) {
  Plan a = testing::twoRankAllGather();
  Plan b = testing::twoRankAllGather();
  EXPECT_EQ(writePlanJson(a), writePlanJson(b));
  b.config.protocol = Protocol::LL128;
  EXPECT_NE(writePlanJson(a), writePlanJson(b));
  EXPECT_NE(writePlanJson(b).find("\"protocol\": \"LL128\""), std::string::npos);
}

// A plan of the previous format: ring AllGather of 3 ranks as tuccl-compile wrote it with format
// version 1 (no root, no source locations).
TEST(PlanJson, VersionOnePlansLoad) {
  const std::string text = fileText(std::string(TUCCL_SOURCE_DIR) + "/tests/data/plan/v1_ring_allgather_3.json");
  ASSERT_NE(text.find("\"version\": 1"), std::string::npos);
  const Expected<Plan> plan = readPlanJson(SourceText("v1.json", text));
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_EQ(plan->collective, Collective::AllGather);
  EXPECT_EQ(plan->nRanks, 3);
  EXPECT_EQ(plan->root, -1);
  EXPECT_EQ(plan->sourceName, "");
  EXPECT_EQ(plan->scheduler, Scheduler::Hpds);
  EXPECT_EQ(plan->executionLevel, ExecutionLevel::Task);
  EXPECT_EQ(plan->tbAllocation, TbPolicy::StateBased);
  EXPECT_EQ(plan->config.protocol, Protocol::Simple);
  int32_t entries = 0;
  for (const PlanRank& rank : plan->ranks)
    for (const PlanTb& tb : rank.tbs)
      for (const PlanEntry& entry : tb.entries) {
        EXPECT_FALSE(entry.loc.known());
        ++entries;
      }
  EXPECT_EQ(entries, 12);  // 6 transfers, a send and a receive each
  // Rewritten, it is a version-2 or version-3 plan that reads back equal.
  for (int version : {2, 3}) {
    const std::string upgraded = writePlanJson(*plan, version);
    EXPECT_NE(upgraded.find("\"version\": " + std::to_string(version)), std::string::npos);
    const Expected<Plan> back = readPlanJson(SourceText("v2.json", upgraded));
    ASSERT_TRUE(back.ok()) << back.status().toString();
    EXPECT_TRUE(*back == *plan);
  }
}

TEST(PlanJson, VersionOneRootedPlansAreRefused) {
  const std::string text = fileText(std::string(TUCCL_SOURCE_DIR) + "/tests/data/plan/v1_ring_allgather_3.json");
  for (const char* collective : {"Broadcast", "Reduce"}) {
    const std::string error =
        errorOf(replaced(text, "\"collective\": \"AllGather\"", std::string("\"collective\": \"") + collective + "\""));
    EXPECT_NE(error.find("bad.json: error: a version-1 plan has no root, which a " + std::string(collective) + " needs"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("recompile"), std::string::npos) << error;
  }
}

TEST(PlanJson, OtherVersionsAreRefused) {
  const std::string good = writePlanJson(testing::twoRankAllGather(), 2);
  for (const char* version : {"0", "5", "7"}) {
    const std::string error = errorOf(replaced(good, "\"version\": 2", std::string("\"version\": ") + version));
    EXPECT_NE(error.find(std::string("plan format version ") + version +
                         " is not supported (this build reads versions 1, 2, 3 and 4)"),
              std::string::npos)
        << error;
  }
  EXPECT_NE(errorOf(replaced(good, "\"version\": 2", "\"version\": \"2\"")).find("plan.version is not an integer"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(good, "\"tuccl-plan\"", "\"other\"")).find("not a TuCCL plan"), std::string::npos);
  EXPECT_NE(errorOf("[1, 2]").find("not a TuCCL plan"), std::string::npos);
}

TEST(PlanJson, RootIsCheckedAgainstTheCollective) {
  const std::string broadcast = writePlanJson(testing::chainBroadcast());
  EXPECT_EQ(errorOf(broadcast), "");
  EXPECT_NE(errorOf(replaced(broadcast, "\"root\": 0", "\"root\": 3"))
                .find("bad.json: error: invalid plan: root 3 of the Broadcast is out of range [0, 3)"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(broadcast, "\"root\": 0", "\"root\": -1")).find("root -1 of the Broadcast is out of range"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(broadcast, "\"root\": 0", "\"root\": -2")).find("plan.root = -2 is out of range [-1, "),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(broadcast, "\"root\": 0", "\"root\": \"zero\"")).find("plan.root is not an integer"),
            std::string::npos);
  EXPECT_NE(errorOf(replaced(broadcast, "\"root\": 0,", "")).find("plan has no \"root\""), std::string::npos);
  const std::string allGather = writePlanJson(testing::twoRankAllGather());
  EXPECT_NE(errorOf(replaced(allGather, "\"root\": -1", "\"root\": 1"))
                .find("AllGather has no root, but the plan names root 1 (must be -1)"),
            std::string::npos);
}

TEST(PlanJson, BadFieldsAreNamedByTheirPath) {
  const std::string good = writePlanJson(testing::twoRankAllGather(), 2);
  EXPECT_EQ(errorOf(good), "");
  EXPECT_NE(errorOf("{\n  \"format\": \"tuccl-plan\",\n  oops\n}").find("bad.json:3:3: error: not valid JSON"),
            std::string::npos);
  const struct {
    const char* from;
    const char* to;
    const char* expected;
  } cases[] = {
      {"\"kind\": \"send\"", "\"kind\": \"teleport\"",
       "plan.ranks[0].tbs[0].entries[1].kind \"teleport\" is not send, recv, recvReduceCopy, copy or reduce"},
      {"\"protocol\": \"Simple\"", "\"protocol\": \"LL256\"", "plan.config.protocol \"LL256\" is not Simple, LL or LL128"},
      {"\"scheduler\": \"hpds\"", "\"scheduler\": \"fifo\"", "plan.scheduler \"fifo\" is not hpds, rr"},
      {"\"executionLevel\": \"task\"", "\"executionLevel\": \"warp\"", "plan.executionLevel \"warp\" is not task"},
      {"\"tbAllocation\": \"connection-based\"", "\"tbAllocation\": 1", "plan.tbAllocation is not a string"},
      {"\"collective\": \"AllGather\"", "\"collective\": \"Gather\"", "plan.collective \"Gather\" is not a collective"},
      {"\"nThreads\": 512", "\"nThreads\": \"many\"", "plan.config.nThreads is not an integer"},
      {"\"nThreads\": 512", "\"nThreads\": 2048", "plan.config.nThreads = 2048 is out of range [1, 1024]"},
      {"\"line\": 3", "\"line\": -3", "plan.ranks[0].tbs[0].entries[0].line = -3 is out of range"},
      {"\"column\": 3", "\"column\": 1.5", "plan.ranks[0].tbs[0].entries[0].column is not an integer"},
      {"\"source\": \"ag.resccl\",", "", "plan has no \"source\""},
      {"\"deps\": []", "\"deps\": [[0]]", "plan.ranks[0].tbs[0].entries[0].deps holds something other than [tb, entry]"},
      {"\"srcBuffer\": \"input\"", "\"srcBuffer\": \"stack\"",
       "plan.ranks[0].tbs[0].entries[0].srcBuffer \"stack\" is not input, output or scratch"},
      {"\"dstIndex\": 0", "\"dstIndex\": 5", "invalid plan: rank 0 tb 0 entry 0: chunks out of the buffer"},
      {"\"line\": 4,\n       \"op\": 1", "\"line\": 4,\n       \"op\": 2",
       "invalid plan: connection 0 -> 1: send 0 (op 2) does not match receive 0 (op 1)"},
  };
  for (const auto& c : cases) {
    const std::string error = errorOf(replaced(good, c.from, c.to));
    EXPECT_NE(error.find(std::string("bad.json: error: ") + c.expected), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace tuccl
