// Plan JSON: the deterministic writer and the checked reader (plan_json.h, docs/plan-format.md).
#include "plan/plan_json.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "plan/plan_rolled.h"
#include "plan/plan_validate.h"
#include "support/json_text.h"

namespace tuccl {

using nlohmann::json;

namespace {

// nlohmann::json objects are std::maps: keys come out sorted, so equal plans give equal text.
json entryJson(const PlanEntry& entry) {
  json deps = json::array();
  for (const EntryRef& dep : entry.deps) deps.push_back(json::array({dep.tb, dep.entry}));
  return json{{"kind", primitiveName(entry.kind)},
              {"peer", entry.peer},
              {"srcBuffer", bufferName(entry.srcBuffer)},
              {"srcIndex", entry.srcIndex},
              {"dstBuffer", bufferName(entry.dstBuffer)},
              {"dstIndex", entry.dstIndex},
              {"count", entry.count},
              {"step", entry.step},
              {"op", entry.op},
              {"subPipeline", entry.subPipeline},
              {"line", entry.loc.line},
              {"column", entry.loc.column},
              {"deps", std::move(deps)},
              {"hasDependents", entry.hasDependents}};
}

json rankJson(const PlanRank& rank) {
  json tbs = json::array();
  for (const PlanTb& tb : rank.tbs) {
    json entries = json::array();
    for (const PlanEntry& entry : tb.entries) entries.push_back(entryJson(entry));
    tbs.push_back(json{{"id", tb.id}, {"sendPeer", tb.sendPeer}, {"recvPeer", tb.recvPeer}, {"entries", std::move(entries)}});
  }
  return json{{"rank", rank.rank}, {"tbs", std::move(tbs)}};
}

// A schema error inside the reader; readPlanJson turns it into its Status.
struct FormatError {
  Status status;
};

constexpr int64_t kMaxIndex = INT32_MAX;

// Typed field access with errors naming the JSON path, for one version of the format.
class Reader {
 public:
  Reader(const SourceText& source, int64_t version) : source_(source), version_(version) {}

  int64_t version() const { return version_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError{makeError(ErrorCode::InvalidInput, source_.name(), SourceLoc{}, message)};
  }
  const json& field(const json& object, const char* key, const std::string& path) const {
    if (!object.is_object()) fail(path + " is not an object");
    auto it = object.find(key);
    if (it == object.end()) fail(path + " has no \"" + key + "\"");
    return *it;
  }
  int64_t integer(const json& object, const char* key, const std::string& path, int64_t low, int64_t high) const {
    return number(field(object, key, path), path + "." + key, low, high);
  }
  /// `value` (found at `path`) as an integer in [low, high].
  int64_t number(const json& value, const std::string& path, int64_t low, int64_t high) const {
    if (!value.is_number_integer()) fail(path + " is not an integer");
    // Unsigned values beyond INT64_MAX are out of every range here.
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(path + " is out of range [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    const auto result = value.get<int64_t>();
    if (result < low || result > high) {
      fail(path + " = " + std::to_string(result) + " is out of range [" + std::to_string(low) + ", " +
           std::to_string(high) + "]");
    }
    return result;
  }
  int32_t index(const json& object, const char* key, const std::string& path, int64_t low = 0) const {
    return static_cast<int32_t>(integer(object, key, path, low, kMaxIndex));
  }
  std::string text(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_string()) fail(path + "." + key + " is not a string");
    return value.get<std::string>();
  }
  bool boolean(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_boolean()) fail(path + "." + key + " is not a boolean");
    return value.get<bool>();
  }
  const json& array(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_array()) fail(path + "." + key + " is not an array");
    return value;
  }
  /// A name of the vocabulary, parsed by `parse`; `expected` lists the accepted names.
  template <typename Parse>
  auto name(const json& object, const char* key, const std::string& path, Parse parse, const char* expected) const {
    const std::string value = text(object, key, path);
    auto parsed = parse(value);
    if (!parsed) fail(path + "." + key + " \"" + value + "\" is not " + expected);
    return *parsed;
  }

 private:
  const SourceText& source_;
  int64_t version_;
};

