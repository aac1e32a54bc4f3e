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

std::vector<ConfigGroup> entryGroups(const TableEntry& entry) {
  std::vector<ConfigGroup> groups;
  groups.reserve(entry.groups.size() + 1);
  ConfigGroup own;
  if (!entry.choices.empty()) own.choice = entry.choices.front();
  own.nChannels = entry.nChannels;
  own.chunkSize = entry.chunkSize;
  own.tucclAlgorithm = entry.tucclAlgorithm;
  own.timeUs = entry.timeUs;
  own.interval = entry.interval;
  groups.push_back(std::move(own));
  groups.insert(groups.end(), entry.groups.begin(), entry.groups.end());
  return groups;
}

}  // namespace tuccl
