// The whole compile as two calls, shared by tuccl-compile, the simulator, the kernel generator's
// tests and the benchmarks: an algorithm from a ResCCLang file at a given shape (parsed and
// proved), and a plan from an algorithm and a scheduler name (DAG -> pipeline -> TB allocation ->
// lowering -> validation).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lang/algorithm.h"
#include "scheduler/plan.h"

namespace tuccl {

struct PlanRequest {
  std::string scheduler = "hpds";  ///< hpds, rr, algorithm, stage (also hpds-level names accepted)
  int32_t stages = 4;              ///< stage-level blocks
  /// "auto": state-based for the task-level schedulers (ResCCL), connection-based with MSCCL's
  /// forwarding channels (channelsByForwarding, Table 3) for algorithm and stage level; or
  /// "state", "connection", "connection+channels".
  std::string tbAllocation = "auto";
  PlanConfig config;  ///< nChannels 0 takes the algorithm's nChannels hint (as tuccl-compile)
};

/// Schedules, allocates TBs and lowers; throws std::invalid_argument for an unknown scheduler or
/// allocation, std::logic_error when the plan fails validatePlan (a scheduler bug).
Plan buildPlan(const Algorithm& algorithm, const PlanRequest& request);

/// Reads and runs a ResCCLang program with nRanks / GPUPerNode overridden (when > 0) and proves it
/// with the semantic checker; throws DiagnosticError on a bad program or a failed proof.
Algorithm loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode);

}  // namespace tuccl
