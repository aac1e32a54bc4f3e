#include "tune/size_grid.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tuccl {

int64_t parseSizeText(std::string_view text) {
  auto fail = [&] {
    return std::invalid_argument("'" + std::string(text) + "' is not a byte size (e.g. 1048576, 64K, 1M, 1G)");
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 18) throw fail();
  int64_t value = std::stoll(std::string(text.substr(0, digits)));
  std::string unit;
  for (char c : text.substr(digits)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    shift = 30;
  } else if (unit == "T" || unit == "TB" || unit == "TIB") {
    shift = 40;
  } else {
    throw fail();
  }
  if (value > (std::numeric_limits<int64_t>::max() >> shift)) throw fail();
  return value << shift;
}

std::pair<int64_t, int64_t> parseSizeRange(std::string_view text) {
  const size_t colon = text.find(':');
  const int64_t lo = parseSizeText(text.substr(0, colon));
  const int64_t hi = colon == std::string_view::npos ? lo : parseSizeText(text.substr(colon + 1));
  if (lo <= 0 || hi < lo)
    throw std::invalid_argument("size range '" + std::string(text) + "' wants MIN:MAX with 0 < MIN <= MAX");
  return {lo, hi};
}

std::vector<int64_t> sizeGrid(int64_t minBytes, int64_t maxBytes, double factor) {
  if (!(factor > 1)) throw std::invalid_argument("the size factor must be greater than 1");
  if (minBytes <= 0 || maxBytes < minBytes) throw std::invalid_argument("size grid wants 0 < MIN <= MAX");
  std::vector<int64_t> sizes;
  for (double s = static_cast<double>(minBytes); s <= static_cast<double>(maxBytes) * (1 + 1e-9); s *= factor) {
    const auto bytes = static_cast<int64_t>(std::llround(s));
    if (sizes.empty() || bytes > sizes.back()) sizes.push_back(bytes);
  }
  return sizes;
}

std::vector<SizeRange> mergeSizeRanges(const std::vector<int64_t>& sizes, const std::vector<std::string>& winnerKeys) {
  if (sizes.size() != winnerKeys.size()) throw std::invalid_argument("mergeSizeRanges: one winner per size");
  if (!std::is_sorted(sizes.begin(), sizes.end()) ||
      std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end())
    throw std::invalid_argument("mergeSizeRanges: sizes must be strictly ascending");
  std::vector<SizeRange> ranges;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!ranges.empty() && winnerKeys[ranges.back().first] == winnerKeys[i]) {
      ranges.back().last = i;
      continue;
    }
    ranges.push_back(SizeRange{i, i, 0, UINT64_MAX});
  }
  for (size_t r = 0; r < ranges.size(); ++r) {
    ranges[r].minBytes = r == 0 ? 0 : static_cast<uint64_t>(sizes[ranges[r].first]);
    ranges[r].maxBytes = r + 1 == ranges.size() ? UINT64_MAX : static_cast<uint64_t>(sizes[ranges[r + 1].first]) - 1;
  }
  return ranges;
}

std::vector<int64_t> chunkLevelsFor(const std::vector<int64_t>& levels, int64_t messageBytes, int32_t nRanks,
                                    int64_t maxSlices) {
  if (levels.empty()) return {};
  const int64_t perChunk = std::max<int64_t>(1, messageBytes / std::max(nRanks, 1));
  const int64_t smallest = (perChunk + std::max<int64_t>(maxSlices, 1) - 1) / std::max<int64_t>(maxSlices, 1);
  std::vector<int64_t> kept;
  for (int64_t level : levels) {
    if (level < smallest) continue;
    kept.push_back(level);
    if (level >= perChunk) break;  // one micro-batch from here on: larger levels add nothing
  }
  if (kept.empty()) kept.push_back(levels.back());  // every level is too small: the largest
  return kept;
}

}  // namespace tuccl
