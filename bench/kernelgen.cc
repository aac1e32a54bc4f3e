// bench_kernelgen: kernel generation as the cluster grows. Per algorithm and scale (8 to 1,024
// ranks by default): the plan's entries, the source bytes of the straight-line kernels (one per
// rank, one block per entry) against the rerolled role kernels, the distinct kernels and the
// per-rank value tables, the generation time, NVRTC seconds per distinct kernel (small scales by
// default; --nvrtc-max-ranks for more) and the total compile time, and the peak memory.
//
//   build/bench/bench_kernelgen [--max-ranks N] [--gpus-per-node G] [--nvrtc-max-ranks N] [--arch sm_90]
//                               [--straight-max-ranks N] [--algorithm NAME ...]
//
// Each row runs in a child process so its peak resident memory (ru_maxrss) is its own. NVRTC
// compiles into a fresh cache directory (nothing is read back), one worker per core.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/compile.h"
#include "kernelgen/nvrtc.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"

namespace {

struct Row {
  long long entries = 0;
  long long straightBytes = -1;  ///< -1: not measured at this scale
  long long bytes = 0;
  int kernels = 0;
  long long tableValues = 0;  ///< summed over ranks
  double planSeconds = 0;
  double generateSeconds = 0;
  double nvrtcSeconds = -1;  ///< wall time of compiling every distinct kernel; -1: not measured
  int nvrtcFailures = 0;
};

struct Options {
  int maxRanks = 1024;
  int gpusPerNode = 8;
  int nvrtcMaxRanks = 32;
  int straightMaxRanks = 128;
  std::string arch = "sm_90";
  std::vector<std::string> algorithms;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

[[noreturn]] void fail(const tuccl::Status& status) {
  std::fprintf(stderr, "%s\n", status.toString().c_str());
  _exit(2);
}

// The straight-line kernels' source bytes: one kernel per rank, one block per entry.
long long straightBytes(const tuccl::Plan& plan) {
  tuccl::Expected<tuccl::KernelLayout> layout = tuccl::layoutKernels(plan);
  if (!layout) fail(layout.status());
  long long bytes = 0;
  for (const tuccl::GeneratedKernel& kernel : tuccl::generateKernels(plan, *layout, {false, false}).kernels) {
    bytes += static_cast<long long>(kernel.source.size());
  }
  return bytes;
}

// NVRTC over every distinct kernel (compilePlan's CUBIN target) into a fresh cache directory.
void measureNvrtc(tuccl::CompiledPlan& compiled, const Options& options, Row& row) {
  tuccl::Targets targets;
  targets.cudaArch = options.arch;
  targets.cacheDir = (std::filesystem::temp_directory_path() / ("tuccl-bench-kernelgen-" + std::to_string(getpid())))
                         .string();
  const auto start = std::chrono::steady_clock::now();
  if (!tuccl::buildTargets(compiled, targets)) row.nvrtcFailures = 1;
  row.nvrtcSeconds = secondsSince(start);
  std::error_code ignored;
  std::filesystem::remove_all(targets.cacheDir, ignored);
}

Row measure(const std::string& name, int ranks, const Options& options) {
  Row row;
  auto start = std::chrono::steady_clock::now();
  const std::string path = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl";
  tuccl::Expected<tuccl::Algorithm> algorithm =
      tuccl::loadRescclAlgorithm(path, ranks, std::min(ranks, options.gpusPerNode));
  if (!algorithm) fail(algorithm.status());
  tuccl::Expected<tuccl::Plan> plan = tuccl::buildPlan(*algorithm, tuccl::PlanRequest{});
  if (!plan) fail(plan.status());
  row.planSeconds = secondsSince(start);
  for (const tuccl::PlanRank& rank : plan->ranks) {
    for (const tuccl::PlanTb& tb : rank.tbs) row.entries += static_cast<long long>(tb.entries.size());
  }
  if (ranks <= options.straightMaxRanks) row.straightBytes = straightBytes(*plan);
  start = std::chrono::steady_clock::now();
  tuccl::Expected<tuccl::CompiledPlan> compiled = tuccl::compilePlan(std::move(*plan), tuccl::Targets{});
  if (!compiled) fail(compiled.status());
  row.generateSeconds = secondsSince(start);
  const tuccl::GeneratedKernels& generated = compiled->kernels;
  row.kernels = static_cast<int>(generated.kernels.size());
  for (const tuccl::GeneratedKernel& kernel : generated.kernels) row.bytes += static_cast<long long>(kernel.source.size());
  for (const tuccl::RankKernel& rank : generated.ranks) row.tableValues += static_cast<long long>(rank.values.size());
  if (ranks <= options.nvrtcMaxRanks && tuccl::nvrtcAvailable()) measureNvrtc(*compiled, options, row);
  return row;
}

bool parseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const bool hasValue = i + 1 < argc;
    if (std::strcmp(argv[i], "--max-ranks") == 0 && hasValue) {
      options.maxRanks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--gpus-per-node") == 0 && hasValue) {
      options.gpusPerNode = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--nvrtc-max-ranks") == 0 && hasValue) {
      options.nvrtcMaxRanks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--straight-max-ranks") == 0 && hasValue) {
      options.straightMaxRanks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--arch") == 0 && hasValue) {
      options.arch = argv[++i];
    } else if (std::strcmp(argv[i], "--algorithm") == 0 && hasValue) {
      options.algorithms.emplace_back(argv[++i]);
    } else {
      return false;
    }
  }
  if (options.algorithms.empty()) options.algorithms = {"hm_allreduce", "ring_allreduce"};
  return options.gpusPerNode > 0 && options.maxRanks >= options.gpusPerNode;
}

