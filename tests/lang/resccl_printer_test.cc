// The ResCCLang printer: every bundled example printed and loaded back is the same algorithm
// (operations compared up to order, the checker passes, printing again gives the same text), and
// algorithms ResCCLang cannot express are refused naming why.
#include "lang/resccl_printer.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

#include <gtest/gtest.h>

#include "lang/msccl_xml.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

Algorithm compileFile(const fs::path& path, const std::vector<std::pair<std::string, int64_t>>& overrides = {}) {
  RescclOptions options;
  options.parameterOverrides = overrides;
  return compileResccl(readSourceFile(path.string()), options).value();
}

std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int, int, int>> opsUpToOrder(const Algorithm& a) {
  std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int, int, int>> ops;
  for (const Operation& op : a.ops) {
    ops.emplace_back(op.step, op.srcRank, op.dstRank, op.srcIndex, op.dstIndex, op.count, static_cast<int>(op.srcBuffer),
                     static_cast<int>(op.dstBuffer), static_cast<int>(op.kind));
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

void expectRoundTrip(const Algorithm& original) {
  Expected<std::string> text = printResccl(original);
  ASSERT_TRUE(text.ok()) << text.status().toString();
  Expected<Algorithm> loaded = compileResccl(SourceText("printed.resccl", *text));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString() << "\n" << text->substr(0, 2000);
  EXPECT_EQ(loaded->name, original.name);
  EXPECT_EQ(loaded->collective, original.collective);
  EXPECT_EQ(loaded->nRanks, original.nRanks);
  EXPECT_EQ(loaded->ranksPerNode, original.ranksPerNode);
  EXPECT_EQ(loaded->nicsPerNode, original.nicsPerNode);
  EXPECT_EQ(loaded->root, original.root);
  EXPECT_EQ(loaded->inPlace, original.inPlace);
  EXPECT_EQ(loaded->bufferChunks, original.bufferChunks);
  EXPECT_EQ(loaded->nChannels, original.nChannels);
  EXPECT_EQ(loaded->nWarps, original.nWarps);
  EXPECT_EQ(opsUpToOrder(*loaded), opsUpToOrder(original));
  const CheckReport report = checkAlgorithm(*loaded);
  EXPECT_TRUE(report.ok()) << (report.violation ? report.violation->message : "");
  Expected<std::string> again = printResccl(*loaded);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *text);
}

TEST(RescclPrinter, EveryExampleRoundTrips) {
  int examples = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms")) {
    if (entry.path().extension() != ".resccl") continue;
    SCOPED_TRACE(entry.path().filename().string());
    ++examples;
    expectRoundTrip(compileFile(entry.path()));
    expectRoundTrip(compileFile(entry.path(), {{"nRanks", 8}, {"GPUPerNode", 4}}));
  }
  EXPECT_GE(examples, 12);
}

TEST(RescclPrinter, WritesKeywordsAndEscapesTheName) {
  Algorithm a = compileFile(fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms/direct_alltoall.resccl",
                            {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 4}});
  a.name = "all \"to\" all \\ direct";
  Expected<std::string> text = printResccl(a);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("AlgoName=\"all \\\"to\\\" all \\\\ direct\""), std::string::npos) << *text;
  EXPECT_NE(text->find("transfer(0, 1, 0, 1, recv, dstChunk=0, dstBuf=\"scratch\")"), std::string::npos) << *text;
  EXPECT_NE(text->find("transfer(1, 1, 1, 0, recv, srcBuf=\"scratch\")"), std::string::npos) << *text;
  expectRoundTrip(a);
}

TEST(RescclPrinter, PrintsAnAlgorithmWithoutOperations) {
  Algorithm a;
  a.name = "empty";
  a.collective = Collective::AllReduce;
  a.nRanks = 1;
  a.inPlace = true;
  a.bufferChunks = {1, 1, 0};
  Expected<std::string> text = printResccl(a);
  ASSERT_TRUE(text.ok()) << text.status().toString();
  EXPECT_NE(text->find("    pass\n"), std::string::npos);
  Expected<Algorithm> loaded = compileResccl(SourceText("empty.resccl", *text));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_TRUE(loaded->ops.empty());
}

// Every valid MSCCL test file, out-of-place ones included (InPlace=0), prints as a program that
// loads back into the same algorithm: an imported file can be edited as ResCCLang.
TEST(RescclPrinter, EveryMscclTestFileRoundTrips) {
  int outOfPlace = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(TUCCL_SOURCE_DIR) / "tests/data/msccl")) {
    if (entry.path().extension() != ".xml") continue;
    SCOPED_TRACE(entry.path().filename().string());
    Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(entry.path().string());
    ASSERT_TRUE(imported.ok()) << imported.status().toString();
    expectRoundTrip(imported->algorithm);
    if (!imported->algorithm.inPlace) {
      ++outOfPlace;
      EXPECT_NE(printResccl(imported->algorithm)->find(", InPlace=0):\n"), std::string::npos);
    }
  }
  EXPECT_GE(outOfPlace, 4);
}

TEST(RescclPrinter, InPlaceIsZeroOrOne) {
  const std::string header = "def ResCCLAlgo(nRanks=2, OpType=\"Allgather\", nChunks=2, InPlace=";
  const std::string body = "):\n    transfer(0, 1, 0, 0, recv, srcBuf=\"input\", dstChunk=1)\n";
  Expected<Algorithm> separate = compileResccl(SourceText("a.resccl", header + "0" + body));
  ASSERT_TRUE(separate.ok()) << separate.status().toString();
  EXPECT_FALSE(separate->inPlace);
  Expected<Algorithm> bad = compileResccl(SourceText("a.resccl", header + "2" + body));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("InPlace"), std::string::npos) << bad.status().message();
}

void expectRefused(const Algorithm& a, const std::string& part) {
  Expected<std::string> text = printResccl(a);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), ErrorCode::Unsupported);
  EXPECT_NE(text.status().message().find("ResCCLang cannot express this algorithm: " + part), std::string::npos)
      << text.status().message();
}

TEST(RescclPrinter, RefusesWhatResccLangCannotExpress) {
  const Algorithm ring = compileFile(fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms/ring_allgather.resccl",
                                     {{"nRanks", 4}, {"GPUPerNode", 2}});
  Algorithm a = ring;
  a.bufferChunks[0] = 2;  // AllGather input of 2 chunks with an output of 4: not NCCL's
  expectRefused(a, "buffer sizes");
  a = ring;
  a.name = "two\nlines";
  expectRefused(a, "its name has a control character");
  a = ring;
  a.ranksPerNode = 3;
  expectRefused(a, "nRanks = 4 is not a multiple of the ranks per node (3)");
  a = ring;
  a.nWarps = 70'000;
  expectRefused(a, "a NICPerNode, nChannels or nWarps hint outside [0, 65536]");
  a = ring;
  a.ops[0].dstRank = 9;
  expectRefused(a, "");
}

}  // namespace
}  // namespace tuccl
