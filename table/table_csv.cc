// NCCL's example tuner CSV (NCCL_TUNER_CONFIG_FILE), read and written for drop-in compatibility:
//   collective,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
// `#` comment lines and blank lines are skipped; names are case-insensitive; -1 is "any" for
// nNodes, nRanks, numPipeOps, regBuff and "keep" for channels; byte ranges are inclusive; the
// first matching line wins. Extensions: -1 / "any" for algorithm or protocol, maxbytes -1 for
// "no upper bound", byte sizes with units ("64K").
#include <cctype>
#include <charconv>
#include <set>

#include "support/text_values.h"
#include "table/table_index.h"
#include "table/table_io.h"

namespace tuccl {
namespace {

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// "any" / "-1" (no constraint) or a name `parse` knows; nullopt in `value` for "any". False when
/// the text is neither.
template <typename T, typename Parse>
bool parseChoiceField(std::string_view text, Parse parse, std::optional<T>& value) {
  value = parse(text);
  return value.has_value() || text == "-1" || equalsIgnoreCase(text, "any");
}

/// A choice field as NCCL's example tuner spells it: lower case, -1 for any.
template <typename T, typename Name>
std::string choiceField(const std::optional<T>& value, Name name) {
  return value ? toLowerCase(name(*value)) : std::string("-1");
}

}  // namespace

Expected<LookupTable> readTableCsv(std::string_view text, std::string_view file) {
  LookupTable table;
  table.matchOrder = MatchOrder::FileOrder;
  std::set<int32_t> pipeOpsValues;
  uint32_t lineNumber = 0;
  size_t lineStart = 0;
  while (lineStart < text.size()) {
    size_t lineEnd = text.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) lineEnd = text.size();
    std::string_view line = text.substr(lineStart, lineEnd - lineStart);
    ++lineNumber;
    lineStart = lineEnd + 1;
    std::string_view content = trim(line);
    if (content.empty() || content[0] == '#') continue;

    // Split into fields, remembering each field's column for messages.
    std::vector<std::pair<std::string_view, uint32_t>> fields;
    size_t fieldStart = 0;
    while (true) {
      size_t comma = line.find(',', fieldStart);
      std::string_view raw = line.substr(
          fieldStart, comma == std::string_view::npos ? std::string_view::npos : comma - fieldStart);
      size_t lead = raw.find_first_not_of(" \t\r");
      fields.emplace_back(
          trim(raw), static_cast<uint32_t>(fieldStart + (lead == std::string_view::npos ? 0 : lead) + 1));
      if (comma == std::string_view::npos) break;
      fieldStart = comma + 1;
    }
    auto lineError = [&](uint32_t column, std::string message) -> Status {
      return makeError(ErrorCode::InvalidInput, std::string(file), SourceLoc{lineNumber, column},
                       std::move(message));
    };
    if (fields.size() < 8 || fields.size() > 10) {
      return lineError(
          1,
          "expected 8 to 10 comma-separated fields (collective,minbytes,maxbytes,algorithm,protocol,"
          "channels,nNodes,nRanks[,numPipeOps[,regBuff]]), got " +
              std::to_string(fields.size()));
    }
    TableEntry entry;
    entry.origin = lineNumber;
    auto [collText, collColumn] = fields[0];
    auto collective = parseCollective(collText);
    if (!collective || !isTunerCollective(*collective)) {
      return lineError(collColumn,
                       "unknown collective '" + std::string(collText) +
                           "' (expected broadcast, reduce, allgather, reducescatter or allreduce)");
    }
    entry.collective = *collective;
    auto minBytes = parseByteSize(fields[1].first);
    if (!minBytes)
      return lineError(fields[1].second,
                       "minbytes '" + std::string(fields[1].first) + "' is not a byte count");
    entry.minBytes = *minBytes;
    if (fields[2].first == "-1") {
      entry.maxBytes = UINT64_MAX;
    } else {
      auto maxBytes = parseByteSize(fields[2].first);
      if (!maxBytes) {
        return lineError(fields[2].second,
                         "maxbytes '" + std::string(fields[2].first) + "' is not a byte count");
      }
      entry.maxBytes = *maxBytes;
    }
    if (entry.minBytes > entry.maxBytes)
      return lineError(fields[1].second, "minbytes is larger than maxbytes");
    std::optional<NcclAlgorithm> algorithm;
    if (!parseChoiceField(fields[3].first, parseNcclAlgorithm, algorithm)) {
      return lineError(fields[3].second,
                       "unknown algorithm '" + std::string(fields[3].first) +
                           "' (expected tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree "
                           "or pat)");
    }
    std::optional<Protocol> protocol;
    if (!parseChoiceField(fields[4].first, parseProtocol, protocol)) {
      return lineError(fields[4].second, "unknown protocol '" + std::string(fields[4].first) +
                                             "' (expected ll, ll128 or simple)");
    }
    if (algorithm || protocol) entry.choices.push_back({algorithm, protocol});

    auto intField = [&](size_t index, const char* name, int64_t lo, int64_t hi,
                        int32_t& out) -> std::optional<Status> {
      auto value = parseInt(fields[index].first);
      if (!value || (*value != -1 && (*value < lo || *value > hi))) {
        return lineError(fields[index].second, std::string(name) + " '" + std::string(fields[index].first) +
                                                   "' is not -1 or an integer in [" + std::to_string(lo) +
                                                   ", " + std::to_string(hi) + "]");
      }
      out = static_cast<int32_t>(*value);
      return std::nullopt;
    };
    int32_t channels = -1;
    if (auto failed = intField(5, "channels", 0, kMaxChannels, channels)) return *failed;
    entry.nChannels = channels > 0 ? channels : 0;
    if (auto failed = intField(6, "nNodes", 1, INT32_MAX, entry.nNodes)) return *failed;
    if (auto failed = intField(7, "nRanks", 1, INT32_MAX, entry.nRanks)) return *failed;
    if (fields.size() > 8) {
      if (auto failed = intField(8, "numPipeOps", 0, INT32_MAX, entry.numPipeOps)) return *failed;
      if (entry.numPipeOps >= 0) pipeOpsValues.insert(entry.numPipeOps);
      if (pipeOpsValues.size() > static_cast<size_t>(kMaxPipeOpsValues)) {
        return lineError(fields[8].second, "more than " + std::to_string(kMaxPipeOpsValues) +
                                               " distinct numPipeOps values in one table");
      }
    }
    if (fields.size() > 9) {
      if (auto failed = intField(9, "regBuff", 0, 1, entry.regBuff)) return *failed;
    }
    if (table.entries.size() >= kMaxTableEntries) {
      return lineError(1, "more than " + std::to_string(kMaxTableEntries) + " entries");
    }
    table.entries.push_back(std::move(entry));
  }
  return table;
}

