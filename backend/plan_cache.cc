// The plan cache (plan_cache.h): selection (plan_selection.h) -> the algorithm's program -> a plan
// compiled once per identity, in memory (build-once futures) and on disk (plan_store.h).
#include "backend/plan_cache.h"

#include <algorithm>
#include <climits>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <tuple>

#include "backend/builtin_algorithms.h"
#include "backend/plan_selection.h"
#include "backend/plan_store.h"
#include "kernelgen/device_headers.h"
#include "kernelgen/compile.h"
#include "kernelgen/nvrtc.h"
#include "plan/plan_json.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/environment.h"
#include "support/hash.h"
#include "support/log.h"
#include "support/text_values.h"
#include "table/table_io.h"
#include "tuccl/tuccl.h"

namespace tuccl::backend {
namespace {

namespace fs = std::filesystem;

using PlanPointer = std::shared_ptr<const CompiledPlan>;
using PlanResult = Expected<PlanPointer>;

// Part of every identity: a change of what the cache stores, or of TuCCL, starts new entries.
constexpr std::string_view kCacheFormat = "tuccl-plan-cache 1";

/// The program a selection runs.
struct Program {
  std::string name;  ///< "builtin/ring_allreduce.resccl", or the file's path
  std::string text;
  int32_t scratchRankPower = 0;
};

/// Everything a plan is built from, as one line, and its hash (the cache key).
struct PlanIdentity {
  std::string text;
  std::string key;
};

uint64_t deviceHeadersHash() {
  uint64_t hash = kFnv1a64OffsetBasis;
  for (const EmbeddedFile& header : deviceHeaders()) hash = fnv1a64(header.text, fnv1a64(header.name, hash));
  return hash;
}

PlanRequest planRequest(const PlanSelection& selection, const PlanCacheOptions& options) {
  PlanRequest request;  // HPDS with state-based TBs (ResCCL §4.3, §4.4) unless the selection says
  if (selection.tbPolicy) request.tbAllocation = TbRequest{*selection.tbPolicy, false};
  request.config.protocol = selection.protocol;
  request.config.chunkSize = selection.chunkSize;
  request.config.nChannels = selection.shape.nChannels;
  // A single-TB plan serves calls of at most singleTbMaxBytes: when a slice holds that much, each
  // of its calls is one micro-batch, and every ring (at least one slot) holds a chunk, so the TB
  // may post a step's sends before it waits for its receives.
  if (selection.tbPolicy == TbPolicy::Single &&
      static_cast<uint64_t>(selection.chunkSize) >= options.singleTbMaxBytes) {
    request.config.sendAhead = 1;
  }
  request.fuse = options.fuse;
  return request;
}

// A rank's kernel runs its TBs times the channels as one grid whose blocks wait on each other's
// flags, so all of them, and those of the ranks sharing its GPU, must be resident at once. With
// `maxBlocks` per rank (0: no limit), a plan whose TBs do not fit even once is refused rather than
// left to wait for blocks that never start, and its channels are cut to what fits. (On an H100
// under MPS, 4 and 8 processes of 32 and 16 blocks of 512 threads, one block per SM, were all
// resident at once: 128 blocks on 132 SMs; bench/gpu_residency.cu.)
Status fitChannels(Plan& plan, int32_t maxBlocks, const std::string& name) {
  if (maxBlocks <= 0) return {};
  size_t tbs = 1;
  for (const PlanRank& rank : plan.ranks) tbs = std::max(tbs, rank.tbs.size());
  if (tbs > static_cast<size_t>(maxBlocks)) {
    return makeError(ErrorCode::ResourceExhausted, name, {},
                     "the plan runs " + std::to_string(tbs) + " TBs on a rank, all at once, but a rank's share of its "
                     "GPU holds " + std::to_string(maxBlocks) + " (its SMs over the ranks that share it, one TB per "
                     "SM): run fewer ranks per GPU, or choose an algorithm of fewer TBs (TUCCL_ALGO)");
  }
  const auto fit = static_cast<int32_t>(static_cast<size_t>(maxBlocks) / tbs);
  if (plan.config.nChannels > fit) {
    logLine(LogLevel::Info, kLogInit, -1,
            name + ": " + std::to_string(plan.config.nChannels) + " channels cut to " + std::to_string(fit) + ": " +
                std::to_string(tbs) + " TBs a channel, " + std::to_string(maxBlocks) + " TBs fit on a rank at once");
    plan.config.nChannels = fit;
  }
  return {};
}

std::string oneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

PlanIdentity identityOf(const Program& program, const RescclParameters& parameters, const PlanRequest& request) {
  static const uint64_t headers = deviceHeadersHash();
  std::string text(kCacheFormat);
  text += " | TuCCL " + std::to_string(TUCCL_VERSION_CODE) + " | device headers " + hashFileName(headers);
  text += " | " + oneLine(program.name) + " " + hashFileName(fnv1a64(program.text)) + " |";
  for (const auto& [name, value] : parameters) text += " " + name + "=" + std::to_string(value);
  const PlanConfig& config = request.config;
  const std::optional<TbPolicy>& tbs = request.tbAllocation.policy;
  text += " | " + std::string(schedulerName(request.scheduler)) + " tb " +
          (tbs ? std::string(tbPolicyName(*tbs)) + (request.tbAllocation.forwardingChannels ? "+channels" : "")
               : std::string("auto")) +
          " | " +
          std::string(protocolName(config.protocol)) + " " + std::to_string(config.nThreads) + " threads, chunk " +
          std::to_string(config.chunkSize) + ", " + std::to_string(config.nChannels) + " channels";
  if (config.sendAhead > 0) text += ", send ahead " + std::to_string(config.sendAhead);
  if (!request.fuse) text += ", unfused";
  return {text, hashFileName(fnv1a64(text))};
}

// ---- CUBINs on disk: per rank "rank <r> <bytes>\n" and the bytes.

std::string serializeCubins(const std::vector<std::vector<char>>& cubins) {
  std::string out;
  for (size_t rank = 0; rank < cubins.size(); ++rank) {
    out += "rank " + std::to_string(rank) + " " + std::to_string(cubins[rank].size()) + "\n";
    out.append(cubins[rank].data(), cubins[rank].size());
  }
  return out;
}

std::optional<std::vector<std::vector<char>>> parseCubins(std::string_view payload, size_t nRanks) {
  std::vector<std::vector<char>> cubins;
  size_t at = 0;
  while (cubins.size() < nRanks) {
    const size_t newline = payload.find('\n', at);
    if (newline == std::string_view::npos) return std::nullopt;
    const std::string header(payload.substr(at, newline - at));
    const std::string expect = "rank " + std::to_string(cubins.size()) + " ";
    if (header.rfind(expect, 0) != 0) return std::nullopt;
    size_t size = 0;
    const std::string_view digits = std::string_view(header).substr(expect.size());
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    if (size > payload.size() - newline - 1) return std::nullopt;
    const char* begin = payload.data() + newline + 1;
    cubins.emplace_back(begin, begin + size);
    at = newline + 1 + size;
  }
  if (at != payload.size()) return std::nullopt;
  return cubins;
}

// The program text of a file a table names, resolved against the table's directory.
fs::path resolveProgramPath(const std::string& path, const std::string& tablePath) {
  const fs::path program(path);
  if (program.is_absolute() || tablePath.empty()) return program;
  return fs::path(tablePath).parent_path() / program;
}

Expected<std::string> readProgramFile(const fs::path& path) {
  try {
    return readSourceFile(path.string()).text();
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error, ErrorCode::NotFound);
  }
}

}  // namespace

