#include "synth/proved.h"

#include <string>
#include <utility>

#include "lang/semantic_check.h"

namespace tuccl {

Expected<Algorithm> proveGenerated(Algorithm algorithm, std::string_view producer) {
  CheckReport report = checkAlgorithm(algorithm);
  if (report.ok()) return algorithm;
  const Violation& violation = *report.violation;
  std::string message = std::string(producer) + " produced an algorithm the checker refutes (" +
                        std::string(violationName(violation.kind)) + "): " + violation.message;
  if (violation.opIndex >= 0) message += " [operation " + std::to_string(violation.opIndex) + "]";
  return makeError(ErrorCode::Internal, std::move(message));
}

}  // namespace tuccl
