// bench_scheduler_compare: HPDS vs round-robin vs algorithm-level vs stage-level execution of the
// HM AllReduce, HM AllGather and ring AllReduce on the ResCCL A100 cluster (2×4, 2×8, 4×4, 4×8
// GPUs), 8 MB to 4 GB, in the simulator (ResCCL §5.2, Figure 6 and 10(b)). Prints a table of
// times, speedups of HPDS over each baseline and efficiency against the lower bound; with --csv
// FILE writes the same rows as CSV for plots (an existing FILE only with --force), and ends with a
// summary of the worst cases. On a terminal, stderr shows the simulations' progress.
//
//   bench_scheduler_compare [--csv FILE [--force]] [--channels C] [--chunk-size BYTES]
//                           [--max-slices N] [--threads T] [--quick]
//
// Two modes (docs/simulator.md, "bench_scheduler_compare"):
//   - default, best micro-batch size: every (algorithm, shape, size, scheduler) is simulated with
//     each micro-batch (chunk) size in {128K, 256K, 512K, 1M, 2M, 4M} and reported with its best
//     time and the size that achieved it ("time@chunk"). The micro-batch size is a tuned
//     configuration in TuCCL, so each scheduler is compared at its own best. --max-slices N skips
//     the sizes that cut a chunk into more than N micro-batches, for speed (the largest candidate
//     is always kept). The default, 0, skips none: a cap of 64 forces 4 MB slices on the 2×4
//     AllReduce at 4 GB, where HPDS is 23% faster with its best, 1 MB.
//   - --chunk-size BYTES: one fixed micro-batch size for every scheduler (ResCCL §5.2: "the
//     transfer-chunk size is fixed at 1MB").
//
// Configuration: Simple, 512 threads, 2 channel replicas for every scheduler (2 GPUs share a NIC,
// so 4 TBs push into each NIC: the peak of Figure 4), TB allocation state-based for HPDS and RR
// (ResCCL), connection-based with MSCCL's forwarding channels for algorithm and stage level. The
// simulations are independent and run on --threads worker threads (default: all cores).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "lang/load_algorithm.h"
#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim/network.h"
#include "scheduler/plan_builder.h"
#include "sim/simulator.h"
#include "support/progress.h"
#include "support/text_values.h"
#include "cli/cli.h"

namespace {

struct Shape {
  int32_t nodes;
  int32_t gpus;
};

// One (algorithm, shape) pair: its topology, and its plans per scheduler and micro-batch size.
struct Case {
  std::string name;
  Shape shape;
  std::string spec;
  tuccl::Network network;
  tuccl::Collective collective;
  std::vector<std::vector<tuccl::Plan>> plans;  // [scheduler][chunk candidate]
};

// One simulation: a case, a message size, a scheduler and a micro-batch size.
struct Job {
  size_t caseIndex;
  size_t sizeIndex;
  size_t scheduler;
  size_t candidate;
  int64_t slices;  // micro-batches per chunk: the cost estimate for ordering
};

// Micro-batches per chunk, as the simulator cuts them (sim/simulator.cc).
int64_t slicesPerChunk(const tuccl::Plan& plan, int64_t bytes) {
  const int32_t replicas = std::max(1, plan.config.nChannels);
  const int32_t chunks = std::max({1, plan.bufferChunks[0], plan.bufferChunks[1]});
  const double chunkBytes = static_cast<double>(bytes) / chunks / replicas;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(chunkBytes / plan.config.chunkSize - 1e-9)));
}

std::string shapeName(const Shape& shape) { return std::to_string(shape.nodes) + "x" + std::to_string(shape.gpus); }

// One option's value: a whole number in [min, max], or the message saying why not.
bool readInteger(const char* option, const char* text, int64_t min, int64_t max, int64_t& out) {
  const tuccl::Expected<int64_t> value = tuccl::parseIntegerInRange(text, min, max);
  if (!value) {
    std::fprintf(stderr, "bench_scheduler_compare: error: %s: %s\n", option, value.status().message().c_str());
    return false;
  }
  out = *value;
  return true;
}

