// The ResCCLang parser and interpreter, through compileResccl (lang/resccl.h).
#include "lang/resccl_parser.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "lang/resccl.h"
#include "tests/lang/resccl_programs.h"

namespace tuccl {
namespace {

// The program's algorithm; a front-end error is rethrown as DiagnosticError for expectError.
Algorithm compile(const std::string& text, const RescclOptions& options = {}) {
  Expected<Algorithm> compiled = compileResccl(SourceText("algo.txt", text), options);
  throwIfError(compiled.status());
  return std::move(compiled).value();
}

// A program with the given body under a small AllReduce header.
std::string program(const std::string& body, const std::string& header = "nRanks=4, OpType=\"Allreduce\"") {
  return "def ResCCLAlgo(" + header + "):\n" + body;
}

// Expects an error at line:column whose message contains `part`.
void expectError(const std::string& text, uint32_t line, uint32_t column, const std::string& part,
                 const RescclOptions& options = {}) {
  try {
    compile(text, options);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const DiagnosticError& error) {
    const Diagnostic& d = error.diagnostic();
    EXPECT_EQ(d.file, "algo.txt");
    EXPECT_EQ(d.severity, Severity::Error);
    EXPECT_EQ(d.loc.line, line) << d.message;
    EXPECT_EQ(d.loc.column, column) << d.message;
    EXPECT_NE(d.message.find(part), std::string::npos) << d.message;
  }
}

// Evaluates `expression` and returns the value, through the chunk argument of a transfer on a
// large buffer (value + offset must lie in [0, 1000)).
int64_t evaluate(const std::string& expression, int64_t offset = 500) {
  Algorithm algorithm =
      compile(program("    transfer(0, 1, 0, (" + expression + ") + " + std::to_string(offset) + ", recv)\n",
                      "nRanks=2, OpType=\"Allreduce\", nChunks=1000"));
  return algorithm.ops.at(0).srcIndex - offset;
}

// ---- The paper's program -------------------------------------------------------------------

TEST(RescclParser, HmAllReduceFromThePaper) {
  Algorithm algorithm = compile(testing::kHmAllReduce);
  EXPECT_EQ(algorithm.name, "HM");
  EXPECT_EQ(algorithm.sourceName, "algo.txt");
  EXPECT_EQ(algorithm.collective, Collective::AllReduce);
  EXPECT_EQ(algorithm.nRanks, 32);
  EXPECT_EQ(algorithm.ranksPerNode, 8);
  EXPECT_EQ(algorithm.nicsPerNode, 8);
  EXPECT_EQ(algorithm.nChannels, 4);
  EXPECT_EQ(algorithm.nWarps, 16);
  EXPECT_EQ(algorithm.root, -1);
  EXPECT_TRUE(algorithm.inPlace);
  EXPECT_EQ(algorithm.bufferChunks, (std::array<int32_t, 3>{32, 32, 0}));
  ASSERT_EQ(algorithm.ops.size(), 1984u);
  EXPECT_TRUE(validateStructure(algorithm).ok());

  // Phase 1, n=0 r=0 baseStep=0 offset=0: 0 -> 1, step 0, chunk (1 % 8 + 0) % 32 = 1, reduce.
  const Operation& first = algorithm.ops[0];
  EXPECT_EQ(first.srcRank, 0);
  EXPECT_EQ(first.dstRank, 1);
  EXPECT_EQ(first.step, 0);
  EXPECT_EQ(first.srcIndex, 1);
  EXPECT_EQ(first.dstIndex, 1);
  EXPECT_EQ(first.count, 1);
  EXPECT_EQ(first.kind, OpKind::Reduce);
  EXPECT_EQ(first.srcBuffer, BufferKind::Output);
  EXPECT_EQ(first.dstBuffer, BufferKind::Output);
  EXPECT_EQ(first.loc, (SourceLoc{12, 21}));
  // Phase 1, n=0 r=0 baseStep=1 offset=2: 0 -> 3, step 1*7+2 = 9, chunk 3 + 8 = 11.
  const Operation& op9 = algorithm.ops[7 + 2];
  EXPECT_EQ(op9.dstRank, 3);
  EXPECT_EQ(op9.step, 9);
  EXPECT_EQ(op9.srcIndex, 11);
  // Phase 2 starts at 896: n=0 r=0 baseStep=0: 0 -> 8, step 28, chunk 0.
  const Operation& phase2 = algorithm.ops[896];
  EXPECT_EQ(phase2.srcRank, 0);
  EXPECT_EQ(phase2.dstRank, 8);
  EXPECT_EQ(phase2.step, 28);
  EXPECT_EQ(phase2.srcIndex, 0);
  EXPECT_EQ(phase2.kind, OpKind::Reduce);
  EXPECT_EQ(phase2.loc, (SourceLoc{19, 17}));
  // Phase 3 starts at 992: rank 31 sends to (31 + 8) % 32 = 7 and copies.
  const Operation& phase3 = algorithm.ops[992 + 3 * 31 + 2];
  EXPECT_EQ(phase3.srcRank, 31);
  EXPECT_EQ(phase3.dstRank, 7);
  EXPECT_EQ(phase3.step, 28 + 3 + 2);
  EXPECT_EQ(phase3.srcIndex, (31 + 32 - (2 + 3) * 8) % 32);
  EXPECT_EQ(phase3.kind, OpKind::Copy);
  EXPECT_EQ(phase3.loc, (SourceLoc{27, 17}));
  // The last one: n=3 r=7 baseStep=3 offset=6: 31 -> 30, step 28 + 6 + 3 = 37, chunk (31 + 24) % 32.
  const Operation& last = algorithm.ops.back();
  EXPECT_EQ(last.srcRank, 31);
  EXPECT_EQ(last.dstRank, 30);
  EXPECT_EQ(last.step, 37);
  EXPECT_EQ(last.srcIndex, 23);
  EXPECT_EQ(last.kind, OpKind::Copy);
  EXPECT_EQ(last.loc, (SourceLoc{35, 21}));
  EXPECT_EQ(algorithm.maxStep(), 37);
}

TEST(RescclParser, HeaderWithoutDef) {
  std::string text = testing::kHmAllReduce;
  text.erase(0, 4);  // "def "
  Algorithm algorithm = compile(text);
  EXPECT_EQ(algorithm.ops.size(), 1984u);
  EXPECT_EQ(algorithm.ops[0].loc, (SourceLoc{12, 21}));
}

TEST(RescclParser, ParameterOverridesReshapeTheProgram) {
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", 16}, {"GPUPerNode", 4}};
  Algorithm algorithm = compile(testing::kHmAllReduce, options);
  EXPECT_EQ(algorithm.nRanks, 16);
  EXPECT_EQ(algorithm.ranksPerNode, 4);
  EXPECT_EQ(algorithm.bufferChunks, (std::array<int32_t, 3>{16, 16, 0}));
  // 4 nodes of 4: 2 * (4*4*4*3) + 2 * (4*4*3)
  EXPECT_EQ(algorithm.ops.size(), 2u * (4 * 4 * 4 * 3) + 2u * (4 * 4 * 3));
  EXPECT_TRUE(validateStructure(algorithm).ok());
}

TEST(RescclParser, HmAllReduceAt1024Ranks) {
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", 1024}, {"GPUPerNode", 8}};
  SourceText source("hm.resccl", testing::kHmAllReduce);
  auto begin = std::chrono::steady_clock::now();
  Algorithm algorithm = compileResccl(source, options).value();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(algorithm.ops.size(), 2u * (128 * 8 * 128 * 7) + 2u * (128 * 8 * 127));
  EXPECT_EQ(algorithm.ops.size(), 2095104u);
  EXPECT_EQ(algorithm.nNodes(), 128);
  std::printf("[ timing   ] HM AllReduce, 1024 ranks: %zu operations parsed and run in %.3f s\n",
              algorithm.ops.size(), seconds);
}

// ---- Header ----------------------------------------------------------------------------------

TEST(RescclParser, HeaderParametersInAnyOrderAndExtensions) {
  Algorithm algorithm = compile(
      "def ResCCLAlgo(OpType=\"broadcast\", Root=3, nRanks=8, nChunks=4, nScratch=2, GPUPerNode=4):\n"
      "    transfer(Root, 0, 0, nChunks - 1, recv)\n"
      "    transfer(Root, 1, nScratch, 0, recv, dstBuf=\"scratch\", dstChunk=nScratch - 1)\n");
  EXPECT_EQ(algorithm.collective, Collective::Broadcast);
  EXPECT_EQ(algorithm.root, 3);
  EXPECT_EQ(algorithm.ranksPerNode, 4);
  EXPECT_EQ(algorithm.nicsPerNode, 0);
  EXPECT_EQ(algorithm.nChannels, 0);
  EXPECT_EQ(algorithm.bufferChunks, (std::array<int32_t, 3>{4, 4, 2}));
  EXPECT_EQ(algorithm.name, "algo");  // no AlgoName: the file name
  ASSERT_EQ(algorithm.ops.size(), 2u);
  EXPECT_EQ(algorithm.ops[0].srcRank, 3);
  EXPECT_EQ(algorithm.ops[0].srcIndex, 3);
  EXPECT_EQ(algorithm.ops[1].step, 2);
  EXPECT_EQ(algorithm.ops[1].dstBuffer, BufferKind::Scratch);
  EXPECT_EQ(algorithm.ops[1].dstIndex, 1);
}

TEST(RescclParser, BufferSizesPerCollective) {
  auto buffers = [](const std::string& header) {
    return compile(program("    pass\n", header)).bufferChunks;
  };
  EXPECT_EQ(buffers("nRanks=4, OpType=\"Allgather\""), (std::array<int32_t, 3>{1, 4, 0}));
  EXPECT_EQ(buffers("nRanks=4, OpType=\"Allgather\", nChunks=8"), (std::array<int32_t, 3>{2, 8, 0}));
  EXPECT_EQ(buffers("nRanks=4, OpType=\"Reducescatter\""), (std::array<int32_t, 3>{4, 1, 0}));
  EXPECT_EQ(buffers("nRanks=4, OpType=\"ALLTOALL\", nChunks=8"), (std::array<int32_t, 3>{8, 8, 0}));
  EXPECT_EQ(buffers("nRanks=4, OpType=\"Allreduce\", nChunks=6"), (std::array<int32_t, 3>{6, 6, 0}));
  EXPECT_EQ(buffers("nRanks=4, OpType=\"Reduce\", Root=0, nScratch=3"), (std::array<int32_t, 3>{4, 4, 3}));
}

TEST(RescclParser, ReduceScatterUsesTheInputBuffer) {
  Algorithm algorithm =
      compile(program("    transfer(0, 1, 0, 3, rrc)\n", "nRanks=4, OpType=\"Reducescatter\""));
  EXPECT_EQ(algorithm.ops[0].srcBuffer, BufferKind::Input);
  EXPECT_EQ(algorithm.ops[0].dstBuffer, BufferKind::Input);
  expectError(program("    transfer(0, 1, 0, 4, rrc)\n", "nRanks=4, OpType=\"Reducescatter\""), 2, 23,
              "transfer() chunk id 4 out of range [0, 4)");
}

TEST(RescclParser, HeaderParametersAreVariablesThatMayBeReassigned) {
  Algorithm algorithm =
      compile(program("    nRanks = nRanks * 2\n"
                      "    transfer(0, 1, nRanks, 0, recv)\n"));
  EXPECT_EQ(algorithm.nRanks, 4);  // the variable changed, not the collective
  EXPECT_EQ(algorithm.ops[0].step, 8);
}

TEST(RescclParser, HeaderErrors) {
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", nRank=3):\n    pass\n", 1, 46,
              "unknown header parameter 'nRank'");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", nRanks=3):\n    pass\n", 1, 46,
              "duplicate header parameter 'nRanks' (first given at line 1, column 16)");
  expectError("def ResCCLAlgo(nRanks=\"4\", OpType=\"Allreduce\"):\n    pass\n", 1, 23,
              "header parameter 'nRanks' takes an integer, found a string");
  expectError("def ResCCLAlgo(nRanks=4, OpType=Allreduce):\n    pass\n", 1, 33,
              "expected a string value for the header parameter 'OpType', found name 'Allreduce'");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allfoo\"):\n    pass\n", 1, 33, "unknown OpType \"Allfoo\"");
  expectError("def ResCCLAlgo(OpType=\"Allreduce\"):\n    pass\n", 1, 5,
              "missing required header parameter 'nRanks'");
  expectError("def ResCCLAlgo(nRanks=4):\n    pass\n", 1, 5, "missing required header parameter 'OpType'");
  expectError("def ResCCLAlgo(nRanks=0, OpType=\"Allreduce\"):\n    pass\n", 1, 23,
              "nRanks = 0: the number of ranks");
  expectError("def ResCCLAlgo(nRanks=32, OpType=\"Allreduce\", GPUPerNode=6):\n    pass\n", 1, 58,
              "GPUPerNode = 6: does not divide nRanks = 32");
  expectError("def ResCCLAlgo(nRanks=32, OpType=\"Allgather\", nChunks=48):\n    pass\n", 1, 55,
              "nChunks = 48: must be a multiple of nRanks = 32 for AllGather");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Broadcast\"):\n    pass\n", 1, 5,
              "missing header parameter 'Root'");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Reduce\", Root=4):\n    pass\n", 1, 48,
              "Root = 4: the root rank");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", Root=0):\n    pass\n", 1, 51,
              "Root applies only to Broadcast and Reduce");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\", nScratch=-1):\n    pass\n", 1, 55,
              "nScratch = -1");
  expectError("def Algo(nRanks=4, OpType=\"Allreduce\"):\n    pass\n", 1, 5, "expected the algorithm header");
  expectError("x = 3\n", 1, 1, "expected the algorithm header 'def' 'ResCCLAlgo(");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\")\n    pass\n", 1, 45,
              "expected ':' after the algorithm header, found end of line");
  expectError("def ResCCLAlgo(nRanks=4 OpType=\"Allreduce\"):\n    pass\n", 1, 25,
              "expected ')' after the header parameters, found name 'OpType'");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\npass\n", 2, 1,
              "expected an indented block after the algorithm header, found 'pass'");
  expectError("def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    pass\nx = 1\n", 3, 1,
              "unexpected name 'x' after the algorithm body");
  expectError("  def ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):\n    pass\n", 1, 3, "unexpected indent");
  expectError("", 1, 1, "expected the algorithm header");
}

