// Reading and writing lookup tables (docs/tuning-table.md): TuCCL's JSON (schema version 1) and
// NCCL's example tuner CSV (NCCL_TUNER_CONFIG_FILE).
//
// In:  table text or a table file.
// Out: a LookupTable (table/lookup_table.h), or its text. Failures come back as a Status whose
//      diagnostic names the file and, for syntax errors, the line and column; schema errors name
//      the JSON path ("entries[3].protocol: unknown protocol ..."). Nothing here throws to the
//      caller, so the plugin can call it under its C ABI.
//
// File spellings: collectives lower case ("allreduce"); algorithms and protocols lower case when
// written ("ring", "ll128", "simple"), any case when read; "any" / -1 for no constraint.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/hash.h"  // fnv1a64, formatHash: the table hash
#include "support/status.h"
#include "table/lookup_table.h"

namespace tuccl {

/// Parses a JSON table; `file` names it in errors.
Expected<LookupTable> readTableJson(std::string_view text, std::string_view file);
/// Deterministic, pretty JSON of schema version 1 (comments, description, generator and metadata
/// included when set).
std::string writeTableJson(const LookupTable& table);

/// What a reader left out of a table, or read otherwise than its author may expect, each naming
/// the file, line and column. The first kMaxTableNotes of each list are kept; the counts are whole.
struct TableNotes {
  std::vector<Diagnostic> skipped;   ///< lines not used, and why (Severity::Error)
  std::vector<Diagnostic> warnings;  ///< lines used with a caveat, e.g. "64K" read as 64 (Severity::Warning)
  size_t skippedLines = 0;
  size_t warningCount = 0;
  bool empty() const { return skippedLines == 0 && warningCount == 0; }
};
inline constexpr size_t kMaxTableNotes = 20;

/// Parses NCCL's example tuner CSV (`collective,minbytes,maxbytes,algorithm,protocol,channels,
/// nNodes,nRanks[,numPipeOps[,regBuff]]`) as NCCL's example tuner reads it (docs/tuning-table.md):
/// inline `#` comments, trailing commas and fields after the tenth are accepted; numbers are
/// their leading digits ("64K" is 64, with a warning). A line that cannot be read is skipped and
/// listed in `notes` (when given); the call fails only when lines were skipped and none is left.
/// The table's order is FileOrder.
Expected<LookupTable> readTableCsv(std::string_view text, std::string_view file, TableNotes* notes = nullptr);

struct CsvTable {
  std::string text;                  ///< the lines, in match order
  std::vector<std::string> dropped;  ///< what the CSV could not hold (lossy only)
};
/// The table as CSV lines in match order. What CSV cannot hold (fallbacks, chunk size, topology,
/// environment, constants) fails the call (InvalidArgument listing it) unless `lossy`, which drops
/// it and lists it in `dropped`.
Expected<CsvTable> writeTableCsv(const LookupTable& table, bool lossy);

/// A table file as the plugin and the tools load it.
struct LoadedTable {
  std::string path;
  TableFormat format = TableFormat::Json;
  uint64_t hash = 0;  ///< FNV-1a 64 of the file bytes
  uint64_t fileBytes = 0;
  LookupTable table;
  TableNotes notes;  ///< CSV: the lines skipped and the warnings (print them once)
};
/// The bytes of a table file, refusing directories and files over kMaxTableFileBytes.
Expected<std::string> readTableBytes(const std::string& path);
/// Reads `path` (readTableBytes), detects the format from the content (JSON when the first
/// non-blank character is '{', otherwise CSV) and parses it.
Expected<LoadedTable> loadTableFile(const std::string& path);
/// As loadTableFile, for bytes already read.
Expected<LoadedTable> parseTableBytes(std::string_view bytes, const std::string& path);

/// `file:line:col: message` (the parts that are known): a table error on one line, without the
/// severity, for logs.
std::string formatTableError(const Status& status);
/// The same for one diagnostic.
std::string formatTableDiagnostic(const Diagnostic& diagnostic);
/// The notes as lines for a log, skipped lines first: `file:line:col: line skipped: why`, then
/// `file:line:col: warning: ...`, each list ending with "... and N more" when it was cut.
std::vector<std::string> formatTableNotes(const TableNotes& notes);

}  // namespace tuccl
