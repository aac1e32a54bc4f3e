// The whole compile as two calls, shared by tuccl-compile, the simulator, the kernel generator's
// tests and the benchmarks: an algorithm from a ResCCLang file at a given shape (parsed and
// proved), and a plan from an algorithm and a request (DAG -> pipeline -> TB allocation ->
// lowering -> validation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lang/algorithm.h"
#include "lang/resccl.h"
#include "plan/plan.h"

namespace tuccl {

struct MscclSchedule;  // lang/msccl_xml.h

/// How buildPlan allocates thread blocks (ResCCL §4.4, Table 3).
struct TbRequest {
  /// Empty ("auto"): state-based for the task-level schedulers (ResCCL), connection-based with
  /// MSCCL's forwarding channels for algorithm and stage level.
  std::optional<TbPolicy> policy;
  /// With a policy: split connections into MSCCL's channels (channelsByForwarding).
  bool forwardingChannels = false;
};

/// The command-line spellings: "auto", "state", "connection", "connection+channels" (and the
/// TbPolicy names); empty for anything else.
std::optional<TbRequest> parseTbRequest(std::string_view name);

struct PlanRequest {
  Scheduler scheduler = Scheduler::Hpds;
  int32_t stages = 4;  ///< stage-level blocks
  TbRequest tbAllocation;
  /// nChannels 0 takes the algorithm's nChannels hint (as tuccl-compile). sendAhead > 0 (the ring
  /// depth, in chunks per micro-batch, the runtime guarantees) asks single-TB plans for the
  /// buffered order (lowering.h); the plan keeps it only where it is deadlock free at that depth.
  PlanConfig config;
  /// The MSCCL XML file's own schedule (ImportedMscclAlgorithm::schedule, not owned): what
  /// Scheduler::AsWritten runs (scheduler/as_written.h); the other schedulers ignore it.
  const MscclSchedule* mscclSchedule = nullptr;
  /// Fuse each receive with the send of its result (lowerToPlan): one pass over the slice. Off:
  /// every transfer is its own send and receive (the plans before fusion).
  bool fuse = true;
};

/// The error of asking for Scheduler::AsWritten without an MSCCL schedule.
inline constexpr std::string_view kAsWrittenNeedsXml = "as-written needs an MSCCL XML input";

/// Schedules, allocates TBs and lowers. An error status for what the input can cause: as-written
/// without a schedule (kAsWrittenNeedsXml), a schedule as-written cannot run (as_written.h).
/// Throws std::logic_error when the plan fails validatePlan (a scheduler bug).
Expected<Plan> tryBuildPlan(const Algorithm& algorithm, const PlanRequest& request);

/// tryBuildPlan for requests known to be good: throws std::invalid_argument with the error's
/// message where tryBuildPlan returns one.
Plan buildPlan(const Algorithm& algorithm, const PlanRequest& request);

/// Reads and runs a ResCCLang program with nRanks / GPUPerNode overridden (when > 0) and proves it
/// with the semantic checker; an error status naming file:line:col on a bad program or a failed proof.
Expected<Algorithm> loadRescclAlgorithm(const std::string& path, int32_t nRanks, int32_t gpusPerNode);

/// As loadRescclAlgorithm, for a program already in memory (an embedded built-in, a table's
/// file read once): `name` names it in diagnostics and is the default AlgoName's source.
Expected<Algorithm> loadRescclAlgorithmFromText(const std::string& name, std::string text,
                                                const RescclParameters& parameters);

}  // namespace tuccl
