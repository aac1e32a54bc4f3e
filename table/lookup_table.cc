#include "table/lookup_table.h"

#include "support/text_values.h"

namespace tuccl {

std::optional<NcclAlgorithm> ncclAlgorithmAt(int index) {
  if (index < 0 || index >= kNcclAlgorithms) return std::nullopt;
  return static_cast<NcclAlgorithm>(index);
}

std::optional<Protocol> protocolAt(int index) {
  if (index < 0 || index >= kProtocols) return std::nullopt;
  return static_cast<Protocol>(index);
}

bool isTunerCollective(Collective collective) { return static_cast<int>(collective) < kTunerCollectives; }

}  // namespace tuccl
