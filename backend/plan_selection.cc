#include "backend/plan_selection.h"

#include <algorithm>
#include <limits>

#include "support/text_values.h"

namespace tuccl::backend {

Status checkPlanQuery(const PlanQuery& query, const PlanCacheOptions& options) {
  if (options.nRanks < 2) {
    return makeError(ErrorCode::InvalidArgument, "a plan needs at least 2 ranks (got " +
                                                     std::to_string(options.nRanks) +
                                                     "); one rank copies locally");
  }
  if (options.nNodes < 1 || options.nNodes > options.nRanks) {
    return makeError(ErrorCode::InvalidArgument, "nNodes " + std::to_string(options.nNodes) + " is not in [1, " +
                                                     std::to_string(options.nRanks) + "]");
  }
  if (query.count < 0) {
    return makeError(ErrorCode::InvalidArgument, "a negative count (" + std::to_string(query.count) + ")");
  }
  if (hasRoot(query.collective) && (query.root < 0 || query.root >= options.nRanks)) {
    return makeError(ErrorCode::InvalidArgument, std::string(collectiveName(query.collective)) + " root " +
                                                     std::to_string(query.root) + " is not a rank in [0, " +
                                                     std::to_string(options.nRanks) + ")");
  }
  if (options.defaultChannels < 1 || options.defaultChunkSize < 1) {
    return makeError(ErrorCode::InvalidArgument, "the default nChannels and chunk size must be positive");
  }
  return {};
}

TableMatch matchTable(const PlanQuery& query, uint64_t bytes, const LookupTable* table, const CommIndex* index) {
  if (table == nullptr || index == nullptr) return {};
  const CompiledDecision* decision = index->lookup(static_cast<int>(query.collective), bytes, kQueryPipeOps, kQueryRegBuff);
  return {table, decision == nullptr ? nullptr : &table->entries[decision->entryIndex]};
}

const TableEntry* matchingEntry(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                const PlanCacheOptions& options) {
  return matchTable(query, tunerBytes(query, options.nRanks), table, index).entry;
}

namespace {

// "RING/SIMPLE, 2 channels" for a table entry's decision.
std::string entrySummary(const TableEntry& entry) {
  std::string text;
  if (!entry.choices.empty()) {
    const Choice& choice = entry.choices.front();
    text = choice.algorithm ? std::string(ncclAlgorithmName(*choice.algorithm)) : "any";
    text += "/";
    text += choice.protocol ? toUpperCase(protocolName(*choice.protocol)) : "any";
  }
  if (entry.nChannels > 0) text += (text.empty() ? "" : ", ") + std::to_string(entry.nChannels) + " channels";
  if (!entry.tucclAlgorithm.empty()) text += (text.empty() ? "" : ", ") + ("tucclAlgorithm " + entry.tucclAlgorithm);
  std::string sizes = "all sizes";
  if (entry.maxBytes != UINT64_MAX) {
    sizes = formatByteSize(entry.minBytes) + ".." + formatByteSize(entry.maxBytes);
  } else if (entry.minBytes > 0) {
    sizes = formatByteSize(entry.minBytes) + " and more";
  }
  text += (text.empty() ? "" : ", ") + sizes;
  return "table entry " + std::to_string(entry.origin) + (text.empty() ? "" : " (" + text + ")");
}

// The built-in family of an entry's primary NCCL algorithm, or why there is none.
std::optional<std::string_view> familyOfNcclAlgorithm(const TableEntry& entry, Collective collective,
                                                      std::string& why) {
  const std::optional<NcclAlgorithm> algorithm =
      entry.choices.empty() ? std::nullopt : entry.choices.front().algorithm;
  if (!algorithm) {
    why = "the entry names no NCCL algorithm";
    return std::nullopt;
  }
  const bool rooted = hasRoot(collective);
  switch (*algorithm) {
    case NcclAlgorithm::Ring: return rooted ? "chain" : "ring";
    case NcclAlgorithm::Tree:
      if (rooted) return "binomial";
      why = "libtuccl runs a TREE " + std::string(collectiveName(collective)) + " as its ring";
      return "ring";
    default:
      why = std::string(ncclAlgorithmName(*algorithm)) + " is not a libtuccl algorithm";
      return std::nullopt;
  }
}

// The entry's own algorithm: a built-in family (checked against the collective) or a file.
Status takeEntryAlgorithm(const TableEntry& entry, const PlanCacheOptions& options, PlanSelection& selection) {
  selection.algorithm = entry.tucclAlgorithm;
  selection.builtin = isBuiltinFamily(entry.tucclAlgorithm);
  if (selection.builtin && findBuiltinAlgorithm(entry.tucclAlgorithm, selection.collective) == nullptr) {
    const std::string collective(collectiveName(selection.collective));
    return makeError(ErrorCode::InvalidInput, tableDisplayName(options), {},
                     "entries[" + std::to_string(entry.origin) + "].tucclAlgorithm: there is no built-in " +
                         toLowerCase(entry.tucclAlgorithm) + " " + collective + " (built-ins for " + collective +
                         ": " + builtinFamiliesOf(selection.collective) + ")");
  }
  if (selection.builtin) selection.algorithm = toLowerCase(entry.tucclAlgorithm);
  return {};
}

}  // namespace

std::string_view defaultFamily(const PlanQuery& query, const PlanCacheOptions& options) {
  return defaultFamily(query, tunerBytes(query, options.nRanks), options);
}

std::string_view defaultFamily(const PlanQuery& query, uint64_t bytes, const PlanCacheOptions& options) {
  const bool evenNodes = options.nNodes > 1 && options.nRanks % options.nNodes == 0;
  if (evenNodes && (query.collective == Collective::AllReduce || query.collective == Collective::AllGather)) {
    return "hm";
  }
  if (query.collective == Collective::AllReduce && options.nRanks <= kDirectAllReduceMaxRanks &&
      bytes <= kDirectAllReduceBytes) {
    return "direct";
  }
  return defaultAlgorithmFamily(query.collective);
}

std::optional<TbPolicy> singleTbPolicy(const PlanQuery& query, const PlanCacheOptions& options) {
  return singleTbPolicy(tunerBytes(query, options.nRanks), options);
}

std::optional<TbPolicy> singleTbPolicy(uint64_t bytes, const PlanCacheOptions& options) {
  const bool gpu = !options.cudaArch.empty();
  if (gpu || options.singleTbMaxBytes == 0 || bytes > options.singleTbMaxBytes) {
    return std::nullopt;
  }
  return TbPolicy::Single;
}

std::string tableDisplayName(const PlanCacheOptions& options) {
  return options.tablePath.empty() ? std::string("the tuning table") : options.tablePath;
}

uint64_t tunerBytes(const PlanQuery& query, int32_t nRanks) {
  const uint64_t bytes = static_cast<uint64_t>(query.count) * static_cast<uint64_t>(dataTypeSize(query.dataType));
  switch (query.collective) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll: return bytes * static_cast<uint64_t>(nRanks);
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::AllReduce: return bytes;
  }
  return bytes;
}

