// Search methods and search dimensions compared on the simulator (issue 8 item 6; TuCCL §IV,
// Figures 6–7). Prints tables and CSV; never asserted in tests.
//
// Per case (topology × collective × message size) the whole joint space — sketch/algorithm ×
// protocol × nChannels × nThreads × chunk size — is simulated once (noiseless; the grid's
// optimum), then every method searches it through seeded measurement noise (sigma 5 % per
// iteration, shrinking with r) at the same budget, 10 % of the grid's profiling cost:
//
//   1. methods: the noiseless time of the configuration each method returns, as the gap to the
//      grid optimum, and the profiling cost it spent (sum of r), averaged over seeds.
//   2. dimensions: speed-up over what NCCL would do (tune/nccl_baseline.h: the plan of NCCL's own
//      algorithm, protocol and channels on the topology, simulated like the candidates) of the best
//      configuration of
//        config-only  the ring program, backend configuration searched (AutoCCL-style)
//        sketch-only  every sketch's admissible programs, each at the default configuration
//        joint        everything (MRACO's find in the joint space, and the joint optimum);
//      beside it, the rank-order ring at NCCL's defaults (Simple, 512 threads, 512 KiB chunks, the
//      program's channels) simulated, the baseline these tables used before the NCCL model.
//
//   bench_search_compare [--topos a;b;c] [--sizes 1M,16M,128M,1G] [--seeds 3] [--budget 0.1]
//                        [--schedulers hpds] [--sigma 0.05] [--max-slices 64] [--csv]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sim/metrics.h"
#include "sim/nccl_model.h"
#include "sim/cost_files.h"
#include "tune/nccl_baseline.h"
#include "sim/network_topology.h"
#include "support/text_values.h"
#include "topo/load.h"
#include "tune/measurement_noise.h"
#include "tune/searcher.h"
#include "tune/sim_profiler.h"
#include "tune/size_grid.h"
#include "tune/sketch_candidates.h"

namespace {

using namespace tuccl;

/// Noiseless times looked up from the simulated grid.
class TabulatedProfiler : public Profiler {
 public:
  explicit TabulatedProfiler(const std::map<Configuration, double>& times) : times_(times) {}
  std::string_view name() const override { return "sim-table"; }
  Measurement profile(const SearchSpace&, const Configuration& config, int64_t resource) override {
    Measurement m;
    m.cost = static_cast<double>(resource);
    auto it = times_.find(config);
    if (it == times_.end()) {
      m.ok = false;
      m.error = "not in the grid";
      return m;
    }
    m.timeUs = it->second;
    return m;
  }

 private:
  const std::map<Configuration, double>& times_;
};

struct MethodStats {
  double gapSum = 0, gapMax = 0, costSum = 0;
  int runs = 0, within1 = 0;
};

struct CaseRow {
  std::string topo, collective;
  int64_t bytes = 0;
  size_t gridSize = 0;
  double optimum = 0;
  std::map<std::string, MethodStats> methods;
  // dimensions
  double ncclUs = 0, ringDefaultUs = 0, configOnlyUs = 0, sketchOnlyUs = 0, jointUs = 0, jointMracoUs = 0, configMracoUs = 0;
  std::string ncclPick, sketchOnlyPick, jointPick;
};

}  // namespace

