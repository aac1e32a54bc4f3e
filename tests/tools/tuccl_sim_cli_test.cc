#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/run_tool.h"

namespace {

using tuccl::tooltest::runCommand;
using tuccl::tooltest::ToolRun;

ToolRun runSim(const std::string& arguments) { return runCommand(std::string(TUCCL_SIM) + " " + arguments); }

std::string example(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name; }

// The numeric rows of an nccl-tests-shaped table: size, count, type, redop, time, algbw, busbw, bound, eff.
std::vector<std::vector<std::string>> rows(const std::string& output) {
  std::vector<std::vector<std::string>> result;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> fields;
    std::string word;
    while (words >> word) fields.push_back(word);
    if (!fields.empty() && std::isdigit(static_cast<unsigned char>(fields[0][0]))) result.push_back(fields);
  }
  return result;
}

TEST(TucclSim, PrintsAnNcclTestsTableAboveTheBound) {
  ToolRun r = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=1 --sizes 1M:64M -f 4");
  ASSERT_EQ(r.status, 0) << r.output;
  auto table = rows(r.output);
  ASSERT_EQ(table.size(), 4u) << r.output;  // 1M, 4M, 16M, 64M
  for (const auto& row : table) {
    ASSERT_GE(row.size(), 9u);
    const double time = std::stod(row[4]), bound = std::stod(row[7]), efficiency = std::stod(row[8]);
    EXPECT_GE(time, bound) << r.output;
    EXPECT_GT(efficiency, 0.0);
    EXPECT_LE(efficiency, 100.0);
  }
  EXPECT_EQ(table[0][0], "1048576");
  EXPECT_NE(r.output.find("# Avg bus bandwidth"), std::string::npos);
}

TEST(TucclSim, ComparesSchedulersAndSimulatesAPlanFile) {
  ToolRun compare = runSim(example("hm_allreduce.resccl") +
                           " --topo preset:resccl-a100:nodes=2,gpus=4 --sizes 8M:8M --compare hpds,rr,algorithm");
  ASSERT_EQ(compare.status, 0) << compare.output;
  EXPECT_NE(compare.output.find("hpds(us)"), std::string::npos) << compare.output;
  EXPECT_NE(compare.output.find("algorithm(us)"), std::string::npos) << compare.output;

  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "tuccl_sim_cli_plan";
  std::filesystem::remove_all(dir);
  ToolRun compile = runCommand(std::string(TUCCL_COMPILE) + " " + example("hm_allgather.resccl") +
                               " -p nRanks=8 -p GPUPerNode=4 --no-cubin -o " + dir.string());
  ASSERT_EQ(compile.status, 0) << compile.output;
  std::filesystem::path trace = dir / "trace.json";
  ToolRun plan = runSim((dir / "plan.json").string() + " --topo preset:resccl-a100:nodes=2,gpus=4 --sizes 16M:16M" +
                        " --trace " + trace.string());
  ASSERT_EQ(plan.status, 0) << plan.output;
  EXPECT_EQ(rows(plan.output).size(), 1u) << plan.output;
  std::ifstream in(trace);
  nlohmann::json events = nlohmann::json::parse(in);
  ASSERT_TRUE(events.contains("traceEvents"));
  EXPECT_GT(events["traceEvents"].size(), 10u);
  std::filesystem::remove_all(dir);
}

TEST(TucclSim, BadInputsExitTwo) {
  EXPECT_EQ(runSim("/nonexistent.resccl").status, 2);
  EXPECT_EQ(runSim(example("ring_allgather.resccl") + " --topo preset:no-such-machine").status, 2);
  EXPECT_EQ(runSim(example("ring_allgather.resccl") + " --sizes 4G:1K").status, 2);
  EXPECT_EQ(runSim(example("ring_allgather.resccl") + " --sizes lots").status, 2);
  EXPECT_EQ(runSim(example("ring_allgather.resccl") + " --scheduler fifo").status, 2);
  // The shape of the program must fit the topology.
  EXPECT_EQ(runSim(example("hm_allreduce.resccl") + " --topo preset:dgx-a100:nodes=2 --ranks 12").status, 2);
}