PlanEntry readEntry(const Reader& read, const json& object, const std::string& path) {
  PlanEntry entry;
  entry.kind = read.name(object, "kind", path, parsePrimitiveKind, "send, recv, recvReduceCopy, copy or reduce");
  if (isFused(entry.kind)) {
    read.fail(path + ".kind " + std::string(primitiveName(entry.kind)) +
              " is a fused primitive, which only rolled plans (format version 4) carry");
  }
  entry.peer = read.index(object, "peer", path);
  entry.srcBuffer = read.name(object, "srcBuffer", path, parseBufferKind, "input, output or scratch");
  entry.srcIndex = read.index(object, "srcIndex", path);
  entry.dstBuffer = read.name(object, "dstBuffer", path, parseBufferKind, "input, output or scratch");
  entry.dstIndex = read.index(object, "dstIndex", path);
  entry.count = read.index(object, "count", path, 1);
  entry.step = read.index(object, "step", path);
  entry.op = read.index(object, "op", path);
  entry.subPipeline = read.index(object, "subPipeline", path);
  if (read.version() >= 2) {
    entry.loc.line = static_cast<uint32_t>(read.index(object, "line", path));
    entry.loc.column = static_cast<uint32_t>(read.index(object, "column", path));
  }
  entry.hasDependents = read.boolean(object, "hasDependents", path);
  for (const json& dep : read.array(object, "deps", path)) {
    if (!dep.is_array() || dep.size() != 2 || !dep[0].is_number_integer() || !dep[1].is_number_integer()) {
      read.fail(path + ".deps holds something other than [tb, entry] pairs");
    }
    const auto tb = dep[0].get<int64_t>();
    const auto index = dep[1].get<int64_t>();
    if (tb < 0 || tb > kMaxIndex || index < 0 || index > kMaxIndex) read.fail(path + ".deps index out of range");
    entry.deps.push_back(EntryRef{static_cast<int32_t>(tb), static_cast<int32_t>(index)});
  }
  return entry;
}

PlanRank readRank(const Reader& read, const json& object, const std::string& path) {
  PlanRank rank;
  rank.rank = read.index(object, "rank", path);
  const json& tbs = read.array(object, "tbs", path);
  for (size_t b = 0; b < tbs.size(); ++b) {
    const std::string tbPath = path + ".tbs[" + std::to_string(b) + "]";
    PlanTb tb;
    tb.id = read.index(tbs[b], "id", tbPath);
    tb.sendPeer = read.index(tbs[b], "sendPeer", tbPath, -2);
    tb.recvPeer = read.index(tbs[b], "recvPeer", tbPath, -2);
    const json& entries = read.array(tbs[b], "entries", tbPath);
    for (size_t e = 0; e < entries.size(); ++e) {
      tb.entries.push_back(readEntry(read, entries[e], tbPath + ".entries[" + std::to_string(e) + "]"));
    }
    rank.tbs.push_back(std::move(tb));
  }
  return rank;
}

// Version 3 (rolled): templates of runs, ranks naming a template and their own values.

constexpr int64_t kMaxPerRankValues = int64_t{1} << 24;

// A template integer: a literal, {"a": A, "b": B[, "m": M]} ((A * rank + B) mod M) or
// {"perRank": k} (the rank's k-th value).
RankValue readRankValue(const Reader& read, const json& value, const std::string& path, int64_t perRankValues) {
  if (value.is_number_integer()) return RankValue::literal(read.number(value, path, INT32_MIN, INT32_MAX));
  if (value.is_object() && value.size() == 1 && value.contains("perRank")) {
    if (perRankValues == 0) read.fail(path + ".perRank names a value, but the template has perRankValues 0");
    const auto slot = static_cast<int32_t>(read.integer(value, "perRank", path, 0, perRankValues - 1));
    return RankValue{RankValue::Form::PerRank, 0, 0, 0, slot};
  }
  if (value.is_object() && value.contains("a") && value.contains("b") &&
      value.size() == (value.contains("m") ? 3u : 2u)) {
    RankValue affine{RankValue::Form::RankAffine, read.integer(value, "a", path, INT32_MIN, INT32_MAX),
                     read.integer(value, "b", path, INT32_MIN, INT32_MAX), 0, 0};
    if (value.contains("m")) affine.m = read.integer(value, "m", path, 0, INT32_MAX);
    return affine;
  }
  read.fail(path + " is not an integer, {\"a\": A, \"b\": B[, \"m\": M]} or {\"perRank\": k}");
}

