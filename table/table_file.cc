// Table files: reading the bytes within the size limit, detecting the format, hashing.
#include <filesystem>
#include <fstream>

#include "support/source_text.h"
#include "table/table_io.h"

namespace tuccl {

std::string formatTableError(const Status& status) { return formatTableDiagnostic(status.diagnostic()); }

std::string formatTableDiagnostic(const Diagnostic& d) {
  std::string out = d.file;
  if (d.loc.known()) {
    out += ":" + std::to_string(d.loc.line);
    if (d.loc.column != 0) out += ":" + std::to_string(d.loc.column);
  }
  if (!out.empty()) out += ": ";
  return out + d.message;
}

std::vector<std::string> formatTableNotes(const TableNotes& notes) {
  std::vector<std::string> lines;
  auto add = [&lines](const std::vector<Diagnostic>& kept, size_t count, const char* label, const char* more) {
    for (const Diagnostic& note : kept) {
      Diagnostic labelled = note;
      labelled.message = label + labelled.message;
      lines.push_back(formatTableDiagnostic(labelled));
    }
    if (count > kept.size()) lines.push_back("... and " + std::to_string(count - kept.size()) + more);
  };
  add(notes.skipped, notes.skippedLines, "line skipped: ", " more lines skipped");
  add(notes.warnings, notes.warningCount, "warning: ", " more warnings");
  return lines;
}

Expected<LoadedTable> parseTableBytes(std::string_view bytes, const std::string& path) {
  // A byte order mark (spreadsheets on Windows write one) is not part of the first field; the
  // hash stays that of the file's bytes.
  const std::string_view text = withoutByteOrderMark(bytes);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return makeError(ErrorCode::InvalidInput, path, {}, "the table file is empty");
  const TableFormat format = text[first] == '{' ? TableFormat::Json : TableFormat::Csv;
  LoadedTable loaded;
  Expected<LookupTable> parsed =
      format == TableFormat::Json ? readTableJson(text, path) : readTableCsv(text, path, &loaded.notes);
  if (!parsed) return parsed.status();
  loaded.path = path;
  loaded.format = format;
  loaded.hash = fnv1a64(bytes);
  loaded.fileBytes = bytes.size();
  loaded.table = std::move(parsed).value();
  return loaded;
}

Expected<std::string> readTableBytes(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return makeError(ErrorCode::InvalidArgument, path, {}, "the table path is a directory");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return makeError(ErrorCode::NotFound, path, {}, "cannot open the table file");
  const std::streamoff size = in.tellg();
  if (size < 0) return makeError(ErrorCode::IoError, path, {}, "cannot read the table file");
  if (static_cast<uint64_t>(size) > kMaxTableFileBytes) {
    return makeError(ErrorCode::InvalidInput, path, {},
                     "the table file has " + std::to_string(size) + " bytes, more than the limit of " +
                         std::to_string(kMaxTableFileBytes) + " (64 MiB)");
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size))
    return makeError(ErrorCode::IoError, path, {}, "cannot read the table file");
  return bytes;
}

Expected<LoadedTable> loadTableFile(const std::string& path) {
  Expected<std::string> bytes = readTableBytes(path);
  if (!bytes) return bytes.status();
  return parseTableBytes(*bytes, path);
}

}  // namespace tuccl
