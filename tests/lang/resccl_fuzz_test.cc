// Deterministic mutation fuzzing of the ResCCLang front end: every mutant of a few seed programs
// must compile or fail with a DiagnosticError pointing into the file; none may crash or hang.
// Inputs that once broke the front end live in tests/data/lang/crashes/ and are replayed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lang/resccl.h"
#include "tests/lang/resccl_programs.h"

namespace tuccl {
namespace {

RescclOptions smallLimits() {
  RescclOptions options;
  options.maxOperations = 100'000;
  options.maxStatements = 1'000'000;
  return options;
}

// Small shapes so the HM seed stays cheap while its mutants still loop.
std::string smallHm() {
  std::string text = testing::kHmAllReduce;
  text.replace(text.find("nRanks=32"), 9, "nRanks=8");
  text.replace(text.find("GPUPerNode=8"), 12, "GPUPerNode=4");
  return text;
}

const std::vector<std::string>& seeds() {
  static const std::vector<std::string> programs{
      smallHm(),
      testing::kRingAllGather,
      testing::kEverything,
      "ResCCLAlgo(nRanks=4, OpType=\"Reduce\", Root=1, nScratch=1):\n"
      "\tfor r in range(4):\n"
      "\t\tif r != Root: transfer(r, Root, 0, 0, rrc)\n",
  };
  return programs;
}

// Tokens a mutation may insert: the language's own words, operators and troublemakers.
const std::vector<std::string>& fragments() {
  static const std::vector<std::string> words{
      "for ",
      "in ",
      "range(",
      "if ",
      "elif ",
      "else:",
      "pass",
      "and ",
      "or ",
      "not ",
      "transfer(",
      "recv",
      "rrc",
      "(",
      ")",
      ",",
      ":",
      ";",
      "=",
      "==",
      "+",
      "-",
      "*",
      "/",
      "//",
      "%",
      "<",
      ">=",
      "!=",
      "\n",
      "\n    ",
      "\t",
      "    ",
      " ",
      "\\\n",
      "#",
      "\"",
      "'",
      "0",
      "1",
      "-1",
      "7",
      "99999999999999999999",
      "9223372036854775807",
      "nRanks",
      "nChunks",
      "x",
      "def ",
      "ResCCLAlgo",
      "OpType=\"Allgather\"",
      "count=",
      "dstChunk=",
      "srcBuf=\"scratch\"",
      std::string("\0", 1),
      "\xff",
      "\r",
  };
  return words;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) lines.push_back(line);
  return lines;
}

std::string joinLines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::string mutate(std::string text, std::mt19937_64& random) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(random() % n); };
  int rounds = 1 + static_cast<int>(random() % 4);
  for (int round = 0; round < rounds; ++round) {
    switch (random() % 9) {
      case 0:  // flip a byte
        if (!text.empty()) text[pick(text.size())] = static_cast<char>(random() & 0xff);
        break;
      case 1:  // insert a fragment
        text.insert(pick(text.size() + 1), fragments()[pick(fragments().size())]);
        break;
      case 2: {  // delete a span
        size_t at = pick(text.size() + 1);
        text.erase(at, 1 + pick(8));
        break;
      }
      case 3: {  // duplicate a line
        std::vector<std::string> lines = splitLines(text);
        if (lines.empty()) break;
        size_t at = pick(lines.size());
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size() + 1)), lines[at]);
        text = joinLines(lines);
        break;
      }
      case 4: {  // delete a line
        std::vector<std::string> lines = splitLines(text);
        if (lines.empty()) break;
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size())));
        text = joinLines(lines);
        break;
      }
      case 5: {  // change the indentation of a line
        std::vector<std::string> lines = splitLines(text);
        if (lines.empty()) break;
        std::string& line = lines[pick(lines.size())];
        size_t indent = line.find_first_not_of(" \t");
        if (indent == std::string::npos) indent = line.size();
        static const char* const kIndents[] = {"",   " ",    "  ",  "    ",        "        ",
                                               "\t", "\t\t", " \t", "            "};
        line = kIndents[pick(std::size(kIndents))] + line.substr(indent);
        text = joinLines(lines);
        break;
      }
      case 6: {  // splice with another seed
        const std::string& other = seeds()[pick(seeds().size())];
        text = text.substr(0, pick(text.size() + 1)) + other.substr(pick(other.size() + 1));
        break;
      }
      case 7: {  // replace a number with another
        size_t at = text.find_first_of("0123456789", pick(text.size() + 1));
        if (at == std::string::npos) break;
        static const char* const kNumbers[] = {
            "0", "-1", "3", "64", "1000000", "4611686018427387904", "100000000000"};
        text.replace(at, 1, kNumbers[pick(std::size(kNumbers))]);
        break;
      }
      default: {  // swap two lines
        std::vector<std::string> lines = splitLines(text);
        if (lines.size() < 2) break;
        std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
        text = joinLines(lines);
        break;
      }
    }
  }
  return text;
}