namespace {

// `entry` deciding as its configuration group `group` (its own decision for group 0).
TableEntry entryAsGroup(const TableEntry& entry, int32_t group) {
  if (group <= 0 || static_cast<size_t>(group) > entry.groups.size()) return entry;
  const ConfigGroup& g = entry.groups[static_cast<size_t>(group) - 1];
  TableEntry as = entry;
  as.choices = {g.choice};
  as.nChannels = g.nChannels;
  as.chunkSize = g.chunkSize;
  as.tucclAlgorithm = g.tucclAlgorithm;
  as.timeUs = g.timeUs;
  return as;
}

// The built-in alternative to `family` for the runtime phase's second group: another family of
// the collective where there is one, else the same family on half the slice.
constexpr int64_t kMinAlternativeChunk = 4 << 10;
ConfigGroup defaultAlternative(const PlanQuery& query, std::string_view family, const PlanCacheOptions& options) {
  ConfigGroup alternative;
  const auto other = [&](std::string_view name) { return findBuiltinAlgorithm(name, query.collective) != nullptr; };
  if ((family == "hm" || family == "direct") && other("ring")) {
    alternative.tucclAlgorithm = "ring";
  } else if (family == "ring" && other("direct")) {
    alternative.tucclAlgorithm = "direct";
  } else if (family == "chain" && other("binomial")) {
    alternative.tucclAlgorithm = "binomial";
  } else if (family == "binomial" && other("chain")) {
    alternative.tucclAlgorithm = "chain";
  } else {
    // The only family: the same on half the slice (more pipelining, half the staging).
    alternative.tucclAlgorithm = std::string(family);
    alternative.chunkSize = static_cast<uint64_t>(std::max<int64_t>(kMinAlternativeChunk, options.defaultChunkSize / 2));
  }
  return alternative;
}

// The table's (or the default) choice, before the environment's overrides.
Expected<PlanSelection> selectFromTable(const PlanQuery& query, const TableMatch& match,
                                       const PlanCacheOptions& options, int32_t group) {
  PlanSelection selection;
  selection.collective = query.collective;
  selection.shape = {options.nRanks, options.nNodes, hasRoot(query.collective) ? query.root : -1,
                     options.defaultChannels};
  selection.chunkSize = options.defaultChunkSize;
  std::string why;
  std::optional<std::string_view> family;
  if (const TableEntry* matched = match.entry; matched != nullptr) {
    const TableEntry entry = entryAsGroup(*matched, group);
    selection.entry = matched;
    selection.reason = entrySummary(entry);
    if (!entry.choices.empty() && entry.choices.front().protocol) selection.protocol = *entry.choices.front().protocol;
    if (entry.nChannels > 0) {
      selection.shape.nChannels =
          options.maxChannels > 0 ? std::min(entry.nChannels, options.maxChannels) : entry.nChannels;
    }
    if (entry.chunkSize > 0) {
      selection.chunkChosen = true;
      selection.chunkSize = static_cast<int64_t>(std::min<uint64_t>(entry.chunkSize, std::numeric_limits<int64_t>::max()));
    }
    if (!entry.tucclAlgorithm.empty()) {
      if (Status status = takeEntryAlgorithm(entry, options, selection); !status) return status;
      return selection;
    }
    family = familyOfNcclAlgorithm(entry, query.collective, why);
  } else if (match.table == nullptr) {
    selection.reason = "no tuning table";
  } else if (!isTunerCollective(query.collective)) {
    selection.reason = "tables hold no " + std::string(collectiveName(query.collective)) + " entries";
  } else {
    selection.reason = "no table entry covers the size";
  }
  if (!why.empty()) selection.reason += ": " + why;
  selection.algorithm = family ? std::string(*family) : std::string(defaultFamily(query, options));
  selection.builtin = true;
  // The default direct AllReduce serves calls of at most kDirectAllReduceBytes: slots of that
  // size hold any of them, and a larger chunk would only take staging from the other plans.
  if (!family && query.collective == Collective::AllReduce && selection.algorithm == "direct") {
    selection.chunkSize = std::min<int64_t>(selection.chunkSize, static_cast<int64_t>(kDirectAllReduceBytes));
  }
  if (group > 0 && selection.entry == nullptr) {
    const ConfigGroup alternative = defaultAlternative(query, selection.algorithm, options);
    selection.algorithm = alternative.tucclAlgorithm;
    if (alternative.chunkSize > 0) selection.chunkSize = static_cast<int64_t>(alternative.chunkSize);
  }
  return selection;
}

}  // namespace

