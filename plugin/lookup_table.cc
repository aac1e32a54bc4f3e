#include "plugin/lookup_table.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace tuccl {
namespace {

constexpr std::array<std::string_view, kNumAlgorithms> kAlgorithmNames = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr std::array<std::string_view, kNumProtocols> kProtocolNames = {"LL", "LL128", "SIMPLE"};

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

template <size_t N>
std::optional<int8_t> findName(const std::array<std::string_view, N>& names, std::string_view text) {
  if (equalsIgnoreCase(text, "any") || text == "-1") return kAny;
  for (size_t i = 0; i < N; ++i) {
    if (equalsIgnoreCase(text, names[i])) return static_cast<int8_t>(i);
  }
  return std::nullopt;
}

// ncclTunerConstants_v5_t layout (nccl-tuner-abi.md): the dimension names of each array.
constexpr std::array<std::string_view, 3> kLinkNames = {"NVLINK", "PCI", "NET"};
constexpr std::array<std::string_view, 4> kArchNames = {"VOLTA", "AMPERE", "HOPPER", "BLACKWELL"};
constexpr std::array<std::string_view, 3> kScaleNames = {"1", "2", "4"};
constexpr std::array<std::string_view, 5> kBandwidthArrays = {
    "llMaxBws", "perChMaxRingLL128Bws", "perChMaxTreeLL128Bws", "perChMaxTreeBws", "perChMaxNVLSTreeBws"};
constexpr uint32_t kBaseLatencyOffset = 0;
constexpr uint32_t kHwLatencyOffset = kNumAlgorithms * kNumProtocols;
constexpr uint32_t kBandwidthOffset = kHwLatencyOffset + 3 * kNumAlgorithms * kNumProtocols;

template <size_t N>
std::optional<uint32_t> indexOf(const std::array<std::string_view, N>& names, std::string_view text) {
  for (size_t i = 0; i < N; ++i) {
    if (equalsIgnoreCase(text, names[i])) return static_cast<uint32_t>(i);
  }
  return std::nullopt;
}

std::vector<std::string_view> splitDots(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

std::string_view tableCollectiveName(Collective collective) {
  // The files' lower-case spelling of the vocabulary's names.
  static constexpr std::array<std::string_view, kCollectives> kLowerCase = {
      "broadcast", "reduce", "allgather", "reducescatter", "allreduce", "alltoall"};
  const auto index = static_cast<size_t>(collective);
  return index < kLowerCase.size() ? kLowerCase[index] : "?";
}
std::string_view algorithmName(int algorithm) {
  return algorithm >= 0 && algorithm < kNumAlgorithms ? kAlgorithmNames[algorithm] : "any";
}
std::string_view choiceProtocolName(int protocol) {
  return protocol >= 0 && protocol < kNumProtocols ? kProtocolNames[protocol] : "any";
}

std::optional<Collective> parseTableCollective(std::string_view text) {
  auto collective = parseCollective(text);
  if (!collective || static_cast<int>(*collective) >= kTunerCollectives) return std::nullopt;
  return collective;
}
std::optional<int8_t> parseAlgorithm(std::string_view text) { return findName(kAlgorithmNames, text); }
std::optional<int8_t> parseChoiceProtocol(std::string_view text) { return findName(kProtocolNames, text); }

std::optional<uint64_t> parseByteSize(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  std::string_view unit = text.substr(i);
  int shift = 0;
  if (unit.empty() || equalsIgnoreCase(unit, "B")) {
    shift = 0;
  } else {
    char prefix = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
    std::string_view rest = unit.substr(1);
    if (!(rest.empty() || equalsIgnoreCase(rest, "B") || equalsIgnoreCase(rest, "iB"))) return std::nullopt;
    switch (prefix) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        return std::nullopt;
    }
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

std::string formatByteSize(uint64_t bytes) {
  static constexpr std::array<std::pair<int, char>, 4> kUnits = {
      {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}}};
  for (auto [shift, unit] : kUnits) {
    uint64_t scale = uint64_t{1} << shift;
    if (bytes != 0 && bytes % scale == 0) return std::to_string(bytes / scale) + unit;
  }
  return std::to_string(bytes);
}

std::string formatTableError(const TableError& error) {
  std::string out = error.file;
  if (error.line != 0) {
    out += ":" + std::to_string(error.line);
    if (error.column != 0) out += ":" + std::to_string(error.column);
  }
  if (!out.empty()) out += ": ";
  return out + error.message;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis and prime
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string formatHash(uint64_t hash) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::optional<uint32_t> tunerConstantOffset(std::string_view name) {
  std::vector<std::string_view> parts = splitDots(name);
  if (parts.size() == 3 && parts[0] == "baseLatencies") {
    auto algo = indexOf(kAlgorithmNames, parts[1]);
    auto proto = indexOf(kProtocolNames, parts[2]);
    if (!algo || !proto) return std::nullopt;
    return kBaseLatencyOffset + *algo * kNumProtocols + *proto;
  }
  if (parts.size() == 4 && parts[0] == "hwLatencies") {
    auto link = indexOf(kLinkNames, parts[1]);
    auto algo = indexOf(kAlgorithmNames, parts[2]);
    auto proto = indexOf(kProtocolNames, parts[3]);
    if (!link || !algo || !proto) return std::nullopt;
    return kHwLatencyOffset + (*link * kNumAlgorithms + *algo) * kNumProtocols + *proto;
  }
  if (parts.size() == 3) {
    auto array = indexOf(kBandwidthArrays, parts[0]);
    auto arch = indexOf(kArchNames, parts[1]);
    std::string_view scaleText = parts[2] == "4+" ? std::string_view("4") : parts[2];
    auto scale = indexOf(kScaleNames, scaleText);
    if (!array || !arch || !scale || parts[0] != kBandwidthArrays[*array]) return std::nullopt;
    return kBandwidthOffset + (*array * 4 + *arch) * 3 + *scale;
  }
  return std::nullopt;
}

std::string tunerConstantName(uint32_t offset) {
  auto name = [](std::string_view view) { return std::string(view); };
  if (offset < kHwLatencyOffset) {
    return "baseLatencies." + name(kAlgorithmNames[offset / kNumProtocols]) + "." +
           name(kProtocolNames[offset % kNumProtocols]);
  }
  if (offset < kBandwidthOffset) {
    uint32_t i = offset - kHwLatencyOffset;
    return "hwLatencies." + name(kLinkNames[i / (kNumAlgorithms * kNumProtocols)]) + "." +
           name(kAlgorithmNames[i / kNumProtocols % kNumAlgorithms]) + "." +
           name(kProtocolNames[i % kNumProtocols]);
  }
  if (offset < kNumTunerConstants) {
    uint32_t i = offset - kBandwidthOffset;
    return name(kBandwidthArrays[i / 12]) + "." + name(kArchNames[i / 3 % 4]) + "." +
           name(kScaleNames[i % 3]);
  }
  return "?";
}

LoadResult parseTableBytes(std::string_view bytes, const std::string& path) {
  LoadResult result;
  size_t first = bytes.find_first_not_of(" \t\r\n");
  TableFormat format =
      first != std::string_view::npos && bytes[first] == '{' ? TableFormat::Json : TableFormat::Csv;
  if (first == std::string_view::npos) {
    result.error = {path, 0, 0, "the table file is empty"};
    return result;
  }
  TableResult parsed = format == TableFormat::Json ? readTableJson(bytes, path) : readTableCsv(bytes, path);
  if (!parsed.ok()) {
    result.error = std::move(parsed.error);
    return result;
  }
  LoadedTable loaded;
  loaded.path = path;
  loaded.format = format;
  loaded.hash = fnv1a64(bytes);
  loaded.fileBytes = bytes.size();
  loaded.table = std::move(*parsed.table);
  result.loaded = std::move(loaded);
  return result;
}

std::optional<TableError> readTableBytes(const std::string& path, std::string& bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return TableError{path, 0, 0, "the table path is a directory"};
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return TableError{path, 0, 0, "cannot open the table file"};
  std::streamoff size = in.tellg();
  if (size < 0) return TableError{path, 0, 0, "cannot read the table file"};
  if (static_cast<uint64_t>(size) > kMaxTableFileBytes) {
    return TableError{path, 0, 0,
                      "the table file has " + std::to_string(size) + " bytes, more than the limit of " +
                          std::to_string(kMaxTableFileBytes) + " (64 MiB)"};
  }
  bytes.assign(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) return TableError{path, 0, 0, "cannot read the table file"};
  return std::nullopt;
}

LoadResult loadTableFile(const std::string& path) {
  std::string bytes;
  if (auto error = readTableBytes(path, bytes)) {
    LoadResult result;
    result.error = std::move(*error);
    return result;
  }
  return parseTableBytes(bytes, path);
}

}  // namespace tuccl
