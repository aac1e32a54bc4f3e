#include "tune/size_grid.h"

#include "support/text_values.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tuccl {

namespace {

/// One bound of a size range: a byte size that fits in int64_t.
Expected<int64_t> parseBound(std::string_view text) {
  Expected<uint64_t> bytes = parseByteSize(text);
  if (!bytes) return bytes.status();
  if (*bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return makeError(ErrorCode::InvalidArgument, "size '" + std::string(text) + "' is too large");
  return static_cast<int64_t>(*bytes);
}

}  // namespace

Expected<std::pair<int64_t, int64_t>> parseSizeRange(std::string_view text) {
  const size_t colon = text.find(':');
  Expected<int64_t> lo = parseBound(text.substr(0, colon));
  if (!lo) return lo.status();
  Expected<int64_t> hi = colon == std::string_view::npos ? lo : parseBound(text.substr(colon + 1));
  if (!hi) return hi.status();
  if (*lo <= 0 || *hi < *lo) {
    return makeError(ErrorCode::InvalidArgument,
                     "size range '" + std::string(text) + "' wants MIN:MAX with 0 < MIN <= MAX");
  }
  return std::pair{*lo, *hi};
}

Expected<std::vector<int64_t>> sizeGrid(int64_t minBytes, int64_t maxBytes, double factor) {
  if (!std::isfinite(factor) || !(factor > 1)) {
    return makeError(ErrorCode::InvalidArgument,
                     "the size factor " + formatNumberForPeople(factor) + " is out of range: must be greater than 1");
  }
  if (minBytes <= 0 || maxBytes < minBytes)
    return makeError(ErrorCode::InvalidArgument, "a size grid wants 0 < MIN <= MAX");
  // Sizes the walk makes before rounding merges any: log(max/min) / log(factor) + 1.
  const double span = std::log(static_cast<double>(maxBytes) / static_cast<double>(minBytes));
  if (span / std::log(factor) + 1 > static_cast<double>(kMaxGridSizes)) {
    const double smallest = std::exp(span / static_cast<double>(kMaxGridSizes - 1));
    const double shown = std::ceil(smallest * 1e4) / 1e4;  // rounded up, so it is enough
    return makeError(ErrorCode::InvalidArgument,
                     "the size factor " + formatNumberForPeople(factor) + " makes about " +
                         formatNumberForPeople(std::floor(span / std::log(factor)) + 1) + " sizes from " +
                         formatBytesForPeople(static_cast<uint64_t>(minBytes)) + " to " +
                         formatBytesForPeople(static_cast<uint64_t>(maxBytes)) + "; at most " +
                         formatNumberForPeople(kMaxGridSizes) + " are allowed: use a factor of at least " +
                         formatNumberForPeople(shown));
  }
  std::vector<int64_t> sizes;
  for (double s = static_cast<double>(minBytes); s <= static_cast<double>(maxBytes) * (1 + 1e-9); s *= factor) {
    const auto bytes = static_cast<int64_t>(std::llround(s));
    if (sizes.empty() || bytes > sizes.back()) sizes.push_back(bytes);
  }
  return sizes;
}

Expected<std::vector<int64_t>> parseSizeGrid(std::string_view range, double factor) {
  Expected<std::pair<int64_t, int64_t>> bounds = parseSizeRange(range);
  if (!bounds) return bounds.status();
  return sizeGrid(bounds->first, bounds->second, factor);
}

std::vector<SizeRange> mergeSizeRanges(const std::vector<int64_t>& sizes, const std::vector<std::string>& winnerKeys) {
  if (sizes.size() != winnerKeys.size()) throw std::invalid_argument("the table ranges need one winner per grid size");
  if (!std::is_sorted(sizes.begin(), sizes.end()) ||
      std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end())
    throw std::invalid_argument("the sizes of a table must be strictly ascending, each given once");
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
