// The TuCCL lookup table: what tune/ writes and the tuner plugin serves to NCCL (design.md,
// "Tuner plugin"; docs/tuning-table.md is the file format).
//
// In:  nothing (plain data).
// Out: a LookupTable value — entries keyed by collective, byte range, nNodes, nRanks, topology
//      signature, each deciding (NCCL algorithm, protocol) choices, nChannels and chunk size; per
//      communicator-size environment recommendations; cost-model constant overrides.
//
// The readers and writers are in table/table_io.h, the per-communicator index in
// table/table_index.h, NCCL's cost-model constants in table/tuner_constants.h. Collectives and
// protocols are the vocabulary's enums; their file spellings live in the (de)serialisers only.
// Standard library only: the plugin links this code into its shared object.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/vocabulary.h"

namespace tuccl {

inline constexpr int kTableFormatVersion = 1;
/// Sizing limits: a larger table is refused (a warning, then a no-op tuner).
inline constexpr uint64_t kMaxTableFileBytes = 64ull << 20;
inline constexpr size_t kMaxTableEntries = 10'000'000;
/// Choices per entry: the primary (algorithm, protocol) and its ordered fallbacks.
inline constexpr int kMaxChoices = 8;
/// Distinct numPipeOps values the entries of one table may filter on.
inline constexpr int kMaxPipeOpsValues = 16;
inline constexpr int kMaxChannels = 64;

// NcclAlgorithm, ncclAlgorithmName and parseNcclAlgorithm are in support/vocabulary.h.
/// The algorithm of cost-table index `index`; nullopt outside [0, kNcclAlgorithms).
std::optional<NcclAlgorithm> ncclAlgorithmAt(int index);
/// The protocol of cost-table index `index` (NCCL_PROTO_LL / LL128 / SIMPLE); nullopt otherwise.
std::optional<Protocol> protocolAt(int index);
/// Whether entries may name `collective`: the ones NCCL's tuner is asked about (not AllToAll).
bool isTunerCollective(Collective collective);

/// One (algorithm, protocol) choice; an empty side is "any": the cheapest available.
struct Choice {
  std::optional<NcclAlgorithm> algorithm;
  std::optional<Protocol> protocol;
  friend bool operator==(const Choice&, const Choice&) = default;
};

/// NCCL's spelling of a choice, "RING/LL128" or "any/SIMPLE", into `out` (NUL-terminated,
/// truncated); returns `out`. Allocation-free (the tuner logs with it on NCCL's call path).
const char* formatChoice(Choice choice, char* out, size_t size) noexcept;

/// What a profiled time rests on (tuccl-tune): the 95 % interval of its median and the samples
/// (repetitions) behind it. samples 0: not known.
struct TimeInterval {
  double lowUs = -1;
  double highUs = -1;  ///< < 0: unbounded (fewer samples than an interval needs)
  int32_t samples = 0;
  friend bool operator==(const TimeInterval&, const TimeInterval&) = default;
};

/// An entry's decision against the defaults, measured by interleaved runs (tuccl-tune's
/// confirmation): the time ratio decision / default as the geometric mean over the pairs, its 95 %
/// interval, the pairs and how many the decision won. A default entry is one whose best
/// configuration was not significantly faster than the default (high >= 1).
struct DefaultComparison {
  double ratio = 1;
  double low = -1;   ///< < 0: unbounded
  double high = -1;  ///< < 0: unbounded
  int32_t pairs = 0;
  int32_t won = 0;
  std::string versus;  ///< the configuration compared when the entry is the default (its best rival)
  friend bool operator==(const DefaultComparison&, const DefaultComparison&) = default;
};

/// One configuration group: a decision as one unit the runtime phase can switch to (TuCCL §III-A:
/// "select the configuration group with the shortest recent completion time"). An entry's own
/// decision is its group 0; TableEntry::groups holds the next best, as tuccl-tune measured them.
struct ConfigGroup {
  Choice choice;                ///< algorithm and protocol (no fallbacks); empty sides: any
  int32_t nChannels = 0;        ///< 0: keep NCCL's
  uint64_t chunkSize = 0;       ///< 0: keep NCCL's
  std::string tucclAlgorithm;   ///< libtuccl's algorithm; empty: from the NCCL algorithm
  double timeUs = -1;           ///< profiled time at the entry's first size; < 0: not known
  TimeInterval interval;        ///< what timeUs rests on
  friend bool operator==(const ConfigGroup&, const ConfigGroup&) = default;
};
/// Groups per entry, the entry's own included.
inline constexpr int kMaxGroups = 8;

/// One table entry: a key (what it matches) and a decision (what it sets).
struct TableEntry {
  // ---- key
  Collective collective = Collective::AllReduce;
  uint64_t minBytes = 0;           ///< inclusive
  uint64_t maxBytes = UINT64_MAX;  ///< inclusive
  int32_t nNodes = -1;             ///< -1: any
  int32_t nRanks = -1;             ///< -1: any
  std::string topology;            ///< signature; empty: any
  int32_t numPipeOps = -1;         ///< -1: any (a per-call filter, from NCCL's CSV)
  int32_t regBuff = -1;            ///< -1: any, 0 or 1 (per call; v4+ only)
  // ---- decision
  std::vector<Choice> choices;  ///< primary first, then fallbacks; empty: keep NCCL's
  int32_t nChannels = 0;        ///< 0: keep NCCL's
  uint64_t chunkSize = 0;       ///< 0: keep NCCL's (v6+ getChunkSize only)
  /// libtuccl only (the tuner ignores it): a built-in algorithm ("ring", "chain", "binomial",
  /// "direct") or the path of a ResCCLang program; empty: chosen from the NCCL algorithm.
  std::string tucclAlgorithm;
  double timeUs = -1;  ///< the decision's profiled time at minBytes; < 0: not known
  TimeInterval interval;  ///< what timeUs rests on
  /// The table says this entry keeps the defaults because tuning found nothing significantly
  /// faster ("default": true); it sets no decision of its own (groups may follow).
  bool isDefault = false;
  std::optional<DefaultComparison> versusDefault;  ///< the evidence; empty: not measured
  /// Alternative configuration groups, fastest first (groups 1, 2, ...; at most kMaxGroups - 1).
  /// The tuner serves group 0 only; adaptive runtimes switch among all of them.
  std::vector<ConfigGroup> groups;
  // ---- provenance
  std::string comment;  ///< JSON "comment" (free text); empty: none
  uint32_t origin = 0;  ///< JSON: index in "entries"; CSV: 1-based line

