// Calibration: the simulator's constants fitted to runs measured on the machine, so that its
// predictions describe this machine instead of the constants papers give.
//
// In:  the machine's Network (a probed topology: tuccl-topo probe), the runs measured on it —
//      each the plan that ran (libtuccl's plan cache keeps it) and its times per size
//      (tuccl-bench's nccl-tests rows) —, the cost model to start from, and the sizes to fit on.
// Out: the fitted CostModel (written as the cost-model file, sim/cost_model.h) and, for every
//      measured point, the simulator's prediction before and after, the fitted and the held-out
//      points apart.
//
// The fit (docs/simulator.md, "Calibration"): the parameters a run exercises — the TB rate
// (perThreadGBps), the local copy/reduce rate (localGBps), the per-primitive synchronisation
// (syncOverheadUs), the base and per-hop latency of each protocol that ran, the memory hierarchy
// (cacheBytes, cacheSpeedup) and, between hosts, the per-TB rate over a NIC (networkTbGBps) —
// minimise the mean squared log ratio of simulated to measured time over the fitted points, by
// Nelder–Mead in log space from the starting model, restarted from its best point. Sizes not
// fitted are the held-out check.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "sim/cost_model.h"
#include "sim/network.h"
#include "support/status.h"

namespace tuccl {

struct MeasuredRun {
  std::string label;  ///< names the run in the report ("allreduce.txt")
  Plan plan;          ///< what ran
  std::vector<std::pair<int64_t, double>> times;  ///< (nccl-tests size in bytes, measured µs)
};

struct CalibrationOptions {
  std::vector<int64_t> fitSizes;  ///< sizes fitted on; every other measured size is held out
  int32_t maxEvaluations = 1500;  ///< simulations of the whole fitted set, over all restarts
};

struct CalibrationPoint {
  std::string label;
  Collective collective = Collective::AllReduce;
  int64_t bytes = 0;
  double measuredUs = 0;
  double beforeUs = 0;  ///< simulated with the starting model
  double afterUs = 0;   ///< simulated with the fitted model
  bool fitted = false;
};

struct CalibrationError {
  double median = 0;  ///< of |simulated / measured − 1|
  double worst = 0;
  int32_t points = 0;
};

struct CalibrationResult {
  CostModel model;
  std::vector<CalibrationPoint> points;
  std::vector<std::string> parameters;  ///< the fitted parameters, by their JSON keys
  CalibrationError heldOutBefore, heldOutAfter, fittedBefore, fittedAfter;
  int32_t evaluations = 0;
};

/// Fits `start` to the runs. InvalidArgument when no size is fitted or none is held out, a run
/// has no time, or a plan does not run on the network (its simulation's error).
Expected<CalibrationResult> calibrateCostModel(const Network& network, const std::vector<MeasuredRun>& runs,
                                               const CostModel& start, const CalibrationOptions& options);

/// The report: one row per point (run, collective, size, measured, before and after with their
/// errors, fit or held out), then the held-out and fitted medians and worst errors.
std::string formatCalibrationReport(const CalibrationResult& result);

}  // namespace tuccl
