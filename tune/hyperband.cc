#include "tune/hyperband.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tuccl {
namespace {

/// eta^k as a double, exact for integer eta within 2^53.
double power(double eta, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) p *= eta;
  return p;
}

/// ceil / floor of x with a relative tolerance, so 81 / 3^4 is 1 and not 0.99999.
int64_t roundedUp(double x) { return static_cast<int64_t>(std::ceil(x * (1 - 1e-12))); }
int64_t roundedDown(double x) { return static_cast<int64_t>(std::floor(x * (1 + 1e-12))); }

}  // namespace

int64_t Bracket::cost() const {
  int64_t total = 0;
  for (const Rung& r : rungs) total += r.configs * r.resource;
  return total;
}

int hyperbandSMax(int64_t maxResource, double eta) {
  if (maxResource < 1) throw std::invalid_argument("hyperband: R_max must be >= 1");
  if (!(eta > 1)) throw std::invalid_argument("hyperband: eta must be > 1");
  int s = 0;
  while (power(eta, s + 1) <= static_cast<double>(maxResource) * (1 + 1e-12)) ++s;
  return s;
}

std::vector<Bracket> hyperbandBrackets(int64_t maxResource, double eta, RungRounding rounding) {
  const int sMax = hyperbandSMax(maxResource, eta);
  std::vector<Bracket> out;
  for (int s = sMax; s >= 0; --s) {
    Bracket b;
    b.s = s;
    const int64_t n = roundedUp(static_cast<double>(sMax + 1) / (s + 1) * power(eta, s));
    for (int i = 0; i <= s; ++i) {
      const double share = static_cast<double>(n) / power(eta, i);
      Rung r;
      r.configs = std::max<int64_t>(1, rounding == RungRounding::Ceil ? roundedUp(share) : roundedDown(share));
      r.resource = i == s ? maxResource
                          : std::max<int64_t>(1, roundedDown(static_cast<double>(maxResource) / power(eta, s - i)));
      b.rungs.push_back(r);
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace tuccl
