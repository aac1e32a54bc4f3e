#include "support/text_values.h"

#include <array>
#include <bit>
#include <cctype>
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
