// Calibration (tune/calibration.h): fitted to runs simulated under known constants, the fit
// predicts the held-out sizes; bad inputs are refused.
#include "tune/calibration.h"

#include <gtest/gtest.h>

#include <string>

#include "scheduler/plan_builder.h"
#include "sim/network_topology.h"
#include "sim/simulator.h"
#include "synth/generators.h"
#include "topo/presets.h"
#include "topo/sketch.h"

namespace tuccl {
namespace {

struct Machine {
  Topology topology = makePreset("preset:dgx-a100:nodes=1,gpus=4");
  Network network = networkFromTopology(topology, "preset").value();
};

// A ring plan of `collective` at TuCCL's defaults.
Plan ringPlan(const Machine& m, Collective collective) {
  Algorithm ring = generateAlgorithm("ring", collective, m.topology, Sketch{}).value();
  PlanRequest request;
  request.config.chunkSize = 256 << 10;
  return buildPlan(ring, request).value();
}

// Times "measured" on a machine whose constants are `truth`: the simulator's own, so that a fit
// that works finds them again (no timing: the test is deterministic).
MeasuredRun measure(const Machine& m, Collective collective, const CostModel& truth) {
  MeasuredRun run;
  run.label = std::string(collectiveName(collective));
  run.plan = ringPlan(m, collective);
  for (int64_t bytes = 1 << 20; bytes <= int64_t{256} << 20; bytes *= 2) {
    SimOptions options;
    options.messageBytes = bytes;
    options.cost = truth;
    run.times.emplace_back(bytes, simulatePlan(run.plan, m.network, options).value().timeUs);
  }
  return run;
}

CostModel slowerMachine() {
  CostModel truth = defaultCostModel();
  truth.perThreadGBps *= 0.2;  // a fifth of the TB rate
  truth.syncOverheadUs = 4;
  truth.protocols[static_cast<int>(Protocol::Simple)].baseLatencyUs = 30;
  truth.cacheBytes = 24 << 20;  // twice as fast below 24 MB
  truth.cacheSpeedup = 2;
  return truth;
}

TEST(Calibration, TheFitPredictsTheHeldOutSizes) {
  const Machine m;
  const CostModel truth = slowerMachine();
  const std::vector<MeasuredRun> runs{measure(m, Collective::AllReduce, truth), measure(m, Collective::AllGather, truth)};
  CalibrationOptions options;
  options.fitSizes = {1 << 20, 4 << 20, 16 << 20, 64 << 20, int64_t{256} << 20};
  const CalibrationResult result = calibrateCostModel(m.network, runs, defaultCostModel(), options).value();
  ASSERT_EQ(result.points.size(), 18u);
  EXPECT_EQ(result.heldOutAfter.points, 8);
  EXPECT_EQ(result.fittedAfter.points, 10);
  EXPECT_GT(result.heldOutBefore.median, 0.5);  // the defaults describe a machine 5x faster
  EXPECT_LT(result.heldOutAfter.median, 0.05) << formatCalibrationReport(result);
  EXPECT_LT(result.heldOutAfter.worst, 0.10) << formatCalibrationReport(result);
  EXPECT_LE(result.evaluations, options.maxEvaluations + 64);
  for (const char* name : {"perThreadGBps", "syncOverheadUs", "protocols.Simple.baseLatencyUs", "cacheBytes"})
    EXPECT_NE(std::find(result.parameters.begin(), result.parameters.end(), name), result.parameters.end()) << name;
  // The report has a row per point and the summary lines.
  const std::string report = formatCalibrationReport(result);
  EXPECT_NE(report.find("held out (8 points): median error"), std::string::npos) << report;
  EXPECT_NE(report.find("AllGather"), std::string::npos);
}

TEST(Calibration, RefusesWhatCannotBeFittedOrChecked) {
  const Machine m;
  const std::vector<MeasuredRun> runs{measure(m, Collective::AllReduce, defaultCostModel())};
  CalibrationOptions none;
  none.fitSizes = {3 << 20};  // not a measured size
  Expected<CalibrationResult> nothingFitted = calibrateCostModel(m.network, runs, defaultCostModel(), none);
  ASSERT_FALSE(nothingFitted.ok());
  EXPECT_NE(nothingFitted.status().message().find("no measured size"), std::string::npos);
  CalibrationOptions all;
  for (const auto& [bytes, us] : runs[0].times) all.fitSizes.push_back(bytes);
  Expected<CalibrationResult> nothingHeld = calibrateCostModel(m.network, runs, defaultCostModel(), all);
  ASSERT_FALSE(nothingHeld.ok());
  EXPECT_NE(nothingHeld.status().message().find("none is held out"), std::string::npos);
  std::vector<MeasuredRun> zero = runs;
  zero[0].times[1].second = 0;
  Expected<CalibrationResult> bad = calibrateCostModel(m.network, zero, defaultCostModel(), none);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not positive"), std::string::npos);
}

}  // namespace
}  // namespace tuccl
