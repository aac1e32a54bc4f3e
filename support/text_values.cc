#include "support/text_values.h"

#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <numeric>

namespace tuccl {
namespace {

/// The power of 1024 a unit suffix stands for ("" and "B": 0, "K"/"KB"/"KiB": 1, ...); -1 when the
/// suffix is not a unit.
int unitPower(std::string_view unit) {
  if (unit.empty() || equalsIgnoreCase(unit, "B")) return 0;
  static constexpr std::string_view kPrefixes = "KMGT";
  const size_t prefix = kPrefixes.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
  if (prefix == std::string_view::npos) return -1;
  const std::string_view rest = unit.substr(1);
  if (!(rest.empty() || equalsIgnoreCase(rest, "B") || equalsIgnoreCase(rest, "iB"))) return -1;
  return static_cast<int>(prefix) + 1;
}

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Expected<uint64_t> parseByteSize(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return makeError(ErrorCode::InvalidArgument, "'" + std::string(text) + "' is not a byte size" +
                                                     std::string(why) + " (e.g. 1048576, 64K, 1M, 1.5G)");
  };
  size_t i = 0;
  uint64_t whole = 0;
  while (i < text.size() && isDigit(text[i])) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (whole > (std::numeric_limits<uint64_t>::max() - digit) / 10) return fail(": too large");
    whole = whole * 10 + digit;
    ++i;
  }
  if (i == 0) return fail("");
  // The fraction, as digits over a power of ten (at most 18 digits, so it fits).
  uint64_t fraction = 0;
  uint64_t denominator = 1;
  if (i < text.size() && text[i] == '.') {
    const size_t start = ++i;
    while (i < text.size() && isDigit(text[i])) {
      if (i - start >= 18) return fail(": too many decimals");
      fraction = fraction * 10 + static_cast<uint64_t>(text[i] - '0');
      denominator *= 10;
      ++i;
    }
    if (i == start) return fail("");
  }
  const int power = unitPower(text.substr(i));
  if (power < 0) return fail("");
  const int shift = 10 * power;
  if (shift > 0 && whole > (std::numeric_limits<uint64_t>::max() >> shift)) return fail(": too large");
  uint64_t bytes = whole << shift;
  if (fraction != 0) {
    // fraction / denominator of one unit is whole when the reduced denominator divides 2^shift.
    const uint64_t common = std::gcd(fraction, denominator);
    const uint64_t numerator = fraction / common;
    const uint64_t reduced = denominator / common;
    if (!std::has_single_bit(reduced) || std::countr_zero(reduced) > shift)
      return fail(": not a whole number of bytes");
    const uint64_t extra = numerator << (shift - std::countr_zero(reduced));  // < 2^shift: no overflow
    if (bytes > std::numeric_limits<uint64_t>::max() - extra) return fail(": too large");
    bytes += extra;
  }
  return bytes;
}

std::string formatByteSize(uint64_t bytes) {
  static constexpr std::array<std::pair<int, char>, 4> kUnits = {
      {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}}};
  for (auto [shift, unit] : kUnits) {
    const uint64_t scale = uint64_t{1} << shift;
    if (bytes != 0 && bytes % scale == 0) return std::to_string(bytes / scale) + unit;
  }
  return std::to_string(bytes);
}

std::string formatBytesForPeople(uint64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (unit + 1 < kUnits.size() && bytes >= (uint64_t{1} << (10 * (unit + 1)))) ++unit;
  if (unit == 0) return std::to_string(bytes) + " B";
  // Integers only (the tuner plugin links this and needs nothing beyond libc): the whole units,
  // then three decimals of the rest by long division, rounded half up.
  const int shift = 10 * static_cast<int>(unit);
  const uint64_t mask = (uint64_t{1} << shift) - 1;
  uint64_t whole = bytes >> shift;
  uint64_t rest = bytes & mask;  // < 2^60, so rest * 10 fits
  uint64_t thousandths = 0;
  for (int digit = 0; digit < 3; ++digit) {
    rest *= 10;
    thousandths = thousandths * 10 + (rest >> shift);
    rest &= mask;
  }
  const bool exact = rest == 0;
  if (rest >= (uint64_t{1} << (shift - 1)) && ++thousandths == 1000) {
    thousandths = 0;
    ++whole;
  }
  std::string number = std::to_string(whole);
  if (thousandths != 0) {
    std::string decimals = std::to_string(thousandths);
    decimals.insert(0, 3 - decimals.size(), '0');
    while (decimals.back() == '0') decimals.pop_back();
    number += "." + decimals;
  }
  return (exact ? "" : "~") + number + " " + kUnits[unit];
}

