// The plan as JSON text (docs/plan-format.md): "format": "tuccl-plan", version 2.
//
// In:  a Plan (writePlanJson), or plan JSON text of version 1 or 2 (readPlanJson).
// Out: deterministic JSON text (byte-identical for equal plans), or a validated Plan.
#pragma once

#include <ostream>
#include <string>

#include "plan/plan.h"
#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

/// The version writePlanJson writes. Version 2 added the root and the source locations.
inline constexpr int kPlanFormatVersion = 2;
/// The oldest version readPlanJson reads (without root: no Broadcast or Reduce plans).
inline constexpr int kOldestPlanFormatVersion = 1;

/// The plan as JSON text: object keys sorted, one-space indentation, a trailing newline.
std::string writePlanJson(const Plan& plan);

/// The same text written to `out` rank by rank, so a large plan is never held twice in memory.
void writePlanJson(std::ostream& out, const Plan& plan);

/// Parses plan JSON and validates the plan (validatePlan). An error carries the file name of
/// `source`; a syntax error its line and column, a schema error the path of the field
/// (plan.ranks[1].tbs[0].entries[3].kind). Refuses other formats and versions, and version-1
/// Broadcast and Reduce plans (they lack the root and must be recompiled).
Expected<Plan> readPlanJson(const SourceText& source);

}  // namespace tuccl
