#include "lang/resccl_lexer.h"

#include <array>
#include <cstdio>
#include <limits>
#include <utility>

namespace tuccl {

namespace {

struct Keyword {
  std::string_view word;
  TokenKind kind;
};

constexpr std::array<Keyword, 10> kKeywords{{
    {"def", TokenKind::KwDef},
    {"for", TokenKind::KwFor},
    {"in", TokenKind::KwIn},
    {"if", TokenKind::KwIf},
    {"elif", TokenKind::KwElif},
    {"else", TokenKind::KwElse},
    {"pass", TokenKind::KwPass},
    {"and", TokenKind::KwAnd},
    {"or", TokenKind::KwOr},
    {"not", TokenKind::KwNot},
}};

bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

std::string quoteByte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f) return std::string("character '") + c + "'";
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "byte 0x%02x", u);
  return buffer;
}

class Lexer {
 public:
  explicit Lexer(const SourceText& source) : source_(source), text_(source.text()) {}

  std::vector<Token> run() {
    tokens_.reserve(text_.size() / 3 + 16);
    bool atLineStart = true;
    while (pos_ < text_.size()) {
      if (atLineStart && parens_.empty()) {
        atLineStart = false;
        if (!readIndentation()) {
          atLineStart = true;  // blank or comment-only line: consumed up to its end
          continue;
        }
      }
      char c = text_[pos_];
      switch (c) {
        case ' ':
        case '\t':
        case '\f':
        case '\r':
          ++pos_;
          break;
        case '\n':
          if (parens_.empty()) {
            if (lineHasTokens_) emit(TokenKind::Newline, here());
            lineHasTokens_ = false;
            atLineStart = true;
          }
          newLine();
          break;
        case '#':
          skipComment();
          break;
        case '\\':
          readContinuation();
          break;
        default:
          readToken(c);
          break;
      }
    }
    // An unclosed '(' is left to the parser, which names what it expected instead.
    SourceLoc end = endLocation();
    // With a '(' still open the parser meets end of file right away, and says so.
    if (lineHasTokens_ && parens_.empty()) emit(TokenKind::Newline, end);
    while (indents_.size() > 1 && parens_.empty()) {
      indents_.pop_back();
      emit(TokenKind::Dedent, end);
    }
    emit(TokenKind::EndOfFile, end);
    return std::move(tokens_);
  }

 private:
  SourceLoc here() const { return SourceLoc{line_, static_cast<uint32_t>(pos_ - lineStart_ + 1)}; }
  SourceLoc at(size_t offset) const {
    return SourceLoc{line_, static_cast<uint32_t>(offset - lineStart_ + 1)};
  }

  // End of file: the end of the last line rather than a line after it.
  SourceLoc endLocation() const {
    if (!text_.empty() && text_.back() == '\n') return source_.locationOf(text_.size() - 1);
    return here();
  }

  [[noreturn]] void fail(SourceLoc loc, std::string message) const {
    throw DiagnosticError(Diagnostic{Severity::Error, source_.name(), loc, std::move(message)});
  }

  void emit(TokenKind kind, SourceLoc loc) {
    Token token;
    token.kind = kind;
    token.loc = loc;
    tokens_.push_back(std::move(token));
  }

  void newLine() {
    ++pos_;
    ++line_;
    lineStart_ = pos_;
  }

  void skipComment() {
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
  }

