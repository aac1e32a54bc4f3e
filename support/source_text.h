// Source locations and user-facing diagnostics, shared by every reader of user files
// (ResCCLang programs, MSCCL XML, topology files, plans, tables).
//
//   algo.txt:12:18: error: transfer() chunk id 40 out of range [0, 32)
//      12 |     transfer(src, dst, step, 40, recv)
//         |                              ^
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl {

/// A position in a source file; line and column count from 1, 0 means "unknown".
struct SourceLoc {
  uint32_t line = 0;
  uint32_t column = 0;

  bool known() const { return line != 0; }
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

/// The text of a user file with a line index, so diagnostics can quote the offending line.
class SourceText {
 public:
  SourceText() = default;
  SourceText(std::string name, std::string text);

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  /// The 1-based line `line` without its line break; empty when out of range.
  std::string_view line(uint32_t line) const;
  uint32_t lineCount() const { return static_cast<uint32_t>(lineStarts_.size()); }
  /// The location of byte `offset` of the text.
  SourceLoc locationOf(size_t offset) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<size_t> lineStarts_;
};

enum class Severity { Error, Warning, Note };

/// One message about a place in a user file.
struct Diagnostic {
  Severity severity = Severity::Error;
  std::string file;
  SourceLoc loc;
  std::string message;
};

/// A source line as a diagnostic quotes it: at most about `width` bytes around the column ("..."
/// marking what was cut), control characters and bytes that are not UTF-8 written as \xNN; and
/// the blanks (tabs kept) that put a caret under the column.
struct SourceExcerpt {
  std::string text;
  std::string caret;  ///< what goes before the '^'
};
SourceExcerpt excerptLine(std::string_view line, uint32_t column, size_t width = 120);

/// `file:line:col: error: message`, then the source line and a caret under the column when the
/// source is known (pass nullptr when it is not).
std::string formatDiagnostic(const Diagnostic& diagnostic, const SourceText* source);

/// The one error type of user-facing failures: thrown by readers and front ends, caught by tools
/// and C API boundaries, never allowed to cross them.
class DiagnosticError : public std::runtime_error {
 public:
  explicit DiagnosticError(Diagnostic diagnostic);
  const Diagnostic& diagnostic() const { return diagnostic_; }

 private:
  Diagnostic diagnostic_;
};

/// `text` without a leading UTF-8 byte order mark (as editors on Windows write CSV and XML).
std::string_view withoutByteOrderMark(std::string_view text);

/// Reads a whole text file, without its byte order mark. Throws DiagnosticError naming the file
/// and saying why when it cannot: missing or unreadable (errno's text), a directory, or binary
/// data (a NUL byte, located).
SourceText readSourceFile(const std::string& path);

}  // namespace tuccl
