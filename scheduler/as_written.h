// The as-written plan of an MSCCL XML file: the file's own thread blocks, channels and step order,
// run at algorithm level, as the MSCCL runtimes run it (docs/msccl.md, "As written").
//
// In:  an imported file's Algorithm and MscclSchedule (lang/msccl_xml.h) and a PlanConfig.
// Out: a Plan (scheduler Scheduler::AsWritten, algorithm-level execution): per rank one plan TB
//      per <tb> of the file, in id order, holding the entries of its steps in the file's order (a
//      step's receive, its local operation, its send); one more TB for the rank's <copy>
//      elements, when it has any. Entries of different TBs wait for each other where the file's
//      order makes one use a slot the other touches (the data dependencies of the file's
//      happens-before order, which its depid/deps and FIFO pairing carry). Sends are buffered as
//      on MSCCL's connections: config.sendAhead becomes the smallest depth (0 = rendezvous) at
//      which the file's order is deadlock free, at most kAsWrittenMaxSendAhead.
//      Or an error status: the schedule does not belong to the algorithm, a step's order
//      contradicts the algorithm's, or the file needs deeper buffering than the bound.
#pragma once

#include <cstdint>

#include "lang/algorithm.h"
#include "lang/msccl_xml.h"
#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// The deepest buffering an as-written plan may rely on: the slots of an NCCL connection
/// (NCCL_STEPS), which MSCCL's connections use.
inline constexpr int32_t kAsWrittenMaxSendAhead = 8;

/// Lowers the file as written. config.nChannels 0 becomes 1: the file's channels are its TBs, and
/// more replicas of the whole file are asked for explicitly.
Expected<Plan> lowerAsWritten(const Algorithm& algorithm, const MscclSchedule& schedule, const PlanConfig& config);

}  // namespace tuccl
