// bench_scheduler_compare: HPDS vs round-robin vs algorithm-level vs stage-level execution of the
// HM AllReduce, HM AllGather and ring AllReduce on the ResCCL A100 cluster (2×4, 2×8, 4×4, 4×8
// GPUs), 8 MB to 4 GB, in the simulator (ResCCL §5.2, Figure 6 and 10(b)). Prints a table of
// times, speedups of HPDS over each baseline and efficiency against the lower bound; writes the
// same rows as CSV for plots.
//
//   bench_scheduler_compare [--csv FILE] [--channels C] [--chunk-size BYTES] [--quick]
//
// Configuration (docs/simulator.md): Simple, 512 threads, 1 MB micro-batches (ResCCL §5.2: "the
// transfer-chunk size is fixed at 1MB"), 2 channel replicas for every scheduler (2 GPUs share a
// NIC, so 4 TBs push into each NIC: the peak of Figure 4), TB allocation state-based for HPDS and
// RR (ResCCL), connection-based with MSCCL's forwarding channels for algorithm and stage level.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim/network.h"
#include "scheduler/plan_builder.h"
#include "sim/simulator.h"

int main(int argc, char** argv) {
  std::string csvPath = "scheduler_compare.csv";
  int32_t channels = 2;
  int64_t chunkSize = 1 << 20;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csvPath = argv[++i];
    } else if (!std::strcmp(argv[i], "--channels") && i + 1 < argc) {
      channels = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--chunk-size") && i + 1 < argc) {
      chunkSize = tuccl::parseBytes(argv[++i]);
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--csv FILE] [--channels C] [--chunk-size BYTES] [--quick]\n", argv[0]);
      return 2;
    }
  }
  struct Shape {
    int32_t nodes;
    int32_t gpus;
  };
  const std::vector<Shape> shapes = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};
  const std::vector<std::string> algorithms = {"hm_allreduce", "hm_allgather", "ring_allreduce"};
  const std::vector<std::string> schedulers = {"hpds", "rr", "algorithm", "stage"};
  std::vector<int64_t> sizes;
  for (int64_t s = 8LL << 20; s <= (4LL << 30); s *= quick ? 8 : 2) sizes.push_back(s);

  std::ofstream csv(csvPath);
  csv << "algorithm,nodes,gpus_per_node,bytes,scheduler,time_us,algbw_gbps,busbw_gbps,bound_us,efficiency,"
         "speedup_of_hpds\n";
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& name : algorithms) {
    for (const Shape& shape : shapes) {
      const int32_t n = shape.nodes * shape.gpus;
      const std::string spec = "preset:resccl-a100:nodes=" + std::to_string(shape.nodes) +
                               (shape.gpus == 8 ? "" : ",gpus=" + std::to_string(shape.gpus));
      const tuccl::Network network = tuccl::loadNetwork(spec);
      const tuccl::Algorithm algorithm = tuccl::loadRescclAlgorithm(
          std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl", n, shape.gpus);
      std::vector<tuccl::Plan> plans;
      for (const std::string& scheduler : schedulers) {
        tuccl::PlanRequest request;
        request.scheduler = scheduler;
        request.config.chunkSize = chunkSize;
        request.config.nChannels = channels;
        plans.push_back(tuccl::buildPlan(algorithm, request));
      }
      const tuccl::CollectiveKind collective = algorithm.collective;
      std::printf("\n## %s (%s) on %d x %d A100 (%s), %d channel(s), chunk %s\n", name.c_str(),
                  std::string(tuccl::collectiveName(collective)).c_str(), shape.nodes, shape.gpus, spec.c_str(), channels,
                  tuccl::formatBytes(chunkSize).c_str());
      std::printf("%8s %10s | %10s %10s %10s %10s | %7s %7s %7s | %6s %6s %6s %6s\n", "size", "bound(us)", "hpds(us)",
                  "rr(us)", "alg(us)", "stage(us)", "xRR", "xALG", "xSTAGE", "eff%H", "eff%R", "eff%A", "eff%S");
      for (int64_t bytes : sizes) {
        const tuccl::LowerBound bound = tuccl::collectiveLowerBound(collective, bytes, network);
        std::vector<double> times;
        for (const tuccl::Plan& plan : plans) {
          tuccl::SimOptions options;
          options.messageBytes = bytes;
          times.push_back(tuccl::simulatePlan(plan, network, options).timeUs);
        }
        std::printf("%8s %10.1f | %10.1f %10.1f %10.1f %10.1f | %6.2fx %6.2fx %6.2fx | %6.1f %6.1f %6.1f %6.1f\n",
                    tuccl::formatBytes(bytes).c_str(), bound.timeUs, times[0], times[1], times[2], times[3],
                    times[1] / times[0], times[2] / times[0], times[3] / times[0], 100 * bound.timeUs / times[0],
                    100 * bound.timeUs / times[1], 100 * bound.timeUs / times[2], 100 * bound.timeUs / times[3]);
        const double factor = tuccl::busBandwidthFactor(collective, n);
        for (size_t s = 0; s < schedulers.size(); ++s) {
          const double algbw = bytes / (times[s] * 1e3);
          csv << name << ',' << shape.nodes << ',' << shape.gpus << ',' << bytes << ',' << schedulers[s] << ','
              << times[s] << ',' << algbw << ',' << algbw * factor << ',' << bound.timeUs << ','
              << bound.timeUs / times[s] << ',' << times[s] / times[0] << '\n';
        }
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n# %zu simulations in %.1f s; CSV: %s\n", algorithms.size() * shapes.size() * sizes.size() * schedulers.size(),
              seconds, csvPath.c_str());
  return 0;
}