int main(int argc, char** argv) {
  std::string topos = "preset:resccl-a100:nodes=2,gpus=4;preset:dgx-h100:nodes=2,gpus=4;preset:tuccl-v100:nodes=2";
  std::string sizesText = "1M,16M,128M,1G", collectivesText = "allreduce,allgather", schedulersText = "hpds";
  std::string methodsText = "mraco,mraco-budget,grid,random,tpe,coordinate";
  int seeds = 3;
  double budgetFraction = 0.1, sigma = 0.05;
  int64_t maxSlices = 64;
  bool csv = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--topos") topos = next();
    else if (a == "--sizes") sizesText = next();
    else if (a == "--collectives") collectivesText = next();
    else if (a == "--schedulers") schedulersText = next();
    else if (a == "--methods") methodsText = next();
    else if (a == "--seeds") seeds = std::stoi(next());
    else if (a == "--budget") budgetFraction = std::stod(next());
    else if (a == "--sigma") sigma = std::stod(next());
    else if (a == "--max-slices") maxSlices = std::stoll(next());
    else if (a == "--csv") csv = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_search_compare [--topos 'a;b;c'] [--sizes 1M,16M,128M,1G] [--collectives "
                   "allreduce,allgather] [--seeds 3] [--budget 0.1] [--schedulers hpds] [--methods ...] [--sigma 0.05] "
                   "[--max-slices 64] [--csv]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  const std::string examples = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms";
  const std::vector<std::string> methods = tuccl::splitList(methodsText, ',');
  const std::vector<std::string> schedulers = tuccl::splitList(schedulersText, ',');
  std::vector<CaseRow> rows;

  for (const std::string& topo : tuccl::splitList(topos, ';')) {
    const Topology topology = loadTopology(topo).value().topology;
    const Network network = makeNetwork(topology);
    const CostModel cost = costModelForTopology(topology, topo).value();  // its class's constants
    NcclBaseline ncclPlans(topology, network, cost);
    for (const std::string& coll : tuccl::splitList(collectivesText, ',')) {
      const Collective kind = *parseCollective(coll);
      const std::vector<AlgorithmCandidate> candidates = algorithmCandidates(topology, kind, examples);
      std::map<std::string, Algorithm> algorithms;
      std::vector<std::string> names;
      for (const AlgorithmCandidate& c : candidates) algorithms.emplace(c.name, c.algorithm), names.push_back(c.name);
      const SearchSpace base = defaultSearchSpace(names, schedulers);
      for (const std::string& sizeText : tuccl::splitList(sizesText, ',')) {
        const tuccl::Expected<uint64_t> parsed = tuccl::parseByteSize(sizeText);
        if (!parsed) {
          std::fprintf(stderr, "--sizes: %s\n", parsed.status().message().c_str());
          return 2;
        }
        const auto bytes = static_cast<int64_t>(*parsed);
        CaseRow row;
        row.topo = topo;
        row.collective = coll;
        row.bytes = bytes;
        const NcclSimulated nccl = ncclPlans.evaluate(kind, bytes).value();
        row.ncclUs = nccl.choice.timeUs;
        row.ncclPick = describeNcclChoice(nccl.choice);
        const auto levels = chunkLevelsFor(base.dimension(base.dimensionIndex(kDimChunkBytes)).levels, bytes,
                                           topology.nRanks(), maxSlices);
        const SearchSpace joint = searchSpaceFromJson(
            nlohmann::json{{"dimensions", {{{"name", std::string(kDimChunkBytes)}, {"values", levels}}}}}, base);
        SimProfilerOptions simOptions;
        simOptions.messageBytes = bytes;
        simOptions.cost = cost;
        simOptions.sigma = 0;
        SimProfiler sim(network, algorithms, simOptions);
        // The grid: every valid configuration, simulated once.
        std::map<Configuration, double> times;
        row.optimum = INFINITY;
        Configuration best;
        for (const Configuration& c : joint.enumerateValid()) {
          const double t = sim.simulatedTime(joint, c);
          times.emplace(c, t);
          if (t < row.optimum) row.optimum = t, best = c;
        }
        row.gridSize = times.size();
        row.jointUs = row.optimum;
        row.jointPick = joint.valueOf(best, kDimAlgorithm) + "/" + joint.valueOf(best, kDimProtocol);
        const double gridCost = static_cast<double>(times.size()) * 27;

        // 1. methods, at equal budget, averaged over seeds.
        for (const std::string& method : methods) {
          MethodStats& stats = row.methods[method];
          for (int seed = 1; seed <= seeds; ++seed) {
            TabulatedProfiler table(times);
            NoisyProfiler noisy(table, sigma, static_cast<uint64_t>(seed) * 7919 + static_cast<uint64_t>(bytes));
            SearchOptions o;
            o.seed = static_cast<uint64_t>(seed);
            o.budget = budgetFraction * gridCost;
            // "mraco-budget": MRACO without the Eq. 5 stop, spending the whole budget as the others do.
            o.convergence.enabled = method != "mraco-budget";
            SearchResult r = makeSearcher(method == "mraco-budget" ? "mraco" : method)->search(joint, noisy, o);
            const double t = r.best ? times.at(*r.best) : INFINITY;
            const double gap = 100 * (t / row.optimum - 1);
            stats.gapSum += gap;
            stats.gapMax = std::max(stats.gapMax, gap);
            stats.costSum += 100 * r.cost / gridCost;
            stats.within1 += gap <= 1.0;
            ++stats.runs;
            if (method == "mraco") row.jointMracoUs += t / seeds;
          }
        }

        // 2. dimensions. Config-only: the ring program, every configuration (optimum from the grid,
        // and MRACO's find in that subspace at 10 % of its grid cost).
        const SearchSpace ringSpace =
            searchSpaceFromJson(nlohmann::json{{"dimensions", {{{"name", "algorithm"}, {"values", {"ring"}}}}}}, joint);
        std::map<Configuration, double> ringTimes;
        row.configOnlyUs = INFINITY;
        for (const Configuration& c : ringSpace.enumerateValid()) {
          Configuration inJoint = c;
          inJoint.index[joint.dimensionIndex(kDimAlgorithm)] =
              static_cast<uint32_t>(joint.dimension(joint.dimensionIndex(kDimAlgorithm)).find("ring"));
          const double t = times.at(inJoint);
          ringTimes.emplace(c, t);
          row.configOnlyUs = std::min(row.configOnlyUs, t);
        }
        for (int seed = 1; seed <= seeds; ++seed) {
          TabulatedProfiler table(ringTimes);
          NoisyProfiler noisy(table, sigma, static_cast<uint64_t>(seed) * 104729 + static_cast<uint64_t>(bytes));
          SearchOptions o;
          o.seed = static_cast<uint64_t>(seed);
          o.budget = budgetFraction * static_cast<double>(ringTimes.size()) * 27;
          SearchResult r = makeMracoSearcher()->search(ringSpace, noisy, o);
          row.configMracoUs += (r.best ? ringTimes.at(*r.best) : INFINITY) / seeds;
        }
        // Default configuration per program: Simple, 512 threads, 512 KiB chunks, the program's
        // channel hint, HPDS (its own one-point space and profiler).
        row.sketchOnlyUs = INFINITY;
        row.ringDefaultUs = INFINITY;
        for (const AlgorithmCandidate& c : candidates) {
          const int64_t channels = std::max<int32_t>(1, c.algorithm.nChannels);
          const SearchSpace point = searchSpaceFromJson(
              nlohmann::json{{"dimensions",
                              {{{"name", "protocol"}, {"values", {"Simple"}}},
                               {{"name", "nChannels"}, {"values", {channels}}},
                               {{"name", "nThreads"}, {"values", {512}}},
                               {{"name", "chunkBytes"}, {"values", {524288}}},
                               {{"name", "algorithm"}, {"values", {c.name}}},
                               {{"name", "scheduler"}, {"values", {schedulers.front()}}}}}},
              joint);
          SimProfiler one(network, algorithms, simOptions);
          const double t = one.simulatedTime(point, point.enumerateValid().at(0));
          if (c.ncclRing) row.ringDefaultUs = t;
          if (t < row.sketchOnlyUs) row.sketchOnlyUs = t, row.sketchOnlyPick = c.name + "@" + c.sketch();
        }
        std::fprintf(stderr, "  %s %s %s: %zu configurations, optimum %.1f us (%s) [%.0f s]\n", topo.c_str(),
                     coll.c_str(), formatByteSize(bytes).c_str(), row.gridSize, row.optimum, row.jointPick.c_str(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        rows.push_back(std::move(row));
      }
    }
  }

  // ---- 1. methods
  std::printf("\n## Search methods at equal budget (%.0f%% of the grid's profiling cost), sigma %.0f%%, %d seeds\n",
              100 * budgetFraction, 100 * sigma, seeds);
  std::printf("## gap: noiseless time of the returned configuration over the grid optimum (mean / max); cost: %% of "
              "the grid's cost spent\n");
  std::printf("%-36s %-9s %5s %5s", "topology", "coll", "size", "grid");
  for (const std::string& m : methods) std::printf(" | %-18s", (m + " gap%/max cost%").c_str());
  std::printf("\n");
  // [mraco variant][baseline] = {wins, ties, losses} on the mean gap (ties: within 0.01 points)
  std::map<std::string, std::map<std::string, std::array<int, 3>>> winsOver;
  std::map<std::string, int> within1Mean, within1All;
  int cases = 0;
  for (const CaseRow& r : rows) {
    std::printf("%-36s %-9s %5s %5zu", r.topo.c_str(), r.collective.c_str(), formatByteSize(r.bytes).c_str(), r.gridSize);
    for (const std::string& m : methods) {
      const MethodStats& s = r.methods.at(m);
      std::printf(" | %5.2f/%5.2f %5.1f", s.gapSum / s.runs, s.gapMax, s.costSum / s.runs);
    }
    std::printf("\n");
    ++cases;
    for (const std::string& mv : {std::string("mraco"), std::string("mraco-budget")}) {
      if (!r.methods.count(mv)) continue;
      const MethodStats& mr = r.methods.at(mv);
      const bool cheap = mr.costSum / mr.runs <= 100 * budgetFraction + 1e-9;
      within1Mean[mv] += cheap && mr.gapSum / mr.runs <= 1.0;
      within1All[mv] += cheap && mr.gapMax <= 1.0;
      for (const std::string& m : methods)
        if (m.rfind("mraco", 0) != 0) {
          const double d = mr.gapSum / mr.runs - r.methods.at(m).gapSum / r.methods.at(m).runs;
          ++winsOver[mv][m][d < -0.01 ? 0 : d > 0.01 ? 2 : 1];
        }
    }
  }
  for (const auto& [mv, n] : within1Mean)
    std::printf("%s: within 1%% of the grid optimum at <= %.0f%% of the grid's cost: %d of %d cases on the mean "
                "over seeds, %d of %d on every seed\n",
                mv.c_str(), 100 * budgetFraction, n, cases, within1All[mv], cases);
  for (const auto& [mv, wins] : winsOver)
    for (const auto& [m, w] : wins)
      std::printf("%s vs %s (mean gap, equal budget): %d better, %d tied, %d worse of %d cases\n", mv.c_str(),
                  m.c_str(), w[0], w[1], w[2], cases);

  // ---- 2. dimensions
  std::printf("\n## Joint vs single-dimension optimisation (TuCCL Figures 6-7): speed-up over what NCCL would do "
              "(NCCL's plan for its model's choice of algorithm, protocol and channels, simulated); ring-dflt: the ring at NCCL's defaults "
              "(Simple, 512 threads, 512K chunks) simulated\n");
  std::printf("%-38s %-9s %5s %10s %-17s %9s | %11s %11s | %11s %-18s | %11s %11s %-14s\n", "topology", "coll",
              "size", "nccl(us)", "(NCCL's choice)", "ring-dflt", "cfg-only", "cfg(MRACO)", "sketch-only", "(pick)",
              "joint", "joint(MRACO)", "(pick)");
  int jointBeatsBoth = 0;
  for (const CaseRow& r : rows) {
    std::printf("%-38s %-9s %5s %10.1f %-17s %8.2fx | %10.2fx %10.2fx | %10.2fx %-18s | %10.2fx %11.2fx %-14s\n",
                r.topo.c_str(), r.collective.c_str(), formatByteSize(r.bytes).c_str(), r.ncclUs, r.ncclPick.c_str(),
                r.ncclUs / r.ringDefaultUs, r.ncclUs / r.configOnlyUs, r.ncclUs / r.configMracoUs,
                r.ncclUs / r.sketchOnlyUs, r.sketchOnlyPick.c_str(), r.ncclUs / r.jointUs, r.ncclUs / r.jointMracoUs,
                r.jointPick.c_str());
    if (r.jointMracoUs < r.configOnlyUs * (1 - 1e-9) && r.jointMracoUs < r.sketchOnlyUs * (1 - 1e-9)) ++jointBeatsBoth;
  }
  std::printf("joint (MRACO's find) beats both single-dimension optima: %d of %zu cases\n", jointBeatsBoth, rows.size());

  if (csv) {
    std::printf("\ntopology,collective,bytes,grid,optimum_us");
    for (const std::string& m : methods) std::printf(",%s_gap_mean,%s_gap_max,%s_cost_pct", m.c_str(), m.c_str(), m.c_str());
    std::printf(",nccl_sim_us,nccl_choice,ring_default_us,config_only_us,config_mraco_us,sketch_only_us,joint_us,"
                "joint_mraco_us\n");
    for (const CaseRow& r : rows) {
      std::printf("\"%s\",%s,%lld,%zu,%.3f", r.topo.c_str(), r.collective.c_str(), static_cast<long long>(r.bytes),
                  r.gridSize, r.optimum);
      for (const std::string& m : methods) {
        const MethodStats& s = r.methods.at(m);
        std::printf(",%.4f,%.4f,%.3f", s.gapSum / s.runs, s.gapMax, s.costSum / s.runs);
      }
      std::printf(",%.3f,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.ncclUs, r.ncclPick.c_str(), r.ringDefaultUs,
                  r.configOnlyUs, r.configMracoUs, r.sketchOnlyUs, r.jointUs, r.jointMracoUs);
    }
  }
  std::fprintf(stderr, "done in %.0f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return 0;
}
