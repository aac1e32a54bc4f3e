// Writes the MSCCL++ execution-plan export of every bundled example algorithm into a directory, for
// the independent checker (tests/tools/mscclpp_semantics.py) that ctest runs next: three TB
// policies, in place and out of place where the collective allows, on one node (memory channels
// only) and on two nodes (port channels between them). It also writes `manifest.txt` (lines
// "FILE ROOT RANKS_PER_NODE"). Exit status 1 when an export fails.
//
// Usage: mscclpp_export_files DIRECTORY
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "plan/mscclpp_export.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"

namespace {

using namespace tuccl;
namespace fs = std::filesystem;

struct Example {
  std::string file;
  RescclParameters parameters;
  /// TB policies whose thread blocks need more than the executor's 64 ops: the export must fail
  /// with ResourceExhausted naming that limit.
  std::vector<std::string> tooManyOps = {};
};

// Small shapes, inside the executor's limits; two shapes of the ring and the direct algorithms.
const std::vector<Example> kExamples = {
    {"ring_allgather", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"ring_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}}},
    {"ring_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}, {"state", "state-unfused", "connection", "single"}},
    {"ring_reducescatter", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"direct_allgather", {{"nRanks", 6}, {"GPUPerNode", 3}}},
    {"direct_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 16}}},
    {"direct_alltoall", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 4}}},
    {"hm_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}, {"single"}},
    {"chain_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"binomial_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"chain_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
    {"binomial_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
};

struct Policy {
  std::string name;
  Scheduler scheduler;
  TbRequest tbs;
  bool fuse = true;
};

const std::vector<Policy> kPolicies = {
    {"state", Scheduler::Hpds, {TbPolicy::StateBased, false}},
    {"state-unfused", Scheduler::Hpds, {TbPolicy::StateBased, false}, false},
    {"connection", Scheduler::Hpds, {TbPolicy::ConnectionBased, false}},
    {"single", Scheduler::Hpds, {TbPolicy::Single, false}},
};

bool exportExample(const fs::path& dir, std::ofstream& manifest, const Example& example) {
  const fs::path source = fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms" / (example.file + ".resccl");
  Expected<Algorithm> algorithm = loadRescclAlgorithm(source.string(), example.parameters);
  if (!algorithm) {
    std::cerr << algorithm.status().toString() << "\n";
    return false;
  }
  bool ok = true;
  for (const Policy& policy : kPolicies) {
    PlanRequest request;
    request.scheduler = policy.scheduler;
    request.tbAllocation = policy.tbs;
    request.fuse = policy.fuse;
    const Plan plan = buildPlan(*algorithm, request).value();
    for (int32_t nodes : {1, 2}) {
      for (bool inPlace : {true, false}) {
        if (!inPlace && plan.collective == Collective::ReduceScatter) continue;  // refused: mscclpp_export_test
        MscclppExportOptions options;
        options.inPlace = inPlace;
        options.ranksPerNode = nodes == 1 ? 0 : plan.nRanks / nodes;
        const std::string name = example.file + ".n" + std::to_string(plan.nRanks) + "." + policy.name + ".nodes" +
                                 std::to_string(nodes) + (inPlace ? ".inplace" : ".outofplace") + ".json";
        Expected<std::string> json = exportMscclppJson(plan, options);
        const bool tooMany = std::find(example.tooManyOps.begin(), example.tooManyOps.end(), policy.name) !=
                             example.tooManyOps.end();
        if (tooMany) {
          const bool refused = !json && json.status().code() == ErrorCode::ResourceExhausted &&
                               json.status().message().find("ops per thread block") != std::string::npos;
          if (!refused) {
            std::cerr << name << ": expected the export to exceed the executor's ops per thread block\n";
            ok = false;
          }
          continue;
        }
        if (!json) {
          std::cerr << name << ": " << json.status().toString() << "\n";
          ok = false;
          continue;
        }
        std::ofstream(dir / name) << *json;
        manifest << name << " " << std::max(0, plan.root) << " " << options.ranksPerNode << "\n";
      }
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: mscclpp_export_files DIRECTORY\n";
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  std::ofstream manifest(dir / "manifest.txt");
  bool ok = true;
  for (const Example& example : kExamples) ok = exportExample(dir, manifest, example) && ok;
  return ok ? 0 : 1;
}
