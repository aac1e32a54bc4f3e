// bench_msccl_rescheduling: what rescheduling an MSCCL XML algorithm buys. Every MSCCL XML file of
// tests/data/msccl (and of any directory given) runs in the simulator twice on a matching DGX-A100
// preset: as written (scheduler as-written: the file's own thread blocks, channels and step order
// at algorithm level, as the MSCCL runtimes run it) and rescheduled by HPDS (task level,
// state-based TBs, the file's nchannels as plan replicas, as tuccl-compile and tuccl-sim plan an
// XML file). At 64 MB, 256 MB and 1 GB it prints both times, the ratio as-written / HPDS (> 1:
// HPDS is faster), TBs per rank and the buffering the file's order needs; then the min / median /
// max ratio over every row.
//
//   bench_msccl_rescheduling [--gpus-per-node G] [--chunk-size BYTES] [--hpds-channels C] [DIR ...]
//
// The preset: preset:dgx-a100:nodes=N,gpus=G with G = --gpus-per-node (default: every rank of
// the file on one node) and N = ngpus / G; a file whose ngpus G does not divide is skipped. Both
// plans use Simple, 512 threads and the same micro-batch (chunk) size, 1 MB by default.
// --hpds-channels C gives HPDS C plan replicas instead of the file's nchannels: with 1, a file
// whose channels run parallel rings over one link keeps that parallelism as written and loses it
// rescheduled (the IR keeps the channel count as a hint, not the split of the data).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/network.h"
#include "sim/simulator.h"
#include "support/text_values.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  int32_t gpusPerNode = 0;  // 0: all ranks on one node
  int64_t chunkSize = 1 << 20;
  int32_t hpdsChannels = 0;  // 0: the file's nchannels
  std::vector<std::string> directories;
};

// The most TBs any rank runs: its TBs in the plan times the plan's replicas.
size_t maxTbs(const tuccl::Plan& plan) {
  size_t most = 0;
  for (const tuccl::PlanRank& rank : plan.ranks) most = std::max(most, rank.tbs.size());
  return most * static_cast<size_t>(std::max(1, plan.config.nChannels));
}

std::vector<fs::path> xmlFiles(const std::vector<std::string>& directories) {
  std::vector<fs::path> files;
  for (const std::string& directory : directories) {
    std::vector<fs::path> mine;
    std::error_code error;
    for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".xml" && it->is_regular_file(error)) mine.push_back(it->path());
    }
    if (error) std::fprintf(stderr, "bench_msccl_rescheduling: %s: %s\n", directory.c_str(), error.message().c_str());
    std::sort(mine.begin(), mine.end());
    files.insert(files.end(), mine.begin(), mine.end());
  }
  return files;
}

