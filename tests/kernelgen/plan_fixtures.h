// Plans of the example algorithms for the kernelgen tests: the pipeline of tuccl-compile
// (compileResccl -> checkAlgorithm -> DAG -> scheduler -> TB allocation -> lowerToPlan).
#pragma once

#include <fstream>
#include <map>
#include <stdexcept>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernelgen/compile.h"
#include "lang/resccl.h"
#include "lang/semantic_check.h"
#include "plan/plan_validate.h"
#include "scheduler/dag.h"
#include "scheduler/lowering.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"

namespace tuccl::testing {

inline const std::vector<std::string>& exampleAlgorithms() {
  static const std::vector<std::string> names = {"ring_allreduce", "hm_allreduce", "ring_allgather", "hm_allgather",
                                                 "direct_allgather"};
  return names;
}

/// The examples of collectives with a root (Broadcast, Reduce); their Root is a parameter.
inline const std::vector<std::string>& rootedExampleAlgorithms() {
  static const std::vector<std::string> names = {"chain_broadcast", "binomial_broadcast", "chain_reduce",
                                                 "binomial_reduce"};
  return names;
}

inline const std::vector<std::string>& schedulers() {
  static const std::vector<std::string> names = {"hpds", "rr", "algorithm", "stage"};
  return names;
}

struct CompiledExample {
  Algorithm algorithm;
  Plan plan;
};

/// The example `name` with 8 ranks, 4 per node, scheduled by `scheduler` (a parseScheduler name);
/// cached. `root` >= 0 overrides the Root of a Broadcast or Reduce program.
inline const CompiledExample& compileExample(const std::string& name, const std::string& scheduler = "hpds",
                                             bool stateBased = true, int32_t nRanks = 8, int32_t perNode = 4,
                                             int32_t root = -1, bool fuse = true) {
  static std::map<std::string, std::unique_ptr<CompiledExample>> cache;
  const std::string key = name + "/" + scheduler + "/" + (stateBased ? "state" : "connection") + "/" +
                          std::to_string(nRanks) + "x" + std::to_string(perNode) + "/root" + std::to_string(root) +
                          (fuse ? "/fused" : "/unfused");
  auto& slot = cache[key];
  if (slot) return *slot;
  const std::string path = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  RescclOptions options;
  options.parameterOverrides = {{"nRanks", nRanks}, {"GPUPerNode", perNode}};
  if (root >= 0) options.parameterOverrides.emplace_back("Root", root);
  auto compiled = std::make_unique<CompiledExample>();
  compiled->algorithm = compileResccl(SourceText("examples/algorithms/" + name + ".resccl", text.str()), options).value();
  EXPECT_TRUE(checkAlgorithm(compiled->algorithm).ok()) << name;
  const Algorithm& algorithm = compiled->algorithm;
  Dag dag = buildDependencyDag(algorithm);
  Pipeline pipeline;
  switch (parseScheduler(scheduler).value()) {
    case Scheduler::Hpds: pipeline = scheduleHpds(dag); break;
    case Scheduler::RoundRobin: pipeline = scheduleRoundRobin(dag); break;
    case Scheduler::AlgorithmLevel: pipeline = scheduleAlgorithmLevel(algorithm, dag); break;
    case Scheduler::StageLevel: pipeline = scheduleStageLevel(algorithm, dag, 4); break;
    case Scheduler::AsWritten: throw std::invalid_argument("the example fixtures are ResCCLang: as-written needs XML");
  }
  TbAllocationOptions allocationOptions;
  allocationOptions.policy = stateBased ? TbPolicy::StateBased : TbPolicy::ConnectionBased;
  TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, allocationOptions);
  PlanConfig config;
  config.nChannels = 1;
  compiled->plan = lowerToPlan(algorithm, dag, pipeline, allocation, config, fuse);  // fused, as buildPlan
  EXPECT_TRUE(validatePlan(compiled->plan).ok()) << key << ": " << validatePlan(compiled->plan).toString();
  slot = std::move(compiled);
  return *slot;
}

/// The kernels of `plan` as compilePlan generates them (no targets).
inline GeneratedKernels kernelsOf(const Plan& plan, const KernelGenOptions& options = {}) {
  Targets targets;
  targets.kernelGen = options;
  Expected<CompiledPlan> compiled = compilePlan(plan, targets);
  EXPECT_TRUE(compiled.ok()) << compiled.status().toString();
  return compiled ? std::move(compiled->kernels) : GeneratedKernels{};
}

}  // namespace tuccl::testing
