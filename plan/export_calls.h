// What a plan exporter checks of the calls the exported file is to serve, the same for MSCCL XML
// (plan/msccl_export.h) and MSCCL++ (plan/mscclpp_export.h).
//
// In:  a Plan, the call layout asked for (in place or out of place) and the message size range.
// Out: Status() when the plan can serve those calls, else the reason.
#pragma once

#include <cstdint>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// minBytes no larger than maxBytes (0: no limit; InvalidArgument); in-place calls only from an
/// in-place plan, out-of-place calls from any plan but an in-place ReduceScatter, whose storage is
/// the input (Unsupported).
Status checkExportedCalls(const Plan& plan, bool inPlace, uint64_t minBytes, uint64_t maxBytes);

}  // namespace tuccl
