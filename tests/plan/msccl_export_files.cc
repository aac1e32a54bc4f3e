// Writes the MSCCL XML export of every bundled example algorithm into a directory, for the
// independent checker (tests/tools/msccl_semantics.py) that ctest runs next: every TB policy,
// 1 and 2 replicas (channels), in place and out of place where the collective allows, for the
// executor's spelling and limits, and a subset for microsoft/msccl and RCCL. It also writes
// `manifest.txt` (lines "FILE RUNTIME ROOT"). Into DIRECTORY/round_trip (with its own manifest.txt)
// it writes the round trips of the valid MSCCL test files (tests/data/msccl/*.xml): each file
// imported, scheduled under every TB policy and exported again, for its own call layout and, when
// in place, for out-of-place calls too. Exit status 1 when an import or export fails.
//
// Usage: msccl_export_files DIRECTORY
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "lang/msccl_xml.h"
#include "plan/msccl_export.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"

namespace {

using namespace tuccl;
namespace fs = std::filesystem;

struct Example {
  std::string file;
  RescclParameters parameters;
};

// Small shapes, inside every runtime's limits.
const std::vector<Example> kExamples = {
    {"ring_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"ring_reducescatter", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"direct_allgather", {{"nRanks", 6}, {"GPUPerNode", 3}}},
    {"direct_allreduce", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 16}}},
    {"direct_alltoall", {{"nRanks", 4}, {"GPUPerNode", 2}, {"nScratch", 4}}},
    {"hm_allgather", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"hm_allreduce", {{"nRanks", 8}, {"GPUPerNode", 4}}},
    {"chain_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"binomial_broadcast", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 2}}},
    {"chain_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
    {"binomial_reduce", {{"nRanks", 6}, {"GPUPerNode", 3}, {"Root", 4}}},
};

struct Policy {
  std::string name;
  Scheduler scheduler;
  TbRequest tbs;
};

const std::vector<Policy> kPolicies = {
    {"state", Scheduler::Hpds, {TbPolicy::StateBased, false}},
    {"connection", Scheduler::Hpds, {TbPolicy::ConnectionBased, false}},
    {"channels", Scheduler::AlgorithmLevel, {TbPolicy::ConnectionBased, true}},
    {"single", Scheduler::Hpds, {TbPolicy::Single, false}},
};

bool exportOne(const fs::path& dir, std::ofstream& manifest, const Plan& plan, const std::string& name,
               const MscclExportOptions& options) {
  Expected<std::string> xml = exportMscclXml(plan, options);
  if (!xml) {
    std::cerr << name << ": " << xml.status().toString() << "\n";
    return false;
  }
  std::ofstream(dir / name) << *xml;
  manifest << name << " " << mscclRuntimeName(options.runtime) << " " << std::max(0, plan.root) << "\n";
  return true;
}

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
    const Plan plan = buildPlan(*algorithm, request).value();
    for (int32_t replicas : {1, 2}) {
      for (bool inPlace : {true, false}) {
        if (!inPlace && plan.collective == Collective::ReduceScatter) continue;  // refused: tested in msccl_export_test
        MscclExportOptions options;
        options.replicas = replicas;
        options.inPlace = inPlace;
        const std::string stem = example.file + "." + policy.name + ".c" + std::to_string(replicas) +
                                 (inPlace ? ".inplace" : ".outofplace");
        ok = exportOne(dir, manifest, plan, stem + ".executor.xml", options) && ok;
        if (replicas == 1 && policy.name == "state") {
          for (MscclRuntime runtime : {MscclRuntime::Msccl, MscclRuntime::Rccl}) {
            options.runtime = runtime;
            ok = exportOne(dir, manifest, plan, stem + "." + std::string(mscclRuntimeName(runtime)) + ".xml", options) && ok;
          }
        }
      }
    }
  }
  return ok;
}

// export(plan(import(file))) for every TB policy and call layout.
bool exportRoundTrip(const fs::path& dir, std::ofstream& manifest, const fs::path& file) {
  Expected<ImportedMscclAlgorithm> imported = importMscclXmlFile(file.string());
  if (!imported) {
    std::cerr << imported.status().toString() << "\n";
    return false;
  }
  const Algorithm& algorithm = imported->algorithm;
  bool ok = true;
  for (const Policy& policy : kPolicies) {
    PlanRequest request;
    request.scheduler = policy.scheduler;
    request.tbAllocation = policy.tbs;
    const Plan plan = buildPlan(algorithm, request).value();
    for (bool inPlace : {true, false}) {
      if (inPlace && !algorithm.inPlace) continue;
      if (!inPlace && algorithm.inPlace && plan.collective == Collective::ReduceScatter) continue;
      MscclExportOptions options;
      options.replicas = 1;
      options.inPlace = inPlace;
      const std::string name =
          file.stem().string() + "." + policy.name + (inPlace ? ".inplace" : ".outofplace") + ".executor.xml";
      ok = exportOne(dir, manifest, plan, name, options) && ok;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: msccl_export_files DIRECTORY\n";
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  std::ofstream manifest(dir / "manifest.txt");
  bool ok = true;
  for (const Example& example : kExamples) ok = exportExample(dir, manifest, example) && ok;
  const fs::path roundTrip = dir / "round_trip";
  fs::create_directories(roundTrip);
  std::ofstream roundTripManifest(roundTrip / "manifest.txt");
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(TUCCL_SOURCE_DIR) / "tests/data/msccl")) {
    if (entry.is_regular_file() && entry.path().extension() == ".xml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) ok = exportRoundTrip(roundTrip, roundTripManifest, file) && ok;
  return ok ? 0 : 1;
}
