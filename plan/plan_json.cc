// Plan JSON: the deterministic writer and the checked reader (plan_json.h, docs/plan-format.md).
#include "plan/plan_json.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

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
    const json& value = field(object, key, path);
    if (!value.is_number_integer()) fail(path + "." + key + " is not an integer");
    // Unsigned values beyond INT64_MAX are out of every range here.
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(path + "." + key + " is out of range [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    const auto number = value.get<int64_t>();
    if (number < low || number > high) {
      fail(path + "." + key + " = " + std::to_string(number) + " is out of range [" + std::to_string(low) + ", " +
           std::to_string(high) + "]");
    }
    return number;
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

PlanConfig readConfig(const Reader& read, const json& config) {
  PlanConfig result;
  result.protocol = read.name(config, "protocol", "plan.config", parseProtocol, "Simple, LL or LL128");
  result.nThreads = static_cast<int32_t>(read.integer(config, "nThreads", "plan.config", 1, 1024));
  result.chunkSize = read.integer(config, "chunkSize", "plan.config", 1, INT64_MAX);
  result.nChannels = read.index(config, "nChannels", "plan.config", 1);
  if (config.contains("sendAhead")) result.sendAhead = read.index(config, "sendAhead", "plan.config");
  return result;
}

Plan readDocument(const Reader& read, const json& document) {
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

// The document without its ranks (an empty "ranks" array).
json planHeaderJson(const Plan& plan) {
  json config{{"protocol", protocolName(plan.config.protocol)},
              {"nThreads", plan.config.nThreads},
              {"chunkSize", plan.config.chunkSize},
              {"nChannels", plan.config.nChannels}};
  if (plan.config.sendAhead > 0) config["sendAhead"] = plan.config.sendAhead;  // absent: rendezvous
  json document{
      {"format", "tuccl-plan"},
      {"version", kPlanFormatVersion},
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
  return document;
}

}  // namespace

std::string writePlanJson(const Plan& plan) {
  json document = planHeaderJson(plan);
  json& ranks = document["ranks"];
  for (const PlanRank& rank : plan.ranks) ranks.push_back(rankJson(rank));
  return document.dump(1) + "\n";
}

void writePlanJson(std::ostream& out, const Plan& plan) {
  const std::string header = planHeaderJson(plan).dump(1);
  constexpr std::string_view kRanks = "\n \"ranks\": []";
  const size_t at = header.find(kRanks);
  if (plan.ranks.empty() || at == std::string::npos) {
    out << header << "\n";
    return;
  }
  // Splice the ranks in as dump(1) nests them: each rank object indented by two spaces.
  out << std::string_view(header).substr(0, at + kRanks.size() - 1);
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    std::string text = rankJson(plan.ranks[r]).dump(1);
    out << (r == 0 ? "\n  " : ",\n  ");
    size_t start = 0;
    for (size_t newline; (newline = text.find('\n', start)) != std::string::npos; start = newline + 1) {
      out << std::string_view(text).substr(start, newline + 1 - start) << "  ";
    }
    out << std::string_view(text).substr(start);
  }
  out << "\n ]" << std::string_view(header).substr(at + kRanks.size()) << "\n";
}

Expected<Plan> readPlanJson(const SourceText& source) {
  Expected<json> parsed = parseJsonText(source);
  if (!parsed) return parsed.status();
  const json& document = *parsed;
  Plan plan;
  try {
    plan = readDocument(Reader(source, readVersion(source, document)), document);
  } catch (const FormatError& error) {
    return error.status;
  }
  if (Status status = validatePlan(plan); !status) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, "invalid plan: " + status.message());
  }
  return plan;
}

}  // namespace tuccl