int run(int argc, char** argv) {
  std::string csvPath;  // empty: no CSV (nothing is written unless asked for)
  bool force = false;
  int64_t channels = 2;
  int64_t fixedChunk = 0;  // 0: best of the candidates
  int64_t maxSlices = 0;  // 0: every candidate
  int64_t threads = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csvPath = argv[++i];
    } else if (!std::strcmp(argv[i], "--force")) {
      force = true;
    } else if (!std::strcmp(argv[i], "--channels") && i + 1 < argc) {
      if (!readInteger("--channels", argv[++i], 1, 64, channels)) return 2;
    } else if (!std::strcmp(argv[i], "--chunk-size") && i + 1 < argc) {
      const tuccl::Expected<uint64_t> parsed = tuccl::parseByteSizeInRange(argv[++i], 256, uint64_t{1} << 30);
      if (!parsed) {
        std::fprintf(stderr, "bench_scheduler_compare: error: --chunk-size: %s\n", parsed.status().message().c_str());
        return 2;
      }
      fixedChunk = static_cast<int64_t>(*parsed);
    } else if (!std::strcmp(argv[i], "--max-slices") && i + 1 < argc) {
      if (!readInteger("--max-slices", argv[++i], 0, tuccl::kMaxSimulatedSlices, maxSlices)) return 2;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      if (!readInteger("--threads", argv[++i], 1, 1024, threads)) return 2;
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--csv FILE [--force]] [--channels C] [--chunk-size BYTES] [--max-slices N] "
                   "[--threads T] [--quick]\n",
                   argv[0]);
      return 2;
    }
  }
  // The CSV is checked before hours of simulation, not after.
  if (const tuccl::Status free = tuccl::cli::checkOutputFree(csvPath, force); !free) {
    std::fprintf(stderr, "bench_scheduler_compare: error: %s\n", free.message().c_str());
    return 2;
  }
  const bool best = fixedChunk == 0;
  const std::vector<int64_t> candidates =
      best ? std::vector<int64_t>{128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}
           : std::vector<int64_t>{fixedChunk};
  const std::vector<Shape> shapes = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};
  const std::vector<std::string> algorithms = {"hm_allreduce", "hm_allgather", "ring_allreduce"};
  const std::vector<std::string> schedulers = {"hpds", "rr", "algorithm", "stage"};
  std::vector<int64_t> sizes;
  for (int64_t s = 8LL << 20; s <= (4LL << 30); s *= quick ? 8 : 2) sizes.push_back(s);

  const auto start = std::chrono::steady_clock::now();
  std::vector<Case> cases;
  for (const std::string& name : algorithms) {
    for (const Shape& shape : shapes) {
      const int32_t n = shape.nodes * shape.gpus;
      Case c{name, shape,
             "preset:resccl-a100:nodes=" + std::to_string(shape.nodes) +
                 (shape.gpus == 8 ? "" : ",gpus=" + std::to_string(shape.gpus)),
             {}, {}, {}};
      c.network = tuccl::loadNetwork(c.spec).value();
      const tuccl::Algorithm algorithm = tuccl::loadRescclAlgorithm(
          std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl", n, shape.gpus).value();
      c.collective = algorithm.collective;
      for (const std::string& scheduler : schedulers) {
        c.plans.emplace_back();
        for (int64_t chunk : candidates) {
          tuccl::PlanRequest request;
          request.scheduler = tuccl::parseScheduler(scheduler).value();
          request.config.chunkSize = chunk;
          request.config.nChannels = static_cast<int32_t>(channels);
          c.plans.back().push_back(tuccl::buildPlan(algorithm, request).value());
        }
      }
      cases.push_back(std::move(c));
    }
  }

  // Every simulation to run; a candidate over the micro-batch cap is skipped unless it is the
  // largest (the fewest micro-batches), so each (case, size, scheduler) keeps at least one.
  std::vector<Job> jobs;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (size_t z = 0; z < sizes.size(); ++z) {
      for (size_t s = 0; s < schedulers.size(); ++s) {
        for (size_t k = 0; k < candidates.size(); ++k) {
          const int64_t slices = slicesPerChunk(cases[c].plans[s][k], sizes[z]);
          if (best && maxSlices > 0 && slices > maxSlices && k + 1 < candidates.size()) continue;
          jobs.push_back({c, z, s, k, slices});
        }
      }
    }
  }
  // Longest first (by message size, then micro-batches), so the last jobs to finish are short.
  std::vector<size_t> order(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double wa = static_cast<double>(sizes[jobs[a].sizeIndex]) * jobs[a].slices;
    const double wb = static_cast<double>(sizes[jobs[b].sizeIndex]) * jobs[b].slices;
    return wa > wb;
  });
  std::vector<double> jobTimes(jobs.size(), 0);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  tuccl::TerminalProgress progress("simulations", order.size());
  auto worker = [&](size_t id) {
    try {
      for (size_t i; (i = next.fetch_add(1)) < order.size();) {
        const Job& job = jobs[order[i]];
        const Case& c = cases[job.caseIndex];
        tuccl::SimOptions options;
        options.messageBytes = sizes[job.sizeIndex];
        tuccl::Expected<tuccl::SimResult> result =
            tuccl::simulatePlan(c.plans[job.scheduler][job.candidate], c.network, options);
        tuccl::throwIfError(result.status());
        jobTimes[order[i]] = result->timeUs;
        progress.advance();
      }
    } catch (...) {
      errors[id] = std::current_exception();
      next = order.size();
    }
  };
  std::vector<std::thread> pool;
  for (int32_t t = 0; t < threads; ++t) pool.emplace_back(worker, static_cast<size_t>(t));
  for (std::thread& t : pool) t.join();
  progress.finish();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);

  // Best time and its micro-batch size per (case, size, scheduler).
  const size_t nS = schedulers.size();
  auto cell = [&](size_t c, size_t z, size_t s) { return (c * sizes.size() + z) * nS + s; };
  std::vector<double> bestTime(cases.size() * sizes.size() * nS, std::numeric_limits<double>::infinity());
  std::vector<int64_t> bestChunk(bestTime.size(), 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const size_t i = cell(jobs[j].caseIndex, jobs[j].sizeIndex, jobs[j].scheduler);
    if (jobTimes[j] < bestTime[i]) {
      bestTime[i] = jobTimes[j];
      bestChunk[i] = candidates[jobs[j].candidate];
    }
  }

  std::ostringstream csv;
  csv << "algorithm,nodes,gpus_per_node,bytes,scheduler,chunk_bytes,time_us,algbw_gbps,busbw_gbps,bound_us,"
         "efficiency,speedup_of_hpds\n";
  struct Worst {
    double ratio = std::numeric_limits<double>::infinity();
    std::string where;
    int32_t below = 0;  // cases under 1.0
    int32_t count = 0;
  };
  // [algorithm]: RR / HPDS at >= 64 MB, and algorithm level / HPDS at >= 256 MB (reported for the
  // hierarchical algorithms); the last entry is over all algorithms in the summary's scope.
  std::vector<Worst> worstRr(algorithms.size() + 1), worstAlg(algorithms.size() + 1);
  auto track = [](Worst& w, double ratio, const std::string& where) {
    ++w.count;
    if (ratio < 1) ++w.below;
    if (ratio < w.ratio) {
      w.ratio = ratio;
      w.where = where;
    }
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const int32_t n = k.shape.nodes * k.shape.gpus;
    std::printf("\n## %s (%s) on %d x %d A100 (%s), %d channel(s), chunk %s\n", k.name.c_str(),
                std::string(tuccl::collectiveName(k.collective)).c_str(), k.shape.nodes, k.shape.gpus, k.spec.c_str(),
                static_cast<int>(channels),
                best ? ("best of 128K..4M" + (maxSlices > 0 ? ", <= " + std::to_string(maxSlices) + " per chunk" : ""))
                           .c_str()
                     : tuccl::formatByteSize(fixedChunk).c_str());
    if (best) {
      std::printf("%8s %10s | %15s %15s %15s %15s | %7s %7s %7s | %6s %6s %6s %6s\n", "size", "bound(us)",
                  "hpds(us)@chunk", "rr(us)@chunk", "alg(us)@chunk", "stage(us)@chunk", "xRR", "xALG", "xSTAGE",
                  "eff%H", "eff%R", "eff%A", "eff%S");
    } else {
      std::printf("%8s %10s | %10s %10s %10s %10s | %7s %7s %7s | %6s %6s %6s %6s\n", "size", "bound(us)", "hpds(us)",
                  "rr(us)", "alg(us)", "stage(us)", "xRR", "xALG", "xSTAGE", "eff%H", "eff%R", "eff%A", "eff%S");
    }
    for (size_t z = 0; z < sizes.size(); ++z) {
      const int64_t bytes = sizes[z];
      const tuccl::LowerBound bound = tuccl::collectiveLowerBound(k.collective, bytes, k.network);
      const double* t = &bestTime[cell(c, z, 0)];
      const int64_t* chunk = &bestChunk[cell(c, z, 0)];
      std::printf("%8s %10.1f |", tuccl::formatByteSize(bytes).c_str(), bound.timeUs);
      for (size_t s = 0; s < nS; ++s) {
        if (best) {
          char text[32];
          std::snprintf(text, sizeof text, "%.1f@%s", t[s], tuccl::formatByteSize(chunk[s]).c_str());
          std::printf(" %15s", text);
        } else {
          std::printf(" %10.1f", t[s]);
        }
      }
      std::printf(" | %6.2fx %6.2fx %6.2fx | %6.1f %6.1f %6.1f %6.1f\n", t[1] / t[0], t[2] / t[0], t[3] / t[0],
                  100 * bound.timeUs / t[0], 100 * bound.timeUs / t[1], 100 * bound.timeUs / t[2],
                  100 * bound.timeUs / t[3]);
      const std::string where = k.name + " " + shapeName(k.shape) + " " + tuccl::formatByteSize(bytes);
      const size_t a = c / shapes.size();
      const bool hierarchical = k.name.rfind("hm_", 0) == 0;
      if (bytes >= (64LL << 20)) {
        track(worstRr[a], t[1] / t[0], where);
        track(worstRr.back(), t[1] / t[0], where);
      }
      if (bytes >= (256LL << 20)) {
        track(worstAlg[a], t[2] / t[0], where);
        if (hierarchical) track(worstAlg.back(), t[2] / t[0], where);
      }
      const double factor = tuccl::busBandwidthFactor(k.collective, n);
      for (size_t s = 0; s < nS; ++s) {
        const double algbw = bytes / (t[s] * 1e3);
        csv << k.name << ',' << k.shape.nodes << ',' << k.shape.gpus << ',' << bytes << ',' << schedulers[s] << ','
            << chunk[s] << ',' << t[s] << ',' << algbw << ',' << algbw * factor << ',' << bound.timeUs << ','
            << bound.timeUs / t[s] << ',' << t[s] / t[0] << '\n';
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n# summary (%s)\n", best ? "each scheduler at its best micro-batch size" : "fixed micro-batch size");
  auto report = [](const char* label, const Worst& w) {
    std::printf("#   %-44s min %.3fx at %s (%d of %d below 1.00x)\n", label, w.ratio, w.where.c_str(), w.below,
                w.count);
  };
  std::printf("# RR time / HPDS time, >= 64M:\n");
  for (size_t a = 0; a < algorithms.size(); ++a) report(algorithms[a].c_str(), worstRr[a]);
  report("all", worstRr.back());
  std::printf("# algorithm-level time / HPDS time, >= 256M:\n");
  for (size_t a = 0; a < algorithms.size(); ++a)
    if (algorithms[a].rfind("hm_", 0) == 0) report(algorithms[a].c_str(), worstAlg[a]);
  report("hierarchical (hm_allreduce, hm_allgather)", worstAlg.back());
  if (!csvPath.empty()) {
    if (const tuccl::Status written = tuccl::cli::writeOutput(csvPath, csv.str()); !written) {
      std::fprintf(stderr, "bench_scheduler_compare: error: %s\n", written.message().c_str());
      return 2;
    }
  }
  std::printf("# %zu simulations on %lld thread(s) in %.1f s; CSV: %s\n", jobs.size(), static_cast<long long>(threads),
              seconds, csvPath.empty() ? "none (--csv FILE)" : csvPath.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tuccl::cli::runGuarded("bench_scheduler_compare", [&] { return run(argc, argv); });
}