std::string formatNumberForPeople(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "infinity" : "-infinity";
  if (value > -1e18 && value < 1e18 && value == static_cast<double>(static_cast<int64_t>(value))) {
    const auto whole = static_cast<int64_t>(value);
    std::string digits = std::to_string(whole < 0 ? -whole : whole);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
    return (whole < 0 ? "-" : "") + digits;
  }
  // The shortest %g text that reads back as the value (snprintf and strtod, libc only).
  char text[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

std::string describeRange(const std::string& min, const std::string& max, bool noMin, bool noMax) {
  if (noMin && noMax) return "any value";
  if (noMax) return "at least " + min;
  if (noMin) return "at most " + max;
  if (min == max) return "exactly " + min;
  return "between " + min + " and " + max;
}

namespace {

Status outOfRange(std::string_view text, const std::string& range) {
  return makeError(ErrorCode::InvalidArgument, "'" + std::string(text) + "' is out of range: must be " + range);
}

std::string integerRange(int64_t min, int64_t max) {
  return describeRange(formatNumberForPeople(static_cast<double>(min)), formatNumberForPeople(static_cast<double>(max)),
                       min == std::numeric_limits<int64_t>::min(), max == std::numeric_limits<int64_t>::max());
}

std::string numberRange(double min, double max) {
  return describeRange(formatNumberForPeople(min), formatNumberForPeople(max),
                       min <= -std::numeric_limits<double>::max(), max >= std::numeric_limits<double>::max());
}

}  // namespace

Expected<uint64_t> parseByteSizeInRange(std::string_view text, uint64_t min, uint64_t max) {
  Expected<uint64_t> bytes = parseByteSize(text);
  const std::string range = describeRange(formatBytesForPeople(min), formatBytesForPeople(max), min == 0,
                                          max == std::numeric_limits<uint64_t>::max());
  if (!bytes) {
    if (bytes.status().message().find("too large") != std::string::npos) return outOfRange(text, range);
    return bytes.status();
  }
  if (*bytes < min || *bytes > max) return outOfRange(text, range);
  return *bytes;
}

Expected<int64_t> parseIntegerInRange(std::string_view text, int64_t min, int64_t max) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) return outOfRange(text, integerRange(min, max));
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty())
    return makeError(ErrorCode::InvalidArgument, "'" + std::string(text) + "' is not a whole number");
  if (value < min || value > max) return outOfRange(text, integerRange(min, max));
  return value;
}

Expected<double> parseNumberInRange(std::string_view text, double min, double max) {
  // A number is digits, a point, an exponent and signs only: strtod would also take "nan", "inf"
  // and hexadecimal. (strtod, not from_chars: the tuner plugin links this and needs only libc.)
  const bool plain = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string_view::npos;
  const std::string copy(text);
  char* end = nullptr;
  const double value = plain ? std::strtod(copy.c_str(), &end) : 0;
  if (!plain || end != copy.c_str() + copy.size())
    return makeError(ErrorCode::InvalidArgument, "'" + std::string(text) + "' is not a number");
  if (!std::isfinite(value) || value < min || value > max) return outOfRange(text, numberRange(min, max));
  return value;
}

Status checkNumberInRange(std::string_view what, double value, double min, double max) {
  if (std::isfinite(value) && value >= min && value <= max) return Status();
  return makeError(ErrorCode::InvalidArgument, std::string(what) + " " + formatNumberForPeople(value) +
                                                   " is out of range: must be " + numberRange(min, max));
}

std::vector<std::string> splitList(std::string_view text, char separator) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    const size_t first = item.find_first_not_of(" \t");
    if (first != std::string_view::npos) {
      const size_t last = item.find_last_not_of(" \t");
      items.emplace_back(item.substr(first, last - first + 1));
    }
    start = end + 1;
  }
  return items;
}

Expected<std::vector<std::string>> splitDistinctList(std::string_view text, char separator) {
  std::vector<std::string> items = splitList(text, separator);
  if (items.empty()) return makeError(ErrorCode::InvalidArgument, "the list is empty");
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (equalsIgnoreCase(items[i], items[j]))
        return makeError(ErrorCode::InvalidArgument, "'" + items[i] + "' is listed twice");
    }
  }
  return items;
}

std::string toLowerCase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string toUpperCase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace tuccl
