// bench_sim_scaling: the simulator's cost as the cluster grows. Per collective (its example
// algorithm under HPDS, the program's channels, 1 MiB micro-batches, as tuccl-sim runs it) and
// message size, on the ResCCL A100 preset at 8 to 1,024 ranks: the simulated time, the wall
// seconds and the peak memory of simulatePlan, beside the reference engine's
// (simulatePlanReference, sim/reference_simulator.h) where it finishes within --reference-limit
// seconds. Building the plan (front end and scheduler) is timed apart.
//
//   build/bench/bench_sim_scaling [--collectives allreduce,allgather] [--sizes 1M,1G]
//       [--ranks 8,16,64,128,512,1024] [--reference-limit 30] [--no-reference]
//
// Each (collective, ranks, engine) runs in a child process; the peak is the child's VmHWM during
// the simulation (reset before it through /proc/self/clear_refs), with the plan resident: `sim
// MiB` is the part above the resident size before the simulation.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/reference_simulator.h"
#include "sim/simulator.h"
#include "support/text_values.h"
#include "cli/cli.h"

namespace {

struct Row {
  double planSeconds = 0;
  double planPeakMiB = 0;  // the child's peak while loading the algorithm and building the plan
  double simUs = 0;
  double wallSeconds = 0;
  double cpuSeconds = 0;  // user + system: what a loaded machine's wall seconds overstate
  double peakMiB = 0;
  double simMiB = 0;
};

const std::map<tuccl::Collective, const char*>& programs() {
  static const std::map<tuccl::Collective, const char*> table = {
      {tuccl::Collective::AllReduce, "hm_allreduce"},     {tuccl::Collective::AllGather, "hm_allgather"},
      {tuccl::Collective::ReduceScatter, "ring_reducescatter"}, {tuccl::Collective::AllToAll, "direct_alltoall"},
      {tuccl::Collective::Broadcast, "chain_broadcast"},  {tuccl::Collective::Reduce, "chain_reduce"}};
  return table;
}

/// A field of /proc/self/status in MiB ("VmHWM", "VmRSS").
double statusMiB(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) return std::atof(line.c_str() + prefix.size()) / 1024.0;
  }
  return 0;
}

void resetPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
}

double cpuSeconds() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The child: builds the plan, simulates every size, writes one Row per size to `out` as it goes.
/// With a limit, a simulation that runs longer is killed by SIGALRM (the parent sees the rows before).
int measure(int out, tuccl::Collective collective, int32_t ranks, int32_t perNode, const std::vector<int64_t>& sizes,
            bool reference, int limitSeconds) {
  const int32_t nodes = ranks / perNode;
  const tuccl::Network network =
      tuccl::loadNetwork("preset:resccl-a100:nodes=" + std::to_string(nodes) + (perNode == 8 ? "" : ",gpus=" + std::to_string(perNode)))
          .value();
  const std::string path = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + programs().at(collective) + ".resccl";
  auto start = std::chrono::steady_clock::now();
  tuccl::RescclParameters parameters{{"nRanks", ranks}, {"GPUPerNode", perNode}};
  // The direct AllToAll keeps one block per rank in scratch: nScratch follows the rank count.
  if (collective == tuccl::Collective::AllToAll) parameters.emplace_back("nScratch", ranks);
  const tuccl::Algorithm algorithm = tuccl::loadRescclAlgorithm(path, parameters).value();
  tuccl::PlanRequest request;
  request.config.nChannels = 0;  // the program's hint, as tuccl-sim
  const tuccl::Plan plan = tuccl::buildPlan(algorithm, request).value();
  const double planSeconds = secondsSince(start);
  const double planPeakMiB = statusMiB("VmHWM");
  for (const int64_t bytes : sizes) {
    tuccl::SimOptions options;
    options.messageBytes = bytes;
    Row row;
    row.planSeconds = planSeconds;
    row.planPeakMiB = planPeakMiB;
    malloc_trim(0);  // what the previous size freed goes back, so this one's peak is its own
    const double before = statusMiB("VmRSS");
    resetPeak();
    if (reference && limitSeconds > 0) alarm(static_cast<unsigned>(limitSeconds));
    const double cpuStart = cpuSeconds();
    start = std::chrono::steady_clock::now();
    const tuccl::Expected<tuccl::SimResult> result =
        reference ? tuccl::simulatePlanReference(plan, network, options) : tuccl::simulatePlan(plan, network, options);
    row.wallSeconds = secondsSince(start);
    row.cpuSeconds = cpuSeconds() - cpuStart;
    alarm(0);
    if (!result) {
      std::fprintf(stderr, "bench_sim_scaling: %s\n", result.status().message().c_str());
      return 1;
    }
    row.simUs = result->timeUs;
    row.peakMiB = statusMiB("VmHWM");
    row.simMiB = std::max(0.0, row.peakMiB - before);
    if (write(out, &row, sizeof(row)) != static_cast<ssize_t>(sizeof(row))) return 1;
  }
  return 0;
}

/// Runs measure() in a child; the rows it finished (fewer than sizes when it was stopped).
std::vector<Row> inChild(tuccl::Collective collective, int32_t ranks, int32_t perNode, const std::vector<int64_t>& sizes,
                         bool reference, int limitSeconds) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return {};
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return {};
  if (child == 0) {
    close(pipefd[0]);
    int status = 1;
    try {
      status = measure(pipefd[1], collective, ranks, perNode, sizes, reference, limitSeconds);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "bench_sim_scaling: %s\n", error.what());
    }
    _exit(status);
  }
  close(pipefd[1]);
  std::vector<Row> rows;
  Row row;
  while (read(pipefd[0], &row, sizeof(row)) == static_cast<ssize_t>(sizeof(row))) rows.push_back(row);
  close(pipefd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return rows;
}