  // Measures the indentation of a line and emits INDENT/DEDENT. Returns false for a blank or
  // comment-only line, which has no layout meaning (its end has been consumed).
  bool readIndentation() {
    size_t start = pos_;
    bool tabs = false;
    bool spaces = false;
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\f')) {
      if (text_[pos_] == '\t') tabs = true;
      if (text_[pos_] == ' ') spaces = true;
      ++pos_;
    }
    while (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ >= text_.size()) return false;
    if (text_[pos_] == '\n') {
      newLine();
      return false;
    }
    if (text_[pos_] == '#') {
      skipComment();
      if (pos_ < text_.size()) newLine();
      return false;
    }
    size_t width = pos_ - start;
    if (width > 0) {
      SourceLoc lineLoc{line_, 1};
      if (tabs && spaces) fail(lineLoc, "inconsistent use of tabs and spaces in indentation");
      char used = tabs ? '\t' : ' ';
      if (indentChar_ == 0) {
        indentChar_ = used;
        indentCharLine_ = line_;
      } else if (indentChar_ != used) {
        fail(lineLoc, std::string("inconsistent use of tabs and spaces in indentation (line ") +
                          std::to_string(indentCharLine_) + " is indented with " +
                          (indentChar_ == '\t' ? "tabs" : "spaces") + ", this line with " +
                          (used == '\t' ? "tabs" : "spaces") + ")");
      }
    }
    SourceLoc first = here();
    if (width > indents_.back()) {
      indents_.push_back(width);
      emit(TokenKind::Indent, first);
    } else {
      while (width < indents_.back()) {
        indents_.pop_back();
        emit(TokenKind::Dedent, first);
      }
      if (width != indents_.back()) fail(first, "unindent does not match any outer indentation level");
    }
    return true;
  }

  void readContinuation() {
    SourceLoc loc = here();
    size_t next = pos_ + 1;
    if (next < text_.size() && text_[next] == '\r') ++next;
    if (next >= text_.size()) fail(loc, "unexpected end of file after the line continuation '\\'");
    if (text_[next] != '\n') fail(loc, "unexpected character '\\' (a line continuation must end its line)");
    pos_ = next;
    newLine();
  }

  void readToken(char c) {
    lineHasTokens_ = true;
    if (isDigit(c)) return readInteger();
    if (isLetter(c)) return readName();
    if (c == '"' || c == '\'') return readString(c);
    SourceLoc loc = here();
    char next = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
    auto one = [&](TokenKind kind) {
      emit(kind, loc);
      pos_ += 1;
    };
    auto two = [&](TokenKind kind) {
      emit(kind, loc);
      pos_ += 2;
    };
    switch (c) {
      case '(':
        parens_.push_back(loc);
        return one(TokenKind::LParen);
      case ')':
        if (!parens_.empty()) parens_.pop_back();
        return one(TokenKind::RParen);
      case ',':
        return one(TokenKind::Comma);
      case ':':
        return one(TokenKind::Colon);
      case ';':
        return one(TokenKind::Semicolon);
      case '+':
        return one(TokenKind::Plus);
      case '-':
        return one(TokenKind::Minus);
      case '*':
        if (next == '*') fail(loc, "the power operator '**' is not supported");
        return one(TokenKind::Star);
      case '%':
        return one(TokenKind::Percent);
      case '/':
        return next == '/' ? two(TokenKind::SlashSlash) : one(TokenKind::Slash);
      case '=':
        return next == '=' ? two(TokenKind::Equal) : one(TokenKind::Assign);
      case '!':
        if (next == '=') return two(TokenKind::NotEqual);
        fail(loc, "unexpected character '!' (did you mean 'not' or '!='?)");
      case '<':
        return next == '=' ? two(TokenKind::LessEqual) : one(TokenKind::Less);
      case '>':
        return next == '=' ? two(TokenKind::GreaterEqual) : one(TokenKind::Greater);
      case '[':
      case ']':
      case '{':
      case '}':
        fail(loc, std::string("unexpected character '") + c + "' (lists and dictionaries are not supported)");
      default:
        break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80)
      fail(loc, "unexpected " + quoteByte(c) + " (only ASCII is allowed outside comments and strings)");
    fail(loc, "unexpected " + quoteByte(c));
  }

  void readInteger() {
    SourceLoc loc = here();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    int64_t value = 0;
    bool overflow = false;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (isDigit(c)) {
        int digit = c - '0';
        if (value > (kMax - digit) / 10) overflow = true;
        if (!overflow) value = value * 10 + digit;
        ++pos_;
      } else if (c == '_' && pos_ + 1 < text_.size() && isDigit(text_[pos_ + 1]) &&
                 isDigit(text_[pos_ - 1])) {
        ++pos_;  // digit separator, as in 1_000_000
      } else {
        break;
      }
    }
    if (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '.') fail(loc, "floating-point numbers are not supported; use integers");
      if (isLetter(c))
        fail(loc, "invalid integer literal (a digit is followed by '" + std::string(1, c) + "')");
    }
    if (overflow) {
      fail(loc, "integer literal is too large (the largest integer is " + std::to_string(kMax) + ")");
    }
    emit(TokenKind::Integer, loc);
    tokens_.back().value = value;
  }

  void readName() {
    SourceLoc loc = here();
    size_t start = pos_;
    while (pos_ < text_.size() && (isLetter(text_[pos_]) || isDigit(text_[pos_]))) ++pos_;
    std::string_view word(text_.data() + start, pos_ - start);
    for (const Keyword& keyword : kKeywords) {
      if (keyword.word == word) return emit(keyword.kind, loc);
    }
    emit(TokenKind::Name, loc);
    tokens_.back().text = std::string(word);
  }

  void readString(char quote) {
    SourceLoc loc = here();
    ++pos_;
    std::string value;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail(loc, "unterminated string literal");
      char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        fail(here(), "unexpected " + quoteByte(c) + " in a string literal");
      if (c == '\\' && pos_ + 1 < text_.size()) {
        char escaped = text_[pos_ + 1];
        switch (escaped) {
          case '\\':
          case '"':
          case '\'':
            value.push_back(escaped);
            pos_ += 2;
            continue;
          case 'n':
            value.push_back('\n');
            pos_ += 2;
            continue;
          case 't':
            value.push_back('\t');
            pos_ += 2;
            continue;
          default:
            break;  // kept literally, as Python does
        }
      }
      value.push_back(c);
      ++pos_;
    }
    emit(TokenKind::String, loc);
    tokens_.back().text = std::move(value);
  }

  const SourceText& source_;
  const std::string& text_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  size_t lineStart_ = 0;
  bool lineHasTokens_ = false;
  std::vector<size_t> indents_{0};
  char indentChar_ = 0;
  uint32_t indentCharLine_ = 0;
  std::vector<SourceLoc> parens_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenizeResccl(const SourceText& source) { return Lexer(source).run(); }

