#include "tune/nccl_tests_output.h"

#include <charconv>
#include <cmath>
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

bool parseHalf(std::span<const std::string_view> f, NcclTestsHalf& half) {
  if (!parseNumber(f[0], half.timeUs) || !parseNumber(f[1], half.algBwGBps) || !parseNumber(f[2], half.busBwGBps))
    return false;
  if (!std::isfinite(half.timeUs) || half.timeUs <= 0) return false;
  int64_t wrong = 0;
  if (f[3] == "N/A")
    half.wrong.reset();
  else if (parseNumber(f[3], wrong))
    half.wrong = wrong;
  else
    return false;
  return true;
}

}  // namespace

NcclTestsOutput parseNcclTestsOutput(std::string_view text) {
  NcclTestsOutput out;
  uint32_t lineNo = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    std::vector<std::string_view> f = fields(line);
    if (f.empty()) {
      if (end == text.size()) break;
      continue;
    }
    if (f[0].starts_with("#")) {
      constexpr std::string_view kAvg = "Avg bus bandwidth";
      if (size_t at = line.find(kAvg); at != std::string_view::npos) {
        size_t colon = line.find(':', at);
        double value = 0;
        if (colon != std::string_view::npos) {
          std::vector<std::string_view> rest = fields(line.substr(colon + 1));
          if (!rest.empty() && parseNumber(rest[0], value)) out.avgBusBwGBps = value;
        }
      }
      if (end == text.size()) break;
      continue;
    }
    uint64_t bytes = 0;
    if (!parseNumber(f[0], bytes)) {  // a log line (NCCL INFO, hostnames, ...)
      if (end == text.size()) break;
      continue;
    }
    // size count type [redop] [root] time algbw busbw #wrong time algbw busbw #wrong
    NcclTestsRow row;
    row.bytes = bytes;
    row.line = lineNo;
    if (f.size() < 11 || !parseNumber(f[1], row.count) ||
        !parseHalf(std::span(f).subspan(f.size() - 8, 4), row.outOfPlace) ||
        !parseHalf(std::span(f).subspan(f.size() - 4, 4), row.inPlace)) {
      out.error = "line " + std::to_string(lineNo) + ": malformed nccl-tests result row: '" + std::string(line) + "'";
      return out;
    }
    row.type = std::string(f[2]);
    out.rows.push_back(std::move(row));
    if (end == text.size()) break;
  }
  return out;
}

const NcclTestsRow* findNcclTestsRow(const NcclTestsOutput& output, uint64_t bytes) {
  for (const NcclTestsRow& row : output.rows)
    if (row.bytes == bytes) return &row;
  return output.rows.size() == 1 ? &output.rows.front() : nullptr;
}

}  // namespace tuccl
