// The TuCCL lookup table: what the tuner serves to NCCL (design.md, "Tuner plugin";
// docs/tuning-table.md is the file format).
//
// In:  table text (JSON, schema version 1, or NCCL's example tuner CSV) — readTableJson,
//      readTableCsv, loadTableFile.
// Out: a LookupTable value (entries keyed by collective, byte range, nNodes, nRanks, topology
//      signature; per communicator-size environment recommendations; cost-model constant
//      overrides), or its text — writeTableJson, writeTableCsv.
//
// Nothing here throws to the caller: readers return a TableResult. The plugin links this code
// into a shared library, so it uses only the C++ runtime and header-only nlohmann/json.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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


// Algorithm and protocol indices are NCCL's cost-table indices; kAny is "no constraint".
inline constexpr int8_t kAny = -1;
inline constexpr int kNumAlgorithms = 7;  // TREE RING COLLNET_DIRECT COLLNET_CHAIN NVLS NVLS_TREE PAT
inline constexpr int kNumProtocols = 3;   // LL LL128 SIMPLE
inline constexpr int8_t kAlgoTree = 0, kAlgoRing = 1, kAlgoCollNetDirect = 2, kAlgoCollNetChain = 3,
                        kAlgoNvls = 4, kAlgoNvlsTree = 5, kAlgoPat = 6;
inline constexpr int8_t kProtoLL = static_cast<int8_t>(Protocol::LL), kProtoLL128 = static_cast<int8_t>(Protocol::LL128),
                        kProtoSimple = static_cast<int8_t>(Protocol::Simple);

/// "allreduce", ... (lower case, as the table files and NCCL's CSV spell them).
std::string_view tableCollectiveName(Collective collective);
/// "TREE", "RING", ..., "any" for kAny.
std::string_view algorithmName(int algorithm);
/// "LL", "LL128", "SIMPLE" (NCCL's spelling), "any" for kAny.
std::string_view choiceProtocolName(int protocol);
/// parseCollective restricted to the collectives NCCL's tuner is asked about (not AllToAll).
std::optional<Collective> parseTableCollective(std::string_view text);
/// Case-insensitive name, "any" or "-1" (kAny).
std::optional<int8_t> parseAlgorithm(std::string_view text);
std::optional<int8_t> parseChoiceProtocol(std::string_view text);
/// "1048576", "1M", "1MiB", "64K", "4k", "2G" (binary units); nullopt on junk or overflow.
std::optional<uint64_t> parseByteSize(std::string_view text);
/// 1048576 -> "1M", 1000 -> "1000".
std::string formatByteSize(uint64_t bytes);

/// One (algorithm, protocol) choice; either may be kAny ("the cheapest available").
struct Choice {
  int8_t algorithm = kAny;
  int8_t protocol = kAny;
  friend bool operator==(const Choice&, const Choice&) = default;
};

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
  uint64_t chunkSize = 0;       ///< 0: keep NCCL's (v6 getChunkSize only)
  // ---- provenance
  uint32_t origin = 0;  ///< JSON: index in "entries"; CSV: 1-based line

  friend bool operator==(const TableEntry&, const TableEntry&) = default;
};

/// Settings a tuner cannot change, recommended as environment variables for a communicator size.
struct EnvRecommendation {
  int32_t nNodes = -1;
  int32_t nRanks = -1;
  std::string topology;
  /// (NCCL_NTHREADS, "512"), ... in file order; names from kEnvSettingNames.
  std::vector<std::pair<std::string, std::string>> settings;
  uint32_t origin = 0;
  friend bool operator==(const EnvRecommendation&, const EnvRecommendation&) = default;
};
inline constexpr std::array<std::string_view, 5> kEnvSettingNames = {
    "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE"};

/// One override of NCCL's cost-model constants (ncclTunerConstants_v5_t), applied by v5/v6 init.
struct ConstantOverride {
  std::string name;     ///< "baseLatencies.RING.LL": for logs and round trips
  uint32_t offset = 0;  ///< index of the double in ncclTunerConstants_v5_t
  double value = 0;
  friend bool operator==(const ConstantOverride&, const ConstantOverride&) = default;
};
/// Number of doubles in ncclTunerConstants_v5_t.
inline constexpr uint32_t kNumTunerConstants = 7 * 3 + 3 * 7 * 3 + 5 * 4 * 3;

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
  friend bool operator==(const LookupTable&, const LookupTable&) = default;
};

/// A reader's failure: where and why. line/column count from 1; 0 means unknown.
struct TableError {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;
  std::string message;
};
/// `file:line:col: message` (the parts that are known).
std::string formatTableError(const TableError& error);

struct TableResult {
  std::optional<LookupTable> table;  ///< set on success
  TableError error;                  ///< set on failure
  bool ok() const { return table.has_value(); }
};

/// Parses a JSON table; `file` names it in errors.
TableResult readTableJson(std::string_view text, std::string_view file);
/// Deterministic, pretty JSON of schema version 1.
std::string writeTableJson(const LookupTable& table);

/// Parses NCCL's example tuner CSV (`collective,minbytes,maxbytes,algorithm,protocol,channels,
/// nNodes,nRanks[,numPipeOps[,regBuff]]`). The table's order is FileOrder.
TableResult readTableCsv(std::string_view text, std::string_view file);
/// CSV lines in match order; fails (message in `error`) when the table uses what CSV cannot
/// hold (fallbacks, chunk size, topology, environment, constants) unless `lossy`, which drops
/// them and lists them in `dropped`.
std::optional<std::string> writeTableCsv(const LookupTable& table, bool lossy, std::string* error,
                                         std::vector<std::string>* dropped = nullptr);

/// FNV-1a 64 of the bytes.
uint64_t fnv1a64(std::string_view bytes);
/// "0x" and 16 hex digits.
std::string formatHash(uint64_t hash);

/// A table file as the plugin and the tool load it.
struct LoadedTable {
  std::string path;
  TableFormat format = TableFormat::Json;
  uint64_t hash = 0;  ///< FNV-1a 64 of the file bytes
  uint64_t fileBytes = 0;
  LookupTable table;
};
struct LoadResult {
  std::optional<LoadedTable> loaded;
  TableError error;
  bool ok() const { return loaded.has_value(); }
};
/// Reads the bytes of a table file into `bytes`, refusing directories and files over
/// kMaxTableFileBytes; the error on failure.
std::optional<TableError> readTableBytes(const std::string& path, std::string& bytes);
/// Reads `path` (readTableBytes), detects the format from the content
/// (JSON when the first non-blank character is '{', otherwise CSV) and parses it.
LoadResult loadTableFile(const std::string& path);
/// As loadTableFile, for bytes already read.
LoadResult parseTableBytes(std::string_view bytes, const std::string& path);

/// The index (in doubles) inside ncclTunerConstants_v5_t of a ConstantOverride name ("baseLatencies.RING.LL",
/// "hwLatencies.NET.RING.LL128", "llMaxBws.HOPPER.2" ...); nullopt for any other name.
std::optional<uint32_t> tunerConstantOffset(std::string_view name);
/// The canonical name of the double at `offset` ("baseLatencies.RING.LL").
std::string tunerConstantName(uint32_t offset);

}  // namespace tuccl
