// The call checks both plan exporters share (export_calls.h).
#include "plan/export_calls.h"

#include <string>

namespace tuccl {

Status checkExportedCalls(const Plan& plan, bool inPlace, uint64_t minBytes, uint64_t maxBytes) {
  if (maxBytes != 0 && minBytes > maxBytes) {
    return makeError(ErrorCode::InvalidArgument, "minBytes " + std::to_string(minBytes) + " is larger than maxBytes " +
                                                     std::to_string(maxBytes));
  }
  if (inPlace && !plan.inPlace) {
    return makeError(ErrorCode::Unsupported, "the plan keeps input and output apart: it cannot serve in-place calls");
  }
  if (!inPlace && plan.inPlace && plan.collective == Collective::ReduceScatter) {
    return makeError(ErrorCode::Unsupported,
                     "an in-place ReduceScatter plan works in the input buffer: it cannot serve out-of-place calls");
  }
  return {};
}

}  // namespace tuccl
