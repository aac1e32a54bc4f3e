#include <filesystem>
#include <fstream>
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

}  // namespace
