// MRACO (TuCCL §III-D, Algorithm 1): TPE proposes the configurations of every Hyperband bracket
// (BOHB-style), successive halving prunes them with growing resource (Eq. 4), the incumbent is
// the best measurement at R_max (elite retention, line 10), and the search ends when Eq. 5 holds
// between consecutive Hyperband iterations, or the budget is spent.
#include <algorithm>
#include <cmath>
#include <map>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>

#include "support/log.h"
#include "tune/searcher.h"

namespace tuccl {
namespace {

/// Elite retention (Algorithm 1 line 10): x* = argmin over {x*} and the survivors of
/// E[PROFILEPERF(x, R_max)]. The expectation is the mean of a configuration's R_max measurements;
/// a challenger whose first R_max measurement beats the incumbent is measured again before it
/// takes over, so one lucky sample (the winner's curse under noise) does not become x*.
struct Elite {
  std::map<Configuration, std::vector<double>> samples;  // R_max measurements
  std::optional<Configuration> best;
  double bestMean = std::numeric_limits<double>::infinity();

  double value() const { return bestMean; }
  static double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? std::numeric_limits<double>::infinity() : s / static_cast<double>(v.size());
  }
  void offer(const Configuration& c, double measured, ProfilingSession& session, const SearchOptions& options,
             int32_t bracket, int32_t rung) {
    std::vector<double>& v = samples[c];
    v.push_back(measured);
    if (!(mean(v) < bestMean)) return;
    if (v.size() < 2 && best && session.canAfford(options.maxResource)) {
      v.push_back(objectiveOf(session.profile(c, options.maxResource, bracket, rung)));
      if (!(mean(v) < bestMean)) return;
    }
    best = c;
    bestMean = mean(v);
  }
  SearchResult finish(SearchResult result) const {
    if (best) {
      result.best = *best;
      result.bestMeasurement.ok = true;
      result.bestMeasurement.timeUs = bestMean;
      result.bestMeasurement.error.clear();
      // busbw of the mean time, from the last measurement's bytes / time ratio
      for (auto it = result.trials.rbegin(); it != result.trials.rend(); ++it)
        if (it->config == *best && it->measurement.ok) {
          result.bestMeasurement.busBwGBps = it->measurement.busBwGBps * it->measurement.timeUs / bestMean;
          break;
        }
    }
    return result;
  }
};

class MracoSearcher : public Searcher {
 public:
  std::string_view name() const override { return "mraco"; }

  SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) override {
    if (options.budget <= 0 && options.maxTrials == 0 && !options.convergence.enabled)
      throw std::invalid_argument("mraco needs a budget, maxTrials or the convergence test");
    ProfilingSession session("mraco", space, profiler, options);
    std::mt19937_64 rng(options.seed);
    const TpeSampler sampler(space, options.tpe);
    const std::vector<Bracket> brackets = hyperbandBrackets(options.maxResource, options.eta, options.rounding);
    const uint64_t valid = space.validCount();
    ConvergenceMonitor monitor(options.convergence);

    std::map<int64_t, std::vector<Observation>> observations;  // by resource
    std::map<int64_t, std::set<Configuration>> measured;       // by resource
    Elite elite;

    try {
      while (true) {
        for (const Bracket& bracket : brackets) {
          if (measured[options.maxResource].size() >= valid) return session.finish("exhausted");
          runBracket(space, sampler, bracket, options, session, observations, measured, elite, rng);
        }
        // Eq. 5 between consecutive Hyperband iterations: the incumbent at R_max and the good
        // set's estimator at the model's fidelity.
        const std::vector<Observation>& history = modelHistory(observations, space, options.tpe);
        Marginals distribution;
        if (history.size() >= 2) {
          TpeOptions sharp = options.tpe;
          sharp.priorWeight = 0;  // the good set itself, not its blend with the uniform prior
          distribution = buildTpeModel(space, history, sharp).l.marginals();
        }
        const bool stop = monitor.record(elite.value(), std::move(distribution));
        componentLogger("tune")->debug("mraco: iteration {} incumbent {:.4g} us, improvement {:.4g}, KL {:.4g}, cost {}",
                                       monitor.steps(), elite.value(), monitor.lastRelativeImprovement(),
                                       monitor.lastKl(), session.spent());
        if (stop)
          return elite.finish(session.finish("converged", true));
      }
    } catch (const SearchStopped& stop) {
      return elite.finish(session.finish(stop.reason));
    }
  }

 private:
  /// BOHB's rule: model the largest resource that has enough observations (the most faithful
  /// ranking that TPE can already fit); empty when none has.
  static const std::vector<Observation>& modelHistory(const std::map<int64_t, std::vector<Observation>>& observations,
                                                      const SearchSpace& space, const TpeOptions& tpe) {
    static const std::vector<Observation> kNone;
    const size_t enough = std::max<size_t>(static_cast<size_t>(std::max(tpe.startupTrials, 2)),
                                           space.dimensionCount() + 1);
    for (auto it = observations.rbegin(); it != observations.rend(); ++it)
      if (it->second.size() >= enough) return it->second;
    return kNone;
  }

  static void runBracket(const SearchSpace& space, const TpeSampler& sampler, const Bracket& bracket,
                         const SearchOptions& options, ProfilingSession& session,
                         std::map<int64_t, std::vector<Observation>>& observations,
                         std::map<int64_t, std::set<Configuration>>& measured, Elite& elite, std::mt19937_64& rng) {
    // Line 5: S_s <- SAMPLE(n_s, C), from TPE; skip what was already measured at this fidelity or above.
    const int64_t r0 = bracket.rungs.front().resource;
    std::set<Configuration> exclude;
    for (auto it = measured.lower_bound(r0); it != measured.end(); ++it) exclude.insert(it->second.begin(), it->second.end());
    std::vector<Configuration> configs = sampler.proposeBatch(
        modelHistory(observations, space, sampler.options()), static_cast<size_t>(bracket.rungs.front().configs), rng,
        std::move(exclude));

    for (size_t i = 0; i < bracket.rungs.size(); ++i) {
      const Rung& rung = bracket.rungs[i];
      // Lines 7–8: profile every survivor with r_i iterations (f_i = mean time per iteration).
      std::vector<double> value(configs.size());
      for (size_t k = 0; k < configs.size(); ++k) {
        const Measurement& m = session.profile(configs[k], rung.resource, bracket.s, static_cast<int32_t>(i));
        value[k] = objectiveOf(m);
        observations[rung.resource].push_back({configs[k], value[k]});
        measured[rung.resource].insert(configs[k]);
        if (rung.resource == options.maxResource)
          elite.offer(configs[k], value[k], session, options, bracket.s, static_cast<int32_t>(i));
      }
      if (i + 1 == bracket.rungs.size()) break;
      // Line 9: keep the best ceil(n_s eta^-(i+1)) (stable: ties keep proposal order).
      std::vector<size_t> order(configs.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
      const size_t keep = std::min(configs.size(), static_cast<size_t>(bracket.rungs[i + 1].configs));
      std::vector<Configuration> survivors;
      for (size_t k = 0; k < keep; ++k) survivors.push_back(configs[order[k]]);
      configs = std::move(survivors);
    }
  }
};

}  // namespace

std::unique_ptr<Searcher> makeMracoSearcher() { return std::make_unique<MracoSearcher>(); }

}  // namespace tuccl
