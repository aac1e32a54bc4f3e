#include "lang/resccl_lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tuccl {
namespace {

using K = TokenKind;

std::vector<Token> lex(const std::string& text) { return tokenizeResccl(SourceText("t.resccl", text)); }

std::vector<K> kinds(const std::string& text) {
  std::vector<K> result;
  for (const Token& token : lex(text)) result.push_back(token.kind);
  return result;
}

// Expects a lexical error at line:column whose message contains `part`.
void expectError(const std::string& text, uint32_t line, uint32_t column, const std::string& part) {
  try {
    lex(text);
    ADD_FAILURE() << "no error for: " << text;
  } catch (const DiagnosticError& error) {
    const Diagnostic& d = error.diagnostic();
    EXPECT_EQ(d.file, "t.resccl");
    EXPECT_EQ(d.loc.line, line) << d.message;
    EXPECT_EQ(d.loc.column, column) << d.message;
    EXPECT_NE(d.message.find(part), std::string::npos) << d.message;
  }
}

TEST(RescclLexer, SimpleStatement) {
  std::vector<Token> tokens = lex("x = (a + 12) // 3 % -b\n");
  std::vector<K> expected{K::Name,       K::Assign,  K::LParen,  K::Name,  K::Plus, K::Integer, K::RParen,
                          K::SlashSlash, K::Integer, K::Percent, K::Minus, K::Name, K::Newline, K::EndOfFile};
  ASSERT_EQ(tokens.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(tokens[i].kind, expected[i]) << i;
  EXPECT_EQ(tokens[0].text, "x");
  EXPECT_EQ(tokens[5].value, 12);
  EXPECT_EQ(tokens[5].loc, (SourceLoc{1, 10}));
  EXPECT_EQ(tokens[7].loc, (SourceLoc{1, 14}));
}

TEST(RescclLexer, OperatorsAndKeywords) {
  EXPECT_EQ(kinds("== != < <= > >= = / // * % + - , : ;"),
            (std::vector<K>{K::Equal, K::NotEqual, K::Less, K::LessEqual, K::Greater, K::GreaterEqual,
                            K::Assign, K::Slash, K::SlashSlash, K::Star, K::Percent, K::Plus, K::Minus,
                            K::Comma, K::Colon, K::Semicolon, K::Newline, K::EndOfFile}));
  EXPECT_EQ(kinds("def for in if elif else pass and or not range transfer _x1"),
            (std::vector<K>{K::KwDef, K::KwFor, K::KwIn, K::KwIf, K::KwElif, K::KwElse, K::KwPass, K::KwAnd,
                            K::KwOr, K::KwNot, K::Name, K::Name, K::Name, K::Newline, K::EndOfFile}));
}

TEST(RescclLexer, IndentAndDedent) {
  std::string text =
      "a:\n"
      "    b\n"
      "    c:\n"
      "        d\n"
      "\n"
      "   # a comment at another indentation\n"
      "    e\n"
      "f\n";
  EXPECT_EQ(kinds(text),
            (std::vector<K>{K::Name, K::Colon, K::Newline, K::Indent, K::Name, K::Newline, K::Name, K::Colon,
                            K::Newline, K::Indent, K::Name, K::Newline, K::Dedent, K::Name, K::Newline,
                            K::Dedent, K::Name, K::Newline, K::EndOfFile}));
}

TEST(RescclLexer, DedentsAtEndOfFileWithoutNewline) {
  EXPECT_EQ(kinds("a:\n  b:\n    c"),
            (std::vector<K>{K::Name, K::Colon, K::Newline, K::Indent, K::Name, K::Colon, K::Newline,
                            K::Indent, K::Name, K::Newline, K::Dedent, K::Dedent, K::EndOfFile}));
}

TEST(RescclLexer, ParenthesesJoinLines) {
  EXPECT_EQ(kinds("f(a,\n        b,\n  c)\nd\n"),
            (std::vector<K>{K::Name, K::LParen, K::Name, K::Comma, K::Name, K::Comma, K::Name, K::RParen,
                            K::Newline, K::Name, K::Newline, K::EndOfFile}));
}

TEST(RescclLexer, BackslashContinuation) {
  std::vector<Token> tokens = lex("x = 1 + \\\n      2\n");
  ASSERT_EQ(tokens.size(), 7u);
  EXPECT_EQ(tokens[4].kind, K::Integer);
  EXPECT_EQ(tokens[4].loc, (SourceLoc{2, 7}));
  EXPECT_EQ(tokens[5].kind, K::Newline);
}

TEST(RescclLexer, BlankLinesCommentsAndCrlf) {
  EXPECT_EQ(kinds("\n\n# only a comment\r\n  \t\n x\r\n"),
            (std::vector<K>{K::Indent, K::Name, K::Newline, K::Dedent, K::EndOfFile}));
  EXPECT_EQ(kinds(""), (std::vector<K>{K::EndOfFile}));
  EXPECT_EQ(kinds("# nothing"), (std::vector<K>{K::EndOfFile}));
}

TEST(RescclLexer, IntegersAndStrings) {
  std::vector<Token> tokens = lex("1_000_000 9223372036854775807 \"Allreduce\" 'x\\\"y'");
  EXPECT_EQ(tokens[0].value, 1000000);
  EXPECT_EQ(tokens[1].value, 9223372036854775807);
  EXPECT_EQ(tokens[2].kind, K::String);
  EXPECT_EQ(tokens[2].text, "Allreduce");
  EXPECT_EQ(tokens[3].text, "x\"y");
}

TEST(RescclLexer, DescribesTokens) {
  std::vector<Token> tokens = lex("foo 12 \"s\" :");
  EXPECT_EQ(describeToken(tokens[0]), "name 'foo'");
  EXPECT_EQ(describeToken(tokens[1]), "integer 12");
  EXPECT_EQ(describeToken(tokens[2]), "string \"s\"");
  EXPECT_EQ(describeToken(tokens[3]), "':'");
  EXPECT_EQ(describeToken(tokens[4]), "end of line");
  EXPECT_EQ(describeToken(tokens[5]), "end of file");
}

TEST(RescclLexer, Errors) {
  expectError("x = 9223372036854775808\n", 1, 5, "integer literal is too large");
  expectError("x = 1.5\n", 1, 5, "floating-point numbers are not supported");
  expectError("x = 12abc\n", 1, 5, "invalid integer literal");
  expectError("x = \"abc\n", 1, 5, "unterminated string literal");
  expectError("x = $\n", 1, 5, "unexpected character '$'");
  expectError(std::string("x = 1\ny = \0\n", 12), 2, 5, "unexpected byte 0x00");
  expectError("x = \xc3\xa9\n", 1, 5, "unexpected byte 0xc3 (only ASCII is allowed");
  expectError("x = [1]\n", 1, 5, "lists and dictionaries are not supported");
  expectError("x = 2 ** 3\n", 1, 7, "'**' is not supported");
  expectError("x = 1 \\ 2\n", 1, 7, "line continuation must end its line");
  expectError("x = 1 \\", 1, 7, "unexpected end of file after the line continuation");
  expectError("x = !y\n", 1, 5, "unexpected character '!'");
}

TEST(RescclLexer, TabsAndSpaces) {
  expectError("a:\n \tb\n", 2, 1, "inconsistent use of tabs and spaces in indentation");
  expectError("a:\n    b\nc:\n\td\n", 4, 1,
              "inconsistent use of tabs and spaces in indentation (line 2 is indented with spaces");
  EXPECT_EQ(kinds("a:\n\tb\n\t\tc\n"),
            (std::vector<K>{K::Name, K::Colon, K::Newline, K::Indent, K::Name, K::Newline, K::Indent, K::Name,
                            K::Newline, K::Dedent, K::Dedent, K::EndOfFile}));
}

TEST(RescclLexer, UnclosedParenthesisIsLeftToTheParser) {
  EXPECT_EQ(kinds("x = (1 +\n  2\n"),
            (std::vector<K>{K::Name, K::Assign, K::LParen, K::Integer, K::Plus, K::Integer, K::EndOfFile}));
}

TEST(RescclLexer, DedentToUnknownLevel) {
  expectError("a:\n    b\n  c\n", 3, 3, "unindent does not match any outer indentation level");
}

TEST(RescclLexer, CommentsMayHoldAnyBytes) {
  static const char kText[] = "x = 1  # caf\xc3\xa9 \0 \xff\n";
  std::string text(kText, sizeof kText - 1);
  EXPECT_EQ(kinds(text), (std::vector<K>{K::Name, K::Assign, K::Integer, K::Newline, K::EndOfFile}));
}

}  // namespace
}  // namespace tuccl