struct PlanCache::Impl {
  std::optional<LookupTable> table;
  std::optional<CommIndex> index;
  PlanCacheOptions options;
  uint64_t tableHash = 0;
  PlanStore store;

  std::mutex mutex;
  std::map<std::string, std::shared_future<PlanResult>> plans;  ///< by key: built once
  std::map<std::string, PlanPointer> described;                ///< by key and description
  /// What a call was served last: by (collective, root, matching entry, or -1 / -2 for the
  /// default of the size class, whether it runs in one TB per rank, configuration group). The
  /// selection depends on nothing else, so later calls skip selecting, describing and hashing.
  std::map<std::tuple<Collective, int32_t, int64_t, bool, int32_t>, PlanPointer> served;
  std::map<std::string, Expected<std::string>> programFiles;    ///< by resolved path, read once

  struct Counters {
    std::atomic<int64_t> plansBuilt{0}, plansLoaded{0}, hostBuilds{0}, hostLoaded{0}, cubinsCompiled{0},
        cubinsLoaded{0}, damagedEntries{0};
  } counters;

  Expected<std::string> programFile(const fs::path& path);
  Expected<Program> programOf(const PlanSelection& selection);
  Status entryError(const PlanSelection& selection, const Status& cause) const;
  PlanResult planOf(const PlanSelection& selection);
  PlanResult buildOnce(const PlanIdentity& identity, const Program& program, const RescclParameters& parameters,
                       const PlanRequest& request, const PlanSelection& selection);
  PlanResult compile(const PlanIdentity& identity, const Program& program, const RescclParameters& parameters,
                     const PlanRequest& request, const PlanSelection& selection);
  Expected<Plan> planFromStoreOrBuild(const PlanIdentity& identity, const Program& program,
                                      const RescclParameters& parameters, const PlanRequest& request,
                                      const PlanSelection& selection);
  Expected<Plan> buildFromAlgorithm(const Program& program, const RescclParameters& parameters,
                                    const PlanRequest& request, const PlanSelection& selection);
  Status addCubins(const PlanIdentity& identity, CompiledPlan& compiled);
  Status addHostKernels(CompiledPlan& compiled);
  void noteDamaged(std::string_view name);
};

