// The bundled example algorithms verify at every shape, and deliberately broken programs in
// tests/data/lang/broken are rejected with the kind and place their first line announces:
//   # expect: error LINE:COL MESSAGE-PART      (front-end error)
//   # expect: KIND line LINE                   (checker violation at that source line)
//   # expect: KIND rank R chunk C              (checker violation naming that slot)
// and an optional "# params: NAME=VALUE ..." line overrides header parameters.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lang/resccl.h"
#include "lang/semantic_check.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = TUCCL_SOURCE_DIR;

struct Shape {
  int nodes;
  int gpusPerNode;
};
const Shape kShapes[] = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};

Algorithm compileShape(const std::string& file, Shape shape) {
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", shape.nodes * shape.gpusPerNode}, {"GPUPerNode", shape.gpusPerNode}};
  return compileResccl(readSourceFile((kSourceDir / "examples/algorithms" / file).string()), options).value();
}

class ExampleTest : public testing::TestWithParam<std::string> {};

TEST_P(ExampleTest, VerifiesAtEveryShape) {
  for (Shape shape : kShapes) {
    SCOPED_TRACE(GetParam() + " at " + std::to_string(shape.nodes) + "x" + std::to_string(shape.gpusPerNode));
    Algorithm algorithm;
    try {
      algorithm = compileShape(GetParam(), shape);
    } catch (const DiagnosticError& error) {
      FAIL() << formatDiagnostic(error.diagnostic(), nullptr);
    }
    EXPECT_EQ(algorithm.nRanks, shape.nodes * shape.gpusPerNode);
    EXPECT_EQ(algorithm.ranksPerNode, shape.gpusPerNode);
    EXPECT_FALSE(algorithm.ops.empty());
    CheckReport report = checkAlgorithm(algorithm);
    EXPECT_TRUE(report.ok()) << (report.violation ? report.violation->message : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleTest,
                         testing::Values("hm_allreduce.resccl", "hm_allgather.resccl", "ring_allgather.resccl",
                                         "ring_allreduce.resccl", "direct_allgather.resccl", "chain_broadcast.resccl",
                                         "binomial_broadcast.resccl", "chain_reduce.resccl", "binomial_reduce.resccl",
                                         "ring_reducescatter.resccl"),
                         [](const testing::TestParamInfo<std::string>& param) {
                           return param.param.substr(0, param.param.find('.'));
                         });

TEST(Examples, HmAllReduceOperationCounts) {
  // Phases 1 and 4: nodes * G * nodes * (G - 1) each; phases 2 and 3: nodes * G * (nodes - 1).
  for (Shape shape : kShapes) {
    const int64_t n = shape.nodes, g = shape.gpusPerNode;
    Algorithm algorithm = compileShape("hm_allreduce.resccl", shape);
    EXPECT_EQ(static_cast<int64_t>(algorithm.ops.size()), 2 * n * g * n * (g - 1) + 2 * n * g * (n - 1));
    EXPECT_EQ(algorithm.maxStep(), n * (g - 1) + 3 * n - 3);
    EXPECT_EQ(algorithm.collective, Collective::AllReduce);
  }
}

TEST(Examples, RootedExamplesVerifyAtEveryRoot) {
  // Broadcast and Reduce programs take their root as the Root parameter; 12 ranks is not a
  // power of two, so the binomial trees are incomplete there.
  for (const char* file : {"chain_broadcast.resccl", "binomial_broadcast.resccl", "chain_reduce.resccl",
                           "binomial_reduce.resccl"}) {
    for (Shape shape : {Shape{2, 4}, Shape{3, 4}}) {
      const int32_t n = shape.nodes * shape.gpusPerNode;
      for (int32_t root = 0; root < n; ++root) {
        SCOPED_TRACE(std::string(file) + " with " + std::to_string(n) + " ranks, root " + std::to_string(root));
        RescclOptions options;
        options.parameterOverrides = {{"nRanks", n}, {"GPUPerNode", shape.gpusPerNode}, {"Root", root}};
        const Algorithm algorithm =
            compileResccl(readSourceFile((kSourceDir / "examples/algorithms" / file).string()), options).value();
        EXPECT_EQ(algorithm.root, root);
        EXPECT_TRUE(algorithm.collective == Collective::Broadcast || algorithm.collective == Collective::Reduce);
        CheckReport report = checkAlgorithm(algorithm);
        EXPECT_TRUE(report.ok()) << (report.violation ? report.violation->message : "");
      }
    }
  }
}

TEST(Examples, DirectAllToAllVerifiesAtEveryShapeWithOneScratchBlockPerRank) {
  for (Shape shape : kShapes) {
    const int32_t n = shape.nodes * shape.gpusPerNode;
    SCOPED_TRACE("direct_alltoall with " + std::to_string(n) + " ranks");
    RescclOptions options;
    options.parameterOverrides = {{"nRanks", n}, {"GPUPerNode", shape.gpusPerNode}, {"nScratch", n}};
    const Algorithm algorithm =
        compileResccl(readSourceFile((kSourceDir / "examples/algorithms/direct_alltoall.resccl").string()), options)
            .value();
    EXPECT_EQ(algorithm.collective, Collective::AllToAll);
    EXPECT_EQ(static_cast<int64_t>(algorithm.ops.size()), 2 * int64_t{n} * (n - 1));
    EXPECT_EQ(algorithm.maxStep(), 1);
    CheckReport report = checkAlgorithm(algorithm);
    EXPECT_TRUE(report.ok()) << (report.violation ? report.violation->message : "");
  }
}

TEST(Examples, DirectAllReduceVerifiesAtEveryShapeWithAScratchChunkPerRankPair) {
  for (Shape shape : kShapes) {
    const int32_t n = shape.nodes * shape.gpusPerNode;
    SCOPED_TRACE("direct_allreduce with " + std::to_string(n) + " ranks");
    RescclOptions options;
    options.parameterOverrides = {{"nRanks", n}, {"GPUPerNode", shape.gpusPerNode}, {"nScratch", n * n}};
    const Algorithm algorithm =
        compileResccl(readSourceFile((kSourceDir / "examples/algorithms/direct_allreduce.resccl").string()), options)
            .value();
    EXPECT_EQ(algorithm.collective, Collective::AllReduce);
    // n(n-1) sends to the owners, n(n-1) local folds, n(n-1) sends of the results.
    EXPECT_EQ(static_cast<int64_t>(algorithm.ops.size()), 3 * int64_t{n} * (n - 1));
    EXPECT_EQ(algorithm.maxStep(), n);
    CheckReport report = checkAlgorithm(algorithm);
    EXPECT_TRUE(report.ok()) << (report.violation ? report.violation->message : "");
  }
}

TEST(Examples, RootedExampleOperationCounts) {
  // Every chain and binomial tree has nRanks - 1 edges, each carrying the nChunks = 4 chunks.
  for (const char* file : {"chain_broadcast.resccl", "binomial_broadcast.resccl", "chain_reduce.resccl",
                           "binomial_reduce.resccl"}) {
    for (Shape shape : kShapes) {
      const Algorithm algorithm = compileShape(file, shape);
      EXPECT_EQ(static_cast<int64_t>(algorithm.ops.size()), 4 * (shape.nodes * shape.gpusPerNode - 1)) << file;
    }
  }
  // The chains take n - 1 hops plus the pipeline of 4 chunks; the trees ceil(log2 n) rounds.
  EXPECT_EQ(compileShape("chain_broadcast.resccl", {4, 8}).maxStep(), 31 + 3 - 1);
  EXPECT_EQ(compileShape("binomial_broadcast.resccl", {4, 8}).maxStep(), 5 + 3 - 1);
  EXPECT_EQ(compileShape("binomial_reduce.resccl", {2, 4}).maxStep(), 3 + 3 - 1);
}

TEST(Examples, EveryExampleIsListed) {
  // A new example must be added to the parameterised list above (direct_alltoall and
  // direct_allreduce have their own tests: their scratch follows nRanks).
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "examples/algorithms")) {
    if (entry.path().extension() == ".resccl") ++count;
  }
  EXPECT_EQ(count, 12);
}