// Hostile numbers are refused before any work, with the range in human numbers.
TEST(TucclSim, NumbersOutOfRangeAreRefusedWithTheRange) {
  const std::string algorithm = example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=1";
  ToolRun fine = runSim(algorithm + " -f 1.0000001");
  EXPECT_EQ(fine.status, 2) << fine.output;
  EXPECT_NE(fine.output.find("must be between 1.01 and 1,024"), std::string::npos) << fine.output;
  ToolRun grid = runSim(algorithm + " -f 1.01 --sizes 1K:4G");
  EXPECT_EQ(grid.status, 2) << grid.output;
  EXPECT_NE(grid.output.find("use a factor of at least 1.0151"), std::string::npos) << grid.output;
  for (const char* bad : {"-f nan", "-f inf", "-f -2", "--threads nan", "--stages -1", "--chunk-size -5"}) {
    ToolRun r = runSim(algorithm + " " + bad);
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.output;
  }
  ToolRun tiny = runSim(algorithm + " --chunk-size 1");
  EXPECT_EQ(tiny.status, 2) << tiny.output;
  EXPECT_NE(tiny.output.find("--chunk-size: '1' is out of range: must be between 256 B and 1 GiB"), std::string::npos)
      << tiny.output;
  // A chunk size the option allows but that cuts the message into millions of micro-batches.
  ToolRun slices = runSim(algorithm + " --chunk-size 256 --sizes 4G");
  EXPECT_EQ(slices.status, 2) << slices.output;
  EXPECT_NE(slices.output.find("the simulator takes at most 65,536: use a chunk size of at least"), std::string::npos)
      << slices.output;
}

// --trace never replaces a file without --force, and its folder is checked before the simulation.
TEST(TucclSim, TraceRefusesAnExistingFileWithoutForce) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "tuccl_sim_cli_trace";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path trace = dir / "trace.json";
  std::ofstream(trace) << "keep me";
  const std::string run = example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=1 --sizes 1M --trace " +
                          trace.string();
  ToolRun refused = runSim(run);
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("exists; pass --force to overwrite it"), std::string::npos) << refused.output;
  EXPECT_EQ(rows(refused.output).size(), 0u) << "refused before any work\n" << refused.output;
  std::ifstream kept(trace);
  std::string content((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "keep me");
  ToolRun forced = runSim(run + " --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  ToolRun intoFile = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=1 --sizes 1M --trace " +
                            (trace / "x.json").string());
  EXPECT_EQ(intoFile.status, 2) << intoFile.output;
  EXPECT_NE(intoFile.output.find("not a directory"), std::string::npos) << intoFile.output;
  ToolRun directory = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=1 --trace " + dir.string());
  EXPECT_EQ(directory.status, 2) << directory.output;
  EXPECT_NE(directory.output.find("is a directory"), std::string::npos) << directory.output;
  std::filesystem::remove_all(dir);
}

// A JSON file whose values have the wrong type is reported with the file's name and without the
// JSON library's internal tag.
TEST(TucclSim, AJsonValueOfTheWrongTypeNamesTheFile) {
  const std::filesystem::path cost = std::filesystem::path(testing::TempDir()) / "tuccl_sim_bad_cost.json";
  std::ofstream(cost) << "{\"syncOverheadUs\": \"fast\"}\n";
  ToolRun r = runSim("--dump-cost --cost " + cost.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(cost.string() + ": error: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[json.exception"), std::string::npos) << r.output;
  std::filesystem::remove(cost);
}

std::string msccl(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl/" + name; }

TEST(TucclSim, SimulatesMscclXmlAsWrittenBesideTheSchedulers) {
  ToolRun r = runSim(msccl("ring_allreduce_2ch.xml") +
                     " --topo preset:dgx-a100:nodes=1,gpus=4 --sizes 64M:64M --compare hpds,as-written");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("as-written(us)"), std::string::npos) << r.output;
  auto table = rows(r.output);
  ASSERT_EQ(table.size(), 1u) << r.output;
  ASSERT_GE(table[0].size(), 9u) << r.output;
  EXPECT_GT(std::stod(table[0][3]), 0.0);  // hpds
  EXPECT_GT(std::stod(table[0][6]), 0.0);  // as-written

  ToolRun single = runSim(msccl("alltoall_copy.xml") + " --topo preset:dgx-a100:nodes=1,gpus=4 --sizes 1M:1M "
                                                       "--scheduler as-written");
  ASSERT_EQ(single.status, 0) << single.output;
  EXPECT_NE(single.output.find("# scheduler as-written (algorithm level"), std::string::npos) << single.output;
}

TEST(TucclSim, RefusesRescclParametersForXmlAndAsWrittenForResccl) {
  ToolRun ranks = runSim(msccl("ring_allreduce_1ch.xml") + " --topo preset:dgx-a100:nodes=1,gpus=4 --ranks 4");
  EXPECT_EQ(ranks.status, 2) << ranks.output;
  EXPECT_NE(ranks.output.find("ResCCLang parameters"), std::string::npos) << ranks.output;

  ToolRun size = runSim(msccl("ring_allreduce_1ch.xml") + " --topo preset:dgx-a100:nodes=1");
  EXPECT_EQ(size.status, 2) << size.output;
  EXPECT_NE(size.output.find("is for 4 GPUs"), std::string::npos) << size.output;

  ToolRun asWritten = runSim(example("ring_allreduce.resccl") + " --topo preset:dgx-a100:nodes=1 --sizes 1M:1M "
                                                                "--compare hpds,as-written");
  EXPECT_EQ(asWritten.status, 2) << asWritten.output;
  EXPECT_NE(asWritten.output.find("as-written needs an MSCCL XML input"), std::string::npos) << asWritten.output;
}