TEST(RescclParser, OverrideErrors) {
  RescclOptions options;
  options.parameterOverrides = {{"nRank", 16}};
  expectError(testing::kHmAllReduce, 1, 5, "parameter override 'nRank=16': unknown parameter 'nRank'",
              options);
  options.parameterOverrides = {{"OpType", 1}};
  expectError(testing::kHmAllReduce, 1, 5, "'OpType' is a string parameter and cannot be overridden",
              options);
  options.parameterOverrides = {{"nRanks", 20}};
  expectError(testing::kHmAllReduce, 1, 97, "GPUPerNode = 8: does not divide nRanks = 20", options);
  options.parameterOverrides = {{"GPUPerNode", 3}};
  expectError(testing::kHmAllReduce, 1, 97, "(the value comes from a parameter override)", options);
}

TEST(RescclParser, OverrideMayAddAKnownParameter) {
  RescclOptions options;
  options.parameterOverrides = {{"GPUPerNode", 2}, {"nRanks", 8}};
  Algorithm algorithm = compile(program("    transfer(0, GPUPerNode, 0, 0, recv)\n"), options);
  EXPECT_EQ(algorithm.nRanks, 8);
  EXPECT_EQ(algorithm.ranksPerNode, 2);
  EXPECT_EQ(algorithm.ops[0].dstRank, 2);
  expectError(program("    x = GPUPerNode\n"), 2, 9,
              "unknown name 'GPUPerNode' (the header does not set this parameter)");
}