// ---- programs

Expected<std::string> PlanCache::Impl::programFile(const fs::path& path) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = programFiles.find(path.string());
  if (it == programFiles.end()) it = programFiles.emplace(path.string(), readProgramFile(path)).first;
  return it->second;
}

Expected<Program> PlanCache::Impl::programOf(const PlanSelection& selection) {
  if (selection.builtin) {
    const BuiltinAlgorithm* builtin = findBuiltinAlgorithm(selection.algorithm, selection.collective);
    if (builtin == nullptr) {
      return makeError(ErrorCode::Internal, "no built-in " + selection.algorithm + " " +
                                                std::string(collectiveName(selection.collective)));
    }
    return Program{"builtin/" + std::string(builtin->fileName), std::string(builtin->text),
                   builtin->scratchRankPower};
  }
  const fs::path path = resolveProgramPath(selection.algorithm, options.tablePath);
  Expected<std::string> text = programFile(path);
  if (!text) return text.status();
  return Program{path.string(), *text, false};
}

// An entry's algorithm that does not load or prove: the table, the entry and the reason.
Status PlanCache::Impl::entryError(const PlanSelection& selection, const Status& cause) const {
  if (selection.entry == nullptr || selection.entry->tucclAlgorithm.empty()) return cause;
  return makeError(cause.code() == ErrorCode::Internal ? ErrorCode::Internal : ErrorCode::InvalidInput,
                   tableDisplayName(options), {},
                   "entries[" + std::to_string(selection.entry->origin) + "].tucclAlgorithm \"" +
                       selection.entry->tucclAlgorithm + "\": " + formatTableError(cause));
}

// ---- the plan itself

namespace {

// An MSCCL XML file has its own shape: it serves a communicator of its ngpus ranks only, and a
// Broadcast or Reduce of its root only.
Status checkXmlFitsCall(const std::string& name, const Algorithm& algorithm, const PlanSelection& selection) {
  if (algorithm.nRanks != selection.shape.nRanks) {
    return makeError(ErrorCode::InvalidInput, name, {},
                     "the MSCCL XML file is for " + std::to_string(algorithm.nRanks) + " GPUs (ngpus), the "
                         "communicator has " + std::to_string(selection.shape.nRanks) + " ranks");
  }
  if (hasRoot(algorithm.collective) && algorithm.root != selection.shape.root) {
    return makeError(ErrorCode::InvalidInput, name, {},
                     "the MSCCL XML file's root is rank " + std::to_string(algorithm.root) + ", the call's rank " +
                         std::to_string(selection.shape.root));
  }
  return {};
}

}  // namespace