  friend bool operator==(const TableEntry&, const TableEntry&) = default;
};

/// The entry's configuration groups: its own decision (group 0: the first choice, channels,
/// chunk size, libtuccl algorithm, time), then `entry.groups`.
std::vector<ConfigGroup> entryGroups(const TableEntry& entry);

/// Settings a tuner cannot change, recommended as environment variables for a communicator size.
struct EnvRecommendation {
  int32_t nNodes = -1;
  int32_t nRanks = -1;
  std::string topology;
  /// (NCCL_NTHREADS, "512"), ... in file order; names from kEnvSettingNames.
  std::vector<std::pair<std::string, std::string>> settings;
  std::string comment;
  uint32_t origin = 0;
  friend bool operator==(const EnvRecommendation&, const EnvRecommendation&) = default;
};
inline constexpr std::array<std::string_view, 5> kEnvSettingNames = {
    "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE"};

/// One override of NCCL's cost-model constants, applied by v5+ init (table/tuner_constants.h
/// places the name in each version's struct).
struct ConstantOverride {
  std::string name;  ///< canonical: "baseLatencies.RING.LL", "llMaxBws.HOPPER.2"
  double value = 0;
  friend bool operator==(const ConstantOverride&, const ConstantOverride&) = default;
};

/// Which of several matching entries wins.
enum class MatchOrder : uint8_t {
  /// The most specific key first (topology, then nRanks, then nNodes given), file order among
  /// equals. The JSON default.
  SpecificFirst,
  /// File order: the first matching entry wins. NCCL's CSV semantics.
  FileOrder,
};

enum class TableFormat : uint8_t { Json, Csv };

struct LookupTable {
  int version = kTableFormatVersion;
  MatchOrder matchOrder = MatchOrder::SpecificFirst;
  std::vector<TableEntry> entries;
  std::vector<EnvRecommendation> environment;
  std::vector<ConstantOverride> constants;
  // ---- what the JSON carries for people and tools; never read by the tuner
  std::string description;
  std::string generator;
  /// The free-form "metadata" object as compact JSON text; empty: none.
  std::string metadataJson;
  friend bool operator==(const LookupTable&, const LookupTable&) = default;
};

}  // namespace tuccl