TEST(TucclSim, VsNcclAddsNcclsSimulatedPlanTheSpeedUpOverItAndTheModel) {
  const std::string args = example("ring_allreduce.resccl") + " --topo preset:dgx-a100 --sizes 1K:1G -f 1024";
  ToolRun plain = runSim(args);
  ToolRun vs = runSim(args + " --vs-nccl");
  ASSERT_EQ(plain.status, 0) << plain.output;
  ASSERT_EQ(vs.status, 0) << vs.output;
  EXPECT_EQ(plain.output.find("xNCCL"), std::string::npos) << plain.output;  // unchanged without the flag
  EXPECT_NE(vs.output.find("xNCCL"), std::string::npos) << vs.output;
  const auto plainRows = rows(plain.output), vsRows = rows(vs.output);
  ASSERT_EQ(vsRows.size(), 3u) << vs.output;  // 1K, 1M, 1G
  ASSERT_EQ(plainRows.size(), vsRows.size());
  for (size_t i = 0; i < vsRows.size(); ++i) {
    // The nine columns, NCCL's plan simulated, its choice, xNCCL, the NCCL model's time.
    ASSERT_EQ(vsRows[i].size(), 13u) << vs.output;
    for (size_t c = 0; c < 9; ++c) EXPECT_EQ(vsRows[i][c], plainRows[i][c]);
    const double time = std::stod(vsRows[i][4]), ncclTime = std::stod(vsRows[i][9]);
    const std::string speedup = vsRows[i][11];
    ASSERT_EQ(speedup.back(), 'x');
    EXPECT_NEAR(std::stod(speedup), ncclTime / time, 0.01 + 0.01 * ncclTime / time) << vs.output;
    EXPECT_GT(std::stod(vsRows[i][12]), 0) << vs.output;
    // Simulated, NCCL's plan is never below the collective's lower bound (the model's formula can be).
    EXPECT_GE(ncclTime, std::stod(vsRows[i][7])) << vs.output;
  }
  EXPECT_EQ(vsRows[0][10].rfind("RING/LL/", 0), 0u) << vs.output;      // NCCL: LL at 1 KiB
  EXPECT_EQ(vsRows[2][10].rfind("RING/Simple/", 0), 0u) << vs.output;  // Simple at 1 GiB

  ToolRun compare = runSim(example("ring_allreduce.resccl") +
                           " --topo preset:dgx-a100:nodes=2 --sizes 1M:1M --compare hpds,rr --vs-nccl");
  ASSERT_EQ(compare.status, 0) << compare.output;
  EXPECT_NE(compare.output.find("nccl-sim(us)"), std::string::npos) << compare.output;
  EXPECT_NE(compare.output.find("model(us)"), std::string::npos) << compare.output;
  EXPECT_NE(compare.output.find("xNCCL"), std::string::npos) << compare.output;
}

TEST(TucclSim, NodesComposesCopiesOfOneNode) {
  const std::string xml = std::string(TUCCL_SOURCE_DIR) + "/tests/data/topo/nccl/a100-nvswitch-full.xml";
  ToolRun two = runSim(example("ring_allgather.resccl") + " --topo " + xml + " --nodes 2 --sizes 1M:1M");
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("16 ranks, 2 nodes"), std::string::npos) << two.output;
  // A preset gets nodes=N: the same table as the spec saying it.
  ToolRun preset = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100 --nodes 2 --sizes 1M:4M");
  ToolRun spec = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=2 --sizes 1M:4M");
  ASSERT_EQ(preset.status, 0) << preset.output;
  EXPECT_EQ(rows(preset.output), rows(spec.output));
  EXPECT_NE(preset.output.find("16 ranks, 2 nodes"), std::string::npos) << preset.output;
  // Without --topo, the default preset's node.
  ToolRun fallback = runSim(example("ring_allgather.resccl") + " --nodes 3 --sizes 1M:1M");
  ASSERT_EQ(fallback.status, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("24 ranks, 3 nodes"), std::string::npos) << fallback.output;
  // Two node counts that disagree, and a count that is not one, are refused.
  ToolRun conflict = runSim(example("ring_allgather.resccl") + " --topo preset:dgx-a100:nodes=2 --nodes 4");
  EXPECT_EQ(conflict.status, 2) << conflict.output;
  EXPECT_NE(conflict.output.find("disagree"), std::string::npos) << conflict.output;
  EXPECT_EQ(runSim(example("ring_allgather.resccl") + " --topo " + xml + " --nodes 0").status, 2);
}

}  // namespace
