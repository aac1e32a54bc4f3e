// NCCL's example tuner CSV (NCCL_TUNER_CONFIG_FILE), read and written for drop-in compatibility:
//   collective,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
// Read as NCCL's example tuner reads it, so one file means the same to both: `#` starts a comment
// (a whole line or the rest of one); fields are split at commas with empty fields dropped (strtok:
// the fields after an empty one move left, which is warned about); fields after the tenth are
// ignored; numbers are their leading decimal digits (strtoull / atoi), so "64K" is 64 (warned
// about, naming the line). Names are case-insensitive; -1 is "any" for nNodes, nRanks, numPipeOps
// and regBuff and "keep" for channels; byte ranges are inclusive; the first matching line wins.
// Extensions: -1 / "any" for algorithm or protocol; maxbytes -1 (strtoull's 2^64-1) is "no upper
// bound". A line that cannot be read (an unknown name, a value out of range, too few fields) is
// skipped and listed in the notes instead of failing the table; the table fails only when no line
// is left.
#include <set>

#include "support/text_values.h"
#include "table/table_index.h"
#include "table/table_io.h"

namespace tuccl {
namespace {

constexpr std::string_view kBlanks = " \t\r\v\f";
constexpr size_t kMaxCsvFields = 10;
constexpr const char* kCsvFieldList =
    "collective,minbytes,maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]";

std::string_view trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kBlanks) - begin + 1);
}

struct CsvField {
  std::string_view text;  ///< trimmed
  uint32_t column = 1;    ///< 1-based, of the first non-blank character
};

/// One data line split as NCCL's example tuner splits it, and what that reading moved or dropped.
struct CsvSplit {
  std::vector<CsvField> fields;          ///< at most kMaxCsvFields
  std::vector<uint32_t> droppedColumns;  ///< empty fields between others (the next fields moved left)
  uint32_t ignoredColumn = 0;            ///< where the fields after the tenth begin; 0: none
};

/// `line` without its comment (from the first '#'), split at commas. Empty and blank fields at the
/// end (a trailing comma) are ignored; an empty field between others is dropped as strtok drops
/// it; a blank one stays (and fails as a value), as in NCCL's example.
CsvSplit splitCsvLine(std::string_view line) {
  line = line.substr(0, line.find('#'));
  CsvSplit split;
  std::vector<std::pair<CsvField, bool>> pieces;  // (field, empty)
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const std::string_view raw = line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    const size_t lead = raw.find_first_not_of(kBlanks);
    pieces.push_back({CsvField{trim(raw), static_cast<uint32_t>(start + (lead == raw.npos ? 0 : lead) + 1)},
                      raw.empty()});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  while (!pieces.empty() && pieces.back().first.text.empty()) pieces.pop_back();
  for (const auto& [field, empty] : pieces) {
    if (empty) {
      split.droppedColumns.push_back(field.column);
    } else if (split.fields.size() == kMaxCsvFields) {
      if (split.ignoredColumn == 0) split.ignoredColumn = field.column;
    } else {
      split.fields.push_back(field);
    }
  }
  return split;
}

/// A number as strtoull / atoi read it: an optional sign, then decimal digits; what follows is
/// `rest`. Nullopt when there is no digit.
struct LeadingNumber {
  bool negative = false;
  uint64_t magnitude = 0;
  bool overflow = false;  ///< more than 2^64-1
  std::string_view rest;  ///< trimmed
};

std::optional<LeadingNumber> readLeadingNumber(std::string_view text) {
  LeadingNumber number;
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) number.negative = text[i++] == '-';
  const size_t digits = i;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (number.magnitude > (UINT64_MAX - digit) / 10) number.overflow = true;
    number.magnitude = number.magnitude * 10 + digit;
  }
  if (i == digits) return std::nullopt;
  number.rest = trim(text.substr(i));
  return number;
}

/// Reads one data line into an entry; a failure is the diagnostic of the line's skip, and
/// `warnings` receives what was read otherwise than a reader of TuCCL's JSON might expect.
class CsvLineReader {
 public:
  CsvLineReader(std::string_view file, uint32_t line, std::vector<Diagnostic>& warnings)
      : file_(file), line_(line), warnings_(warnings) {}

