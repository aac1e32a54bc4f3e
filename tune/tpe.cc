#include "tune/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace tuccl {
namespace {

/// Normalised coordinates of an ordinal dimension's levels in [0, 1] (log space when logScale).
std::vector<double> coordinates(const Dimension& dim) {
  std::vector<double> u(dim.levels.size(), 0.0);
  auto f = [&](int64_t v) { return dim.logScale ? std::log(static_cast<double>(v)) : static_cast<double>(v); };
  const double lo = f(dim.levels.front()), hi = f(dim.levels.back());
  for (size_t j = 0; j < u.size(); ++j) u[j] = hi > lo ? (f(dim.levels[j]) - lo) / (hi - lo) : 0.0;
  return u;
}

double logSumExp(std::span<const double> xs) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : xs) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

size_t sampleDiscrete(std::span<const double> p, std::mt19937_64& rng) {
  double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double acc = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    acc += p[i];
    if (r < acc) return i;
  }
  return p.size() - 1;
}

}  // namespace

size_t tpeGoodCount(size_t n, const TpeOptions& options) {
  if (n == 0) return 0;
  size_t good = static_cast<size_t>(std::ceil(options.gamma * static_cast<double>(n)));
  good = std::clamp<size_t>(good, 1, static_cast<size_t>(std::max(1, options.maxGood)));
  if (n > 1) good = std::min(good, n - 1);
  return good;
}

ParzenEstimator::ParzenEstimator(const SearchSpace& space, std::span<const Configuration> centers,
                                 const TpeOptions& options) {
  const size_t dims = space.dimensionCount();
  const size_t n = centers.size();
  const size_t protocolDim = space.dimensionIndex(options.protocolDimension);

  kernel_.assign(n + 1, std::vector<std::vector<double>>(dims));
  // Component n: the uniform prior.
  for (size_t d = 0; d < dims; ++d)
    kernel_[n][d].assign(space.dimension(d).size(), 1.0 / static_cast<double>(space.dimension(d).size()));

  for (size_t d = 0; d < dims; ++d) {
    const Dimension& dim = space.dimension(d);
    const size_t size = dim.size();
    if (dim.kind == DimensionKind::Categorical) {
      const double eps = options.categoricalSmoothing / static_cast<double>(std::max<size_t>(n, 1));
      for (size_t i = 0; i < n; ++i) {
        std::vector<double>& p = kernel_[i][d];
        p.assign(size, eps);
        p[centers[i].index[d]] += 1.0;
        for (double& x : p) x /= 1.0 + eps * static_cast<double>(size);
      }
      continue;
    }
    // Ordinal: Gaussian kernels over normalised coordinates.
    const std::vector<double> u = coordinates(dim);
    double minGap = 1.0;
    for (size_t j = 1; j < u.size(); ++j) minGap = std::min(minGap, u[j] - u[j - 1]);
    std::vector<double> distinct;
    for (size_t i = 0; i < n; ++i) distinct.push_back(u[centers[i].index[d]]);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    const double sigmaMin = std::max(1.0 / std::min(100.0, static_cast<double>(n) + 1.0), 0.5 * minGap);
    for (size_t i = 0; i < n; ++i) {
      const double mu = u[centers[i].index[d]];
      auto it = std::lower_bound(distinct.begin(), distinct.end(), mu);
      const double left = it == distinct.begin() ? mu : mu - *(it - 1);
      const double right = it + 1 == distinct.end() ? 1.0 - mu : *(it + 1) - mu;
      double sigma = std::max(left, right);
      if (protocolDim != SearchSpace::npos) {
        const auto protocol = parseProtocol(space.dimension(protocolDim).label(centers[i].index[protocolDim]));
        if (protocol) sigma *= options.protocolBandwidth[static_cast<size_t>(*protocol)];
      }
      sigma = std::clamp(sigma, sigmaMin, 1.0);
      std::vector<double>& p = kernel_[i][d];
      p.resize(size);
      double total = 0;
      for (size_t j = 0; j < size; ++j) {
        const double z = (u[j] - mu) / sigma;
        p[j] = std::exp(-0.5 * z * z);
        total += p[j];
      }
      for (double& x : p) x /= total;
    }
  }

  weights_.assign(n + 1, 1.0);
  weights_[n] = options.priorWeight;
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= total;

  logKernel_ = kernel_;
  for (auto& comp : logKernel_)
    for (auto& dim : comp)
      for (double& x : dim) x = std::log(std::max(x, 1e-300));
}

