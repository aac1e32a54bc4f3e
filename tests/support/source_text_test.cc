#include "support/source_text.h"

#include <filesystem>
#include <fstream>

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

namespace tuccl {
namespace {

std::string temporaryFile(const std::string& name, const std::string& bytes) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / ("tuccl_source_text_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string readError(const std::string& path) {
  try {
    readSourceFile(path);
  } catch (const DiagnosticError& error) {
    return formatDiagnostic(error.diagnostic(), nullptr);
  }
  return "no error";
}

TEST(ReadSourceFile, ADirectoryIsNamedAsOne) {
  const std::string message = readError(std::filesystem::temp_directory_path().string());
  EXPECT_NE(message.find("it is a directory, not a file"), std::string::npos) << message;
}

TEST(ReadSourceFile, MissingFileSaysWhy) {
  EXPECT_NE(readError("/nonexistent/x.resccl").find("No such file or directory"), std::string::npos);
}

TEST(ReadSourceFile, BinaryDataIsRefusedWithItsPlace) {
  const std::string path = temporaryFile("binary", std::string("ok line\nab\0cd", 13));
  const std::string message = readError(path);
  EXPECT_NE(message.find(":2:3: error: not a text file"), std::string::npos) << message;
  std::filesystem::remove(path);
}

TEST(ReadSourceFile, TheByteOrderMarkIsDropped) {
  const std::string path = temporaryFile("bom", "\xef\xbb\xbf" "allreduce,1\n");
  EXPECT_EQ(readSourceFile(path).text(), "allreduce,1\n");
  std::filesystem::remove(path);
  EXPECT_EQ(withoutByteOrderMark("\xef\xbb\xbfx"), "x");
  EXPECT_EQ(withoutByteOrderMark("x"), "x");
}

TEST(Diagnostic, ALongLineIsClippedAroundTheColumnWithTheCaretUnderIt) {
  std::string line(200000, 'a');
  line[150000] = 'X';
  SourceText source("big.json", line);
  const std::string text = formatDiagnostic(Diagnostic{Severity::Error, "big.json", {1, 150001}, "bad"}, &source);
  EXPECT_LT(text.size(), 400u) << text.size();
  const size_t quoted = text.find(" 1 | ...");
  ASSERT_NE(quoted, std::string::npos) << text;
  const size_t xAt = text.find('X', quoted) - quoted;
  const size_t caretLine = text.find('\n', quoted) + 1;
  EXPECT_EQ(text.find('^', caretLine) - caretLine, xAt) << text;
}

TEST(Diagnostic, BinaryBytesAreEscapedAndTheCaretStillLinesUp) {
  SourceText source("f", std::string("\x01\xff\xc3\xa9z\n"));
  const std::string text = formatDiagnostic(Diagnostic{Severity::Error, "f", {1, 5}, "bad"}, &source);
  EXPECT_NE(text.find(" 1 | \\x01\\xff\xc3\xa9z\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   |          ^\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tuccl
