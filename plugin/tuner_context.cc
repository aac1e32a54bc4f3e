#include "plugin/tuner_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <tuple>

#include "support/text_values.h"
#include "table/table_io.h"
#include "support/environment.h"

namespace tuccl {
namespace {

constexpr const char* kDefaultCsvPath = "nccl_tuner.conf";

/// Where the table comes from. Precedence (docs/tuning-table.md): TUCCL_TUNER_TABLE, then
/// NCCL_TUNER_CONFIG_FILE, then ./nccl_tuner.conf when it exists; an explicitly named table that
/// fails is a warning and does not fall back to the next source.
struct TableSource {
  std::string path;
  const char* variable = nullptr;  ///< the environment variable that named it; null: the default
};

std::optional<TableSource> resolveTableSource(ncclDebugLogger_t logger) {
  const std::optional<std::string> table = env::text("TUCCL_TUNER_TABLE");
  const std::optional<std::string> csv = env::text("NCCL_TUNER_CONFIG_FILE");
  if (table) {
    if (csv) {
      TUCCL_TUNER_LOG(
          logger, NCCL_LOG_INFO,
          "TuCCL tuner: TUCCL_TUNER_TABLE=%s takes precedence; NCCL_TUNER_CONFIG_FILE=%s is ignored", table->c_str(),
          csv->c_str());
    }
    return TableSource{*table, "TUCCL_TUNER_TABLE"};
  }
  if (csv) return TableSource{*csv, "NCCL_TUNER_CONFIG_FILE"};
  std::error_code ec;
  if (std::filesystem::exists(kDefaultCsvPath, ec)) return TableSource{kDefaultCsvPath, nullptr};
  return std::nullopt;
}

/// Indexes shared between communicators: (table bytes hash, size, communicator key). Entries are
/// weak, so an index lives exactly as long as some communicator uses it. `notesLogged`: the tables
/// (hash, size) whose skipped lines and warnings this process has logged already.
struct IndexCache {
  std::mutex mutex;
  std::map<std::tuple<uint64_t, uint64_t, int32_t, int32_t, std::string>, std::weak_ptr<const SharedTable>>
      entries;
  std::set<std::pair<uint64_t, uint64_t>> notesLogged;
};

IndexCache& indexCache() {
  static IndexCache* cache = new IndexCache;  // never destroyed: contexts may outlive static destructors
  return *cache;
}

/// The lines the table's reader skipped and its warnings, at WARN, once per process and table.
void logTableNotes(const LoadedTable& loaded, ncclDebugLogger_t logger) {
  if (loaded.notes.empty()) return;
  IndexCache& cache = indexCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!cache.notesLogged.insert({loaded.hash, loaded.fileBytes}).second) return;
  }
  TUCCL_TUNER_LOG(logger, NCCL_LOG_WARN,
                  "TuCCL tuner: table %s: %zu lines skipped, %zu warnings; the table is served without the "
                  "skipped lines",
                  loaded.path.c_str(), loaded.notes.skippedLines, loaded.notes.warningCount);
  for (const std::string& line : formatTableNotes(loaded.notes))
    TUCCL_TUNER_LOG(logger, NCCL_LOG_WARN, "TuCCL tuner: %s", line.c_str());
}

void logEnvironment(const LookupTable& table, const CommKey& comm, ncclDebugLogger_t logger) {
  const EnvRecommendation* env = recommendEnvironment(table, comm);
  if (env == nullptr) return;
  for (const auto& [name, value] : env->settings) {
    const std::optional<std::string> current = env::text(name.c_str());
    const bool same = current && value == *current;
    TUCCL_TUNER_LOG(logger, NCCL_LOG_INFO,
                    "TuCCL tuner: the table recommends %s=%s for %d ranks on %d nodes (%s%s)", name.c_str(),
                    value.c_str(), comm.nRanks, comm.nNodes, !current ? "unset" : "set to ",
                    !current ? "" : (same ? "the same" : current->c_str()));
  }
}

/// The decisions of the alternative configuration groups of every entry that can match `comm`.
std::map<uint32_t, std::vector<CompiledDecision>> groupDecisionsOf(const LookupTable& table, const CommKey& comm) {
  std::map<uint32_t, std::vector<CompiledDecision>> decisions;
  for (uint32_t i = 0; i < table.entries.size(); ++i) {
    const TableEntry& entry = table.entries[i];
    if (entry.groups.empty() || !keyMatches(entry.nNodes, entry.nRanks, entry.topology, comm)) continue;
    std::vector<CompiledDecision>& groups = decisions[i];
    for (const ConfigGroup& group : entry.groups) {
      CompiledDecision decision;
      decision.choices[0] = group.choice;
      decision.numChoices = 1;
      decision.nChannels = group.nChannels;
      decision.chunkSize = group.chunkSize;
      decision.entryIndex = i;
      decision.origin = entry.origin;
      groups.push_back(decision);
    }
  }
  return decisions;
}