double ParzenEstimator::logDensity(const Configuration& config) const {
  std::vector<double> terms(weights_.size());
  for (size_t c = 0; c < weights_.size(); ++c) {
    double t = weights_[c] > 0 ? std::log(weights_[c]) : -std::numeric_limits<double>::infinity();
    for (size_t d = 0; d < logKernel_[c].size(); ++d) t += logKernel_[c][d][config.index[d]];
    terms[c] = t;
  }
  return logSumExp(terms);
}

Configuration ParzenEstimator::sample(std::mt19937_64& rng) const {
  const size_t c = sampleDiscrete(weights_, rng);
  Configuration config{std::vector<uint32_t>(kernel_[c].size())};
  for (size_t d = 0; d < kernel_[c].size(); ++d)
    config.index[d] = static_cast<uint32_t>(sampleDiscrete(kernel_[c][d], rng));
  return config;
}

std::vector<std::vector<double>> ParzenEstimator::marginals() const {
  std::vector<std::vector<double>> out;
  if (kernel_.empty()) return out;
  for (size_t d = 0; d < kernel_[0].size(); ++d) {
    std::vector<double> m(kernel_[0][d].size(), 0.0);
    for (size_t c = 0; c < weights_.size(); ++c)
      for (size_t j = 0; j < m.size(); ++j) m[j] += weights_[c] * kernel_[c][d][j];
    out.push_back(std::move(m));
  }
  return out;
}

TpeModel buildTpeModel(const SearchSpace& space, std::span<const Observation> history, const TpeOptions& options) {
  std::vector<size_t> order(history.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return history[a].value < history[b].value; });
  const size_t nGood = tpeGoodCount(history.size(), options);
  std::vector<Configuration> good, bad;
  for (size_t k = 0; k < order.size(); ++k) (k < nGood ? good : bad).push_back(history[order[k]].config);
  ParzenEstimator l(space, good, options);
  ParzenEstimator g(space, bad, options);
  return TpeModel{std::move(good), std::move(bad), std::move(l), std::move(g)};
}

Configuration TpeSampler::randomOutside(const std::set<Configuration>& exclude, std::mt19937_64& rng) const {
  for (int attempt = 0; attempt < 64; ++attempt) {
    Configuration c = space_.sampleValid(rng);
    if (!exclude.count(c)) return c;
  }
  // Nearly everything is excluded: scan the grid from a random offset.
  std::vector<Configuration> all = space_.enumerateValid();
  const size_t start = std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng);
  for (size_t k = 0; k < all.size(); ++k)
    if (!exclude.count(all[(start + k) % all.size()])) return all[(start + k) % all.size()];
  return all[start];
}

Configuration TpeSampler::proposeFrom(const TpeModel* model, const std::set<Configuration>& exclude,
                                      std::mt19937_64& rng) const {
  if (!model) return randomOutside(exclude, rng);
  if (options_.randomFraction > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < options_.randomFraction)
    return randomOutside(exclude, rng);
  double bestScore = -std::numeric_limits<double>::infinity();
  std::optional<Configuration> best;
  // Draws that are invalid or excluded are replaced, up to a bound.
  int drawn = 0;
  for (int attempt = 0; attempt < options_.candidates * 8 && drawn < options_.candidates; ++attempt) {
    Configuration c = model->l.sample(rng);
    if (!space_.isValid(c) || exclude.count(c)) continue;
    ++drawn;
    const double score = model->l.logDensity(c) - model->g.logDensity(c);
    if (score > bestScore) {
      bestScore = score;
      best = std::move(c);
    }
  }
  return best ? *best : randomOutside(exclude, rng);
}

Configuration TpeSampler::propose(std::span<const Observation> history, std::mt19937_64& rng,
                                  const std::set<Configuration>& exclude) const {
  if (history.size() < static_cast<size_t>(std::max(options_.startupTrials, 2))) return randomOutside(exclude, rng);
  const TpeModel model = buildTpeModel(space_, history, options_);
  return proposeFrom(&model, exclude, rng);
}

std::vector<Configuration> TpeSampler::proposeBatch(std::span<const Observation> history, size_t count,
                                                    std::mt19937_64& rng, std::set<Configuration> exclude) const {
  std::optional<TpeModel> model;
  if (history.size() >= static_cast<size_t>(std::max(options_.startupTrials, 2)))
    model.emplace(buildTpeModel(space_, history, options_));
  std::vector<Configuration> out;
  for (size_t k = 0; k < count; ++k) {
    Configuration c = proposeFrom(model ? &*model : nullptr, exclude, rng);
    exclude.insert(c);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tuccl