std::string sizeLabel(int64_t bytes) { return tuccl::formatByteSize(static_cast<uint64_t>(bytes)); }

int run(int argc, char** argv) {
  CLI::App app{"bench_sim_scaling: simulation seconds and peak memory per collective and size, 8 to 1,024 ranks"};
  std::string collectives = "allreduce,allgather";
  std::string sizeText = "1M,1G";
  std::string rankText = "8,16,64,128,512,1024";
  int64_t perNode = 8;
  int64_t limit = 30;
  bool noReference = false;
  app.add_option("--collectives", collectives, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce")
      ->capture_default_str();
  app.add_option("--sizes", sizeText, "message sizes (K, M, G suffixes)")->capture_default_str();
  app.add_option("--ranks", rankText, "rank counts, multiples of --gpus-per-node")->capture_default_str();
  app.add_option("--gpus-per-node", perNode, "GPUs per node (the preset's node reduced to its first K GPUs)")
      ->transform(tuccl::cli::integerIn(1, 8))
      ->capture_default_str();
  app.add_option("--reference-limit", limit, "seconds the reference engine may take per simulation")
      ->transform(tuccl::cli::integerIn(1, 86'400))
      ->capture_default_str();
  app.add_flag("--no-reference", noReference, "skip the reference engine");
  if (const std::optional<int> exit = tuccl::cli::parse(app, argc, argv)) return *exit;

  std::vector<tuccl::Collective> kinds;
  for (const std::string& name : tuccl::splitList(collectives)) {
    const std::optional<tuccl::Collective> kind = tuccl::parseCollective(name);
    if (!kind || !programs().count(*kind)) {
      std::fprintf(stderr, "bench_sim_scaling: error: --collectives: unknown collective '%s'\n", name.c_str());
      return tuccl::cli::kExitError;
    }
    kinds.push_back(*kind);
  }
  std::vector<int64_t> sizes;
  for (const std::string& text : tuccl::splitList(sizeText)) {
    const tuccl::Expected<uint64_t> bytes = tuccl::parseByteSizeInRange(text, 1, uint64_t{1} << 40);
    if (!bytes) {
      std::fprintf(stderr, "bench_sim_scaling: error: --sizes: %s\n", bytes.status().message().c_str());
      return tuccl::cli::kExitError;
    }
    sizes.push_back(static_cast<int64_t>(*bytes));
  }
  std::vector<int32_t> rankCounts;
  for (const std::string& text : tuccl::splitList(rankText)) {
    const tuccl::Expected<int64_t> ranks = tuccl::parseIntegerInRange(text, perNode, 8192);
    if (!ranks || *ranks % perNode != 0) {
      std::fprintf(stderr, "bench_sim_scaling: error: --ranks: '%s' is not a multiple of %lld GPUs per node up to 8192\n",
                   text.c_str(), static_cast<long long>(perNode));
      return tuccl::cli::kExitError;
    }
    rankCounts.push_back(static_cast<int32_t>(*ranks));
  }

  std::printf("# resccl-a100, %lld GPUs per node, HPDS, program channels, 1 MiB micro-batches; wall and CPU seconds\n"
              "# and peak resident MiB of the simulation (child process, plan resident; sim = above the plan);\n"
              "# plan: loading the algorithm and building the plan (its seconds and the peak until then);\n"
              "# reference: simulatePlanReference, stopped after %lld s\n",
              static_cast<long long>(perNode), static_cast<long long>(limit));
  for (const tuccl::Collective collective : kinds) {
    std::printf("\n## %s (%s.resccl)\n", std::string(tuccl::collectiveName(collective)).c_str(),
                programs().at(collective));
    std::printf("%6s %5s %6s %7s %8s | %12s %7s %7s %8s %7s | %12s %7s %7s %8s %7s | %9s\n", "ranks", "nodes", "size",
                "plan_s", "plan_MiB", "time_us", "wall_s", "cpu_s", "peak_MiB", "sim_MiB", "ref_time_us", "wall_s", "cpu_s",
                "peak_MiB", "sim_MiB", "diff_%");
    bool referenceGaveUp = noReference;
    for (const int32_t ranks : rankCounts) {
      const std::vector<Row> rows = inChild(collective, ranks, static_cast<int32_t>(perNode), sizes, false, 0);
      std::vector<Row> reference;
      if (!referenceGaveUp)
        reference = inChild(collective, ranks, static_cast<int32_t>(perNode), sizes, true, static_cast<int>(limit));
      if (reference.size() < sizes.size()) referenceGaveUp = true;  // larger shapes take longer still
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::printf("%6d %5lld %6s", ranks, static_cast<long long>(ranks / perNode), sizeLabel(sizes[i]).c_str());
        if (i >= rows.size()) {
          std::printf("  failed (see above)\n");
          continue;
        }
        const Row& row = rows[i];
        std::printf(" %7.2f %8.1f | %12.1f %7.3f %7.3f %8.1f %7.1f |", row.planSeconds, row.planPeakMiB, row.simUs,
                    row.wallSeconds, row.cpuSeconds, row.peakMiB, row.simMiB);
        if (i < reference.size()) {
          const Row& ref = reference[i];
          std::printf(" %12.1f %7.3f %7.3f %8.1f %7.1f | %9.6f\n", ref.simUs, ref.wallSeconds, ref.cpuSeconds,
                      ref.peakMiB, ref.simMiB, 100.0 * (row.simUs - ref.simUs) / ref.simUs);
        } else {
          std::printf(" %12s %7s %7s %8s %7s | %9s\n", noReference ? "-" : ("> " + std::to_string(limit) + " s").c_str(),
                      "", "", "", "", "");
        }
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tuccl::cli::runGuarded("bench_sim_scaling", [&] { return run(argc, argv); });
}