std::string orDash(double value, const char* format) {
  if (value < 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parseOptions(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: %s [--max-ranks N] [--gpus-per-node G] [--nvrtc-max-ranks N] [--straight-max-ranks N] "
                 "[--arch sm_90] [--algorithm NAME ...]\n",
                 argv[0]);
    return 2;
  }
  std::printf("# kernel generation, %d GPUs per node, NVRTC %s for %s with %u workers up to %d ranks; straight-line "
              "sources up to %d ranks\n",
              options.gpusPerNode, tuccl::nvrtcAvailable() ? tuccl::nvrtcVersionText().c_str() : "(none)",
              options.arch.c_str(), std::max(1u, std::thread::hardware_concurrency()), options.nvrtcMaxRanks,
              options.straightMaxRanks);
  std::printf("%-15s %6s %9s %12s %11s %7s %11s %7s %7s %9s %9s %8s\n", "algorithm", "ranks", "entries",
              "straight_KB", "source_KB", "kernels", "table_vals", "plan_s", "gen_s", "nvrtc_s/k", "total_s",
              "peak_MiB");
  for (const std::string& name : options.algorithms) {
    for (int factor : {1, 4, 16, 128}) {  // 8, 32, 128 and 1,024 ranks with 8 GPUs per node
      const int ranks = options.gpusPerNode * factor;
      if (ranks > options.maxRanks) break;
      int pipefd[2];
      if (pipe(pipefd) != 0) return 1;
      const pid_t child = fork();
      if (child < 0) return 1;
      if (child == 0) {
        close(pipefd[0]);
        const Row row = measure(name, ranks, options);
        const ssize_t written = write(pipefd[1], &row, sizeof(row));
        _exit(written == static_cast<ssize_t>(sizeof(row)) ? 0 : 1);
      }
      close(pipefd[1]);
      Row row;
      const ssize_t got = read(pipefd[0], &row, sizeof(row));
      close(pipefd[0]);
      int status = 0;
      struct rusage usage {};
      wait4(child, &status, 0, &usage);
      if (got != static_cast<ssize_t>(sizeof(row)) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("%-15s %6d  failed (see above)\n", name.c_str(), ranks);
        return 1;
      }
      const double total = row.generateSeconds + (row.nvrtcSeconds > 0 ? row.nvrtcSeconds : 0);
      std::printf("%-15s %6d %9lld %12s %11.1f %7d %11lld %7.2f %7.2f %9s %9s %8.1f%s\n", name.c_str(), ranks,
                  row.entries, orDash(row.straightBytes < 0 ? -1 : row.straightBytes / 1024.0, "%.1f").c_str(),
                  row.bytes / 1024.0, row.kernels, row.tableValues, row.planSeconds, row.generateSeconds,
                  orDash(row.nvrtcSeconds < 0 ? -1 : row.nvrtcSeconds / row.kernels, "%.2f").c_str(),
                  orDash(row.nvrtcSeconds < 0 ? -1 : total, "%.2f").c_str(), usage.ru_maxrss / 1024.0,
                  row.nvrtcFailures > 0 ? "  (NVRTC failed)" : "");
      std::fflush(stdout);
    }
  }
  return 0;
}