Expected<CsvTable> writeTableCsv(const LookupTable& table, bool lossy) {
  std::vector<std::string> losses;
  auto lose = [&](std::string what) { losses.push_back(std::move(what)); };
  if (!table.environment.empty()) lose("the \"environment\" recommendations");
  if (!table.constants.empty()) lose("the \"constants\" overrides");
  std::string out =
      "# TuCCL tuning table in NCCL's example tuner format (NCCL_TUNER_CONFIG_FILE); first match wins.\n"
      "# collective,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n";
  for (uint32_t index : entriesInMatchOrder(table)) {
    const TableEntry& entry = table.entries[index];
    std::string name = table.matchOrder == MatchOrder::FileOrder ? "line " : "entries[";
    name += std::to_string(entry.origin) + (table.matchOrder == MatchOrder::FileOrder ? "" : "]");
    if (!entry.topology.empty()) {
      lose(name + ": topology \"" + entry.topology + "\" (entry dropped)");
      continue;
    }
    if (entry.choices.size() > 1)
      lose(name + ": " + std::to_string(entry.choices.size() - 1) + " fallback(s)");
    if (entry.chunkSize > 0) lose(name + ": chunkSize");
    if (!entry.tucclAlgorithm.empty()) lose(name + ": tucclAlgorithm");
    const Choice choice = entry.choices.empty() ? Choice{} : entry.choices[0];
    out += toLowerCase(collectiveName(entry.collective)) + "," + std::to_string(entry.minBytes) + "," +
           (entry.maxBytes == UINT64_MAX ? std::string("-1") : std::to_string(entry.maxBytes)) + "," +
           choiceField(choice.algorithm, ncclAlgorithmName) + "," +
           choiceField(choice.protocol, protocolName) + "," +
           std::to_string(entry.nChannels > 0 ? entry.nChannels : -1) + "," + std::to_string(entry.nNodes) +
           "," + std::to_string(entry.nRanks) + "," + std::to_string(entry.numPipeOps) + "," +
           std::to_string(entry.regBuff) + "\n";
  }
  if (!losses.empty() && !lossy) {
    std::string message = "the CSV format cannot hold:";
    for (const std::string& loss : losses) message += "\n  " + loss;
    message += "\n(use --lossy to drop them)";
    return makeError(ErrorCode::InvalidArgument, std::move(message));
  }
  return CsvTable{std::move(out), lossy ? std::move(losses) : std::vector<std::string>{}};
}

}  // namespace tuccl