  std::optional<Diagnostic> read(const CsvSplit& split, TableEntry& entry) {
    for (uint32_t column : split.droppedColumns) {
      warn(column,
           "empty field dropped: the fields after it move one place left, as NCCL's example tuner "
           "reads them; remove the extra comma");
    }
    if (split.ignoredColumn != 0) {
      warn(split.ignoredColumn, "fields after the tenth (regBuff) are ignored, as NCCL's example tuner ignores them");
    }
    const auto& f = split.fields;
    if (f.size() < 8) {
      return error(1, std::string("expected 8 to 10 comma-separated fields (") + kCsvFieldList + "), got " +
                       std::to_string(f.size()));
    }
    entry.origin = line_;
    auto collective = parseCollective(f[0].text);
    if (!collective || !isTunerCollective(*collective)) {
      return error(f[0].column, "unknown collective '" + std::string(f[0].text) +
                                    "' (expected broadcast, reduce, allgather, reducescatter or allreduce)");
    }
    entry.collective = *collective;
    if (auto failed = readBytes(f[1], "minbytes", false, entry.minBytes)) return failed;
    if (auto failed = readBytes(f[2], "maxbytes", true, entry.maxBytes)) return failed;
    if (entry.minBytes > entry.maxBytes) {
      return error(f[1].column, "minbytes (" + std::to_string(entry.minBytes) + ") is larger than maxbytes (" +
                                    std::to_string(entry.maxBytes) + ")");
    }
    std::optional<NcclAlgorithm> algorithm;
    if (!readChoice(f[3].text, parseNcclAlgorithm, algorithm)) {
      return error(f[3].column, "unknown algorithm '" + std::string(f[3].text) +
                                    "' (expected tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree or pat)");
    }
    std::optional<Protocol> protocol;
    if (!readChoice(f[4].text, parseProtocol, protocol)) {
      return error(f[4].column,
                   "unknown protocol '" + std::string(f[4].text) + "' (expected ll, ll128 or simple)");
    }
    if (algorithm || protocol) entry.choices.push_back({algorithm, protocol});
    int32_t channels = -1;
    if (auto failed = readInt(f[5], "channels", 0, kMaxChannels, channels)) return failed;
    entry.nChannels = channels > 0 ? channels : 0;
    if (auto failed = readInt(f[6], "nNodes", 1, INT32_MAX, entry.nNodes)) return failed;
    if (auto failed = readInt(f[7], "nRanks", 1, INT32_MAX, entry.nRanks)) return failed;
    if (entry.nNodes > 0 && entry.nRanks > 0 && entry.nRanks < entry.nNodes) {
      // No communicator has fewer ranks than nodes: the line matches nothing (as the JSON reader
      // says of such an entry); often an empty field moved the next ones left.
      return error(f[7].column, "nRanks " + std::to_string(entry.nRanks) + " is smaller than nNodes " +
                                    std::to_string(entry.nNodes) + ": no communicator matches");
    }
    if (f.size() > 8) {
      if (auto failed = readInt(f[8], "numPipeOps", 0, INT32_MAX, entry.numPipeOps)) return failed;
    }
    if (f.size() > 9) {
      if (auto failed = readInt(f[9], "regBuff", 0, 1, entry.regBuff)) return failed;
    }
    return std::nullopt;
  }

  Diagnostic error(uint32_t column, std::string message) const {
    return Diagnostic{Severity::Error, std::string(file_), SourceLoc{line_, column}, std::move(message)};
  }

 private:
  void warn(uint32_t column, std::string message) {
    warnings_.push_back(Diagnostic{Severity::Warning, std::string(file_), SourceLoc{line_, column}, std::move(message)});
  }

  /// "any" / "-1" (no constraint) or a name `parse` knows; nullopt in `value` for "any".
  template <typename T, typename Parse>
  static bool readChoice(std::string_view text, Parse parse, std::optional<T>& value) {
    value = parse(text);
    return value.has_value() || text == "-1" || equalsIgnoreCase(text, "any");
  }

  /// Text after the number, ignored as strtoull / atoi ignore it, is said: a unit most of all,
  /// since "64K" is 64 bytes to NCCL's example tuner.
  void warnIgnoredRest(const CsvField& field, const char* name, const LeadingNumber& number) {
    if (number.rest.empty()) return;
    const std::string read = (number.negative ? "-" : "") + std::to_string(number.magnitude);
    std::string message = std::string(name) + " '" + std::string(field.text) + "' is read as " + read +
                          ", as NCCL's example tuner reads it: the text after the number is ignored";
    Expected<uint64_t> meant = parseByteSize(field.text);
    if (!number.negative && meant && *meant != number.magnitude) {
      message += "; write " + std::to_string(*meant) + " for " + formatBytesForPeople(*meant);
    }
    warn(field.column, std::move(message));
  }