// The [tb, entry] pairs of `deps` (at `path`), `expected` of them (-1: any number).
std::vector<RankValue> readDepValues(const Reader& read, const json& deps, const std::string& path, int64_t expected,
                                     int64_t perRankValues) {
  if (!deps.is_array()) read.fail(path + " is not an array");
  if (expected >= 0 && deps.size() != static_cast<size_t>(expected)) {
    read.fail(path + " has " + std::to_string(deps.size()) + " pairs, the entry has " + std::to_string(expected) +
              " deps");
  }
  std::vector<RankValue> values;
  for (size_t d = 0; d < deps.size(); ++d) {
    const std::string depPath = path + "[" + std::to_string(d) + "]";
    if (!deps[d].is_array() || deps[d].size() != 2) read.fail(depPath + " is not a [tb, entry] pair");
    values.push_back(readRankValue(read, deps[d][0], depPath + "[0]", perRankValues));
    values.push_back(readRankValue(read, deps[d][1], depPath + "[1]", perRankValues));
  }
  return values;
}

// A run's "stride" or "modulo": the fields it names (others 0). Unknown fields are refused: a
// misspelt one would silently change the expansion.
std::vector<RankValue> readSteps(const Reader& read, const json& run, const char* key, const std::string& path,
                                 int32_t named, int32_t deps, int64_t perRankValues) {
  std::vector<RankValue> values(named + 2 * static_cast<size_t>(deps), RankValue::literal(0));
  if (!run.contains(key)) return values;
  const json& steps = run[key];
  const std::string stepsPath = path + "." + key;
  if (!steps.is_object()) read.fail(stepsPath + " is not an object");
  for (auto it = steps.begin(); it != steps.end(); ++it) {
    if (it.key() == "deps") {
      const std::vector<RankValue> depValues = readDepValues(read, *it, stepsPath + ".deps", deps, perRankValues);
      std::copy(depValues.begin(), depValues.end(), values.begin() + named);
      continue;
    }
    int field = 0;
    while (field < named && it.key() != entryFieldName(field)) ++field;
    if (field == named) read.fail(stepsPath + " has an unknown field \"" + it.key() + "\"");
    values[field] = readRankValue(read, *it, stepsPath + "." + it.key(), perRankValues);
  }
  return values;
}

RolledRun readRun(const Reader& read, const json& run, const std::string& path, int64_t perRankValues,
                  const PlanReadLimits& limits) {
  if (!run.is_object()) read.fail(path + " is not an object");
  RolledRun rolled;
  rolled.repeat = run.contains("repeat") ? read.integer(run, "repeat", path, 1, limits.maxExpandedItems) : 1;
  const json& entry = read.field(run, "entry", path);
  const std::string entryPath = path + ".entry";
  rolled.shape.kind = read.name(entry, "kind", entryPath, parsePrimitiveKind, primitiveNameList());
  if (isFused(rolled.shape.kind) && read.version() < 4) {
    read.fail(entryPath + ".kind " + std::string(primitiveName(rolled.shape.kind)) +
              " is a fused primitive, which plan format version 4 introduced (this plan says version " +
              std::to_string(read.version()) + ")");
  }
  rolled.shape.srcBuffer = read.name(entry, "srcBuffer", entryPath, parseBufferKind, "input, output or scratch");
  rolled.shape.dstBuffer = read.name(entry, "dstBuffer", entryPath, parseBufferKind, "input, output or scratch");
  if (isFused(rolled.shape.kind)) {
    rolled.shape.nextDstBuffer =
        read.name(entry, "nextDstBuffer", entryPath, parseBufferKind, "input, output or scratch");
  }
  rolled.shape.hasDependents = read.boolean(entry, "hasDependents", entryPath);
  const int named = namedFields(rolled.shape.kind);
  for (int field = 0; field < named; ++field) {
    rolled.base.push_back(readRankValue(read, read.field(entry, entryFieldName(field), entryPath),
                                        entryPath + "." + entryFieldName(field), perRankValues));
  }
  const std::vector<RankValue> deps =
      readDepValues(read, read.array(entry, "deps", entryPath), entryPath + ".deps", -1, perRankValues);
  rolled.base.insert(rolled.base.end(), deps.begin(), deps.end());
  rolled.shape.deps = static_cast<int32_t>(deps.size() / 2);
  rolled.stride = readSteps(read, run, "stride", path, named, rolled.shape.deps, perRankValues);
  rolled.modulo = readSteps(read, run, "modulo", path, named, rolled.shape.deps, perRankValues);
  return rolled;
}

