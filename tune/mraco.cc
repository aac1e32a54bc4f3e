// MRACO (TuCCL §III-D, Algorithm 1): TPE proposes the configurations of every Hyperband bracket
// (BOHB-style), successive halving prunes them with growing resource (Eq. 4), the incumbent is
// the best measurement at R_max (elite retention, line 10), and the search ends when Eq. 5 holds
// between consecutive Hyperband iterations, or the budget is spent. Before returning, a reserve
// held back from the budget re-measures the best few R_max configurations (a race) so that
// near-ties under measurement noise are settled by several samples, not one or two.
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
  /// Final selection (a race at R_max): the `finalCandidates` best distinct configurations by
  /// their R_max mean are re-measured in rounds, best first, while a round's measurements fit in
  /// the reserve (finalReserve x searchCost, never past the budget) and more than one candidate is
  /// in the race. After each round a candidate whose mean is more than finalZ standard errors
  /// above the leader's leaves (the noise variance is pooled over every candidate's samples: the
  /// candidates are near-ties, so their noise is alike). x* becomes the candidate with the lowest
  /// pooled mean (search and race samples). The winner's curse that brought a candidate into the
  /// top k fades as its fresh samples accumulate.
  void race(ProfilingSession& session, const SearchOptions& options, double searchCost) {
    if (!(options.finalReserve > 0) || options.finalCandidates < 2) return;
    const int64_t r = options.maxResource;
    double reserve = options.finalReserve * searchCost;
    if (options.budget > 0) reserve = std::min(reserve, options.budget - session.spent());
    std::vector<const Configuration*> candidates;  // by R_max mean; ties keep the map's order
    for (const auto& [c, v] : samples)
      if (std::isfinite(mean(v))) candidates.push_back(&c);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](const Configuration* a, const Configuration* b) { return mean(samples[*a]) < mean(samples[*b]); });
    if (candidates.size() > static_cast<size_t>(options.finalCandidates)) candidates.resize(options.finalCandidates);
    if (candidates.size() < 2) return;
    std::vector<const Configuration*> racing = candidates;
    double used = 0;
    try {
      while (racing.size() > 1) {
        bool roundComplete = true;
        for (const Configuration* c : racing) {
          if (used + static_cast<double>(r) > reserve * (1 + 1e-12) || !session.canAfford(r)) {
            roundComplete = false;
            break;
          }
          samples[*c].push_back(objectiveOf(session.profile(*c, r)));
          used += static_cast<double>(r);
        }
        if (!roundComplete) break;
        // Failed measurements (+inf) leave the race; the rest are ranked by their means.
        std::erase_if(racing, [&](const Configuration* c) { return !std::isfinite(mean(samples[*c])); });
        std::stable_sort(racing.begin(), racing.end(),
                         [&](const Configuration* a, const Configuration* b) { return mean(samples[*a]) < mean(samples[*b]); });
        // Pooled within-candidate variance.
        double squares = 0, dof = 0;
        for (const Configuration* c : candidates) {
          const std::vector<double>& v = samples[*c];
          const double m = mean(v);
          if (!std::isfinite(m) || v.size() < 2) continue;
          for (double x : v) squares += (x - m) * (x - m);
          dof += static_cast<double>(v.size() - 1);
        }
        if (racing.size() < 2 || dof < 1) continue;
        const double variance = squares / dof;
        const std::vector<double>& lead = samples[*racing.front()];
        const double leadMean = mean(lead);
        std::erase_if(racing, [&](const Configuration* c) {
          const std::vector<double>& v = samples[*c];
          const double se = std::sqrt(variance / static_cast<double>(v.size()) + variance / static_cast<double>(lead.size()));
          return mean(v) - leadMean > options.finalZ * se;
        });
      }
    } catch (const SearchStopped&) {
      // the trial limit: keep what was measured
    }
    const Configuration* pick = nullptr;
    double pickMean = std::numeric_limits<double>::infinity();
    for (const Configuration* c : candidates)
      if (const double m = mean(samples[*c]); m < pickMean) pick = c, pickMean = m;
    if (pick) best = *pick, bestMean = pickMean;
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
    // The search runs under `phase`, whose budget holds back the final selection's reserve;
    // the race gets the whole budget back (the session reads the budget through this reference).
    Elite elite;
    SearchOptions phase = options;
    const bool racing = options.finalReserve > 0 && options.finalCandidates >= 2;
    if (racing && options.budget > 0) phase.budget = options.budget / (1 + options.finalReserve);
    ProfilingSession session("mraco", space, profiler, phase);
    auto conclude = [&](std::string reason, bool converged) {
      const double searchCost = session.spent();
      phase.budget = options.budget;
      elite.race(session, options, searchCost);
      return elite.finish(session.finish(std::move(reason), converged));
    };
    std::mt19937_64 rng(options.seed);
    const TpeSampler sampler(space, options.tpe);
    const std::vector<Bracket> brackets = hyperbandBrackets(options.maxResource, options.eta, options.rounding);
    const uint64_t valid = space.validCount();
    ConvergenceMonitor monitor(options.convergence);

    std::map<int64_t, std::vector<Observation>> observations;  // by resource
    std::map<int64_t, std::set<Configuration>> measured;       // by resource

    try {
      while (true) {
        for (const Bracket& bracket : brackets) {
          if (measured[options.maxResource].size() >= valid) return conclude("exhausted", false);
          runBracket(space, sampler, bracket, phase, session, observations, measured, elite, rng);
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
        logFormat(LogLevel::Trace, kLogTuning, "mraco: iteration %lld incumbent %.4g us, improvement %.4g, KL %.4g, cost %.4g",
                  static_cast<long long>(monitor.steps()), elite.value(), monitor.lastRelativeImprovement(),
                  monitor.lastKl(), static_cast<double>(session.spent()));
        if (stop) return conclude("converged", true);
      }
    } catch (const SearchStopped& stop) {
      return conclude(stop.reason, false);
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
      std::vector<Measurement> sample(configs.size());
      for (size_t k = 0; k < configs.size(); ++k) {
        const Measurement& m = session.profile(configs[k], rung.resource, bracket.s, static_cast<int32_t>(i));
        value[k] = objectiveOf(m);
        sample[k] = m;
        observations[rung.resource].push_back({configs[k], value[k]});
        measured[rung.resource].insert(configs[k]);
        if (rung.resource == options.maxResource)
          elite.offer(configs[k], value[k], session, options, bracket.s, static_cast<int32_t>(i));
      }
      if (i + 1 == bracket.rungs.size()) break;
      // Line 9: keep the best ceil(n_s eta^-(i+1)) by median (stable: ties keep proposal order),
      // and promote on intervals: a configuration the last kept one is not significantly faster
      // than (their intervals overlap) goes on too, up to as many again — measurement noise
      // must not prune what it cannot tell apart.
      std::vector<size_t> order(configs.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
      const size_t keep = std::min(configs.size(), static_cast<size_t>(bracket.rungs[i + 1].configs));
      std::vector<Configuration> survivors;
      for (size_t k = 0; k < keep; ++k) survivors.push_back(configs[order[k]]);
      if (keep > 0) {
        const Measurement& last = sample[order[keep - 1]];
        for (size_t k = keep; k < configs.size() && survivors.size() < 2 * keep; ++k)
          if (std::isfinite(value[order[k]]) && !significantlySlower(sample[order[k]], last))
            survivors.push_back(configs[order[k]]);
      }
      configs = std::move(survivors);
    }
  }
};

}  // namespace

std::unique_ptr<Searcher> makeMracoSearcher() { return std::make_unique<MracoSearcher>(); }

}  // namespace tuccl
