#include "table/tuner_constants.h"

#include <array>
#include <vector>

#include "support/text_values.h"
#include "table/lookup_table.h"

namespace tuccl {
namespace {

// The dimension names of each array besides algorithms and protocols (nccl-tuner-abi.md; RUBIN
// from tuner v7).
constexpr std::array<std::string_view, 3> kLinkNames = {"NVLINK", "PCI", "NET"};
constexpr std::array<std::string_view, 5> kArchNames = {"VOLTA", "AMPERE", "HOPPER", "BLACKWELL", "RUBIN"};
constexpr std::array<std::string_view, 3> kScaleNames = {"1", "2", "4"};
constexpr std::array<std::string_view, 5> kBandwidthArrays = {
    "llMaxBws", "perChMaxRingLL128Bws", "perChMaxTreeLL128Bws", "perChMaxTreeBws", "perChMaxNVLSTreeBws"};
constexpr uint32_t kLatencies = kNcclAlgorithms * kProtocols;
constexpr uint32_t kBaseLatencyOffset = 0;
constexpr uint32_t kHwLatencyOffset = kLatencies;
constexpr uint32_t kBandwidthOffset = kHwLatencyOffset + kLinkNames.size() * kLatencies;

uint32_t archRows(TunerConstantsLayout layout) { return layout == TunerConstantsLayout::V7 ? 5 : 4; }

template <size_t N>
std::optional<uint32_t> indexOf(const std::array<std::string_view, N>& names, std::string_view text) {
  for (size_t i = 0; i < N; ++i) {
    if (equalsIgnoreCase(text, names[i])) return static_cast<uint32_t>(i);
  }
  return std::nullopt;
}

std::optional<uint32_t> algorithmIndex(std::string_view text) {
  const auto algorithm = parseNcclAlgorithm(text);
  return algorithm ? std::optional<uint32_t>(static_cast<uint32_t>(*algorithm)) : std::nullopt;
}
std::optional<uint32_t> protocolIndex(std::string_view text) {
  const auto protocol = parseProtocol(text);
  return protocol ? std::optional<uint32_t>(static_cast<uint32_t>(*protocol)) : std::nullopt;
}
std::string constantAlgorithmName(uint32_t index) {
  return std::string(ncclAlgorithmName(static_cast<NcclAlgorithm>(index)));
}
/// NCCL's upper-case spelling in constant names: "LL", "LL128", "SIMPLE".
std::string constantProtocolName(uint32_t index) {
  return toUpperCase(protocolName(static_cast<Protocol>(index)));
}

std::vector<std::string_view> splitDots(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

uint32_t tunerConstantCount(TunerConstantsLayout layout) {
  return layout == TunerConstantsLayout::V7 ? kNumTunerConstantsV7 : kNumTunerConstantsV5;
}

std::optional<uint32_t> tunerConstantOffset(std::string_view name, TunerConstantsLayout layout) {
  const std::vector<std::string_view> parts = splitDots(name);
  if (parts.size() == 3 && parts[0] == "baseLatencies") {
    const auto algo = algorithmIndex(parts[1]);
    const auto proto = protocolIndex(parts[2]);
    if (!algo || !proto) return std::nullopt;
    return kBaseLatencyOffset + *algo * kProtocols + *proto;
  }
  if (parts.size() == 4 && parts[0] == "hwLatencies") {
    const auto link = indexOf(kLinkNames, parts[1]);
    const auto algo = algorithmIndex(parts[2]);
    const auto proto = protocolIndex(parts[3]);
    if (!link || !algo || !proto) return std::nullopt;
    return kHwLatencyOffset + (*link * kNcclAlgorithms + *algo) * kProtocols + *proto;
  }
  if (parts.size() == 3) {
    const auto array = indexOf(kBandwidthArrays, parts[0]);
    const auto arch = indexOf(kArchNames, parts[1]);
    const auto scale = indexOf(kScaleNames, parts[2] == "4+" ? std::string_view("4") : parts[2]);
    if (!array || !arch || !scale || parts[0] != kBandwidthArrays[*array]) return std::nullopt;
    const uint32_t rows = archRows(layout);
    if (*arch >= rows) return std::nullopt;
    return kBandwidthOffset + (*array * rows + *arch) * kScaleNames.size() + *scale;
  }
  return std::nullopt;
}

std::string tunerConstantName(uint32_t offset, TunerConstantsLayout layout) {
  auto name = [](std::string_view view) { return std::string(view); };
  if (offset < kHwLatencyOffset) {
    return "baseLatencies." + constantAlgorithmName(offset / kProtocols) + "." +
           constantProtocolName(offset % kProtocols);
  }
  if (offset < kBandwidthOffset) {
    const uint32_t i = offset - kHwLatencyOffset;
    return "hwLatencies." + name(kLinkNames[i / kLatencies]) + "." +
           constantAlgorithmName(i / kProtocols % kNcclAlgorithms) + "." +
           constantProtocolName(i % kProtocols);
  }
  if (offset < tunerConstantCount(layout)) {
    const uint32_t i = offset - kBandwidthOffset;
    const uint32_t perArray = archRows(layout) * kScaleNames.size();
    return name(kBandwidthArrays[i / perArray]) + "." + name(kArchNames[i % perArray / kScaleNames.size()]) +
           "." + name(kScaleNames[i % kScaleNames.size()]);
  }
  return "?";
}

std::optional<std::string> canonicalTunerConstantName(std::string_view name) {
  const auto offset = tunerConstantOffset(name, TunerConstantsLayout::V7);
  if (!offset) return std::nullopt;
  return tunerConstantName(*offset, TunerConstantsLayout::V7);
}

}  // namespace tuccl