RankTemplate readTemplate(const Reader& read, const json& object, const std::string& path,
                          const PlanReadLimits& limits) {
  RankTemplate tmpl;
  tmpl.perRankValues = static_cast<int32_t>(read.integer(object, "perRankValues", path, 0, kMaxPerRankValues));
  const json& tbs = read.array(object, "tbs", path);
  for (size_t b = 0; b < tbs.size(); ++b) {
    const std::string tbPath = path + ".tbs[" + std::to_string(b) + "]";
    RolledTb tb;
    tb.id = readRankValue(read, read.field(tbs[b], "id", tbPath), tbPath + ".id", tmpl.perRankValues);
    tb.sendPeer = readRankValue(read, read.field(tbs[b], "sendPeer", tbPath), tbPath + ".sendPeer", tmpl.perRankValues);
    tb.recvPeer = readRankValue(read, read.field(tbs[b], "recvPeer", tbPath), tbPath + ".recvPeer", tmpl.perRankValues);
    const json& runs = read.array(tbs[b], "runs", tbPath);
    for (size_t r = 0; r < runs.size(); ++r) {
      tb.runs.push_back(readRun(read, runs[r], tbPath + ".runs[" + std::to_string(r) + "]", tmpl.perRankValues, limits));
    }
    tmpl.tbs.push_back(std::move(tb));
  }
  return tmpl;
}

RolledRank readRolledRank(const Reader& read, const json& object, const std::string& path,
                          const std::vector<RankTemplate>& templates) {
  RolledRank rank;
  rank.rank = read.index(object, "rank", path);
  if (templates.empty()) read.fail(path + ".template names a template, but plan.templates is empty");
  rank.templateIndex =
      static_cast<int32_t>(read.integer(object, "template", path, 0, static_cast<int64_t>(templates.size()) - 1));
  const json& values = read.array(object, "values", path);
  const int32_t needed = templates[rank.templateIndex].perRankValues;
  if (values.size() != static_cast<size_t>(needed)) {
    read.fail(path + ".values has " + std::to_string(values.size()) + " values, template " +
              std::to_string(rank.templateIndex) + " needs " + std::to_string(needed));
  }
  for (size_t v = 0; v < values.size(); ++v) {
    rank.values.push_back(read.number(values[v], path + ".values[" + std::to_string(v) + "]", INT32_MIN, INT32_MAX));
  }
  return rank;
}

// The ranks of a version-3 document, expanded; refused before expanding beyond the limits.
std::vector<PlanRank> readRolledRanks(const Reader& read, const json& document, const PlanReadLimits& limits) {
  std::vector<RankTemplate> templates;
  const json& templateArray = read.array(document, "templates", "plan");
  for (size_t t = 0; t < templateArray.size(); ++t) {
    templates.push_back(readTemplate(read, templateArray[t], "plan.templates[" + std::to_string(t) + "]", limits));
  }
  std::vector<int64_t> costs;
  for (const RankTemplate& tmpl : templates) costs.push_back(expandedCost(tmpl));
  const json& rankArray = read.array(document, "ranks", "plan");
  std::vector<RolledRank> ranks;
  int64_t cost = 0;
  for (size_t r = 0; r < rankArray.size(); ++r) {
    ranks.push_back(readRolledRank(read, rankArray[r], "plan.ranks[" + std::to_string(r) + "]", templates));
    cost += std::min(costs[ranks.back().templateIndex], limits.maxExpandedItems + 1);
    if (cost > limits.maxExpandedItems) {
      read.fail("the plan expands to more than " + std::to_string(limits.maxExpandedItems) +
                " entries and dependencies (plan.ranks[" + std::to_string(r) + "] passes the limit)");
    }
  }
  std::vector<PlanRank> expanded;
  expanded.reserve(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int32_t t = ranks[r].templateIndex;
    Expected<PlanRank> rank =
        expandRolledRank(templates[t], ranks[r], "plan.templates[" + std::to_string(t) + "]");
    if (!rank) read.fail(rank.status().message());
    expanded.push_back(std::move(*rank));
  }
  return expanded;
}

