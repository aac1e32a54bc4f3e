#include "table/lookup_table.h"

#include <cctype>
#include <cstdio>

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

const char* formatChoice(Choice choice, char* out, size_t size) noexcept {
  // NCCL's spelling: "RING/LL128", "any/SIMPLE".
  std::string_view algorithm = choice.algorithm ? ncclAlgorithmName(*choice.algorithm) : "any";
  // NCCL's protocol names are the vocabulary's in upper case (no allocation here: noexcept).
  char protocol[8] = "any";
  if (choice.protocol) {
    std::string_view name = protocolName(*choice.protocol);
    size_t n = 0;
    for (; n < name.size() && n + 1 < sizeof protocol; ++n)
      protocol[n] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[n])));
    protocol[n] = '\0';
  }
  std::snprintf(out, size, "%.*s/%s", static_cast<int>(algorithm.size()), algorithm.data(), protocol);
  return out;
}

}  // namespace tuccl
