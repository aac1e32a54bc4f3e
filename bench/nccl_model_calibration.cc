// The NCCL model (sim/nccl_model.h) beside published nccl-tests bus bandwidths, and what it
// predicts on 2 and 4 nodes. Prints tables; never asserted (tests/sim/nccl_model_test.cc checks
// the one-node figures are within ±15%).
//
//   bench_nccl_model_calibration [--sizes 1K,1M,64M,8G]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/nccl_model.h"
#include "support/text_values.h"
#include "topo/presets.h"

namespace {

using namespace tuccl;

/// A published ring AllReduce bus bandwidth at a large size (reference/cost-model.md).
struct Published {
  const char* preset;
  double busBwGBps;
  const char* source;
};

constexpr Published kPublished[] = {
    {"dgx-a100", 230.0, "nccl-tests, 8xA100 NVSwitch, ring AllReduce at 8 GB"},
    {"dgx-h100", 370.0, "cost-model.md: 8xH100 NVSwitch ring collectives (without NVLS)"},
};
constexpr uint64_t kCalibrationBytes = uint64_t{8} << 30;

void printCalibration() {
  std::printf("## One node, ring AllReduce at 8 GiB: the model beside published nccl-tests busbw\n");
  std::printf("%-10s %-18s %10s %10s %8s  %s\n", "preset", "model choice", "model", "published", "error", "source");
  for (const Published& p : kPublished) {
    const Topology topology = makePreset(std::string("preset:") + p.preset);
    const NcclGraph graph = searchNcclGraph(topology);
    const NcclChoice ring =
        evaluateNcclChoice(graph, Collective::AllReduce, kCalibrationBytes, NcclAlgorithm::Ring, Protocol::Simple).value();
    const NcclChoice chosen = ncclModelChoice(graph, Collective::AllReduce, kCalibrationBytes);
    std::printf("%-10s %-18s %10.1f %10.1f %+7.1f%%  %s\n", p.preset, describeNcclChoice(chosen).c_str(), ring.busBwGBs,
                p.busBwGBps, 100 * (ring.busBwGBs - p.busBwGBps) / p.busBwGBps, p.source);
  }
}

void printScaling(const std::vector<int64_t>& sizes) {
  const char* presets[] = {"resccl-a100", "dgx-a100", "dgx-h100", "ndv2"};
  const Collective collectives[] = {Collective::AllReduce, Collective::AllGather, Collective::AllToAll};
  std::printf("\n## The model on 1, 2 and 4 nodes: choice and busbw (GB/s) per size\n");
  std::printf("%-12s %-6s %-13s %8s", "preset", "nodes", "collective", "ch x GB/s");
  for (int64_t bytes : sizes) std::printf(" | %-16s %7s", formatByteSize(bytes).c_str(), "busbw");
  std::printf("\n");
  for (const char* preset : presets) {
    for (int nodes : {1, 2, 4}) {
      const Topology topology = makePreset(std::string("preset:") + preset + ":nodes=" + std::to_string(nodes));
      const NcclGraph graph = searchNcclGraph(topology);
      for (Collective collective : collectives) {
        char channels[32];
        std::snprintf(channels, sizeof channels, "%dx%.1f", graph.nChannels, graph.bwPerChannelGBps);
        std::printf("%-12s %-6d %-13s %8s", preset, nodes, std::string(collectiveName(collective)).c_str(), channels);
        for (int64_t bytes : sizes) {
          const NcclChoice choice = ncclModelChoice(graph, collective, static_cast<uint64_t>(bytes));
          std::printf(" | %-16s %7.1f", describeNcclChoice(choice).c_str(), choice.busBwGBs);
        }
        std::printf("\n");
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizesText = "1K,1M,64M,8G";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizesText = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_nccl_model_calibration [--sizes 1K,1M,64M,8G]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  std::vector<int64_t> sizes;
  for (const std::string& item : splitList(sizesText, ',')) {
    const Expected<uint64_t> bytes = parseByteSizeInRange(item, 1, uint64_t{1} << 40);
    if (!bytes) {
      std::fprintf(stderr, "bench_nccl_model_calibration: --sizes: %s\n", bytes.status().message().c_str());
      return 2;
    }
    sizes.push_back(static_cast<int64_t>(*bytes));
  }
  printCalibration();
  printScaling(sizes);
  return 0;
}
