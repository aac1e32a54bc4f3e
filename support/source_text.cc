#include "support/source_text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tuccl {

SourceText::SourceText(std::string name, std::string text) : name_(std::move(name)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
  }
  // A final line break does not open another line.
  if (lineStarts_.size() > 1 && lineStarts_.back() == text_.size()) lineStarts_.pop_back();
}

std::string_view SourceText::line(uint32_t line) const {
  if (line == 0 || line > lineStarts_.size()) return {};
  size_t begin = lineStarts_[line - 1];
  size_t end = line < lineStarts_.size() ? lineStarts_[line] : text_.size();
  while (end > begin && (text_[end - 1] == '\n' || text_[end - 1] == '\r')) --end;
  return std::string_view(text_).substr(begin, end - begin);
}

SourceLoc SourceText::locationOf(size_t offset) const {
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  size_t index = static_cast<size_t>(it - lineStarts_.begin());  // 1-based line number
  if (index == 0) index = 1;
  return SourceLoc{static_cast<uint32_t>(index), static_cast<uint32_t>(offset - lineStarts_[index - 1] + 1)};
}

namespace {

const char* severityName(Severity severity) {
  switch (severity) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Note:
      return "note";
  }
  return "error";
}

// Control characters in a quoted source line would garble the terminal; show them as '?'.
std::string printable(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t') c = '?';
    if (u == 0x7f) c = '?';
  }
  return out;
}

}  // namespace

std::string formatDiagnostic(const Diagnostic& diagnostic, const SourceText* source) {
  std::ostringstream out;
  out << (diagnostic.file.empty() ? "<input>" : diagnostic.file);
  if (diagnostic.loc.known()) {
    out << ':' << diagnostic.loc.line;
    if (diagnostic.loc.column != 0) out << ':' << diagnostic.loc.column;
  }
  out << ": " << severityName(diagnostic.severity) << ": " << diagnostic.message << '\n';
  if (source != nullptr && diagnostic.loc.known() && diagnostic.loc.line <= source->lineCount()) {
    std::string text = printable(source->line(diagnostic.loc.line));
    std::string number = std::to_string(diagnostic.loc.line);
    out << ' ' << number << " | " << text << '\n';
    if (diagnostic.loc.column != 0) {
      out << ' ' << std::string(number.size(), ' ') << " | ";
      // Keep tabs so the caret lines up under tab-indented code.
      for (uint32_t i = 1; i < diagnostic.loc.column && i - 1 < text.size(); ++i) {
        out << (text[i - 1] == '\t' ? '\t' : ' ');
      }
      out << "^\n";
    }
  }
  return out.str();
}

DiagnosticError::DiagnosticError(Diagnostic diagnostic)
    : std::runtime_error(formatDiagnostic(diagnostic, nullptr)), diagnostic_(std::move(diagnostic)) {}

SourceText readSourceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DiagnosticError(Diagnostic{Severity::Error, path, {}, std::string("cannot open file: ") + std::strerror(errno)});
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    throw DiagnosticError(Diagnostic{Severity::Error, path, {}, "cannot read file"});
  }
  return SourceText(path, buffer.str());
}

}  // namespace tuccl
