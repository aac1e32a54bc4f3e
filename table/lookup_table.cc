#include "table/lookup_table.h"

#include "support/text_values.h"

namespace tuccl {
namespace {

constexpr std::array<std::string_view, kNcclAlgorithms> kAlgorithmNames = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};

}  // namespace

std::string_view ncclAlgorithmName(NcclAlgorithm algorithm) {
  const auto index = static_cast<size_t>(algorithm);
  return index < kAlgorithmNames.size() ? kAlgorithmNames[index] : "?";
}

std::optional<NcclAlgorithm> parseNcclAlgorithm(std::string_view text) {
  for (size_t i = 0; i < kAlgorithmNames.size(); ++i) {
    if (equalsIgnoreCase(text, kAlgorithmNames[i])) return static_cast<NcclAlgorithm>(i);
  }
  return std::nullopt;
}

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