  std::optional<Diagnostic> readBytes(const CsvField& field, const char* name, bool minusOneIsUnbounded,
                                      uint64_t& out) {
    std::optional<LeadingNumber> number = readLeadingNumber(field.text);
    const bool unbounded = minusOneIsUnbounded && number && number->negative && number->magnitude == 1;
    if (!number || (number->negative && !unbounded) || number->overflow) {
      return error(field.column, std::string(name) + " '" + std::string(field.text) + "' is not a byte count" +
                                     (minusOneIsUnbounded ? " or -1 (no upper bound)" : "") +
                                     (number && number->overflow ? ": more than 2^64-1" : ""));
    }
    warnIgnoredRest(field, name, *number);
    out = unbounded ? UINT64_MAX : number->magnitude;
    return std::nullopt;
  }

  std::optional<Diagnostic> readInt(const CsvField& field, const char* name, int64_t lo, int64_t hi,
                                    int32_t& out) {
    std::optional<LeadingNumber> number = readLeadingNumber(field.text);
    const bool wildcard = number && number->negative && number->magnitude == 1;
    if (!number || number->overflow ||
        (!wildcard && (number->negative || number->magnitude < static_cast<uint64_t>(lo) ||
                       number->magnitude > static_cast<uint64_t>(hi)))) {
      return error(field.column, std::string(name) + " '" + std::string(field.text) +
                                     "' is not -1 or an integer in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
    }
    warnIgnoredRest(field, name, *number);
    out = wildcard ? -1 : static_cast<int32_t>(number->magnitude);
    return std::nullopt;
  }

  std::string_view file_;
  uint32_t line_;
  std::vector<Diagnostic>& warnings_;
};

/// Keeps the first kMaxTableNotes of a list of notes, counting them all.
void keepNote(std::vector<Diagnostic>& kept, size_t& count, Diagnostic note) {
  ++count;
  if (kept.size() < kMaxTableNotes) kept.push_back(std::move(note));
}

/// A choice field as NCCL's example tuner spells it: lower case, -1 for any.
template <typename T, typename Name>
std::string choiceField(const std::optional<T>& value, Name name) {
  return value ? toLowerCase(name(*value)) : std::string("-1");
}

}  // namespace

Expected<LookupTable> readTableCsv(std::string_view text, std::string_view file, TableNotes* notesOut) {
  LookupTable table;
  table.matchOrder = MatchOrder::FileOrder;
  TableNotes notes;
  std::set<int32_t> pipeOpsValues;
  uint32_t lineNumber = 0;
  for (size_t lineStart = 0; lineStart < text.size();) {
    size_t lineEnd = text.find('\n', lineStart);
    if (lineEnd == std::string_view::npos) lineEnd = text.size();
    const std::string_view line = text.substr(lineStart, lineEnd - lineStart);
    ++lineNumber;
    lineStart = lineEnd + 1;
    const CsvSplit split = splitCsvLine(line);
    if (split.fields.empty() && split.droppedColumns.empty()) continue;  // blank or a comment
    std::vector<Diagnostic> warnings;
    CsvLineReader reader(file, lineNumber, warnings);
    TableEntry entry;
    std::optional<Diagnostic> failed = reader.read(split, entry);
    if (!failed && entry.numPipeOps >= 0 && !pipeOpsValues.contains(entry.numPipeOps) &&
        pipeOpsValues.size() == static_cast<size_t>(kMaxPipeOpsValues)) {
      failed = reader.error(split.fields[8].column, "more than " + std::to_string(kMaxPipeOpsValues) +
                                                        " distinct numPipeOps values in one table");
    }
    if (!failed && table.entries.size() >= kMaxTableEntries) {
      failed = reader.error(1, "more than " + std::to_string(kMaxTableEntries) + " entries");
    }
    // A skipped line's warnings stay: they may be why it failed ("64K" read as 64 is below minbytes).
    for (Diagnostic& warning : warnings) keepNote(notes.warnings, notes.warningCount, std::move(warning));
    if (failed) {
      keepNote(notes.skipped, notes.skippedLines, std::move(*failed));
      continue;
    }
    if (entry.numPipeOps >= 0) pipeOpsValues.insert(entry.numPipeOps);
    table.entries.push_back(std::move(entry));
  }
  if (table.entries.empty() && notes.skippedLines > 0) {
    Diagnostic first = notes.skipped.front();
    first.message += " (no line of the table is valid: " + std::to_string(notes.skippedLines) + " skipped" +
                     (notes.skippedLines > 1 ? ", this is the first)" : ")");
    return makeError(ErrorCode::InvalidInput, first.file, first.loc, std::move(first.message));
  }
  if (notesOut != nullptr) *notesOut = std::move(notes);
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
    if (!entry.groups.empty()) lose(name + ": " + std::to_string(entry.groups.size()) + " alternative group(s)");
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