PlanConfig readConfig(const Reader& read, const json& config) {
  PlanConfig result;
  result.protocol = read.name(config, "protocol", "plan.config", parseProtocol, "Simple, LL or LL128");
  result.nThreads = static_cast<int32_t>(read.integer(config, "nThreads", "plan.config", 1, 1024));
  result.chunkSize = read.integer(config, "chunkSize", "plan.config", 1, INT64_MAX);
  result.nChannels = read.index(config, "nChannels", "plan.config", 1);
  if (config.contains("sendAhead")) result.sendAhead = read.index(config, "sendAhead", "plan.config");
  return result;
}

Plan readDocument(const Reader& read, const json& document, const PlanReadLimits& limits) {
  Plan plan;
  plan.collective = read.name(document, "collective", "plan", parseCollective,
                              "a collective (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll)");
  plan.algorithm = read.text(document, "algorithm", "plan");
  plan.nRanks = static_cast<int32_t>(read.integer(document, "nRanks", "plan", 1, (1 << 22) - 1));
  if (read.version() >= 2) {
    plan.sourceName = read.text(document, "source", "plan");
    plan.root = static_cast<int32_t>(read.integer(document, "root", "plan", -1, kMaxIndex));
  } else if (hasRoot(plan.collective)) {
    read.fail("a version-1 plan has no root, which a " + std::string(collectiveName(plan.collective)) +
              " needs: recompile the algorithm (tuccl-compile -o) to get a version-" + std::to_string(kPlanFormatVersion) +
              " plan");
  }
  const json& buffers = read.field(document, "buffers", "plan");
  plan.bufferChunks = {read.index(buffers, "input", "plan.buffers"), read.index(buffers, "output", "plan.buffers"),
                       read.index(buffers, "scratch", "plan.buffers")};
  plan.inPlace = read.boolean(document, "inPlace", "plan");
  plan.config = readConfig(read, read.field(document, "config", "plan"));
  plan.scheduler = read.name(document, "scheduler", "plan", parseScheduler, "hpds, rr, algorithm-level or stage-level");
  plan.executionLevel = read.name(document, "executionLevel", "plan", parseExecutionLevel, "task, stage or algorithm");
  plan.tbAllocation = read.name(document, "tbAllocation", "plan", parseTbPolicy, "connection-based, state-based or single");
  plan.subPipelines = read.index(document, "subPipelines", "plan");
  if (read.version() >= 3) {
    plan.ranks = readRolledRanks(read, document, limits);
    return plan;
  }
  const json& ranks = read.array(document, "ranks", "plan");
  for (size_t r = 0; r < ranks.size(); ++r) plan.ranks.push_back(readRank(read, ranks[r], "plan.ranks[" + std::to_string(r) + "]"));
  return plan;
}

// "versions 1 and 2".
std::string supportedVersions() {
  std::string text = "versions " + std::to_string(kOldestPlanFormatVersion);
  for (int v = kOldestPlanFormatVersion + 1; v <= kPlanFormatVersion; ++v) {
    text += (v == kPlanFormatVersion ? " and " : ", ") + std::to_string(v);
  }
  return text;
}

// The version of a "tuccl-plan" document this build reads.
int64_t readVersion(const SourceText& source, const json& document) {
  const Reader read(source, 0);
  if (!document.is_object() || !document.contains("format") || !document["format"].is_string() ||
      document["format"].get<std::string>() != "tuccl-plan") {
    read.fail("not a TuCCL plan (\"format\" must be \"tuccl-plan\")");
  }
  const int64_t version = read.integer(document, "version", "plan", 0, INT32_MAX);
  if (version < kOldestPlanFormatVersion || version > kPlanFormatVersion) {
    read.fail("plan format version " + std::to_string(version) + " is not supported (this build reads " +
              supportedVersions() + ")");
  }
  return version;
}

}  // namespace

