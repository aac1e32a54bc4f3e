#include "tune/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "sim/simulator.h"
#include "support/vocabulary.h"

namespace tuccl {

namespace {

/// One fitted number: how to read and write it in the model, in log space (value = exp(x), or
/// 1 + exp(x) for a factor that must stay above 1).
struct Parameter {
  std::string name;
  std::function<double&(CostModel&)> at;
  bool aboveOne = false;

  double toX(double value) const { return std::log(aboveOne ? std::max(1e-9, value - 1) : std::max(1e-12, value)); }
  double fromX(double x) const { return aboveOne ? 1 + std::exp(x) : std::exp(x); }
};

const char* const kHopNames[kHopClasses] = {"nvlink", "pcie", "network"};

/// The parameters the runs exercise, with `start` completed where a rate means "the TB cap" (0).
std::vector<Parameter> fittedParameters(const Network& network, const std::vector<MeasuredRun>& runs, CostModel& start) {
  std::vector<Parameter> parameters;
  parameters.push_back({"perThreadGBps", [](CostModel& m) -> double& { return m.perThreadGBps; }});
  int32_t threads = 1;
  std::set<Protocol> protocols;
  for (const MeasuredRun& run : runs) {
    threads = std::max(threads, run.plan.config.nThreads);
    protocols.insert(run.plan.config.protocol);
  }
  if (!(start.localGBps > 0)) start.localGBps = start.perThreadGBps * threads;
  parameters.push_back({"localGBps", [](CostModel& m) -> double& { return m.localGBps; }});
  if (!(start.syncOverheadUs > 0)) start.syncOverheadUs = 1;
  parameters.push_back({"syncOverheadUs", [](CostModel& m) -> double& { return m.syncOverheadUs; }});
  const bool between = network.nNodes() > 1;
  for (Protocol protocol : protocols) {
    const int p = static_cast<int>(protocol);
    const std::string name = "protocols." + std::string(protocolName(protocol));
    if (!(start.protocols[p].baseLatencyUs > 0)) start.protocols[p].baseLatencyUs = 1;
    parameters.push_back({name + ".baseLatencyUs", [p](CostModel& m) -> double& { return m.protocols[p].baseLatencyUs; }});
    for (int h : {static_cast<int>(HopClass::NVLink), static_cast<int>(HopClass::Network)}) {
      if (h == static_cast<int>(HopClass::Network) && !between) continue;
      if (!(start.protocols[p].hopLatencyUs[h] > 0)) start.protocols[p].hopLatencyUs[h] = 1;
      parameters.push_back({name + ".hopLatencyUs." + kHopNames[h],
                            [p, h](CostModel& m) -> double& { return m.protocols[p].hopLatencyUs[h]; }});
    }
  }
  if (between) {
    if (!(start.networkTbGBps > 0)) start.networkTbGBps = start.perThreadGBps * threads;
    parameters.push_back({"networkTbGBps", [](CostModel& m) -> double& { return m.networkTbGBps; }});
  }
  // The memory hierarchy starts in the middle of the measured sizes, twice as fast below them.
  if (!(start.cacheBytes > 0)) {
    std::vector<double> sizes;
    for (const MeasuredRun& run : runs)
      for (const auto& [bytes, us] : run.times) sizes.push_back(static_cast<double>(bytes));
    std::sort(sizes.begin(), sizes.end());
    start.cacheBytes = sizes.empty() ? 1 << 24 : sizes[sizes.size() / 2];
    start.cacheSpeedup = 2;
  }
  parameters.push_back({"cacheBytes", [](CostModel& m) -> double& { return m.cacheBytes; }});
  parameters.push_back({"cacheSpeedup", [](CostModel& m) -> double& { return m.cacheSpeedup; }, true});
  return parameters;
}

/// Minimises f from x0 by Nelder–Mead (reflection 1, expansion 2, contraction and shrink 1/2),
/// an initial simplex of `step` along each axis; stops after `budget` evaluations or when the
/// simplex's values agree to 1e-10. Returns the best point; `used` counts the evaluations.
std::vector<double> nelderMead(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x0,
                               double step, int32_t budget, int32_t& used) {
  const size_t n = x0.size();
  std::vector<std::vector<double>> simplex(n + 1, x0);
  std::vector<double> value(n + 1);
  for (size_t i = 0; i < n; ++i) simplex[i + 1][i] += step;
  for (size_t i = 0; i <= n; ++i) value[i] = f(simplex[i]), ++used;
  std::vector<size_t> order(n + 1);
  while (used < budget) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    if (std::abs(value[worst] - value[best]) < 1e-10) break;
    std::vector<double> centroid(n, 0);
    for (size_t i : order)
      if (i != worst)
        for (size_t d = 0; d < n; ++d) centroid[d] += simplex[i][d] / static_cast<double>(n);
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (size_t d = 0; d < n; ++d) x[d] = centroid[d] + t * (simplex[worst][d] - centroid[d]);
      return x;
    };
    const std::vector<double> reflected = along(-1);
    const double fr = f(reflected);
    ++used;
    if (fr < value[best]) {
      const std::vector<double> expanded = along(-2);
      const double fe = f(expanded);
      ++used;
      if (fe < fr) simplex[worst] = expanded, value[worst] = fe;
      else simplex[worst] = reflected, value[worst] = fr;
      continue;
    }
    if (fr < value[second]) {
      simplex[worst] = reflected, value[worst] = fr;
      continue;
    }
    const std::vector<double> contracted = fr < value[worst] ? along(-0.5) : along(0.5);
    const double fc = f(contracted);
    ++used;
    if (fc < std::min(fr, value[worst])) {
      simplex[worst] = contracted, value[worst] = fc;
      continue;
    }
    for (size_t i = 0; i <= n; ++i) {
      if (i == best) continue;
      for (size_t d = 0; d < n; ++d) simplex[i][d] = simplex[best][d] + 0.5 * (simplex[i][d] - simplex[best][d]);
      value[i] = f(simplex[i]);
      ++used;
    }
  }
  const size_t best = static_cast<size_t>(std::min_element(value.begin(), value.end()) - value.begin());
  return simplex[best];
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : (values[m - 1] + values[m]) / 2;
}

