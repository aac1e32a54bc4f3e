#include "tune/nccl_tests_output.h"

#include <charconv>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <span>

namespace tuccl {
namespace {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

template <typename T>
bool parseNumber(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

/// What the fourth column of a half holds.
enum class CheckColumn : uint8_t { Unknown, WrongCount, MaxError };

bool allDigits(std::string_view text, std::string_view also = {}) {
  if (text.empty()) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)) && also.find(c) == std::string_view::npos) return false;
  return true;
}

/// The line without a launcher's prefix: `[1,0]<stdout>:` (mpirun --tag-output), `[0] ` (Intel
/// MPI -prepend-rank), `0: ` (srun --label).
std::string_view stripLauncherPrefix(std::string_view line) {
  const size_t first = line.find_first_not_of(" \t");
  if (first == std::string_view::npos) return line;
  std::string_view rest = line.substr(first);
  if (rest.starts_with("[")) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || !allDigits(rest.substr(1, close - 1), ",")) return line;
    rest.remove_prefix(close + 1);
    for (std::string_view stream : {"<stdout>", "<stderr>"})
      if (rest.starts_with(stream)) rest.remove_prefix(stream.size());
    if (rest.starts_with(":")) rest.remove_prefix(1);
    return rest;
  }
  const size_t colon = rest.find(':');
  if (colon != std::string_view::npos && allDigits(rest.substr(0, colon)) && colon + 1 < rest.size() &&
      (rest[colon + 1] == ' ' || rest[colon + 1] == '\t'))
    return rest.substr(colon + 1);
  return line;
}

/// `-S 1`'s timestamp, `%Y-%m-%d %H:%M:%S`, as the row's last two fields.
bool endsWithTimestamp(const std::vector<std::string_view>& f) {
  if (f.size() < 2) return false;
  const std::string_view date = f[f.size() - 2], time = f[f.size() - 1];
  return date.size() == 10 && date[4] == '-' && date[7] == '-' && allDigits(date, "-") && time.size() == 8 &&
         time[2] == ':' && time[5] == ':' && allDigits(time, ":");
}

bool parseHalf(std::span<const std::string_view> f, CheckColumn check, NcclTestsHalf& half) {
  if (!parseNumber(f[0], half.timeUs) || !parseNumber(f[1], half.algBwGBps) || !parseNumber(f[2], half.busBwGBps))
    return false;
  if (!std::isfinite(half.timeUs) || half.timeUs <= 0) return false;
  if (f[3] == "N/A") return true;
  double value = 0;
  if (!parseNumber(f[3], value) || !std::isfinite(value) || value < 0) return false;
  if (check == CheckColumn::Unknown) {
    // `%5.0le` (older `error`) is always in exponent form; `%6g` (`#wrong`) only from 1e6 on.
    const bool exponent = f[3].find_first_of("eE") != std::string_view::npos;
    check = exponent && value < 1e6 ? CheckColumn::MaxError : CheckColumn::WrongCount;
  }
  if (check == CheckColumn::MaxError)
    half.maxError = value;
  else
    half.wrong = static_cast<int64_t>(std::llround(std::min(value, 9e18)));
  return true;
}

/// The check column a column-header line names (`#wrong`, `error`, `res`), if it is one.
std::optional<CheckColumn> checkColumnOf(const std::vector<std::string_view>& f) {
  const bool header = std::find(f.begin(), f.end(), "busbw") != f.end() &&
                      (std::find(f.begin(), f.end(), "time") != f.end() ||
                       std::find(f.begin(), f.end(), "cputime") != f.end());
  if (!header) return std::nullopt;
  for (std::string_view field : f) {
    if (field == "#wrong" || field == "wrong") return CheckColumn::WrongCount;
    if (field == "error" || field == "res") return CheckColumn::MaxError;
  }
  return CheckColumn::Unknown;
}

/// The fields of a row: size count type [redop] [root] half half [timestamp], a half being
/// time algbw busbw check [i_min i_max i_p99 i_cv%].
bool parseRow(std::vector<std::string_view> f, CheckColumn check, NcclTestsRow& row) {
  if (endsWithTimestamp(f)) f.resize(f.size() - 2);
  if (f.size() < 3 || !parseNumber(f[1], row.count)) return false;
  const size_t rest = f.size() - 3;
  size_t width = 0;
  if (rest >= 8 && rest <= 10) width = 4;
  if (rest >= 16 && rest <= 18) width = 8;
  if (width == 0) return false;
  const size_t first = 3 + rest - 2 * width;
  row.type = std::string(f[2]);
  return parseHalf(std::span(f).subspan(first, 4), check, row.outOfPlace) &&
         parseHalf(std::span(f).subspan(first + width, 4), check, row.inPlace);
}

}  // namespace

NcclTestsOutput parseNcclTestsOutput(std::string_view text) {
  NcclTestsOutput out;
  CheckColumn check = CheckColumn::Unknown;
  uint32_t lineNo = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    const std::string_view line = stripLauncherPrefix(raw);
    std::vector<std::string_view> f = fields(line);
    std::erase(f, std::string_view("|"));
    if (f.empty()) continue;
    if (f[0].starts_with("#")) {
      if (f[0].size() > 1 && f[0] != "#wrong") f[0].remove_prefix(1);  // "#size": a header glued to '#'
      if (std::optional<CheckColumn> named = checkColumnOf(f)) check = *named;
      constexpr std::string_view kAvg = "Avg bus bandwidth";
      if (size_t at = line.find(kAvg); at != std::string_view::npos) {
        size_t colon = line.find(':', at);
        double value = 0;
        if (colon != std::string_view::npos) {
          std::vector<std::string_view> rest = fields(line.substr(colon + 1));
          if (!rest.empty() && parseNumber(rest[0], value)) out.avgBusBwGBps = value;
        }
      }
      continue;
    }
    uint64_t bytes = 0;
    if (!parseNumber(f[0], bytes)) continue;  // a log line (NCCL INFO, hostnames, ...)
    NcclTestsRow row;
    row.bytes = bytes;
    row.line = lineNo;
    if (!parseRow(std::move(f), check, row)) {
      std::string quoted(raw.substr(0, 200));
      for (char& c : quoted)
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = '?';
      out.error = "line " + std::to_string(lineNo) + ": malformed nccl-tests result row: '" + quoted +
                  (raw.size() > 200 ? "...'" : "'");
      return out;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

const NcclTestsRow* findNcclTestsRow(const NcclTestsOutput& output, uint64_t bytes) {
  for (const NcclTestsRow& row : output.rows)
    if (row.bytes == bytes) return &row;
  return output.rows.size() == 1 ? &output.rows.front() : nullptr;
}

std::vector<const NcclTestsRow*> findNcclTestsRows(const NcclTestsOutput& output, uint64_t bytes) {
  std::vector<const NcclTestsRow*> rows;
  for (const NcclTestsRow& row : output.rows)
    if (row.bytes == bytes) rows.push_back(&row);
  if (!rows.empty() || output.rows.empty()) return rows;
  for (const NcclTestsRow& row : output.rows)
    if (row.bytes != output.rows.front().bytes) return {};
  for (const NcclTestsRow& row : output.rows) rows.push_back(&row);
  return rows;
}

}  // namespace tuccl