Expected<Plan> PlanCache::Impl::buildFromAlgorithm(const Program& program, const RescclParameters& parameters,
                                                   const PlanRequest& request, const PlanSelection& selection) {
  // ResCCLang programs take the communicator's shape as header parameters; XML files have their own.
  const bool xml = detectAlgorithmFormat(program.name, program.text) == AlgorithmFormat::MscclXml;
  Expected<LoadedAlgorithm> loaded =
      loadProvedAlgorithm(SourceText(program.name, program.text), xml ? RescclParameters{} : parameters);
  if (!loaded) return loaded.status();
  const Algorithm& algorithm = loaded->algorithm;
  if (algorithm.collective != selection.collective) {
    return makeError(ErrorCode::InvalidInput, program.name, {},
                     "the program's collective is " + std::string(collectiveName(algorithm.collective)) +
                         ", the call's " + std::string(collectiveName(selection.collective)));
  }
  if (xml) {
    if (Status status = checkXmlFitsCall(program.name, algorithm, selection); !status) return status;
  }
  Expected<Plan> plan = buildPlan(algorithm, request);
  if (!plan) return makeError(ErrorCode::Internal, program.name, {}, "scheduling failed: " + plan.status().message());
  ++counters.plansBuilt;
  return plan;
}

void PlanCache::Impl::noteDamaged(std::string_view name) {
  ++counters.damagedEntries;
  logLine(LogLevel::Warn, kLogInit, -1, "plan cache: " + std::string(name) + " failed its checksum; removed and rebuilt");
}

Expected<Plan> PlanCache::Impl::planFromStoreOrBuild(const PlanIdentity& identity, const Program& program,
                                                     const RescclParameters& parameters, const PlanRequest& request,
                                                     const PlanSelection& selection) {
  const std::string name = "plans/" + identity.key + ".plan";
  if (store.enabled()) {
    const PlanStore::Lookup found = store.read(name, identity.text);
    if (found.state == PlanStore::State::Damaged) noteDamaged(name);
    if (found.state == PlanStore::State::Found) {
      Expected<Plan> plan = readPlanJson(SourceText(name, found.payload));
      if (plan) {
        ++counters.plansLoaded;
        return plan;
      }
      noteDamaged(name);  // sealed but unreadable: written by another TuCCL build
    }
  }
  Expected<Plan> plan = buildFromAlgorithm(program, parameters, request, selection);
  if (plan && store.enabled()) {
    if (Status status = store.write(name, identity.text, writePlanJson(*plan)); !status)
      logLine(LogLevel::Warn, kLogInit, -1, "plan cache: " + status.message());
  }
  return plan;
}

Status PlanCache::Impl::addCubins(const PlanIdentity& identity, CompiledPlan& compiled) {
  if (options.cudaArch.empty()) return {};
  // NVRTC's version is part of the name: another NVRTC's CUBINs (or a test double's images) are
  // never read back as this one's.
  const std::string name = "cubins/" + identity.key + "-" + oneLine(options.cudaArch) + "-nvrtc" +
                           oneLine(nvrtcVersionText()) + ".cubins";
  if (store.enabled()) {
    const PlanStore::Lookup found = store.read(name, identity.text);
    if (found.state == PlanStore::State::Damaged) noteDamaged(name);
    if (found.state == PlanStore::State::Found) {
      if (auto cubins = parseCubins(found.payload, compiled.kernels.kernels.size())) {
        compiled.cubins = std::move(*cubins);
        ++counters.cubinsLoaded;
        return {};
      }
      noteDamaged(name);
    }
  }
  Targets targets;
  targets.cudaArch = options.cudaArch;
  targets.cacheDir = store.hostDirectory();
  if (Status status = buildTargets(compiled, targets); !status) return status;
  counters.cubinsCompiled += static_cast<int64_t>(compiled.cubins.size());
  if (store.enabled()) {
    if (Status status = store.write(name, identity.text, serializeCubins(compiled.cubins)); !status)
      logLine(LogLevel::Warn, kLogInit, -1, "plan cache: " + status.message());
  }
  return {};
}

Status PlanCache::Impl::addHostKernels(CompiledPlan& compiled) {
  if (!options.hostKernels) return {};
  Targets targets;
  targets.hostKernels = true;
  targets.cacheDir = store.hostDirectory();
  if (Status status = buildTargets(compiled, targets); !status) return status;
  ++(compiled.host->fromCache ? counters.hostLoaded : counters.hostBuilds);
  return {};
}

