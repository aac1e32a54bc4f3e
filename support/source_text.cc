#include "support/source_text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <sys/stat.h>
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

// The length of the UTF-8 sequence starting at `text[i]` when it is a valid one, else 0.
size_t utf8SequenceLength(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const size_t length = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  return length;
}

bool isContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

}  // namespace

SourceExcerpt excerptLine(std::string_view line, uint32_t column, size_t width) {
  // The window of bytes shown: the whole line when it fits, else `width` bytes around the column.
  const size_t at = column == 0 ? 0 : std::min<size_t>(column - 1, line.size());
  size_t begin = 0;
  size_t end = line.size();
  if (line.size() > width) {
    begin = at > width / 2 ? at - width / 2 : 0;
    end = std::min(line.size(), begin + width);
    begin = end - std::min(end, width);
    while (begin > 0 && begin < line.size() && isContinuationByte(line[begin])) ++begin;
    while (end < line.size() && end > begin && isContinuationByte(line[end])) --end;
  }
  SourceExcerpt excerpt;
  std::string padding;  // blanks as wide as excerpt.text so far
  if (begin > 0) {
    excerpt.text = "...";
    padding = "   ";
  }
  bool caretPlaced = false;
  for (size_t i = begin; i < end;) {
    if (i == at) {
      excerpt.caret = padding;
      caretPlaced = true;
    }
    const char c = line[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '\t') {
      excerpt.text += '\t';
      padding += '\t';
      ++i;
    } else if (u >= 0x20 && u < 0x7f) {
      excerpt.text += c;
      padding += ' ';
      ++i;
    } else if (const size_t length = u >= 0x80 ? utf8SequenceLength(line, i) : 0; length > 0) {
      excerpt.text.append(line.substr(i, length));
      padding += ' ';
      i += length;
    } else {
      // Control characters and bytes that are not UTF-8 would garble the terminal: escaped.
      static constexpr char kHex[] = "0123456789abcdef";
      excerpt.text += {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
      padding += "    ";
      ++i;
    }
  }
  if (!caretPlaced) excerpt.caret = padding;
  if (end < line.size()) excerpt.text += "...";
  return excerpt;
}

namespace {

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
    const SourceExcerpt excerpt = excerptLine(source->line(diagnostic.loc.line), diagnostic.loc.column);
    std::string number = std::to_string(diagnostic.loc.line);
    out << ' ' << number << " | " << excerpt.text << '\n';
    if (diagnostic.loc.column != 0) out << ' ' << std::string(number.size(), ' ') << " | " << excerpt.caret << "^\n";
  }
  return out.str();
}

DiagnosticError::DiagnosticError(Diagnostic diagnostic)
    : std::runtime_error(formatDiagnostic(diagnostic, nullptr)), diagnostic_(std::move(diagnostic)) {}

std::string_view withoutByteOrderMark(std::string_view text) {
  constexpr std::string_view kUtf8Bom = "\xef\xbb\xbf";
  return text.substr(0, kUtf8Bom.size()) == kUtf8Bom ? text.substr(kUtf8Bom.size()) : text;
}

SourceText readSourceFile(const std::string& path) {
  auto fail = [&path](std::string message) {
    return DiagnosticError(Diagnostic{Severity::Error, path, {}, std::move(message)});
  };
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) throw fail(std::string("cannot open file: ") + std::strerror(errno));
  if (S_ISDIR(status.st_mode)) throw fail("cannot read file: it is a directory, not a file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail(std::string("cannot open file: ") + std::strerror(errno != 0 ? errno : EACCES));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw fail(std::string("cannot read file: ") + std::strerror(errno != 0 ? errno : EIO));
  std::string text = buffer.str();
  // Text formats only: a NUL byte means a binary file (a CUBIN, an archive) given by mistake.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const SourceLoc loc = SourceText(path, text.substr(0, nul + 1)).locationOf(nul);
    throw DiagnosticError(Diagnostic{Severity::Error, path, loc, "not a text file: it holds binary data (a NUL byte)"});
  }
  const std::string_view body = withoutByteOrderMark(text);
  if (body.size() != text.size()) text.erase(0, text.size() - body.size());
  return SourceText(path, std::move(text));
}

}  // namespace tuccl