bool environmentFixesTheChoice(const PlanCacheOptions& options) {
  return !options.forcedAlgorithm.empty() || options.forcedChannels > 0 || options.forcedChunkSize > 0;
}

std::vector<ConfigGroup> candidateGroups(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                         const PlanCacheOptions& options) {
  return candidateGroups(query, matchTable(query, tunerBytes(query, options.nRanks), table, index), options);
}

std::vector<ConfigGroup> candidateGroups(const PlanQuery& query, const TableMatch& match,
                                         const PlanCacheOptions& options) {
  if (const TableEntry* entry = match.entry; entry != nullptr) {
    std::vector<ConfigGroup> groups = entryGroups(*entry);
    if (environmentFixesTheChoice(options)) groups.resize(1);
    return groups;
  }
  ConfigGroup own;
  own.tucclAlgorithm = std::string(defaultFamily(query, options));
  if (environmentFixesTheChoice(options)) return {own};
  return {own, defaultAlternative(query, own.tucclAlgorithm, options)};
}

Expected<PlanSelection> selectPlan(const PlanQuery& query, const LookupTable* table, const CommIndex* index,
                                   const PlanCacheOptions& options, int32_t group) {
  return selectPlan(query, matchTable(query, tunerBytes(query, options.nRanks), table, index), options, group);
}

