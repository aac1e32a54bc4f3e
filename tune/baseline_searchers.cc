// The baselines MRACO is judged against (issue 8 item 3): grid search, random search, TPE without
// Hyperband, all measuring every trial at R_max.
#include <algorithm>
#include <random>
#include <set>

#include "tune/searcher.h"

namespace tuccl {
namespace {

/// Every valid configuration in lexicographic order until the budget is spent.
class GridSearcher : public Searcher {
 public:
  std::string_view name() const override { return "grid"; }
  SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) override {
    ProfilingSession session("grid", space, profiler, options);
    try {
      for (const Configuration& c : space.enumerateValid()) session.profile(c, options.maxResource);
    } catch (const SearchStopped& stop) {
      return session.finish(stop.reason);
    }
    return session.finish("exhausted");
  }
};

/// Uniform draws from the valid configurations, without repetition.
class RandomSearcher : public Searcher {
 public:
  std::string_view name() const override { return "random"; }
  SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) override {
    ProfilingSession session("random", space, profiler, options);
    std::mt19937_64 rng(options.seed);
    std::vector<Configuration> all = space.enumerateValid();
    std::shuffle(all.begin(), all.end(), rng);
    try {
      for (const Configuration& c : all) session.profile(c, options.maxResource);
    } catch (const SearchStopped& stop) {
      return session.finish(stop.reason);
    }
    return session.finish("exhausted");
  }
};

/// Sequential TPE at full resource: every proposal is measured at R_max.
class TpeSearcher : public Searcher {
 public:
  std::string_view name() const override { return "tpe"; }
  SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) override {
    ProfilingSession session("tpe", space, profiler, options);
    std::mt19937_64 rng(options.seed);
    TpeSampler sampler(space, options.tpe);
    std::vector<Observation> history;
    std::set<Configuration> seen;
    const uint64_t valid = space.validCount();
    if (options.budget <= 0 && options.maxTrials == 0)
      throw std::invalid_argument("tpe search needs a budget or maxTrials");
    try {
      while (seen.size() < valid) {
        Configuration c = sampler.propose(history, rng, seen);
        const Measurement& m = session.profile(c, options.maxResource);
        history.push_back({c, objectiveOf(m)});
        seen.insert(std::move(c));
      }
    } catch (const SearchStopped& stop) {
      return session.finish(stop.reason);
    }
    return session.finish("exhausted");
  }
};

}  // namespace

std::unique_ptr<Searcher> makeGridSearcher() { return std::make_unique<GridSearcher>(); }
std::unique_ptr<Searcher> makeRandomSearcher() { return std::make_unique<RandomSearcher>(); }
std::unique_ptr<Searcher> makeTpeSearcher() { return std::make_unique<TpeSearcher>(); }

}  // namespace tuccl