std::string_view tokenKindSpelling(TokenKind kind) {
  switch (kind) {
    case TokenKind::EndOfFile:
      return "end of file";
    case TokenKind::Newline:
      return "end of line";
    case TokenKind::Indent:
      return "indent";
    case TokenKind::Dedent:
      return "dedent";
    case TokenKind::Name:
      return "name";
    case TokenKind::Integer:
      return "integer";
    case TokenKind::String:
      return "string";
    case TokenKind::KwDef:
      return "def";
    case TokenKind::KwFor:
      return "for";
    case TokenKind::KwIn:
      return "in";
    case TokenKind::KwIf:
      return "if";
    case TokenKind::KwElif:
      return "elif";
    case TokenKind::KwElse:
      return "else";
    case TokenKind::KwPass:
      return "pass";
    case TokenKind::KwAnd:
      return "and";
    case TokenKind::KwOr:
      return "or";
    case TokenKind::KwNot:
      return "not";
    case TokenKind::LParen:
      return "(";
    case TokenKind::RParen:
      return ")";
    case TokenKind::Comma:
      return ",";
    case TokenKind::Colon:
      return ":";
    case TokenKind::Semicolon:
      return ";";
    case TokenKind::Assign:
      return "=";
    case TokenKind::Plus:
      return "+";
    case TokenKind::Minus:
      return "-";
    case TokenKind::Star:
      return "*";
    case TokenKind::Slash:
      return "/";
    case TokenKind::SlashSlash:
      return "//";
    case TokenKind::Percent:
      return "%";
    case TokenKind::Equal:
      return "==";
    case TokenKind::NotEqual:
      return "!=";
    case TokenKind::Less:
      return "<";
    case TokenKind::LessEqual:
      return "<=";
    case TokenKind::Greater:
      return ">";
    case TokenKind::GreaterEqual:
      return ">=";
  }
  return "?";
}

std::string describeToken(const Token& token) {
  switch (token.kind) {
    case TokenKind::EndOfFile:
    case TokenKind::Newline:
    case TokenKind::Indent:
    case TokenKind::Dedent:
      return std::string(tokenKindSpelling(token.kind));
    case TokenKind::Name:
      return "name '" + token.text + "'";
    case TokenKind::Integer:
      return "integer " + std::to_string(token.value);
    case TokenKind::String: {
      std::string shown = token.text.size() > 40 ? token.text.substr(0, 40) + "..." : token.text;
      for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20) c = '?';
      }
      return "string \"" + shown + "\"";
    }
    default:
      return "'" + std::string(tokenKindSpelling(token.kind)) + "'";
  }
}

}  // namespace tuccl
