// The plan as JSON text (docs/plan-format.md): "format": "tuccl-plan", version 3 (rolled: runs of
// entries and rank templates, plan/plan_rolled.h) or version 2 (one object per entry).
//
// In:  a Plan (writePlanJson), or plan JSON text of version 1, 2 or 3 (readPlanJson).
// Out: deterministic JSON text (byte-identical for equal plans), or a validated Plan.
#pragma once

#include <ostream>
#include <string>

#include "plan/plan.h"
#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

/// The version writePlanJson writes by default. Version 2 added the root and the source
/// locations; version 3 rolls runs of entries and ranks of one shape into templates; version 4
/// (rolled, like 3) adds the fused primitives (recvCopySend, recvReduceSend, recvReduceCopySend)
/// and their next* fields.
inline constexpr int kPlanFormatVersion = 4;
/// The oldest version readPlanJson reads (without root: no Broadcast or Reduce plans).
inline constexpr int kOldestPlanFormatVersion = 1;
/// The oldest version writePlanJson writes: one object per entry.
inline constexpr int kOldestWrittenPlanFormatVersion = 2;

/// The plan as JSON text of `version` (2, 3 or 4; another is a bug: std::invalid_argument). Object
/// keys in sorted order, a trailing newline; equal plans give byte-identical text. Versions 2 and
/// 3 write a plan with fused entries unfused (unfusedPlan): the same transfers.
std::string writePlanJson(const Plan& plan, int version = kPlanFormatVersion);

/// The same text written to `out` piece by piece (a rank, a run): the text of a large plan is
/// never held whole in memory.
void writePlanJson(std::ostream& out, const Plan& plan, int version = kPlanFormatVersion);

/// What readPlanJson refuses to build, whatever the text says.
struct PlanReadLimits {
  /// Entries plus dependencies of the expanded plan (a 1,024-rank HM AllReduce has 8.3 x 10^6;
  /// the default, 2^26, is several GB of Plan in memory).
  int64_t maxExpandedItems = int64_t{1} << 26;
};

/// Parses plan JSON and validates the plan (validatePlan). An error carries the file name of
/// `source`; a syntax error its line and column, a schema error the path of the field
/// (plan.ranks[1].tbs[0].entries[3].kind, plan.templates[0].tbs[2].runs[1].stride.op). Refuses
/// other formats and versions, version-1 Broadcast and Reduce plans (they lack the root and must
/// be recompiled), and version-3 plans that would expand beyond `limits`.
Expected<Plan> readPlanJson(const SourceText& source, const PlanReadLimits& limits = {});

}  // namespace tuccl