bool parseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--gpus-per-node") && i + 1 < argc) {
      const tuccl::Expected<int64_t> value = tuccl::parseIntegerInRange(argv[++i], 1, 1024);
      if (!value) {
        std::fprintf(stderr, "bench_msccl_rescheduling: error: --gpus-per-node: %s\n", value.status().message().c_str());
        return false;
      }
      options.gpusPerNode = static_cast<int32_t>(*value);
    } else if (!std::strcmp(argv[i], "--chunk-size") && i + 1 < argc) {
      const tuccl::Expected<uint64_t> value = tuccl::parseByteSizeInRange(argv[++i], 256, uint64_t{1} << 30);
      if (!value) {
        std::fprintf(stderr, "bench_msccl_rescheduling: error: --chunk-size: %s\n", value.status().message().c_str());
        return false;
      }
      options.chunkSize = static_cast<int64_t>(*value);
    } else if (!std::strcmp(argv[i], "--hpds-channels") && i + 1 < argc) {
      const tuccl::Expected<int64_t> value = tuccl::parseIntegerInRange(argv[++i], 1, 64);
      if (!value) {
        std::fprintf(stderr, "bench_msccl_rescheduling: error: --hpds-channels: %s\n", value.status().message().c_str());
        return false;
      }
      options.hpdsChannels = static_cast<int32_t>(*value);
    } else if (argv[i][0] != '-') {
      options.directories.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "usage: %s [--gpus-per-node G] [--chunk-size BYTES] [--hpds-channels C] [DIR ...]\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run(int argc, char** argv) {
  Options options;
  if (!parseOptions(argc, argv, options)) return 2;
  std::vector<std::string> directories = {std::string(TUCCL_SOURCE_DIR) + "/tests/data/msccl"};
  directories.insert(directories.end(), options.directories.begin(), options.directories.end());
  const std::vector<int64_t> sizes = {64LL << 20, 256LL << 20, 1LL << 30};

  std::printf("# MSCCL XML as written vs rescheduled by HPDS, simulated; Simple, 512 threads, chunk %s\n",
              tuccl::formatByteSize(static_cast<uint64_t>(options.chunkSize)).c_str());
  std::printf("# ratio = as-written / HPDS (> 1: HPDS faster); TBs: most per rank (replicas included); ch: HPDS replicas; ahead: the buffered sends per "
              "connection the file's order needs (0: none)\n");
  std::printf("%-30s %-13s %-11s %6s %8s %12s %12s %7s %9s %5s\n", "file", "collective", "topology", "ch",
              "size", "hpds(us)", "written(us)", "ratio", "TBs h/w", "ahead");
  std::vector<double> ratios;
  for (const fs::path& file : xmlFiles(directories)) {
    const std::string name = file.filename().string();
    tuccl::Expected<tuccl::LoadedAlgorithm> loaded = tuccl::loadProvedAlgorithmFile(file.string(), {});
    if (!loaded) {
      std::printf("# %s skipped: %s\n", name.c_str(), loaded.status().message().c_str());
      continue;
    }
    const tuccl::Algorithm& algorithm = loaded->algorithm;
    const int32_t perNode = options.gpusPerNode > 0 ? options.gpusPerNode : algorithm.nRanks;
    if (algorithm.nRanks % perNode != 0) {
      std::printf("# %s skipped: %d GPUs per node do not divide its %d ranks\n", name.c_str(), perNode,
                  algorithm.nRanks);
      continue;
    }
    const int32_t nodes = algorithm.nRanks / perNode;
    const std::string spec =
        "preset:dgx-a100:nodes=" + std::to_string(nodes) + ",gpus=" + std::to_string(perNode);
    tuccl::Expected<tuccl::Network> network = tuccl::loadNetwork(spec);
    if (!network) {
      std::printf("# %s skipped: %s: %s\n", name.c_str(), spec.c_str(), network.status().message().c_str());
      continue;
    }
    tuccl::PlanRequest request;
    request.config.chunkSize = options.chunkSize;
    request.config.nChannels = options.hpdsChannels;  // 0: the file's nchannels (HPDS), 1 (as written)
    request.mscclSchedule = &loaded->msccl->schedule;
    const tuccl::Plan hpds = tuccl::buildPlan(algorithm, request).value();
    request.scheduler = tuccl::Scheduler::AsWritten;
    request.config.nChannels = 0;
    tuccl::Expected<tuccl::Plan> written = tuccl::buildPlan(algorithm, request);
    if (!written) {
      std::printf("# %s: as written: %s\n", name.c_str(), written.status().message().c_str());
      continue;
    }
    const std::string tbs = std::to_string(maxTbs(hpds)) + "/" + std::to_string(maxTbs(*written));
    for (int64_t bytes : sizes) {
      tuccl::SimOptions sim;
      sim.messageBytes = bytes;
      const tuccl::Expected<tuccl::SimResult> a = tuccl::simulatePlan(hpds, *network, sim);
      const tuccl::Expected<tuccl::SimResult> b = tuccl::simulatePlan(*written, *network, sim);
      if (!a || !b) {
        std::printf("# %s %s: %s\n", name.c_str(), tuccl::formatByteSize(static_cast<uint64_t>(bytes)).c_str(),
                    (!a ? a.status() : b.status()).message().c_str());
        continue;
      }
      const double ratio = b->timeUs / a->timeUs;
      ratios.push_back(ratio);
      std::printf("%-30s %-13s %-11s %6d %8s %12.1f %12.1f %7.3f %9s %5d\n", name.c_str(),
                  std::string(tuccl::collectiveName(algorithm.collective)).c_str(),
                  (std::to_string(nodes) + "x" + std::to_string(perNode)).c_str(), hpds.config.nChannels,
                  tuccl::formatByteSize(static_cast<uint64_t>(bytes)).c_str(), a->timeUs, b->timeUs, ratio,
                  tbs.c_str(), written->config.sendAhead);
    }
  }
  if (ratios.empty()) {
    std::printf("# no file ran\n");
    return 1;
  }
  std::printf("# as-written / HPDS over %zu rows: min %.3f, median %.3f, max %.3f\n", ratios.size(),
              *std::min_element(ratios.begin(), ratios.end()), median(ratios),
              *std::max_element(ratios.begin(), ratios.end()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_msccl_rescheduling: error: %s\n", error.what());
    return 3;
  }
}