CalibrationError errorOf(const std::vector<CalibrationPoint>& points, bool fitted, bool after) {
  std::vector<double> errors;
  for (const CalibrationPoint& p : points) {
    if (p.fitted != fitted) continue;
    errors.push_back(std::abs((after ? p.afterUs : p.beforeUs) / p.measuredUs - 1));
  }
  CalibrationError error;
  error.points = static_cast<int32_t>(errors.size());
  error.median = median(errors);
  error.worst = errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end());
  return error;
}

Expected<double> simulatedUs(const MeasuredRun& run, const Network& network, const CostModel& model, int64_t bytes) {
  SimOptions options;
  options.messageBytes = bytes;
  options.cost = model;
  Expected<SimResult> result = simulatePlan(run.plan, network, options);
  if (!result) return result.status();
  return result->timeUs;
}

}  // namespace

Expected<CalibrationResult> calibrateCostModel(const Network& network, const std::vector<MeasuredRun>& runs,
                                               const CostModel& start, const CalibrationOptions& options) {
  const std::set<int64_t> fitSizes(options.fitSizes.begin(), options.fitSizes.end());
  CalibrationResult result;
  int32_t fittedCount = 0, heldOut = 0;
  for (const MeasuredRun& run : runs) {
    if (run.times.empty()) return makeError(ErrorCode::InvalidArgument, run.label + ": no measured time");
    for (const auto& [bytes, us] : run.times) {
      if (!(us > 0)) return makeError(ErrorCode::InvalidArgument, run.label + ": a time that is not positive at " + std::to_string(bytes) + " B");
      CalibrationPoint point;
      point.label = run.label;
      point.collective = run.plan.collective;
      point.bytes = bytes;
      point.measuredUs = us;
      point.fitted = fitSizes.count(bytes) > 0;
      (point.fitted ? fittedCount : heldOut) += 1;
      Expected<double> before = simulatedUs(run, network, start, bytes);
      if (!before) return makeError(ErrorCode::InvalidArgument, run.label + ": " + before.status().message());
      point.beforeUs = *before;
      result.points.push_back(point);
    }
  }
  if (fittedCount == 0) return makeError(ErrorCode::InvalidArgument, "no measured size is among the sizes to fit");
  if (heldOut == 0) return makeError(ErrorCode::InvalidArgument, "every measured size is fitted: none is held out to check the fit");

  CostModel base = start;
  const std::vector<Parameter> parameters = fittedParameters(network, runs, base);
  auto modelAt = [&](const std::vector<double>& x) {
    CostModel model = base;
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].at(model) = parameters[i].fromX(x[i]);
    return model;
  };
  auto objective = [&](const std::vector<double>& x) {
    const CostModel model = modelAt(x);
    double sum = 0;
    size_t point = 0;
    for (const MeasuredRun& run : runs) {
      for (const auto& [bytes, us] : run.times) {
        if (!result.points[point++].fitted) continue;
        Expected<double> simulated = simulatedUs(run, network, model, bytes);
        if (!simulated || !(*simulated > 0)) return std::numeric_limits<double>::max();
        const double e = std::log(*simulated / us);
        sum += e * e;
      }
    }
    return sum / fittedCount;
  };
  std::vector<double> x;
  for (const Parameter& parameter : parameters) {
    CostModel copy = base;
    x.push_back(parameter.toX(parameter.at(copy)));
  }
  int32_t used = 0;
  // Two rounds: the second restarts a fresh simplex at the first's best point (Nelder–Mead can
  // collapse along a valley); a third, smaller one polishes.
  x = nelderMead(objective, x, 1.0, options.maxEvaluations / 2, used);
  x = nelderMead(objective, x, 0.5, options.maxEvaluations * 5 / 6, used);
  x = nelderMead(objective, x, 0.1, options.maxEvaluations, used);
  result.evaluations = used;
  result.model = modelAt(x);
  for (const Parameter& parameter : parameters) result.parameters.push_back(parameter.name);

  size_t point = 0;
  for (const MeasuredRun& run : runs) {
    for (const auto& [bytes, us] : run.times) {
      Expected<double> after = simulatedUs(run, network, result.model, bytes);
      if (!after) return makeError(ErrorCode::InvalidArgument, run.label + ": " + after.status().message());
      result.points[point++].afterUs = *after;
    }
  }
  result.heldOutBefore = errorOf(result.points, false, false);
  result.heldOutAfter = errorOf(result.points, false, true);
  result.fittedBefore = errorOf(result.points, true, false);
  result.fittedAfter = errorOf(result.points, true, true);
  return result;
}

