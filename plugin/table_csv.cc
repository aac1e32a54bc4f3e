// NCCL's example tuner CSV (NCCL_TUNER_CONFIG_FILE), read and written for drop-in compatibility:
//   collective,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
// `#` comment lines and blank lines are skipped; names are case-insensitive; -1 is "any" for
// nNodes, nRanks, numPipeOps, regBuff and "keep" for channels; byte ranges are inclusive; the
// first matching line wins. Extensions: -1 / "any" for algorithm or protocol, maxbytes -1 for
// "no upper bound", byte sizes with units ("64K").
#include <cctype>
#include <charconv>
#include <set>

#include "plugin/lookup_table.h"
#include "plugin/table_index.h"

namespace tuccl {
namespace {

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

struct CsvLineError {
  uint32_t column;
  std::string message;
};

std::optional<int64_t> parseInt(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

TableResult readTableCsv(std::string_view text, std::string_view file) {
  TableResult result;
  result.error.file = std::string(file);
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
    auto lineError = [&](uint32_t column, std::string message) {
      result.error.line = lineNumber;
      result.error.column = column;
      result.error.message = std::move(message);
      return result;
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
    auto collective = parseTableCollective(collText);
    if (!collective) {
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
    auto algorithm = parseAlgorithm(fields[3].first);
    if (!algorithm) {
      return lineError(fields[3].second,
                       "unknown algorithm '" + std::string(fields[3].first) +
                           "' (expected tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree "
                           "or pat)");
    }
    auto protocol = parseChoiceProtocol(fields[4].first);
    if (!protocol) {
      return lineError(fields[4].second, "unknown protocol '" + std::string(fields[4].first) +
                                             "' (expected ll, ll128 or simple)");
    }
    if (*algorithm != kAny || *protocol != kAny) entry.choices.push_back({*algorithm, *protocol});

    auto intField = [&](size_t index, const char* name, int64_t lo, int64_t hi,
                        int32_t& out) -> std::optional<TableResult> {
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
  result.table = std::move(table);
  return result;
}

std::optional<std::string> writeTableCsv(const LookupTable& table, bool lossy, std::string* error,
                                         std::vector<std::string>* dropped) {
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
    Choice choice = entry.choices.empty() ? Choice{} : entry.choices[0];
    auto field = [](int8_t value, std::string_view text) {
      return value == kAny ? std::string("-1") : [&] {
        std::string lower(text);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return lower;
      }();
    };
    out += std::string(tableCollectiveName(entry.collective)) + "," + std::to_string(entry.minBytes) + "," +
           (entry.maxBytes == UINT64_MAX ? std::string("-1") : std::to_string(entry.maxBytes)) + "," +
           field(choice.algorithm, algorithmName(choice.algorithm)) + "," +
           field(choice.protocol, choiceProtocolName(choice.protocol)) + "," +
           std::to_string(entry.nChannels > 0 ? entry.nChannels : -1) + "," + std::to_string(entry.nNodes) +
           "," + std::to_string(entry.nRanks) + "," + std::to_string(entry.numPipeOps) + "," +
           std::to_string(entry.regBuff) + "\n";
  }
  if (!losses.empty() && !lossy) {
    if (error) {
      *error = "the CSV format cannot hold:";
      for (const std::string& loss : losses) *error += "\n  " + loss;
      *error += "\n(use --lossy to drop them)";
    }
    return std::nullopt;
  }
  if (dropped) *dropped = std::move(losses);
  return out;
}

}  // namespace tuccl