namespace {

// The document without its ranks (an empty "ranks" array; version 3 also an empty "templates").
json planHeaderJson(const Plan& plan, int version) {
  json config{{"protocol", protocolName(plan.config.protocol)},
              {"nThreads", plan.config.nThreads},
              {"chunkSize", plan.config.chunkSize},
              {"nChannels", plan.config.nChannels}};
  if (plan.config.sendAhead > 0) config["sendAhead"] = plan.config.sendAhead;  // absent: rendezvous
  json document{
      {"format", "tuccl-plan"},
      {"version", version},
      {"collective", collectiveName(plan.collective)},
      {"algorithm", plan.algorithm},
      {"source", plan.sourceName},
      {"nRanks", plan.nRanks},
      {"root", plan.root},
      {"buffers",
       json{{"input", plan.bufferChunks[0]}, {"output", plan.bufferChunks[1]}, {"scratch", plan.bufferChunks[2]}}},
      {"inPlace", plan.inPlace},
      {"config", std::move(config)},
      {"scheduler", schedulerName(plan.scheduler)},
      {"executionLevel", executionLevelName(plan.executionLevel)},
      {"tbAllocation", tbPolicyName(plan.tbAllocation)},
      {"subPipelines", plan.subPipelines},
      {"ranks", json::array()},
  };
  if (version >= 3) document["templates"] = json::array();
  return document;
}

// Version 2: each rank as dump(1) nests it, indented by two spaces.
void writePlainRanks(std::ostream& out, const Plan& plan) {
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    std::string text = rankJson(plan.ranks[r]).dump(1);
    out << (r == 0 ? "\n  " : ",\n  ");
    size_t start = 0;
    for (size_t newline; (newline = text.find('\n', start)) != std::string::npos; start = newline + 1) {
      out << std::string_view(text).substr(start, newline + 1 - start) << "  ";
    }
    out << std::string_view(text).substr(start);
  }
}

// Version 3, written directly (no JSON tree): a template integer.
void writeRankValue(std::ostream& out, const RankValue& value) {
  switch (value.form) {
    case RankValue::Form::Literal:
      out << value.b;
      return;
    case RankValue::Form::RankAffine:
      out << "{\"a\": " << value.a << ", \"b\": " << value.b;
      if (value.m > 0) out << ", \"m\": " << value.m;
      out << '}';
      return;
    case RankValue::Form::PerRank:
      out << "{\"perRank\": " << value.slot << '}';
      return;
  }
}

void writeDepValues(std::ostream& out, const std::vector<RankValue>& values, size_t named) {
  out << '[';
  for (size_t f = named; f < values.size(); f += 2) {
    out << (f == named ? "[" : ", [");
    writeRankValue(out, values[f]);
    out << ", ";
    writeRankValue(out, values[f + 1]);
    out << ']';
  }
  out << ']';
}

// A run's "stride" or "modulo": the fields that are not literally 0 (left out when none is).
void writeSteps(std::ostream& out, const char* key, const std::vector<RankValue>& values, int named) {
  const RankValue zero = RankValue::literal(0);
  const bool depsZero = std::all_of(values.begin() + named, values.end(), [&](const RankValue& v) { return v == zero; });
  bool first = true;
  for (int f = 0; f < named; ++f) {
    if (values[f] == zero) continue;
    out << (first ? std::string(", \"") + key + "\": {\"" : std::string(", \"")) << entryFieldName(f) << "\": ";
    writeRankValue(out, values[f]);
    first = false;
  }
  if (!depsZero) {
    out << (first ? std::string(", \"") + key + "\": {\"" : std::string(", \"")) << "deps\": ";
    writeDepValues(out, values, named);
    first = false;
  }
  if (!first) out << '}';
}

void writeRun(std::ostream& out, const RolledRun& run) {
  out << '{';
  if (run.repeat > 1) out << "\"repeat\": " << run.repeat << ", ";
  out << "\"entry\": {\"kind\": \"" << primitiveName(run.shape.kind) << '"';
  const int named = namedFields(run.shape.kind);
  for (int f = 0; f < named; ++f) {
    out << ", \"" << entryFieldName(f) << "\": ";
    writeRankValue(out, run.base[f]);
    if (f == static_cast<int>(EntryField::Peer)) out << ", \"srcBuffer\": \"" << bufferName(run.shape.srcBuffer) << '"';
    if (f == static_cast<int>(EntryField::SrcIndex)) {
      out << ", \"dstBuffer\": \"" << bufferName(run.shape.dstBuffer) << '"';
    }
    if (f == static_cast<int>(EntryField::NextPeer)) {
      out << ", \"nextDstBuffer\": \"" << bufferName(run.shape.nextDstBuffer) << '"';
    }
  }
  out << ", \"deps\": ";
  writeDepValues(out, run.base, named);
  out << ", \"hasDependents\": " << (run.shape.hasDependents ? "true" : "false") << '}';
  if (run.repeat > 1) {
    writeSteps(out, "stride", run.stride, named);
    writeSteps(out, "modulo", run.modulo, named);
  }
  out << '}';
}