/// The communicator's runtime phase, when it is switched on and usable and the table has groups
/// for it; registered for the duration intake.
std::unique_ptr<CommAdaptation> createAdaptation(const SharedTable& shared, const CommKey& comm,
                                                 std::optional<uint64_t> commId, ncclDebugLogger_t logger) {
  const size_t nRanks = static_cast<size_t>(comm.nRanks);
  std::optional<TunerAdaptSettings> settings = tunerAdaptSettings(logger);
  if (!settings) return nullptr;
  if (shared.groupDecisions.empty()) {
    TUCCL_TUNER_LOG(logger, NCCL_LOG_INFO,
                    "TuCCL adapt: no entry for this communicator has configuration groups: nothing to adapt");
    return nullptr;
  }
  std::unique_ptr<RendezvousStore> store = openTunerRendezvous(*settings, logger);
  if (!store) return nullptr;
  const uint64_t id = commId ? *commId : legacyCommunicatorId(nRanks);
  auto adaptation = std::make_unique<CommAdaptation>(
      *settings, std::move(store), id, static_cast<int32_t>(std::min<size_t>(nRanks, INT32_MAX)), logger);
  // What every rank must share for its choices to be the same call by call.
  const AdaptationOptions& rule = settings->rule;
  char joined[512];
  std::snprintf(joined, sizeof joined,
                "table=%016llx nRanks=%d nNodes=%d topology=%s samples=%d sync=%d probe=%d window=%d budget=%.17g",
                static_cast<unsigned long long>(shared.tableHash), comm.nRanks, comm.nNodes, comm.topology.c_str(),
                rule.minSamples, rule.syncEvery, rule.probeEvery, rule.window, rule.budget);
  if (!adaptation->join(joined)) return nullptr;
  TUCCL_TUNER_LOG(logger, NCCL_LOG_INFO,
                  "TuCCL adapt: communicator 0x%016llx (%zu ranks) adapts over %zu entries with groups; "
                  "rendezvous %s, agreement every %d calls of a key, timeout %lld ms",
                  static_cast<unsigned long long>(id), nRanks, shared.groupDecisions.size(),
                  settings->rendezvous.c_str(), settings->rule.syncEvery,
                  static_cast<long long>(settings->timeout.count()));
  registerCommAdaptation(adaptation.get());
  return adaptation;
}

std::shared_ptr<const SharedTable> loadSharedTable(const TableSource& source, const CommKey& comm,
                                                   ncclDebugLogger_t logger) {
  auto warn = [&](const Status& error) {
    std::string message = formatTableError(error);
    TUCCL_TUNER_LOG(logger, NCCL_LOG_WARN,
                    "TuCCL tuner: ignoring the tuning table (%s%s): %s; NCCL tunes as usual",
                    source.variable != nullptr ? source.variable : "default ",
                    source.variable != nullptr ? "" : kDefaultCsvPath, message.c_str());
    return nullptr;
  };
  Expected<std::string> read = readTableBytes(source.path);
  if (!read) return warn(read.status());
  const std::string& bytes = *read;
  uint64_t hash = fnv1a64(bytes);
  auto key =
      std::make_tuple(hash, static_cast<uint64_t>(bytes.size()), comm.nNodes, comm.nRanks, comm.topology);
  IndexCache& cache = indexCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(key);
    if (it != cache.entries.end()) {
      if (auto shared = it->second.lock()) {
        TUCCL_TUNER_LOG(
            logger, NCCL_LOG_INFO,
            "TuCCL tuner: table %s (hash 0x%016llx, %zu entries for %d ranks on %d nodes, shared)",
            source.path.c_str(), static_cast<unsigned long long>(hash), shared->index.candidateEntries(),
            comm.nRanks, comm.nNodes);
        return shared;
      }
    }
  }
  Expected<LoadedTable> loaded = parseTableBytes(bytes, source.path);
  if (!loaded) return warn(loaded.status());
  logTableNotes(*loaded, logger);
  const LookupTable& table = loaded->table;
  auto shared = std::make_shared<SharedTable>();
  shared->tableHash = hash;
  shared->index = CommIndex::build(table, comm);
  shared->format = loaded->format;
  shared->groupDecisions = groupDecisionsOf(table, comm);
  for (const ConstantOverride& constant : table.constants) {
    shared->constants.push_back({constant.name, constant.value,
                                 tunerConstantOffset(constant.name, TunerConstantsLayout::V5),
                                 tunerConstantOffset(constant.name, TunerConstantsLayout::V7)});
  }
  TUCCL_TUNER_LOG(logger, NCCL_LOG_INFO,
                  "TuCCL tuner: table %s (%s, hash 0x%016llx, %zu entries; %zu for %d ranks on %d nodes%s%s, "
                  "%zu byte ranges)",
                  source.path.c_str(), loaded->format == TableFormat::Json ? "json v1" : "NCCL tuner csv",
                  static_cast<unsigned long long>(hash), table.entries.size(),
                  shared->index.candidateEntries(), comm.nRanks, comm.nNodes,
                  comm.topology.empty() ? "" : ", topology ", comm.topology.c_str(),
                  shared->index.rangeCount());
  logEnvironment(table, comm, logger);
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto it = cache.entries.begin(); it != cache.entries.end();) {
    it = it->second.expired() ? cache.entries.erase(it) : std::next(it);
  }
  cache.entries[key] = shared;
  return shared;
}

}  // namespace

