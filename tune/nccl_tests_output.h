// Reading the output of nccl-tests (all_reduce_perf, all_gather_perf, ...; formats.md).
//
// In:  the text a benchmark printed (stdout and stderr together).
// Out: its result rows — size, count, type, and for the out-of-place and in-place halves the
//      time (µs), algbw and busbw (GB/s) and #wrong — and the footer's average bus bandwidth;
//      or an error naming the line that looks like a result row but is not one.
//
// Every generation of the format parses (ecosystem-formats.md (c)): a row is size, count, type,
// zero to two of redop / root (by test and generation), then the two halves, each time, algbw,
// busbw and the check column — 2017's `res` and 2019-2022's `error` (a maximum deviation, e.g.
// `0e+00`), or `#wrong` (a count) since 2022-08, `N/A` without checking — followed by `-I 1`'s four
// per-iteration columns when present, and `-S 1`'s timestamp at the end of the row. The column
// header, when seen, says which check column it is; without one, exponent form below 1e6 is a
// deviation. `|` separators are ignored. Launcher prefixes — mpirun --tag-output's
// `[1,0]<stdout>:`, Intel MPI's `[0] `, srun --label's `0: ` — are taken off every line first.
// Lines that start with '#' and lines whose first field is not a number (NCCL INFO / WARN logs)
// are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl {

struct NcclTestsHalf {
  double timeUs = 0;
  double algBwGBps = 0;
  double busBwGBps = 0;
  std::optional<int64_t> wrong;    ///< `#wrong`; empty for "N/A" (run without -c) and older formats
  std::optional<double> maxError;  ///< older formats' `error` / `res`: the largest deviation
};

struct NcclTestsRow {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string type;
  NcclTestsHalf outOfPlace, inPlace;
  uint32_t line = 0;  ///< 1-based line in the output
};

struct NcclTestsOutput {
  std::vector<NcclTestsRow> rows;
  std::optional<double> avgBusBwGBps;  ///< "# Avg bus bandwidth : X"
  std::string error;                   ///< set when a row-like line is malformed
  bool ok() const { return error.empty(); }
};

NcclTestsOutput parseNcclTestsOutput(std::string_view text);

/// The row for `bytes`: the exact size when present, else the only row (nccl-tests rounds sizes
/// down to a multiple of ranks × type size); nullptr otherwise.
const NcclTestsRow* findNcclTestsRow(const NcclTestsOutput& output, uint64_t bytes);
/// Every row for `bytes`, in output order (one per cycle of nccl-tests' -N): the rows of the exact
/// size when present, else every row when they are all of one size; empty otherwise.
std::vector<const NcclTestsRow*> findNcclTestsRows(const NcclTestsOutput& output, uint64_t bytes);

}  // namespace tuccl
