#include "support/source_text.h"

#include <gtest/gtest.h>

namespace tuccl {
namespace {

TEST(SourceText, LinesAndLocations) {
  SourceText source("a.txt", "first\nsecond line\r\nthird");
  EXPECT_EQ(source.lineCount(), 3u);
  EXPECT_EQ(source.line(1), "first");
  EXPECT_EQ(source.line(2), "second line");
  EXPECT_EQ(source.line(3), "third");
  EXPECT_EQ(source.line(4), "");
  EXPECT_EQ(source.line(0), "");
  EXPECT_EQ(source.locationOf(0), (SourceLoc{1, 1}));
  EXPECT_EQ(source.locationOf(6), (SourceLoc{2, 1}));
  EXPECT_EQ(source.locationOf(8), (SourceLoc{2, 3}));
}

TEST(SourceText, TrailingNewlineOpensNoLine) {
  EXPECT_EQ(SourceText("a", "x\ny\n").lineCount(), 2u);
  EXPECT_EQ(SourceText("a", "").lineCount(), 1u);
}

TEST(Diagnostic, FormatsLocationSourceAndCaret) {
  SourceText source("algo.txt", "x = 1\n    transfer(a, b)\n");
  Diagnostic diagnostic{Severity::Error, "algo.txt", SourceLoc{2, 14}, "unknown name 'a'"};
  EXPECT_EQ(formatDiagnostic(diagnostic, &source),
            "algo.txt:2:14: error: unknown name 'a'\n"
            " 2 |     transfer(a, b)\n"
            "   |              ^\n");
}

TEST(Diagnostic, WithoutLocationOrSource) {
  Diagnostic diagnostic{Severity::Error, "t.json", {}, "cannot open file"};
  EXPECT_EQ(formatDiagnostic(diagnostic, nullptr), "t.json: error: cannot open file\n");
}

TEST(Diagnostic, ControlCharactersAreNotEchoed) {
  SourceText source("f", std::string("a\x1b[2Jb\n"));
  Diagnostic diagnostic{Severity::Error, "f", SourceLoc{1, 2}, "bad character"};
  std::string text = formatDiagnostic(diagnostic, &source);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(ReadSourceFile, MissingFileNamesTheFile) {
  try {
    readSourceFile("/nonexistent/dir/algo.txt");
    FAIL() << "expected an error";
  } catch (const DiagnosticError& error) {
    EXPECT_EQ(error.diagnostic().file, "/nonexistent/dir/algo.txt");
    EXPECT_NE(error.diagnostic().message.find("cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace tuccl