TunerContext* createTunerContext(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                                 std::optional<uint64_t> commId) noexcept {
  TunerContext* context = new (std::nothrow) TunerContext;
  if (context == nullptr) return nullptr;
  context->logger = logger;
  try {
    const std::optional<std::string> trace = env::text("TUCCL_TUNER_TRACE");
    context->trace = equalsIgnoreCase(env::text("NCCL_DEBUG").value_or(""), "TRACE") || (trace && *trace != "0");
    CommKey comm;
    comm.nNodes = static_cast<int32_t>(std::min<size_t>(nNodes, INT32_MAX));
    comm.nRanks = static_cast<int32_t>(std::min<size_t>(nRanks, INT32_MAX));
    if (std::optional<std::string> signature = env::text("TUCCL_TOPOLOGY_SIGNATURE")) comm.topology = *signature;
    std::optional<TableSource> source = resolveTableSource(logger);
    if (!source) {
      TUCCL_TUNER_LOG(logger, NCCL_LOG_INFO,
                      "TuCCL tuner: no table (TUCCL_TUNER_TABLE and NCCL_TUNER_CONFIG_FILE unset, no ./%s); "
                      "NCCL tunes as usual",
                      kDefaultCsvPath);
      return context;
    }
    context->shared = loadSharedTable(*source, comm, logger);
    if (context->shared) {
      context->index = &context->shared->index;
      context->format = context->shared->format;
      context->adapt = createAdaptation(*context->shared, comm, commId, logger);
    }
  } catch (...) {
    // Out of memory while loading: a no-op tuner for this communicator.
    if (context->adapt) unregisterCommAdaptation(context->adapt.get());
    context->adapt.reset();
    context->shared.reset();
    context->index = nullptr;
    TUCCL_TUNER_LOG(logger, NCCL_LOG_WARN,
                    "TuCCL tuner: could not load the tuning table; NCCL tunes as usual");
  }
  return context;
}

void applyTunerConstants(const TunerContext& context, double* constants,
                         TunerConstantsLayout layout) noexcept {
  if (constants == nullptr || !context.shared) return;
  const uint32_t count = tunerConstantCount(layout);
  for (const PlacedConstant& constant : context.shared->constants) {
    const std::optional<uint32_t>& offset =
        layout == TunerConstantsLayout::V7 ? constant.offsetV7 : constant.offsetV5;
    if (!offset || *offset >= count) {
      TUCCL_TUNER_LOG(
          context.logger, NCCL_LOG_INFO,
          "TuCCL tuner: cost model %s: not a constant of this NCCL's tuner interface (v%d); skipped",
          constant.name.c_str(), layout == TunerConstantsLayout::V7 ? 7 : 5);
      continue;
    }
    TUCCL_TUNER_LOG(context.logger, NCCL_LOG_INFO, "TuCCL tuner: cost model %s: %g -> %g",
                    constant.name.c_str(), constants[*offset], constant.value);
    constants[*offset] = constant.value;
  }
}

const CompiledDecision& adaptedDecision(const TunerContext& context, int collective, uint64_t nBytes,
                                        const CompiledDecision& decision) noexcept {
  if (!context.adapt) return decision;
  auto it = context.shared->groupDecisions.find(decision.entryIndex);
  if (it == context.shared->groupDecisions.end()) return decision;
  const TunerAdaptKey key{collective, sizeBucket(nBytes), decision.entryIndex};
  const int32_t group = context.adapt->chooseGroup(key, static_cast<int32_t>(it->second.size()) + 1, nBytes);
  return group <= 0 || group > static_cast<int32_t>(it->second.size()) ? decision
                                                                        : it->second[static_cast<size_t>(group - 1)];
}

const CompiledDecision& lastAdaptedDecision(const TunerContext& context, int collective, uint64_t nBytes,
                                            const CompiledDecision& decision) noexcept {
  if (!context.adapt) return decision;
  auto it = context.shared->groupDecisions.find(decision.entryIndex);
  if (it == context.shared->groupDecisions.end()) return decision;
  const int32_t group = context.adapt->lastGroup({collective, sizeBucket(nBytes), decision.entryIndex});
  return group <= 0 || group > static_cast<int32_t>(it->second.size()) ? decision
                                                                        : it->second[static_cast<size_t>(group - 1)];
}

void destroyTunerContext(TunerContext* context) noexcept {
  if (context == nullptr) return;
  if (context->adapt) unregisterCommAdaptation(context->adapt.get());
  delete context;
}

}  // namespace tuccl