void writeTemplates(std::ostream& out, const RolledPlan& rolled) {
  for (size_t t = 0; t < rolled.templates.size(); ++t) {
    const RankTemplate& tmpl = rolled.templates[t];
    out << (t == 0 ? "\n  " : ",\n  ") << "{\"perRankValues\": " << tmpl.perRankValues << ", \"tbs\": [";
    for (size_t b = 0; b < tmpl.tbs.size(); ++b) {
      const RolledTb& tb = tmpl.tbs[b];
      out << (b == 0 ? "\n   " : ",\n   ") << "{\"id\": ";
      writeRankValue(out, tb.id);
      out << ", \"sendPeer\": ";
      writeRankValue(out, tb.sendPeer);
      out << ", \"recvPeer\": ";
      writeRankValue(out, tb.recvPeer);
      out << ", \"runs\": [";
      for (size_t r = 0; r < tb.runs.size(); ++r) {
        out << (r == 0 ? "\n    " : ",\n    ");
        writeRun(out, tb.runs[r]);
      }
      out << (tb.runs.empty() ? "]}" : "\n   ]}");
    }
    out << (tmpl.tbs.empty() ? "]}" : "\n  ]}");
  }
}

void writeRolledRanks(std::ostream& out, const RolledPlan& rolled) {
  for (size_t r = 0; r < rolled.ranks.size(); ++r) {
    const RolledRank& rank = rolled.ranks[r];
    out << (r == 0 ? "\n  " : ",\n  ") << "{\"rank\": " << rank.rank << ", \"template\": " << rank.templateIndex
        << ", \"values\": [";
    for (size_t v = 0; v < rank.values.size(); ++v) out << (v == 0 ? "" : ", ") << rank.values[v];
    out << "]}";
  }
}

// Splices `write` into the empty array `key` of the header text (dump(1): at indentation 1).
void spliceArray(std::ostream& out, std::string_view header, size_t& written, std::string_view key, bool empty,
                 const std::function<void()>& write) {
  const std::string placeholder = "\n \"" + std::string(key) + "\": []";
  const size_t at = header.find(placeholder, written);
  if (at == std::string_view::npos) throw std::logic_error("plan header lacks \"" + std::string(key) + "\"");
  out << header.substr(written, at + placeholder.size() - 1 - written);
  written = at + placeholder.size() - 1;
  if (empty) return;
  write();
  out << "\n ";
}

}  // namespace

void writePlanJson(std::ostream& out, const Plan& plan, int version) {
  if (version < kOldestWrittenPlanFormatVersion || version > kPlanFormatVersion) {
    throw std::invalid_argument("writePlanJson writes plan format versions " +
                                std::to_string(kOldestWrittenPlanFormatVersion) + " to " +
                                std::to_string(kPlanFormatVersion) + ", not " + std::to_string(version));
  }
  if (version < 4 && hasFusedEntries(plan)) {
    // Older formats have no fused primitives: the same transfers, each receive then its send.
    writePlanJson(out, unfusedPlan(plan), version);
    return;
  }
  const std::string header = planHeaderJson(plan, version).dump(1);
  size_t written = 0;
  if (version == 2) {
    spliceArray(out, header, written, "ranks", plan.ranks.empty(), [&] { writePlainRanks(out, plan); });
  } else {
    const RolledPlan rolled = rollPlan(plan);
    // "ranks" sorts before "templates".
    spliceArray(out, header, written, "ranks", rolled.ranks.empty(), [&] { writeRolledRanks(out, rolled); });
    spliceArray(out, header, written, "templates", rolled.templates.empty(), [&] { writeTemplates(out, rolled); });
  }
  out << std::string_view(header).substr(written) << "\n";
}

std::string writePlanJson(const Plan& plan, int version) {
  std::ostringstream out;
  writePlanJson(out, plan, version);
  return std::move(out).str();
}

Expected<Plan> readPlanJson(const SourceText& source, const PlanReadLimits& limits) {
  Expected<json> parsed = parseJsonText(source);
  if (!parsed) return parsed.status();
  const json& document = *parsed;
  Plan plan;
  try {
    plan = readDocument(Reader(source, readVersion(source, document)), document, limits);
  } catch (const FormatError& error) {
    return error.status;
  }
  if (Status status = validatePlan(plan); !status) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, "invalid plan: " + status.message());
  }
  return plan;
}

}  // namespace tuccl