struct Expectation {
  std::string text;
  std::vector<std::pair<std::string, int64_t>> params;
};

Expectation readExpectation(const SourceText& source) {
  Expectation expectation;
  for (uint32_t line = 1; line <= source.lineCount(); ++line) {
    std::string_view text = source.line(line);
    if (text.rfind("# expect: ", 0) == 0) expectation.text = std::string(text.substr(10));
    if (text.rfind("# params: ", 0) == 0) {
      std::istringstream words{std::string(text.substr(10))};
      std::string word;
      while (words >> word) {
        size_t eq = word.find('=');
        expectation.params.emplace_back(word.substr(0, eq), std::stoll(word.substr(eq + 1)));
      }
    }
  }
  return expectation;
}

class BrokenProgramTest : public testing::TestWithParam<std::string> {};

TEST_P(BrokenProgramTest, RejectedWhereExpected) {
  SourceText source = readSourceFile(GetParam());
  Expectation expectation = readExpectation(source);
  ASSERT_FALSE(expectation.text.empty()) << "no '# expect:' line";
  RescclOptions options;
  options.parameterOverrides = expectation.params;
  options.maxStatements = 1'000'000;
  std::istringstream words(expectation.text);
  std::string kind;
  words >> kind;

  if (kind == "error") {
    std::string where, message;
    words >> where;
    std::getline(words >> std::ws, message);
    Expected<Algorithm> compiled = compileResccl(source, options);
    ASSERT_FALSE(compiled.ok()) << "expected a front-end error: " << expectation.text;
    const Diagnostic& diagnostic = compiled.diagnostic();
    std::string shown = formatDiagnostic(diagnostic, &source);
    EXPECT_EQ(compiled.status().code(), ErrorCode::InvalidInput);
    EXPECT_EQ(std::to_string(diagnostic.loc.line) + ":" + std::to_string(diagnostic.loc.column), where) << shown;
    EXPECT_NE(diagnostic.message.find(message), std::string::npos) << shown;
    EXPECT_EQ(diagnostic.file, GetParam());
    return;
  }

  Expected<Algorithm> compiled = compileResccl(source, options);
  ASSERT_TRUE(compiled.ok()) << formatDiagnostic(compiled.diagnostic(), &source);
  Algorithm algorithm = std::move(compiled).value();
  CheckReport report = checkAlgorithm(algorithm);
  ASSERT_FALSE(report.ok()) << "expected " << expectation.text;
  const Violation& violation = *report.violation;
  EXPECT_EQ(violationName(violation.kind), kind) << violation.message;
  std::string what;
  words >> what;
  if (what == "line") {
    uint32_t line = 0;
    words >> line;
    EXPECT_EQ(violation.loc.line, line) << violation.message;
  } else {
    ASSERT_EQ(what, "rank");
    std::string rank, chunkWord, chunk;
    words >> rank >> chunkWord >> chunk;
    EXPECT_NE(violation.message.find("rank " + rank + " "), std::string::npos) << violation.message;
    EXPECT_NE(violation.message.find("chunk " + chunk), std::string::npos) << violation.message;
  }
}

std::vector<std::string> brokenPrograms() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "tests/data/lang/broken")) {
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Broken, BrokenProgramTest, testing::ValuesIn(brokenPrograms()),
                         [](const testing::TestParamInfo<std::string>& param) {
                           std::string name = fs::path(param.param).stem().string();
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tuccl
