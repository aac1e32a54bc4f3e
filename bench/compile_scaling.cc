// bench_compile_scaling: time per compile stage and peak memory as the cluster grows (8 to 1,024
// ranks by default): parse (ResCCLang front end), check (semantic checker), DAG, HPDS, TB
// allocation (state-based) and lowering to the plan; then the plan JSON (version 3) as
// tuccl-compile -o writes it: milliseconds and bytes (counted, not kept).
//
//   build/bench/bench_compile_scaling [PROGRAM.resccl] [--gpus-per-node G] [--max-ranks N] [--front-end-only]
//
// Each size runs in a child process so its peak resident memory (ru_maxrss) is its own.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <streambuf>
#include <string>

#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "plan/plan_json.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/lowering.h"
#include "scheduler/tb_allocation.h"

namespace {

struct Measurement {
  long long operations = 0;
  double parseMs = 0;
  double checkMs = 0;
  double dagMs = 0;
  double hpdsMs = 0;
  double tbMs = 0;
  double lowerMs = 0;
  int verified = 0;
  int tbsPerRank = 0;  // maximum over ranks, state-based
  double jsonMs = 0;
  long long jsonBytes = 0;
};

// Counts the bytes written through it.
class CountingBuffer : public std::streambuf {
 public:
  long long count() const { return count_; }

 protected:
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++count_;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    count_ += n;
    return n;
  }

 private:
  long long count_ = 0;
};

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Measurement measure(const tuccl::SourceText& source, int ranks, int gpusPerNode, bool frontEndOnly) {
  tuccl::RescclOptions options;
  options.parameterOverrides = {{"nRanks", ranks}, {"GPUPerNode", gpusPerNode}};
  options.maxOperations = 64'000'000;
  options.maxStatements = 2'000'000'000;
  Measurement m;
  auto start = std::chrono::steady_clock::now();
  tuccl::Algorithm algorithm = tuccl::compileResccl(source, options).value();
  m.parseMs = millisecondsSince(start);
  m.operations = static_cast<long long>(algorithm.ops.size());
  start = std::chrono::steady_clock::now();
  tuccl::CheckReport report = tuccl::checkAlgorithm(algorithm);
  m.checkMs = millisecondsSince(start);
  m.verified = report.ok() ? 1 : 0;
  if (frontEndOnly || !report.ok()) return m;
  start = std::chrono::steady_clock::now();
  tuccl::Dag dag = tuccl::buildDependencyDag(algorithm);
  m.dagMs = millisecondsSince(start);
  start = std::chrono::steady_clock::now();
  tuccl::Pipeline pipeline = tuccl::scheduleHpds(dag);
  m.hpdsMs = millisecondsSince(start);
  start = std::chrono::steady_clock::now();
  tuccl::TbAllocation allocation = tuccl::allocateThreadBlocks(algorithm, dag, pipeline);
  m.tbMs = millisecondsSince(start);
  for (int32_t count : allocation.tbCount) m.tbsPerRank = std::max(m.tbsPerRank, static_cast<int>(count));
  start = std::chrono::steady_clock::now();
  tuccl::Plan plan = tuccl::lowerToPlan(algorithm, dag, pipeline, allocation, {}, true);
  m.lowerMs = millisecondsSince(start);
  start = std::chrono::steady_clock::now();
  CountingBuffer counter;
  std::ostream out(&counter);
  tuccl::writePlanJson(out, plan);
  m.jsonMs = millisecondsSince(start);
  m.jsonBytes = counter.count();
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/hm_allreduce.resccl";
  int gpusPerNode = 8;
  int maxRanks = 1024;
  bool frontEndOnly = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpus-per-node") == 0 && i + 1 < argc) {
      gpusPerNode = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--max-ranks") == 0 && i + 1 < argc) {
      maxRanks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--front-end-only") == 0) {
      frontEndOnly = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || argv[i][0] == '-') {
      std::fprintf(stderr, "usage: %s [PROGRAM.resccl] [--gpus-per-node G] [--max-ranks N] [--front-end-only]\n",
                   argv[0]);
      return argv[i][2] == 'h' ? 0 : 2;
    } else {
      path = argv[i];
    }
  }
  if (gpusPerNode <= 0 || maxRanks < gpusPerNode) {
    std::fprintf(stderr, "bench_compile_scaling: need --gpus-per-node > 0 and --max-ranks >= it\n");
    return 2;
  }
  tuccl::SourceText source;
  try {
    source = tuccl::readSourceFile(path);
  } catch (const tuccl::DiagnosticError& error) {
    std::fprintf(stderr, "%s", tuccl::formatDiagnostic(error.diagnostic(), nullptr).c_str());
    return 2;
  }

  std::printf("# %s, %d GPUs per node; milliseconds per stage, peak resident memory of the whole compile\n",
              path.c_str(), gpusPerNode);
  std::printf("%6s %5s %9s %8s %8s %8s %8s %8s %8s %9s %8s %5s %8s %8s %9s\n", "ranks", "nodes", "ops", "parse", "check",
              "dag", "hpds", "tballoc", "lower", "total_ms", "peak_MiB", "TBs", "verified", "json_ms", "json_KiB");
  for (int ranks = gpusPerNode; ranks <= maxRanks; ranks *= 2) {
    int pipefd[2];
    if (pipe(pipefd) != 0) return 1;
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      close(pipefd[0]);
      Measurement m;
      try {
        m = measure(source, ranks, gpusPerNode, frontEndOnly);
      } catch (const tuccl::DiagnosticError& error) {
        std::fprintf(stderr, "%s", tuccl::formatDiagnostic(error.diagnostic(), &source).c_str());
        _exit(2);
      }
      ssize_t written = write(pipefd[1], &m, sizeof(m));
      _exit(written == static_cast<ssize_t>(sizeof(m)) ? 0 : 1);
    }
    close(pipefd[1]);
    Measurement m;
    ssize_t got = read(pipefd[0], &m, sizeof(m));
    close(pipefd[0]);
    int status = 0;
    struct rusage usage {};
    wait4(child, &status, 0, &usage);
    if (got != static_cast<ssize_t>(sizeof(m)) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("%6d  failed (see above)\n", ranks);
      return 1;
    }
    const double total = m.parseMs + m.checkMs + m.dagMs + m.hpdsMs + m.tbMs + m.lowerMs;
    std::printf("%6d %5d %9lld %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f %8.1f %5d %8s %8.1f %9.1f\n", ranks,
                ranks / gpusPerNode, m.operations, m.parseMs, m.checkMs, m.dagMs, m.hpdsMs, m.tbMs, m.lowerMs, total,
                usage.ru_maxrss / 1024.0, m.tbsPerRank, m.verified ? "yes" : "NO", m.jsonMs, m.jsonBytes / 1024.0);
  }
  return 0;
}