PlanResult PlanCache::Impl::compile(const PlanIdentity& identity, const Program& program,
                                    const RescclParameters& parameters, const PlanRequest& request,
                                    const PlanSelection& selection) {
  std::shared_ptr<CompiledPlan> compiled;
  {
    // Another process building the same entry finishes before this one looks.
    std::optional<FileLock> entryLock;
    if (store.enabled()) {
      Expected<FileLock> lock = store.lock(identity.key);
      if (lock) entryLock.emplace(std::move(*lock));
    }
    Expected<Plan> plan = planFromStoreOrBuild(identity, program, parameters, request, selection);
    if (!plan) return plan.status();
    if (Status fits = fitChannels(*plan, options.maxBlocksPerRank, program.name); !fits) return fits;
    // The layout and kernels here; the CUBINs may come from the store, the host build comes after
    // the entry's lock.
    Expected<CompiledPlan> generated = compilePlan(std::move(*plan), Targets{});
    if (!generated) return makeError(ErrorCode::Internal, program.name + ": " + generated.status().message());
    compiled = std::make_shared<CompiledPlan>(std::move(*generated));
    compiled->key = identity.key;
    compiled->description = describeSelection(selection);
    if (Status status = addCubins(identity, *compiled); !status) return status;
  }
  if (Status status = addHostKernels(*compiled); !status) return status;
  logLine(LogLevel::Info, kLogInit, -1, "plan " + identity.key + ": " + compiled->description);
  return PlanPointer(std::move(compiled));
}

// The plan of `identity`, built by the first caller; concurrent callers wait for it. A failure
// is handed to the callers waiting for it and forgotten, so a later call tries again.
PlanResult PlanCache::Impl::buildOnce(const PlanIdentity& identity, const Program& program,
                                      const RescclParameters& parameters, const PlanRequest& request,
                                      const PlanSelection& selection) {
  std::promise<PlanResult> promise;
  std::shared_future<PlanResult> future;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(identity.key);
    if (it != plans.end()) {
      future = it->second;
    } else {
      plans.emplace(identity.key, promise.get_future().share());
    }
  }
  if (future.valid()) return future.get();
  PlanResult result = [&]() -> PlanResult {
    try {
      return compile(identity, program, parameters, request, selection);
    } catch (const std::exception& error) {
      return makeError(ErrorCode::Internal, std::string("plan compilation failed: ") + error.what());
    } catch (...) {
      return makeError(ErrorCode::Internal, "plan compilation failed");
    }
  }();
  if (!result) {
    std::lock_guard<std::mutex> lock(mutex);
    plans.erase(identity.key);
  }
  promise.set_value(result);
  return result;
}

PlanResult PlanCache::Impl::planOf(const PlanSelection& selection) {
  Expected<Program> program = programOf(selection);
  if (!program) return entryError(selection, program.status());
  const RescclParameters parameters =
      algorithmParameters(selection.collective, selection.shape, program->scratchRankPower);
  const PlanRequest request = planRequest(selection, options);
  const PlanIdentity identity = identityOf(*program, parameters, request);
  PlanResult built = buildOnce(identity, *program, parameters, request, selection);
  if (!built) return entryError(selection, built.status());
  // One compiled plan serves every selection with its identity; each gets its own description.
  const std::string description = describeSelection(selection);
  if ((*built)->description == description) return built;
  std::lock_guard<std::mutex> lock(mutex);
  PlanPointer& copy = described[identity.key + "\n" + description];
  if (copy == nullptr) {
    auto renamed = std::make_shared<CompiledPlan>(**built);
    renamed->description = description;
    copy = std::move(renamed);
  }
  return copy;
}

// ---- PlanCache

