#include "sim/cost_model.h"

#include <gtest/gtest.h>

namespace tuccl {
namespace {

TEST(CostModel, DefaultsAreTheCitedNumbers) {
  const CostModel model = defaultCostModel();
  const ProtocolCost& simple = model.protocol(Protocol::Simple);
  EXPECT_DOUBLE_EQ(simple.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(simple.baseLatencyUs, 8.4);
  EXPECT_DOUBLE_EQ(simple.hopLatencyUs[static_cast<int>(HopClass::NVLink)], 3.4);
  EXPECT_DOUBLE_EQ(simple.hopLatencyUs[static_cast<int>(HopClass::Network)], 14.0);
  EXPECT_DOUBLE_EQ(model.protocol(Protocol::LL).efficiency, 0.5);
  EXPECT_DOUBLE_EQ(model.protocol(Protocol::LL128).efficiency, 120.0 / 128.0);
  EXPECT_DOUBLE_EQ(model.protocol(Protocol::LL128).tbCapGBps, 20.0);
  EXPECT_DOUBLE_EQ(tbCapGBps(model, Protocol::Simple, 512, false), 24.0);
  EXPECT_DOUBLE_EQ(tbCapGBps(model, Protocol::Simple, 256, false), 12.0);
  EXPECT_DOUBLE_EQ(tbCapGBps(model, Protocol::LL128, 512, false), 20.0);
  EXPECT_DOUBLE_EQ(tbCapGBps(model, Protocol::Simple, 512, true), 6.25);  // Figure 4: 4 TBs fill 25 GB/s
}

TEST(CostModel, ContentionFollowsEquationOne) {
  const CostModel model = defaultCostModel();
  EXPECT_DOUBLE_EQ(contentionFactor(model, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(contentionFactor(model, 1.0), 1.0);
  EXPECT_NEAR(contentionFactor(model, 2.0), 1.0 / 1.15, 1e-12);
  EXPECT_GT(contentionFactor(model, 1.5), contentionFactor(model, 2.0));
  EXPECT_DOUBLE_EQ(contentionFactor(model, 1e9), model.contentionFloor);
}

TEST(CostModel, StagingSlotsFollowTheBuffer) {
  const CostModel model = defaultCostModel();
  EXPECT_EQ(stagingSlots(model, 1 << 20), 4);   // 4 MiB / 1 MiB
  EXPECT_EQ(stagingSlots(model, 64 << 10), 8);  // NCCL_STEPS
  EXPECT_EQ(stagingSlots(model, 16 << 20), 1);
}

TEST(CostModel, JsonRoundTripsAndOverridesSomeFields) {
  const CostModel model = defaultCostModel();
  const std::string text = writeCostModelJson(model);
  const CostModel back = readCostModelJson(SourceText("cost.json", text)).value();
  EXPECT_EQ(writeCostModelJson(back), text);
  const CostModel changed = readCostModelJson(
      SourceText("cost.json", R"({"syncOverheadUs": 2.5, "protocols": {"Simple": {"hopLatencyUs": {"network": 7}}}})"))
                                    .value();
  EXPECT_DOUBLE_EQ(changed.syncOverheadUs, 2.5);
  EXPECT_DOUBLE_EQ(changed.protocol(Protocol::Simple).hopLatencyUs[static_cast<int>(HopClass::Network)], 7.0);
  EXPECT_DOUBLE_EQ(changed.protocol(Protocol::Simple).hopLatencyUs[static_cast<int>(HopClass::NVLink)], 3.4);
  EXPECT_DOUBLE_EQ(changed.perThreadGBps, model.perThreadGBps);
}

TEST(CostModel, RejectsTyposAndBadValues) {
  EXPECT_FALSE(readCostModelJson(SourceText("c.json", R"({"syncOverhead": 1})")).ok());
  EXPECT_FALSE(readCostModelJson(SourceText("c.json", R"({"syncOverheadUs": -1})")).ok());
  EXPECT_FALSE(readCostModelJson(SourceText("c.json", R"({"protocols": {"LL256": {}}})")).ok());
  EXPECT_FALSE(readCostModelJson(SourceText("c.json", R"({"protocols": {"LL": {"efficiency": 2}}})")).ok());
  Expected<CostModel> broken = readCostModelJson(SourceText("c.json", "{\n  \"a\": ,\n}"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(broken.diagnostic().loc.line, 2u);
  EXPECT_EQ(parseProtocol("ll128"), Protocol::LL128);
  EXPECT_FALSE(parseProtocol("LL256"));
}

TEST(CostModel, PerThreadRateMustBeARateAndMessagesSayTheRange) {
  // 0 once meant "no per-thread cap"; a file that says 0 is refused, naming the range.
  Expected<CostModel> zero = readCostModelJson(SourceText("c.json", R"({"perThreadGBps": 0})"));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("cost.perThreadGBps must be a finite number > 0; got 0"), std::string::npos)
      << zero.status().message();
  Expected<CostModel> floor = readCostModelJson(SourceText("c.json", R"({"contentionFloor": 0})"));
  ASSERT_FALSE(floor.ok());
  EXPECT_NE(floor.status().message().find(">= 1e-06; got 0"), std::string::npos) << floor.status().message();
  Expected<CostModel> small = readCostModelJson(SourceText("c.json", R"({"perThreadGBps": 0.01})"));
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_DOUBLE_EQ(small->perThreadGBps, 0.01);
}

}  // namespace
}  // namespace tuccl