std::string formatCalibrationReport(const CalibrationResult& result) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "# %-18s %-14s %12s %12s %12s %8s %12s %8s  %s\n", "run", "collective", "bytes",
                "measured(us)", "before(us)", "error", "after(us)", "error", "role");
  out << line;
  for (const CalibrationPoint& p : result.points) {
    std::snprintf(line, sizeof line, "  %-18s %-14s %12lld %12.1f %12.1f %+7.1f%% %12.1f %+7.1f%%  %s\n", p.label.c_str(),
                  std::string(collectiveName(p.collective)).c_str(), static_cast<long long>(p.bytes), p.measuredUs,
                  p.beforeUs, 100 * (p.beforeUs / p.measuredUs - 1), p.afterUs, 100 * (p.afterUs / p.measuredUs - 1),
                  p.fitted ? "fit" : "held out");
    out << line;
  }
  auto summary = [&](const char* what, const CalibrationError& before, const CalibrationError& after) {
    std::snprintf(line, sizeof line,
                  "# %s (%d points): median error %.1f%% -> %.1f%%, worst %.1f%% -> %.1f%% (before -> after)\n", what,
                  after.points, 100 * before.median, 100 * after.median, 100 * before.worst, 100 * after.worst);
    out << line;
  };
  summary("held out", result.heldOutBefore, result.heldOutAfter);
  summary("fitted", result.fittedBefore, result.fittedAfter);
  out << "# fitted (" << result.evaluations << " evaluations):";
  for (const std::string& name : result.parameters) out << " " << name;
  out << "\n";
  return out.str();
}

}  // namespace tuccl
