#include "tune/confirmation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tuccl {
namespace {

/// The finite round times of `c` as one sample; ok = false when there is none.
Measurement summaryOf(const ConfirmedCandidate& c) {
  std::vector<double> finite;
  for (double t : c.roundUs)
    if (std::isfinite(t) && t > 0) finite.push_back(t);
  if (finite.empty()) {
    Measurement failed;
    failed.ok = false;
    failed.error = "no run succeeded";
    return failed;
  }
  return measurementOfSamples(std::move(finite), 0);
}

}  // namespace

const ConfirmedCandidate& Confirmation::chosen() const {
  if (!keepDefault) return candidates.at(rival);
  for (const ConfirmedCandidate& c : candidates)
    if (c.isDefault()) return c;
  throw std::logic_error("confirmation without the default");
}

Confirmation confirmAgainstDefault(Profiler& profiler, const SearchSpace& space,
                                   const std::vector<Configuration>& candidates, const ConfirmationOptions& options,
                                   uint32_t firstTrialId, const std::function<void(const Trial&)>& onRun) {
  if (candidates.empty()) throw std::invalid_argument("confirmation: no candidate");
  if (options.minRounds < 2 || options.maxRounds < options.minRounds || options.resource < 1)
    throw std::invalid_argument("confirmation: needs 2 <= minRounds <= maxRounds and resource >= 1");
  Confirmation result;
  result.candidates.push_back(ConfirmedCandidate{});  // the default, index 0 while measuring
  for (const Configuration& c : candidates) result.candidates.push_back(ConfirmedCandidate{c, {}, {}});
  const size_t n = result.candidates.size();
  uint32_t id = firstTrialId;

  // The fastest non-default candidate by its median so far, and its ratio to the default.
  auto judge = [&] {
    size_t best = 0;
    double bestUs = std::numeric_limits<double>::infinity();
    for (size_t i = 1; i < n; ++i) {
      const Measurement m = summaryOf(result.candidates[i]);
      if (m.ok && m.timeUs < bestUs) best = i, bestUs = m.timeUs;
    }
    if (best == 0) best = 1;
    return std::pair{best, pairedRatio(result.candidates[best].roundUs, result.candidates[0].roundUs)};
  };

  for (int32_t round = 0; round < options.maxRounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      ConfirmedCandidate& c = result.candidates[(k + static_cast<size_t>(round)) % n];
      Trial trial;
      trial.id = id++;
      trial.resource = options.resource;
      trial.isDefault = c.isDefault();
      if (c.config) trial.config = *c.config;
      trial.measurement = c.isDefault() ? profiler.profileDefault(options.resource)
                                        : profiler.profile(space, *c.config, options.resource);
      c.roundUs.push_back(objectiveOf(trial.measurement));
      if (onRun) onRun(trial);
    }
    result.rounds = round + 1;
    if (result.rounds < options.minRounds) continue;
    const auto [rival, ratio] = judge();
    (void)rival;
    if (ratio.pairs >= options.minRounds && (ratio.faster() || ratio.slower())) break;
  }

  const auto [rival, ratio] = judge();
  result.versusDefault = ratio;
  const bool defaultRan = summaryOf(result.candidates[0]).ok;
  result.keepDefault = defaultRan && !ratio.faster();
  const ConfirmedCandidate* rivalPtr = &result.candidates[rival];
  for (ConfirmedCandidate& c : result.candidates) c.summary = summaryOf(c);
  // Fastest first; failed ones last, in their original order.
  std::vector<ConfirmedCandidate> ordered = result.candidates;
  std::stable_sort(ordered.begin(), ordered.end(), [](const ConfirmedCandidate& a, const ConfirmedCandidate& b) {
    return objectiveOf(a.summary) < objectiveOf(b.summary);
  });
  for (size_t i = 0; i < ordered.size(); ++i)
    if (ordered[i].config == rivalPtr->config) result.rival = i;
  result.candidates = std::move(ordered);
  return result;
}

}  // namespace tuccl
