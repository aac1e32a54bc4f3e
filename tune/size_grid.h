// Message sizes for a tuning run and the byte ranges of the table it writes (issue 8 item 5).
//
// In:  a size range "1K:1G" and a growth factor (2: powers of two), or the winners found at
//      each grid size.
// Out: the grid of sizes; the byte ranges of the table, adjacent sizes with the same winner merged
//      into one range; the chunk sizes worth searching at one message size.
//
// Range semantics: grid size s_i stands for the calls from s_i up to s_{i+1} - 1; the first range
// starts at 0 and the last one has no upper bound, so every call size matches exactly one range.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace tuccl {

/// "MIN:MAX" or a single size, each a byte size as support/text_values.h reads them ("1K:1G",
/// "64K", "1.5M:4G"); InvalidArgument naming the text when a bound is not a size or the range is
/// not 0 < MIN <= MAX.
Expected<std::pair<int64_t, int64_t>> parseSizeRange(std::string_view text);
/// The most sizes a grid holds (each is a simulation or a measurement per candidate).
inline constexpr int64_t kMaxGridSizes = 1024;

/// min, min·factor, min·factor², ... rounded to whole bytes, up to max (max itself included when
/// the walk lands on it, within rounding); a size the rounding repeats appears once.
/// InvalidArgument unless factor > 1 (finite) and 0 < min <= max, and when the grid would hold more
/// than kMaxGridSizes sizes (the message names the smallest factor that fits).
Expected<std::vector<int64_t>> sizeGrid(int64_t minBytes, int64_t maxBytes, double factor = 2);
/// The grid of a size range written as text: parseSizeRange, then sizeGrid.
Expected<std::vector<int64_t>> parseSizeGrid(std::string_view range, double factor = 2);

/// One table range: the grid sizes [first, last] (indices into the grid) share one winner.
struct SizeRange {
  size_t first = 0;
  size_t last = 0;
  uint64_t minBytes = 0;           ///< inclusive
  uint64_t maxBytes = UINT64_MAX;  ///< inclusive; UINT64_MAX: no bound
};

/// Merges adjacent grid sizes whose winners (`winnerKeys[i]`, any text identifying the decision
/// the table would record) are equal. `sizes` ascending, same length as `winnerKeys`.
std::vector<SizeRange> mergeSizeRanges(const std::vector<int64_t>& sizes, const std::vector<std::string>& winnerKeys);

/// The chunk sizes (micro-batch bytes) worth searching for a message of `messageBytes` split into
/// `nRanks` chunks: the levels of `levels` from the smallest giving at most `maxSlices`
/// micro-batches per chunk up to the first that holds a whole chunk (larger ones behave the same:
/// one micro-batch). Never empty: when no level fits, the nearest one.
std::vector<int64_t> chunkLevelsFor(const std::vector<int64_t>& levels, int64_t messageBytes, int32_t nRanks,
                                    int64_t maxSlices);

}  // namespace tuccl
