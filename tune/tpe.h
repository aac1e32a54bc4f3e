// Tree-structured Parzen Estimator (TuCCL §III-D stage 1, Eq. 2–3; Bergstra et al. 2011).
//
// In:  observations (configuration, objective; lower is better) of one fidelity.
// Out: proposals: random while there are fewer than `startupTrials` observations, then the
//      candidate with the largest l(x)/g(x) among `candidates` draws from l(x), where l is the
//      Parzen estimator of the good observations and g of the bad ones.
//
// Naming: l = density of the good set, g = density of the bad set (Bergstra's convention; the
// paper's Eq. 2–3 swap the letters between the two equations). Eq. 3's factor (mu_g - mu_l) is the
// same for every candidate, so the argmax is that of l/g alone.
//
// The estimator is multivariate: one product kernel per observation (Eq. 2's
// exp(-||x - x_i||^2 / 2 sigma_p^2)) plus a uniform prior component, so dependencies between
// dimensions (LL128 wants many threads, many channels want many threads) survive. Each kernel is
// discretised over the dimension's values:
//   ordinal:     a Gaussian over the normalised coordinate (log(value) when logScale), bandwidth
//                the larger gap to the neighbouring distinct observed coordinates (domain ends
//                included), clipped to [max(range / min(100, n + 1), half the smallest level
//                gap), range], then scaled by the protocol factor of the observation (Eq. 2's
//                sigma_p: LL128's volatile bandwidth gets wider kernels);
//   categorical: weight 1 on the observed value plus smoothing / n on every value, normalised
//                (a frequency estimator whose smoothing fades as observations accumulate).
#pragma once

#include <array>
#include <map>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "support/vocabulary.h"
#include "tune/search_space.h"

namespace tuccl {

struct TpeOptions {
  int startupTrials = 10;     ///< uniform random proposals before the model is used
  double gamma = 0.15;        ///< good set = ceil(gamma * n) best observations ...
  int maxGood = 25;           ///< ... at most this many (Optuna's cap)
  int candidates = 24;        ///< EI candidates drawn from l(x) per proposal
  double priorWeight = 1.0;   ///< weight of the uniform component (one observation's worth)
  double categoricalSmoothing = 1.0;
  double randomFraction = 0;  ///< share of proposals drawn uniformly after start-up
  /// Eq. 2's protocol-dependent sigma_p: the bandwidth multiplier of an observation's ordinal
  /// kernels by its value of `protocolDimension` (indexed by Protocol); values that are no
  /// protocol use 1.
  std::string protocolDimension = "protocol";
  std::array<double, kProtocols> protocolBandwidth = {1.0, 1.5, 1.0};  // LL, LL128, Simple
};

struct Observation {
  Configuration config;
  double value = 0;  ///< objective, lower is better; +inf for failures
};

/// Size of the good set for n observations: clamp(ceil(gamma * n), 1, maxGood), never n when
/// n > 1 (the bad set must not be empty).
size_t tpeGoodCount(size_t n, const TpeOptions& options);

/// A mixture of discretised product kernels (one per centre) and a uniform prior component.
class ParzenEstimator {
 public:
  ParzenEstimator(const SearchSpace& space, std::span<const Configuration> centers, const TpeOptions& options);

  /// log of the mixture probability of `config` (a probability mass: the kernels are discrete).
  double logDensity(const Configuration& config) const;
  /// A draw from the mixture; may violate the space's constraints.
  Configuration sample(std::mt19937_64& rng) const;
  /// The mixture's marginal distribution of every dimension (for the KL test of Eq. 5).
  std::vector<std::vector<double>> marginals() const;
  size_t componentCount() const { return weights_.size(); }

 private:
  // kernel_[component][dimension][value]: probability (log in logKernel_)
  std::vector<std::vector<std::vector<double>>> kernel_;
  std::vector<std::vector<std::vector<double>>> logKernel_;
  std::vector<double> weights_;  // normalised
};

/// The good/bad split and the two estimators of a history (ties broken by history order).
struct TpeModel {
  std::vector<Configuration> good, bad;
  ParzenEstimator l, g;
};
TpeModel buildTpeModel(const SearchSpace& space, std::span<const Observation> history, const TpeOptions& options);

class TpeSampler {
 public:
  TpeSampler(const SearchSpace& space, TpeOptions options) : space_(space), options_(std::move(options)) {}

  /// One proposal for `history`; avoids configurations in `exclude` while it can (falls back to a
  /// random valid configuration outside `exclude`, then to any valid one).
  Configuration propose(std::span<const Observation> history, std::mt19937_64& rng,
                        const std::set<Configuration>& exclude = {}) const;
  /// `count` distinct proposals from one model of `history` (a Hyperband bracket's start-up
  /// set); each is added to the exclusions of the next.
  std::vector<Configuration> proposeBatch(std::span<const Observation> history, size_t count, std::mt19937_64& rng,
                                          std::set<Configuration> exclude = {}) const;
  const TpeOptions& options() const { return options_; }

 private:
  Configuration proposeFrom(const TpeModel* model, const std::set<Configuration>& exclude,
                            std::mt19937_64& rng) const;
  Configuration randomOutside(const std::set<Configuration>& exclude, std::mt19937_64& rng) const;

  const SearchSpace& space_;
  TpeOptions options_;
};

}  // namespace tuccl