PlanCache::PlanCache(std::optional<LookupTable> table, PlanCacheOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->options = std::move(options);
  impl_->table = std::move(table);
  if (impl_->table) {
    impl_->index = CommIndex::build(*impl_->table,
                                    CommKey{impl_->options.nNodes, impl_->options.nRanks, impl_->options.topology});
    // The table's canonical JSON, and the content of every program file it names: ranks whose
    // tables or programs differ would run different plans.
    uint64_t hash = fnv1a64(writeTableJson(*impl_->table));
    for (const TableEntry& entry : impl_->table->entries) {
      if (entry.tucclAlgorithm.empty() || isBuiltinFamily(entry.tucclAlgorithm)) continue;
      const Expected<std::string> text =
          impl_->programFile(resolveProgramPath(entry.tucclAlgorithm, impl_->options.tablePath));
      hash = fnv1a64(text ? *text : "unreadable " + entry.tucclAlgorithm, hash);
    }
    impl_->tableHash = hash == 0 ? 1 : hash;  // 0 means "no table"
  }
  std::string problem;
  impl_->store = PlanStore::open(impl_->options.cacheDir, problem);
  if (!problem.empty()) logLine(LogLevel::Warn, kLogInit, -1, "plan cache: " + problem + "; plans are kept in memory only");
}

uint64_t PlanCache::tableHash() const { return impl_->tableHash; }

void PlanCache::setCommunicatorShape(int32_t nNodes, int32_t maxBlocksPerRank) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  PlanCacheOptions& o = impl_->options;
  if (o.nNodes == nNodes && o.maxBlocksPerRank == maxBlocksPerRank) return;
  o.nNodes = nNodes;
  o.maxBlocksPerRank = maxBlocksPerRank;
  if (impl_->table) impl_->index = CommIndex::build(*impl_->table, CommKey{o.nNodes, o.nRanks, o.topology});
  impl_->served.clear();
}

std::vector<ConfigGroup> PlanCache::groupsFor(const PlanQuery& query) const {
  const LookupTable* table = impl_->table ? &*impl_->table : nullptr;
  const CommIndex* index = impl_->index ? &*impl_->index : nullptr;
  return candidateGroups(query, table, index, impl_->options);
}

int32_t PlanCache::entryFor(const PlanQuery& query) const {
  const LookupTable* table = impl_->table ? &*impl_->table : nullptr;
  const CommIndex* index = impl_->index ? &*impl_->index : nullptr;
  const TableEntry* entry = matchingEntry(query, table, index, impl_->options);
  return entry == nullptr ? -1 : static_cast<int32_t>(entry - table->entries.data());
}

std::string PlanCache::tableMismatch() const {
  if (!impl_->table) return {};
  const PlanCacheOptions& o = impl_->options;
  const CommKey comm{o.nNodes, o.nRanks, o.topology};
  auto shape = [](int32_t nRanks, int32_t nNodes, const std::string& topology) {
    std::string text = (nRanks < 0 ? std::string("any rank count") : std::to_string(nRanks) + " ranks") + " on " +
                       (nNodes < 0 ? std::string("any node count") : std::to_string(nNodes) + (nNodes == 1 ? " node" : " nodes"));
    if (!topology.empty()) text += " (topology " + topology + ")";
    return text;
  };
  std::string text;
  for (int c = 0; c < kTunerCollectives; ++c) {
    std::vector<std::string> shapes;
    bool matches = false;
    for (const TableEntry& entry : impl_->table->entries) {
      if (static_cast<int>(entry.collective) != c) continue;
      matches = matches || keyMatches(entry.nNodes, entry.nRanks, entry.topology, comm);
      std::string s = shape(entry.nRanks, entry.nNodes, entry.topology);
      if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(std::move(s));
    }
    if (shapes.empty() || matches) continue;
    std::string list;
    for (const std::string& s : shapes) list += (list.empty() ? "" : "; ") + s;
    if (!text.empty()) text += "\n";
    text += toLowerCase(collectiveName(static_cast<Collective>(c))) + ": the table's entries are for " + list +
            ", this communicator is " + shape(o.nRanks, o.nNodes, o.topology.empty() ? std::string() : o.topology) +
            ": none applies, the built-in defaults decide";
  }
  return text;
}

std::pair<int32_t, int32_t> PlanCache::entryAndGroupCount(const PlanQuery& query) const {
  const CallDecision decision = decide(query);
  return {decision.entryIndex, decision.groups};
}

