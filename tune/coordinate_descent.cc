// Coordinate descent per (algorithm, protocol) subspace — the AutoCCL approach (issue 8 item 3).
// Every subspace (each combination of the values of options.subspaceDimensions) starts from the
// valid configuration nearest the middle of the other dimensions and sweeps one coordinate at a
// time (all its values, the others fixed), moving to the best; a subspace is done after a full
// pass without improvement. Subspaces take turns one sweep at a time, so a budget cut leaves every
// subspace explored to a similar depth. Every trial is at R_max; repeated points are not re-measured.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>

#include "tune/searcher.h"

namespace tuccl {
namespace {

class CoordinateDescentSearcher : public Searcher {
 public:
  std::string_view name() const override { return "coordinate"; }

  SearchResult search(const SearchSpace& space, Profiler& profiler, const SearchOptions& options) override {
    ProfilingSession session("coordinate", space, profiler, options);
    std::vector<size_t> subDims, coordDims;
    for (size_t d = 0; d < space.dimensionCount(); ++d) {
      const bool sub = std::find(options.subspaceDimensions.begin(), options.subspaceDimensions.end(),
                                 space.dimension(d).name) != options.subspaceDimensions.end();
      (sub ? subDims : coordDims).push_back(d);
    }

    // One start point per subspace with at least one valid configuration.
    struct State {
      Configuration current;
      double value = std::numeric_limits<double>::infinity();
      size_t nextCoord = 0;
      size_t sweepsWithoutGain = 0;
      bool done = false;
    };
    std::map<Configuration, State> subspaces;  // key: the configuration with coordinates zeroed
    auto keyOf = [&](Configuration c) {
      for (size_t d : coordDims) c.index[d] = 0;
      return c;
    };
    auto distanceToMiddle = [&](const Configuration& c) {
      long total = 0;
      for (size_t d : coordDims) total += std::labs(static_cast<long>(c.index[d]) - static_cast<long>(space.dimension(d).size() / 2));
      return total;
    };
    for (const Configuration& c : space.enumerateValid()) {
      auto [it, fresh] = subspaces.try_emplace(keyOf(c), State{c});
      if (!fresh && distanceToMiddle(c) < distanceToMiddle(it->second.current)) it->second.current = c;
    }

    std::map<Configuration, double> cache;
    auto measure = [&](const Configuration& c) {
      auto it = cache.find(c);
      if (it != cache.end()) return it->second;
      double v = objectiveOf(session.profile(c, options.maxResource));
      cache.emplace(c, v);
      return v;
    };

    try {
      for (auto& [key, state] : subspaces) state.value = measure(state.current);
      bool active = true;
      while (active) {
        active = false;
        for (auto& [key, state] : subspaces) {
          if (state.done || coordDims.empty()) continue;
          active = true;
          const size_t d = coordDims[state.nextCoord];
          Configuration best = state.current;
          double bestValue = state.value;
          for (uint32_t v = 0; v < space.dimension(d).size(); ++v) {
            Configuration c = state.current;
            c.index[d] = v;
            if (c == state.current || !space.isValid(c)) continue;
            const double value = measure(c);
            if (value < bestValue) {
              bestValue = value;
              best = c;
            }
          }
          const bool gained = bestValue < state.value;
          state.current = best;
          state.value = bestValue;
          state.sweepsWithoutGain = gained ? 0 : state.sweepsWithoutGain + 1;
          state.nextCoord = (state.nextCoord + 1) % coordDims.size();
          if (state.sweepsWithoutGain >= coordDims.size()) state.done = true;
        }
      }
    } catch (const SearchStopped& stop) {
      return session.finish(stop.reason);
    }
    return session.finish("exhausted");
  }
};

}  // namespace

std::unique_ptr<Searcher> makeCoordinateDescentSearcher() { return std::make_unique<CoordinateDescentSearcher>(); }

}  // namespace tuccl
