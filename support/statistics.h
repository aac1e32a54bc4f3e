// Order statistics of timing samples, shared by the tuner's measurements (tune/) and the runtime
// phase (adapt/): one definition of the median and of the interval both decide on.
//
// Standard library only, without libm (the tuner plugin links the C library alone).
#pragma once

#include <utility>
#include <vector>

namespace tuccl {

/// The median of `samples` (reordered) and the half-width of its 95 % interval (McGill, Tukey and
/// Larsen's notch, 1.58 IQR / sqrt(n); 0 for fewer than 2 samples); {-1, 0} for none.
std::pair<double, double> medianAndHalfWidth(std::vector<double> samples);
/// Quantile q of `sorted` (ascending, not empty) by linear interpolation between order statistics.
double quantileOfSorted(const std::vector<double>& sorted, double q);

}  // namespace tuccl