struct Outcome {
  int compiled = 0;
  int diagnosed = 0;
};

// Compiles `text`; it must succeed or throw a DiagnosticError pointing into the file.
void runOne(const std::string& name, const std::string& text, Outcome& outcome) {
  SourceText source(name, text);
  Expected<Algorithm> algorithm = compileResccl(source, smallLimits());
  if (algorithm.ok()) {
    EXPECT_LE(algorithm->ops.size(), 100'000u);
    Status problem = validateStructure(*algorithm);
    EXPECT_TRUE(problem.ok()) << problem.message();
    ++outcome.compiled;
  } else {
    const Diagnostic& d = algorithm.diagnostic();
    EXPECT_EQ(d.file, name);
    EXPECT_EQ(d.severity, Severity::Error);
    EXPECT_LE(d.loc.line, source.lineCount() + 1) << d.message;
    EXPECT_FALSE(d.message.empty());
    EXPECT_FALSE(formatDiagnostic(d, &source).empty());
    ++outcome.diagnosed;
  }
}

TEST(RescclFuzz, SeedsCompile) {
  for (size_t i = 0; i < seeds().size(); ++i) {
    EXPECT_TRUE(compileResccl(SourceText("seed" + std::to_string(i), seeds()[i]), smallLimits()).ok()) << i;
  }
}

TEST(RescclFuzz, MutantsCompileOrDiagnose) {
  constexpr int kMutantsPerSeed = 12'000;
  Outcome outcome;
  auto begin = std::chrono::steady_clock::now();
  for (size_t s = 0; s < seeds().size(); ++s) {
    std::mt19937_64 random(0x7e5cc1 + s);
    for (int i = 0; i < kMutantsPerSeed; ++i) {
      std::string mutant = mutate(seeds()[s], random);
      runOne("mutant.resccl", mutant, outcome);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "seed " << s << " mutant " << i << ":\n" << mutant;
        return;
      }
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("[ fuzz     ] %d mutants compiled, %d diagnosed, %.2f s\n", outcome.compiled, outcome.diagnosed,
              seconds);
  EXPECT_GT(outcome.compiled, 0);
  EXPECT_GT(outcome.diagnosed, 0);
}

TEST(RescclFuzz, RandomBytes) {
  std::mt19937_64 random(42);
  Outcome outcome;
  for (int i = 0; i < 5'000; ++i) {
    std::string text(random() % 200, '\0');
    for (char& c : text) c = static_cast<char>(random() & 0xff);
    if (i % 2 == 0) text = "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    " + text;
    runOne("bytes.resccl", text, outcome);
  }
  EXPECT_EQ(outcome.compiled + outcome.diagnosed, 5'000);
}

// Every input that once crashed or hung the front end (see fuzz/resccl_fuzzer.cc).
TEST(RescclFuzz, CrashCorpusRegressions) {
  std::filesystem::path folder = std::filesystem::path(TUCCL_SOURCE_DIR) / "tests/data/lang/crashes";
  ASSERT_TRUE(std::filesystem::is_directory(folder)) << folder;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".resccl") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  Outcome outcome;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(file.string());
    runOne(file.filename().string(), text, outcome);
  }
  std::printf("[ corpus   ] %zu regression inputs replayed\n", files.size());
  EXPECT_FALSE(files.empty());
}

}  // namespace
}  // namespace tuccl