// ---- Statements ------------------------------------------------------------------------------

TEST(RescclParser, EveryConstruct) {
  Algorithm algorithm = compile(testing::kEverything);
  EXPECT_EQ(algorithm.name, "algo");
  EXPECT_EQ(algorithm.bufferChunks, (std::array<int32_t, 3>{4, 4, 2}));
  ASSERT_EQ(algorithm.ops.size(), 6u);
  EXPECT_EQ(algorithm.ops[0].kind, OpKind::Copy);
  EXPECT_EQ(algorithm.ops[1].kind, OpKind::Reduce);
  EXPECT_EQ(algorithm.ops[1].srcIndex, 1);
  EXPECT_EQ(algorithm.ops[1].dstIndex, 3);
  EXPECT_EQ(algorithm.ops[3].kind, OpKind::Copy);  // r == 3
  EXPECT_EQ(algorithm.ops[4].dstBuffer, BufferKind::Scratch);
  EXPECT_EQ(algorithm.ops[4].srcBuffer, BufferKind::Output);
  EXPECT_EQ(algorithm.ops[4].dstIndex, 1);
  EXPECT_EQ(algorithm.ops[5].count, 2);
  EXPECT_EQ(algorithm.ops[5].loc, (SourceLoc{18, 5}));
}

TEST(RescclParser, RangeForms) {
  auto steps = [](const std::string& range) {
    Algorithm algorithm =
        compile(program("    for i in " + range + ":\n        transfer(0, 1, i, 0, recv)\n"));
    std::vector<int32_t> result;
    for (const Operation& op : algorithm.ops) result.push_back(op.step);
    return result;
  };
  EXPECT_EQ(steps("range(3)"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(steps("range(2, 5)"), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(steps("range(1, 8, 3)"), (std::vector<int32_t>{1, 4, 7}));
  EXPECT_EQ(steps("range(5, 0, -2)"), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(steps("range(5, 5)"), (std::vector<int32_t>{}));
  EXPECT_EQ(steps("range(-3)"), (std::vector<int32_t>{}));
  EXPECT_EQ(steps("range(0, 5, -1)"), (std::vector<int32_t>{}));
}

TEST(RescclParser, RangeBoundsAreEvaluatedOnceAndTheVariableMayBeReassigned) {
  Algorithm algorithm =
      compile(program("    n = 3\n"
                      "    for i in range(n):\n"
                      "        n = 100\n"
                      "        transfer(0, 1, i, 0, recv)\n"
                      "        i = 50\n"
                      "    transfer(0, 1, i, 0, recv)\n"));
  ASSERT_EQ(algorithm.ops.size(), 4u);
  EXPECT_EQ(algorithm.ops[2].step, 2);
  EXPECT_EQ(algorithm.ops[3].step, 50);  // the variable keeps its last value after the loop
}

TEST(RescclParser, SameLineBodiesSemicolonsAndComments) {
  Algorithm algorithm = compile(
      "ResCCLAlgo(nRanks=4, OpType=\"Allreduce\"):  # header\n"
      "  # a comment\n"
      "\n"
      "  for i in range(3): transfer(0, 1, i, 0, recv)\n"
      "  if 1: a = 1; b = 2;\n"
      "  for j in range(2):\n"
      "      if j == 1: transfer(1, 2, a + b, j, rrc)\n"
      "      else: pass\n");
  ASSERT_EQ(algorithm.ops.size(), 4u);
  EXPECT_EQ(algorithm.ops[3].step, 3);
  EXPECT_EQ(algorithm.ops[3].loc, (SourceLoc{7, 18}));
}

TEST(RescclParser, TabIndentedProgram) {
  Algorithm algorithm = compile(
      "def ResCCLAlgo(nRanks=2, OpType=\"Allreduce\"):\n"
      "\tfor i in range(2):\n"
      "\t\ttransfer(i, 1 - i, 0, i, recv)\n");
  EXPECT_EQ(algorithm.ops.size(), 2u);
}

TEST(RescclParser, IfElifElse) {
  auto pick = [](int64_t x) {
    Algorithm algorithm = compile(program("    x = " + std::to_string(x) +
                                          "\n"
                                          "    if x < 0:\n"
                                          "        s = 1\n"
                                          "    elif x == 0 or x == 5:\n"
                                          "        s = 2\n"
                                          "    elif not x != 7 and x >= 7:\n"
                                          "        s = 3\n"
                                          "    else:\n"
                                          "        s = 4\n"
                                          "    transfer(0, 1, s, 0, recv)\n"));
    return algorithm.ops[0].step;
  };
  EXPECT_EQ(pick(-1), 1);
  EXPECT_EQ(pick(0), 2);
  EXPECT_EQ(pick(5), 2);
  EXPECT_EQ(pick(7), 3);
  EXPECT_EQ(pick(8), 4);
}

// ---- Expressions -----------------------------------------------------------------------------

TEST(RescclParser, PrecedenceAndUnaryOperators) {
  EXPECT_EQ(evaluate("1 + 2 * 3"), 7);
  EXPECT_EQ(evaluate("(1 + 2) * 3"), 9);
  EXPECT_EQ(evaluate("10 - 4 - 3"), 3);
  EXPECT_EQ(evaluate("100 // 10 // 5"), 2);
  EXPECT_EQ(evaluate("-3 * -3"), 9);
  EXPECT_EQ(evaluate("- - 4"), 4);
  EXPECT_EQ(evaluate("+4"), 4);
  EXPECT_EQ(evaluate("-7 % 3"), 2);  // (-7) % 3, as in Python
  EXPECT_EQ(evaluate("2 + 3 == 5"), 1);
  EXPECT_EQ(evaluate("1 < 2 and 3"), 3);
  EXPECT_EQ(evaluate("0 or 0"), 0);
  EXPECT_EQ(evaluate("0 and 1 // 0"), 0);  // short circuit
  EXPECT_EQ(evaluate("1 or 1 // 0"), 1);
  EXPECT_EQ(evaluate("not 0 + 1"), 0);
  EXPECT_EQ(evaluate("1_000 - 999"), 1);
}

// Python:  [(a, b, a // b, a % b) for a in (7, -7) for b in (2, -2)] and friends.
TEST(RescclParser, FloorDivisionAndModuloFollowPython) {
  struct Row {
    int64_t a, b, quotient, remainder;
  };
  const Row rows[] = {{7, 2, 3, 1},   {-7, 2, -4, 1},  {7, -2, -4, -1}, {-7, -2, 3, -1}, {6, 3, 2, 0},
                      {-6, 3, -2, 0}, {6, -3, -2, 0},  {0, 5, 0, 0},    {0, -5, 0, 0},   {1, 7, 0, 1},
                      {-1, 7, -1, 6}, {1, -7, -1, -6}, {-1, -7, 0, -1}, {13, 13, 1, 0},  {-13, 4, -4, 3}};
  for (const Row& row : rows) {
    std::string a = "(" + std::to_string(row.a) + ")";
    std::string b = "(" + std::to_string(row.b) + ")";
    EXPECT_EQ(evaluate(a + " // " + b), row.quotient) << row.a << " // " << row.b;
    EXPECT_EQ(evaluate(a + " / " + b), row.quotient) << row.a << " / " << row.b;
    EXPECT_EQ(evaluate(a + " % " + b), row.remainder) << row.a << " % " << row.b;
  }
}

TEST(RescclParser, LargeIntegers) {
  EXPECT_EQ(evaluate("9223372036854775807 - 9223372036854775806"), 1);
  EXPECT_EQ(evaluate("(-9223372036854775807 - 1) % 7"), 6);   // INT64_MIN % 7
  EXPECT_EQ(evaluate("(-9223372036854775807 - 1) % -1"), 0);  // no trap
  EXPECT_EQ(evaluate("(-9223372036854775807 - 1) // 2 // 1000000000000000000"), -5);
}

// ---- Errors ----------------------------------------------------------------------------------

TEST(RescclParser, EvaluationErrors) {
  expectError(program("    x = y + 1\n"), 2, 9, "unknown name 'y'");
  expectError(program("    x = 1\n    if x == 2:\n        y = 1\n    z = y\n"), 5, 9,
              "unknown name 'y' (it is used before it is assigned)");
  expectError(program("    x = 4 // (2 - 2)\n"), 2, 11, "division by zero");
  expectError(program("    x = 4 / 0\n"), 2, 11, "division by zero");
  expectError(program("    x = 4 % 0\n"), 2, 11, "modulo by zero");
  expectError(program("    x = 9223372036854775807 + 1\n"), 2, 29,
              "integer overflow: 9223372036854775807 + 1");
  expectError(program("    x = 3037000500 * 3037000500\n"), 2, 20, "integer overflow");
  expectError(program("    x = -9223372036854775807 - 2\n"), 2, 30, "integer overflow");
  expectError(program("    x = (-9223372036854775807 - 1) // -1\n"), 2, 36, "integer overflow");
  expectError(program("    x = OpType\n"), 2, 9, "'OpType' is a string header parameter");
  expectError(program("    for i in range(0, 5, 1 - 1):\n        pass\n"), 2, 26,
              "range() step must not be zero");
}

TEST(RescclParser, TransferRangeErrorsPointAtTheArgument) {
  expectError(program("    transfer(0, 1, 0, 40, recv)\n"), 2, 23,
              "transfer() chunk id 40 out of range [0, 4)");
  expectError(program("    c = 2\n    transfer(0, 1, 0, c * -1, recv)\n"), 3, 23,
              "transfer() chunk id -2 out of range [0, 4)");
  expectError(program("    transfer(4, 1, 0, 0, recv)\n"), 2, 14,
              "transfer() source rank 4 out of range [0, 4)");
  expectError(program("    transfer(0, (1 - 2), 0, 0, recv)\n"), 2, 17,
              "transfer() destination rank -1 out of range [0, 4)");
  expectError(program("    transfer(0, 1, -1, 0, recv)\n"), 2, 20, "transfer() step -1 is negative");
  expectError(program("    transfer(0, 1, 2147483648, 0, recv)\n"), 2, 20,
              "transfer() step 2147483648 is too large");
  expectError(program("    transfer(0, 1, 0, 3, recv, count=2)\n"), 2, 23,
              "transfer() chunk id 3 (count 2) out of range [0, 4)");
  expectError(program("    transfer(0, 1, 0, 0, recv, count=0)\n"), 2, 38,
              "transfer() count 0 is not positive");
  expectError(program("    transfer(0, 1, 0, 0, recv, dstChunk=4)\n"), 2, 41,
              "transfer() destination chunk id 4 out of range [0, 4)");
  expectError(
      program("    transfer(0, 1, 0, 0, recv, dstBuf=\"scratch\")\n"), 2, 23,
      "out of range [0, 0) of the scratch buffer (the scratch buffer is empty; set nScratch in the header)");
  // The column of a transfer spread over several lines.
  expectError(program("    transfer(0, 1, 0,\n             7, recv)\n"), 3, 14, "chunk id 7");
}

TEST(RescclParser, SyntaxErrors) {
  expectError(program("    transfer(0, 1, 0, 0, recv:\n"), 2, 30,
              "expected ')' after the arguments of transfer(), found ':'");
  expectError(program("    transfer(0, 1, 0, recv)\n"), 2, 23,
              "transfer() is missing its chunk id argument before the communication type recv");
  expectError(program("    transfer(0, 1, 0, 0, 1)\n"), 2, 26, "expected the communication type recv or rrc");
  expectError(program("    transfer(0, 1, 0)\n"), 2, 21, "transfer() is missing its chunk id argument");
  expectError(program("    transfer(0, 1, 0, 0, recv, 5)\n"), 2, 32, "this is a 6th");
  expectError(program("    transfer(0, 1, 0, 0, recv, bogus=1)\n"), 2, 32,
              "unknown transfer() argument 'bogus'");
  expectError(program("    transfer(0, 1, 0, 0, recv, count=1, count=2)\n"), 2, 41, "'count' given twice");
  expectError(program("    transfer(0, 1, 0, 0, recv, srcBuf=\"gpu\")\n"), 2, 39, "expected a buffer name");
  expectError(program("    x = (1 + 2\n    y = 3\n"), 3, 5,
              "expected ')' to close the '(' at line 2, column 9, found name 'y'");
  expectError(program("    x = 1 +\n"), 2, 12, "expected an expression, found end of line");
  expectError(program("    transfer(0, 1, 0, 0, recv\n\n"), 3, 1,
              "expected ')' after the arguments of transfer(), found end of file");
  expectError(program("    x = \"s\"\n"), 2, 9, "strings are not allowed in expressions");
  expectError(program("    x = min(1, 2)\n"), 2, 9, "function calls are not supported in expressions");
  expectError(program("    print(1)\n"), 2, 5, "unknown function 'print'");
  expectError(program("    x\n"), 2, 6, "expected '=' after the name 'x', found end of line");
  expectError(program("    x = 1 = 2\n"), 2, 11, "chained assignment");
  expectError(program("    x = 1 < 2 < 3\n"), 2, 15, "chained comparisons");
  expectError(program("    while 1:\n        pass\n"), 2, 5, "'while' is not supported");
  expectError(program("    for i in range(3)\n        pass\n"), 2, 22,
              "expected ':' after 'for ... in range(...)'");
  expectError(program("    for i in (3):\n        pass\n"), 2, 14, "expected 'range(...)' after 'in'");
  expectError(program("    for i range(3):\n        pass\n"), 2, 11,
              "expected 'in' after the loop variable 'i'");
  expectError(program("    for i in range():\n        pass\n"), 2, 14, "range() needs at least 1 argument");
  expectError(program("    for i in range(1, 2, 3, 4):\n        pass\n"), 2, 29,
              "range() takes at most 3 arguments");
  expectError(program("    for i in range(3):\n    pass\n"), 3, 5,
              "expected an indented block after 'for', found 'pass'");
  expectError(program("    x = 1\n        y = 2\n"), 3, 9, "unexpected indent");
  expectError(program("    else:\n        pass\n"), 2, 5, "'else' without a matching 'if'");
  expectError(program("    if 1: for i in range(2): pass\n"), 2, 11, "'for' must start its own line");
  expectError(program("    x = 1 2\n"), 2, 11,
              "expected the end of the line after the statement, found integer 2");
  expectError(program("    if 1:\n        pass\n      pass\n"), 4, 7,
              "unindent does not match any outer indentation level");
  expectError(program("    if 1:\n  \t  pass\n"), 3, 1, "inconsistent use of tabs and spaces in indentation");
  expectError(program("    if 1:\n\t\tpass\n"), 3, 1, "inconsistent use of tabs and spaces in indentation");
}

TEST(RescclParser, NestingLimits) {
  std::string deep = "    x = " + std::string(300, '(') + "1" + std::string(300, ')') + "\n";
  expectError(program(deep), 2, 210, "nested too deeply");
  std::string longSum = "    x = 1";
  for (int i = 0; i < 1000; ++i) longSum += " + 1";
  expectError(program(longSum + "\n"), 2, 807, "expression is nested too deeply (more than 200 levels)");
  std::string minus = "    x = " + std::string(1000, '-') + "1\n";
  expectError(program(minus), 2, 210, "nested too deeply");
  std::string blocks;
  for (int depth = 1; depth <= 120; ++depth) blocks += std::string(depth, ' ') + "if 1:\n";
  blocks += std::string(121, ' ') + "pass\n";
  expectError(program(blocks), 101, 101, "blocks are nested too deeply (more than 100 levels)");
}

TEST(RescclParser, RunawayProgramsHitTheLimits) {
  RescclOptions options;
  options.maxStatements = 10'000;
  expectError(program("    for i in range(1000000000000):\n        pass\n"), 3, 9,
              "the program executed more than 10000 statements, the limit (raise it with --max-statements",
              options);
  expectError(
      program("    x = 0\n    for i in range(100):\n        for j in range(100):\n            x = x + 1\n"),
      4, 9, "more than 10000 statements", options);
  options = {};
  options.maxOperations = 100;
  expectError(program("    for i in range(1000):\n        transfer(0, 1, i, 0, recv)\n"), 3, 9,
              "the program emitted more than 100 transfers, the limit (raise it with --max-ops", options);
  options.maxOperations = 1000;
  EXPECT_EQ(
      compile(program("    for i in range(1000):\n        transfer(0, 1, i, 0, recv)\n"), options).ops.size(),
      1000u);
}

TEST(RescclParser, DiagnosticFormatQuotesTheLine) {
  SourceText source("algo.txt", program("    transfer(0, 1, 0, 40, recv)\n"));
  Expected<Algorithm> compiled = compileResccl(source);
  ASSERT_FALSE(compiled.ok()) << "no error";
  {
    EXPECT_EQ(formatDiagnostic(compiled.diagnostic(), &source),
              "algo.txt:2:23: error: transfer() chunk id 40 out of range [0, 4)\n"
              " 2 |     transfer(0, 1, 0, 40, recv)\n"
              "   |                       ^\n");
  }
}

TEST(RescclParser, DocumentationExamples) {
  Algorithm ring = compile(
      "def ResCCLAlgo(nRanks=8, OpType=\"Allgather\", AlgoName=\"Ring\"):\n"
      "    # ring AllGather: in step s, rank r forwards chunk (r - s) mod n to its right neighbour\n"
      "    for step in range(nRanks - 1):\n"
      "        for r in range(nRanks):\n"
      "            transfer(r, (r + 1) % nRanks, step, (r - step) % nRanks, recv)\n");
  EXPECT_EQ(ring.ops.size(), 56u);
  EXPECT_EQ(ring.bufferChunks, (std::array<int32_t, 3>{1, 8, 0}));
  EXPECT_TRUE(validateStructure(ring).ok());
  Algorithm reduce = compile(
      "def ResCCLAlgo(nRanks=4, OpType=\"Reduce\", Root=0, nChunks=1, nScratch=1):\n"
      "    for r in range(1, nRanks):\n"
      "        transfer(r, Root, 2 * r - 2, 0, recv, dstBuf=\"scratch\")   # stage rank r's chunk at the "
      "root\n"
      "        transfer(Root, Root, 2 * r - 1, 0, rrc, srcBuf=\"scratch\")  # reduce it into the root's "
      "data\n");
  ASSERT_EQ(reduce.ops.size(), 6u);
  EXPECT_EQ(reduce.ops[0].dstBuffer, BufferKind::Scratch);
  EXPECT_EQ(reduce.ops[0].srcBuffer, BufferKind::Output);
  EXPECT_EQ(reduce.ops[1].srcBuffer, BufferKind::Scratch);
  EXPECT_TRUE(reduce.ops[1].isLocal());
  EXPECT_TRUE(validateStructure(reduce).ok());
}

// ---- The AST ---------------------------------------------------------------------------------

TEST(RescclParser, ResolvesVariablesToSlots) {
  RescclProgram parsed =
      parseResccl(SourceText("a.resccl", program("    a = nRanks\n    b = a + a\n    a = b\n")));
  EXPECT_EQ(parsed.slotNames, (std::vector<std::string>{"a", "nRanks", "b"}));
  ASSERT_EQ(parsed.header.size(), 2u);
  EXPECT_EQ(parsed.header[0].name, "nRanks");
  EXPECT_EQ(parsed.header[0].integer, 4);
  EXPECT_EQ(parsed.header[1].string, "Allreduce");
  EXPECT_EQ(parsed.blocks[parsed.body].statements.size(), 3u);
  EXPECT_EQ(parsed.transferCount, 0);
}

}  // namespace
}  // namespace tuccl
