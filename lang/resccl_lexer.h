// The ResCCLang lexer: program text to a flat token list with Python-style layout tokens.
//
// In:  the text of a ResCCLang program (any bytes).
// Out: tokens ending in EndOfFile, with NEWLINE at the end of every logical line and INDENT /
//      DEDENT around indented blocks; or a DiagnosticError at the first lexical problem
//      (unexpected byte, integer literal overflow, unterminated string, mixed tabs and spaces,
//      dedent to an unknown level). An unclosed '(' is left to the parser.
//
// Layout follows Python: blank and comment-only lines are ignored, newlines inside parentheses
// are joined, a backslash at the end of a line continues it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/source_text.h"

namespace tuccl {

enum class TokenKind : uint8_t {
  EndOfFile,
  Newline,
  Indent,
  Dedent,
  Name,
  Integer,
  String,
  // Keywords.
  KwDef,
  KwFor,
  KwIn,
  KwIf,
  KwElif,
  KwElse,
  KwPass,
  KwAnd,
  KwOr,
  KwNot,
  // Punctuation and operators.
  LParen,
  RParen,
  Comma,
  Colon,
  Semicolon,
  Assign,
  Plus,
  Minus,
  Star,
  Slash,
  SlashSlash,
  Percent,
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
};

struct Token {
  TokenKind kind = TokenKind::EndOfFile;
  SourceLoc loc;
  int64_t value = 0;  ///< Integer tokens
  std::string text;   ///< Name tokens: the name; String tokens: the decoded value
};

/// Splits a program into tokens. Throws DiagnosticError (file:line:col) on a lexical error.
std::vector<Token> tokenizeResccl(const SourceText& source);

/// How a token reads in an error message: "name 'x'", "integer 12", "')'", "end of line", ...
std::string describeToken(const Token& token);

/// The spelling of a keyword or punctuation kind ("for", "//", ...); a description for others.
std::string_view tokenKindSpelling(TokenKind kind);

}  // namespace tuccl
