#include "topo/limits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tuccl {

std::string formatPlainNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e18) {
    std::string digits = std::to_string(static_cast<long long>(std::fabs(value)));
    std::string grouped;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
      grouped += digits[i];
    }
    return (value < 0 ? "-" : "") + grouped;
  }
  if (std::fabs(value) >= 1e18) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", value);
    return text;
  }
  // Six significant digits, without an exponent and without trailing zeros.
  int decimals = std::max(0, 5 - static_cast<int>(std::floor(std::log10(std::fabs(value)))));
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  std::string out = text;
  if (out.find('.') != std::string::npos) {
    while (out.back() == '0') out.pop_back();
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

std::optional<std::string> rangeProblem(double value, const NumberRange& range) {
  bool inRange = std::isfinite(value) && value <= range.max &&
                 (range.minExclusive ? value > range.min : value >= range.min);
  bool whole = !range.integer || value == std::trunc(value);
  if (inRange && whole) return std::nullopt;
  std::string unit = range.unit.empty() ? "" : " " + std::string(range.unit);
  std::string bounds = range.minExclusive ? "above " + formatPlainNumber(range.min) + " up to "
                                          : formatPlainNumber(range.min) + " to ";
  return std::string(range.what) + " must be " + (range.integer ? "a whole number " : "") + bounds +
         formatPlainNumber(range.max) + unit + ", got " + formatPlainNumber(value);
}

}  // namespace tuccl