Expected<PlanSelection> selectPlan(const PlanQuery& query, const TableMatch& match, const PlanCacheOptions& options,
                                   int32_t group) {
  if (Status status = checkPlanQuery(query, options); !status) return status;
  if (group < 0 || (group > 0 && static_cast<size_t>(group) >= candidateGroups(query, match, options).size())) {
    return makeError(ErrorCode::InvalidArgument, "configuration group " + std::to_string(group) + " does not exist");
  }
  Expected<PlanSelection> selected = selectFromTable(query, match, options, group);
  if (!selected) return selected;
  PlanSelection& selection = *selected;
  if (group > 0) selection.reason += "; configuration group " + std::to_string(group);
  if (!options.forcedAlgorithm.empty()) {
    selection.builtin = isBuiltinFamily(options.forcedAlgorithm);
    selection.algorithm = selection.builtin ? toLowerCase(options.forcedAlgorithm) : options.forcedAlgorithm;
    if (selection.builtin && findBuiltinAlgorithm(selection.algorithm, query.collective) == nullptr) {
      const std::string collective(collectiveName(query.collective));
      return makeError(ErrorCode::InvalidArgument, "TUCCL_ALGO=" + options.forcedAlgorithm + ": there is no built-in " +
                                                       selection.algorithm + " " + collective + " (built-ins for " +
                                                       collective + ": " + builtinFamiliesOf(query.collective) + ")");
    }
    selection.reason += "; TUCCL_ALGO";
  }
  if (options.forcedChannels > 0) {
    selection.shape.nChannels = options.forcedChannels;
    selection.reason += "; TUCCL_NCHANNELS";
  }
  if (options.forcedChunkSize > 0) {
    selection.chunkSize = options.forcedChunkSize;
    selection.chunkChosen = true;
    selection.reason += "; TUCCL_CHUNK_SIZE";
  }
  if (options.forcedProtocol) {
    selection.protocol = *options.forcedProtocol;
    selection.reason += "; TUCCL_PROTO";
  }
  if (!selection.chunkChosen && selection.protocol != Protocol::Simple) {
    selection.chunkSize = std::min(selection.chunkSize,
                                   selection.protocol == Protocol::LL ? kLlMaxChunkBytes : kLl128MaxChunkBytes);
  }
  selection.tbPolicy = singleTbPolicy(query, options);
  return selected;
}

int32_t channelsForBytes(uint64_t bytes, int32_t planChannels, int32_t nThreads, Protocol protocol) {
  if (planChannels <= 1) return 1;
  const uint64_t perThread = protocol == Protocol::Simple ? kSimpleBytesPerThread : kLineBytesPerThread;
  const uint64_t perChannel = perThread * static_cast<uint64_t>(std::max(1, nThreads));
  return static_cast<int32_t>(std::clamp<uint64_t>(bytes / perChannel, 1, static_cast<uint64_t>(planChannels)));
}

bool channelsFollowSize(const TableEntry* entry, int32_t group, const PlanCacheOptions& options) {
  if (options.forcedChannels > 0) return false;
  return entry == nullptr || entryAsGroup(*entry, group).nChannels <= 0;
}

std::string describeSelection(const PlanSelection& selection) {
  std::string text(collectiveName(selection.collective));  // the call's size is not part of it: plans serve many
  if (selection.shape.root >= 0) text += " root " + std::to_string(selection.shape.root);
  text += ": " + selection.reason + " -> ";
  text += selection.builtin ? "built-in " + selection.algorithm : selection.algorithm;
  text += ", " + std::to_string(selection.shape.nChannels) + (selection.shape.nChannels == 1 ? " channel" : " channels");
  text += ", chunk " + formatByteSize(static_cast<uint64_t>(selection.chunkSize));
  if (selection.protocol != Protocol::Simple) text += ", " + std::string(protocolName(selection.protocol));
  if (selection.tbPolicy == TbPolicy::Single) text += ", one TB per rank";
  return text;
}

}  // namespace tuccl::backend
