// A plan from an algorithm and a request in one call (DAG -> pipeline -> TB allocation ->
// lowering -> validation), shared by tuccl-compile, the simulator, libtuccl's plan cache, the
// tests and the benchmarks. The algorithm comes from lang/load_algorithm.h.
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
  /// With a policy: the channel of each of the algorithm's operations, which splits a connection
  /// into one per channel (a TB each), as NCCL's channels each have their own; empty: none, or
  /// forwardingChannels. Its size must be the operation count.
  std::vector<int32_t> channelOfOperation;
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
/// without a schedule (InvalidArgument, kAsWrittenNeedsXml), a schedule as-written cannot run
/// (as_written.h); Internal for a plan that fails validatePlan, or a stage that found the
/// algorithm, DAG, pipeline and allocation disagreeing (a scheduler bug).
Expected<Plan> buildPlan(const Algorithm& algorithm, const PlanRequest& request);

}  // namespace tuccl
