// Hyperband's schedule (TuCCL Algorithm 1 lines 1–9 and Eq. 4; Li et al., JMLR 2018).
//
// In:  the full resource R_max (profiling iterations of one complete measurement) and the
//      reduction factor eta > 1.
// Out: the brackets s = s_max .. 0, s_max = floor(log_eta R_max). Bracket s starts
//      n = ceil((s_max + 1) / (s + 1) · eta^s) configurations at r = R_max · eta^-s; rung i
//      (0 <= i <= s) measures n_i configurations at r_i = r · eta^i, and keeps the best n_{i+1}.
//
// Rounding, where the sources differ:
//   n_i: Ceil — ceil(n · eta^-i), Algorithm 1 line 9 and Eq. 4 (the default); Floor —
//        floor(n · eta^-i), Li et al.'s successive halving (their Table 1). Never below 1.
//   r_i: floor(R_max · eta^(i - s)) computed exactly for integer eta, at least 1; the last rung
//        is R_max itself.
// Algorithm 1 as printed pairs n_s = ceil(eta^(s_max - s)) with R_s = floor(R_max eta^-s), which
// would profile eta^s_max configurations at R_max with no pruning in bracket 0; we follow the
// Hyperband bracket definition the paper's text describes (docs/tuning.md).
#pragma once

#include <cstdint>
#include <vector>

namespace tuccl {

enum class RungRounding : uint8_t { Ceil, Floor };

struct Rung {
  int64_t configs = 0;
  int64_t resource = 0;
  friend bool operator==(const Rung&, const Rung&) = default;
};

struct Bracket {
  int s = 0;
  std::vector<Rung> rungs;  ///< rung 0 first; the last at R_max
  /// Sum over rungs of configs × resource.
  int64_t cost() const;
  friend bool operator==(const Bracket&, const Bracket&) = default;
};

/// floor(log_eta(maxResource)), exact for integer powers.
int hyperbandSMax(int64_t maxResource, double eta);
/// The brackets of one Hyperband iteration, s = s_max first. Throws std::invalid_argument when
/// maxResource < 1 or eta <= 1.
std::vector<Bracket> hyperbandBrackets(int64_t maxResource, double eta, RungRounding rounding = RungRounding::Ceil);

}  // namespace tuccl