CallDecision PlanCache::decide(const PlanQuery& query) const {
  const LookupTable* table = impl_->table ? &*impl_->table : nullptr;
  const CommIndex* index = impl_->index ? &*impl_->index : nullptr;
  CallDecision decision;
  decision.query = query;
  decision.bytes = tunerBytes(query, impl_->options.nRanks);
  decision.entry = matchTable(query, decision.bytes, table, index).entry;
  const bool fixed = environmentFixesTheChoice(impl_->options);
  if (decision.entry == nullptr) {
    decision.groups = fixed ? 1 : 2;  // candidateGroups: the default and an alternative
  } else {
    decision.entryIndex = static_cast<int32_t>(decision.entry - table->entries.data());
    decision.groups = fixed ? 1 : static_cast<int32_t>(std::min<size_t>(decision.entry->groups.size() + 1, INT32_MAX));
  }
  return decision;
}

Expected<std::shared_ptr<const CompiledPlan>> PlanCache::planFor(const PlanQuery& query, int32_t group) {
  if (Status status = checkPlanQuery(query, impl_->options); !status) return status;
  return planFor(decide(query), group);
}

Expected<std::shared_ptr<const CompiledPlan>> PlanCache::planFor(const CallDecision& decision, int32_t group) {
  const PlanQuery& query = decision.query;
  // Without an entry the default depends on the size class (defaultFamily): -1 or -2.
  const int64_t entryKey = decision.entry != nullptr ? decision.entryIndex
                           : defaultFamily(query, decision.bytes, impl_->options) == defaultAlgorithmFamily(query.collective)
                               ? -1
                               : -2;
  const auto served = std::make_tuple(query.collective, hasRoot(query.collective) ? query.root : -1, entryKey,
                                      singleTbPolicy(decision.bytes, impl_->options).has_value(), group);
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (auto it = impl_->served.find(served); it != impl_->served.end()) return it->second;
  }
  const TableMatch match{impl_->table ? &*impl_->table : nullptr, decision.entry};
  Expected<PlanSelection> selection = selectPlan(query, match, impl_->options, group);
  if (!selection) return selection.status();
  PlanResult plan = impl_->planOf(*selection);
  if (plan) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->served.emplace(served, *plan);
  }
  return plan;
}

int32_t PlanCache::channelsFor(const CallDecision& decision, int32_t group, const CompiledPlan& plan) const {
  const PlanConfig& config = plan.plan.config;
  const int32_t channels = std::max(1, plan.layout.channels);
  if (!channelsFollowSize(decision.entry, group, impl_->options)) return channels;
  return channelsForBytes(decision.bytes, channels, config.nThreads, config.protocol);
}

PlanCacheStats PlanCache::stats() const {
  const Impl::Counters& c = impl_->counters;
  PlanCacheStats stats;
  stats.plansBuilt = c.plansBuilt;
  stats.plansLoaded = c.plansLoaded;
  stats.hostBuilds = c.hostBuilds;
  stats.hostLoaded = c.hostLoaded;
  stats.cubinsCompiled = c.cubinsCompiled;
  stats.cubinsLoaded = c.cubinsLoaded;
  stats.damagedEntries = c.damagedEntries;
  stats.diskCache = impl_->store.enabled();
  return stats;
}

// ---- the environment

Expected<std::optional<LookupTable>> loadTableFromEnvironment() {
  return loadNamedTable(env::text("TUCCL_TUNER_TABLE").value_or(""));
}

Expected<std::optional<LookupTable>> loadNamedTable(const std::string& path) {
  if (path.empty()) return std::optional<LookupTable>();
  Expected<LoadedTable> loaded = loadTableFile(path);
  // The message names the file and, for a syntax error, the line and column, as tuccl-table
  // validate prints it: the API's callers see only the message.
  if (!loaded) return makeError(loaded.status().code(), "TUCCL_TUNER_TABLE: " + loaded.status().toString());
  return std::optional<LookupTable>(std::move(loaded->table));
}

std::string defaultCacheDir() {
  if (std::optional<std::string> dir = env::text("TUCCL_CACHE_DIR")) return *dir;
  if (std::optional<std::string> dir = env::text("XDG_CACHE_HOME")) return (fs::path(*dir) / "tuccl").string();
  if (std::optional<std::string> dir = env::text("HOME")) return (fs::path(*dir) / ".cache" / "tuccl").string();
  return {};
}

}  // namespace tuccl::backend
