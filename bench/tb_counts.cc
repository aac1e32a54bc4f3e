// bench_tb_counts: thread blocks per rank and their utilisation for the HM programs on the four
// shapes of ResCCL Table 3 (2x4, 2x8, 4x4, 4x8), connection-based (MSCCL) vs state-based
// (ResCCL) allocation over HPDS and round-robin pipelines; then the scheduler's time on one
// large shape.
//
//   build/bench/bench_tb_counts [--large-ranks N]   (default 1024; 0 skips the timing)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lang/resccl.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/lowering.h"
#include "scheduler/tb_allocation.h"

namespace {

using namespace tuccl;

Algorithm compileProgram(const std::string& file, int nodes, int gpus) {
  const SourceText source = readSourceFile(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + file);
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", nodes * gpus}, {"GPUPerNode", gpus}};
  options.maxOperations = 64'000'000;
  options.maxStatements = 2'000'000'000;
  return compileResccl(source, options).value();
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void printTable() {
  std::printf("%-13s %-5s %-5s %5s  %-24s %5s %5s %7s %7s %7s\n", "algorithm", "shape", "sched", "subP", "allocation",
              "minTB", "maxTB", "busy", "avgIdle", "maxIdle");
  const int shapes[][2] = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};
  for (const char* file : {"hm_allreduce.resccl", "hm_allgather.resccl"}) {
    for (const auto& shape : shapes) {
      const Algorithm algorithm = compileProgram(file, shape[0], shape[1]);
      const Dag dag = buildDependencyDag(algorithm);
      const std::vector<int32_t> channels = channelsByForwarding(algorithm, dag);
      for (const Pipeline& pipeline : {scheduleHpds(dag), scheduleRoundRobin(dag)}) {
        const struct {
          const char* name;
          TbAllocationOptions options;
        } rows[] = {{"connection", {TbPolicy::ConnectionBased, {}}},
                    {"connection+ch (MSCCL)", {TbPolicy::ConnectionBased, channels}},
                    {"state", {TbPolicy::StateBased, {}}},
                    {"state+ch (ResCCL)", {TbPolicy::StateBased, channels}}};
        for (const auto& row : rows) {
          const TbUsage usage = measureTbUsage(algorithm, pipeline, allocateThreadBlocks(algorithm, dag, pipeline, row.options));
          std::printf("%-13s %dx%-3d %-5s %5d  %-24s %5d %5d %6.1f%% %6.1f%% %6.1f%%\n",
                      (std::string("HM ") + std::string(collectiveName(algorithm.collective))).c_str(), shape[0], shape[1],
                      std::string(schedulerName(pipeline.scheduler)).c_str(), pipeline.subPipelineCount(), row.name, usage.minTbs, usage.maxTbs,
                      100 * usage.busyFraction, 100 * usage.meanIdle, 100 * usage.maxIdle);
        }
      }
    }
  }
}

void timeLarge(int ranks) {
  const int gpus = 8;
  auto start = std::chrono::steady_clock::now();
  const Algorithm algorithm = compileProgram("hm_allreduce.resccl", ranks / gpus, gpus);
  const double compile = secondsSince(start);
  start = std::chrono::steady_clock::now();
  const Dag dag = buildDependencyDag(algorithm);
  const double dagSeconds = secondsSince(start);
  start = std::chrono::steady_clock::now();
  const Pipeline pipeline = scheduleHpds(dag);
  const double hpds = secondsSince(start);
  start = std::chrono::steady_clock::now();
  const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline);
  const double tb = secondsSince(start);
  start = std::chrono::steady_clock::now();
  const Plan plan = lowerToPlan(algorithm, dag, pipeline, allocation);
  const double lower = secondsSince(start);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("\nHM AllReduce, %d ranks: %zu tasks, %lld DAG edges, %d sub-pipelines\n", ranks, algorithm.ops.size(),
              static_cast<long long>(dag.edgeCount()), pipeline.subPipelineCount());
  std::printf("  compileResccl %.2fs  DAG %.2fs  HPDS %.2fs  TB allocation %.2fs  lowering %.2fs  peak RSS %.0f MiB\n", compile,
              dagSeconds, hpds, tb, lower, usage.ru_maxrss / 1024.0);
  (void)plan;
}

}  // namespace

int main(int argc, char** argv) {
  int largeRanks = 1024;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--large-ranks") == 0 && i + 1 < argc) {
      largeRanks = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--large-ranks N]\n", argv[0]);
      return 2;
    }
  }
  try {
    printTable();
    if (largeRanks > 0) timeLarge(largeRanks);
  } catch (const DiagnosticError& error) {
    std::fprintf(stderr, "%s\n", formatDiagnostic(error.diagnostic(), nullptr).c_str());
    return 1;
  }
  return 0;
}
