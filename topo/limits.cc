#include "topo/limits.h"

#include "support/text_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tuccl {

std::optional<std::string> rangeProblem(double value, const NumberRange& range) {
  bool inRange = std::isfinite(value) && value <= range.max &&
                 (range.minExclusive ? value > range.min : value >= range.min);
  bool whole = !range.integer || value == std::trunc(value);
  if (inRange && whole) return std::nullopt;
  std::string unit = range.unit.empty() ? "" : " " + std::string(range.unit);
  std::string bounds = range.minExclusive ? "above " + formatNumberForPeople(range.min) + " up to "
                                          : formatNumberForPeople(range.min) + " to ";
  return std::string(range.what) + " must be " + (range.integer ? "a whole number " : "") + bounds +
         formatNumberForPeople(range.max) + unit + ", got " + formatNumberForPeople(value);
}

}  // namespace tuccl
