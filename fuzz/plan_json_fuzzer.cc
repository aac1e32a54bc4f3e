// libFuzzer target for the plan JSON reader, versions 1 to 4 (build with -DTUCCL_FUZZ=ON and
// clang).
//
//   build-fuzz/fuzz/plan_json_fuzzer -max_total_time=300 -timeout=5 -dict=fuzz/plan_json.dict fuzz/corpus_plan
//
// Every input must read into a valid plan that writes back (versions 2, 3 and 4) to text reading
// into the same plan (unfused before version 4), or fail with a Status naming the file; anything
// else (a crash, a sanitizer report, a hang, an escaping exception, an expansion beyond the limit) is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "plan/plan_json.h"
#include "plan/plan_validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  tuccl::SourceText source("fuzz.json", std::string(reinterpret_cast<const char*>(data), size));
  tuccl::PlanReadLimits limits;
  limits.maxExpandedItems = 1 << 16;  // small, so every input ends quickly
  tuccl::Expected<tuccl::Plan> plan = tuccl::readPlanJson(source, limits);
  if (!plan.ok()) {
    const tuccl::Diagnostic& diagnostic = plan.diagnostic();
    if (diagnostic.file != "fuzz.json" || diagnostic.message.empty()) std::abort();
    if (diagnostic.loc.line > source.lineCount() + 1) std::abort();
    return 0;
  }
  if (!tuccl::validatePlan(*plan).ok()) std::abort();
  int64_t items = 0;
  for (const tuccl::PlanRank& rank : plan->ranks)
    for (const tuccl::PlanTb& tb : rank.tbs)
      for (const tuccl::PlanEntry& entry : tb.entries) items += 1 + static_cast<int64_t>(entry.deps.size());
  if (items > limits.maxExpandedItems) std::abort();
  const tuccl::Plan unfused = tuccl::unfusedPlan(*plan);
  for (int version : {2, 3, 4}) {
    const std::string text = tuccl::writePlanJson(*plan, version);
    tuccl::Expected<tuccl::Plan> back = tuccl::readPlanJson(tuccl::SourceText("again.json", text));
    if (!back.ok() || !(*back == (version < 4 ? unfused : *plan))) std::abort();
  }
  return 0;
}
