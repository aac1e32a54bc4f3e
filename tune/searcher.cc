#include "tune/searcher.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace tuccl {

ProfilingSession::ProfilingSession(std::string method, const SearchSpace& space, Profiler& profiler,
                                   const SearchOptions& options)
    : space_(space), profiler_(profiler), options_(options) {
  result_.method = std::move(method);
  if (options.maxResource < 1) throw std::invalid_argument("search: maxResource must be >= 1");
}

bool ProfilingSession::canAfford(int64_t resource) const {
  if (options_.maxTrials > 0 && result_.trials.size() >= options_.maxTrials) return false;
  return options_.budget <= 0 || result_.cost + static_cast<double>(resource) <= options_.budget * (1 + 1e-12);
}

const Measurement& ProfilingSession::profile(const Configuration& config, int64_t resource, int32_t bracket,
                                             int32_t rung) {
  if (options_.maxTrials > 0 && result_.trials.size() >= options_.maxTrials) throw SearchStopped{"max trials"};
  if (!canAfford(resource)) throw SearchStopped{"budget"};
  Trial trial;
  trial.id = static_cast<uint32_t>(result_.trials.size());
  trial.config = config;
  trial.resource = resource;
  trial.bracket = bracket;
  trial.rung = rung;
  trial.measurement = profiler_.profile(space_, config, resource);
  if (trial.measurement.cost <= 0) trial.measurement.cost = static_cast<double>(resource);
  result_.cost += static_cast<double>(resource);

  if (trial.measurement.ok) {
    anySuccess_ = true;
    leadingFailures_ = 0;
  } else if (!anySuccess_ && ++leadingFailures_ >= options_.maxLeadingFailures) {
    throw std::runtime_error("profiler '" + std::string(profiler_.name()) + "' failed " +
                             std::to_string(leadingFailures_) + " times in a row: " + trial.measurement.error);
  }
  // Elite retention: the incumbent is the best measurement at the largest resource seen.
  const double value = objectiveOf(trial.measurement);
  if (std::isfinite(value) &&
      (resource > result_.bestResource ||
       (resource == result_.bestResource && value < objectiveOf(result_.bestMeasurement)))) {
    result_.best = config;
    result_.bestMeasurement = trial.measurement;
    result_.bestResource = resource;
  }
  result_.trials.push_back(std::move(trial));
  if (options_.onTrial) options_.onTrial(result_.trials.back());
  return result_.trials.back().measurement;
}

double ProfilingSession::bestAt(int64_t resource) const {
  double best = std::numeric_limits<double>::infinity();
  for (const Trial& t : result_.trials)
    if (t.resource == resource) best = std::min(best, objectiveOf(t.measurement));
  return best;
}

SearchResult ProfilingSession::finish(std::string stopReason, bool converged) {
  result_.stopReason = std::move(stopReason);
  result_.converged = converged;
  return result_;
}

std::vector<std::string> searcherNames() { return {"mraco", "grid", "random", "tpe", "coordinate"}; }

std::unique_ptr<Searcher> makeSearcher(std::string_view name) {
  if (name == "mraco") return makeMracoSearcher();
  if (name == "grid") return makeGridSearcher();
  if (name == "random") return makeRandomSearcher();
  if (name == "tpe") return makeTpeSearcher();
  if (name == "coordinate" || name == "autoccl") return makeCoordinateDescentSearcher();
  return nullptr;
}

}  // namespace tuccl
