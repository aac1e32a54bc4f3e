// Plan JSON: writer, reader and structural validation (docs/plan-format.md).
#include "scheduler/plan.h"

#include <map>
#include <set>
#include <algorithm>

#include <nlohmann/json.hpp>

namespace tuccl {

using nlohmann::json;

std::string_view primitiveName(PrimitiveKind kind) {
  switch (kind) {
    case PrimitiveKind::Send:
      return "send";
    case PrimitiveKind::Recv:
      return "recv";
    case PrimitiveKind::RecvReduceCopy:
      return "recvReduceCopy";
    case PrimitiveKind::Copy:
      return "copy";
    case PrimitiveKind::Reduce:
      return "reduce";
  }
  return "?";
}

std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name) {
  for (auto kind : {PrimitiveKind::Send, PrimitiveKind::Recv, PrimitiveKind::RecvReduceCopy, PrimitiveKind::Copy,
                    PrimitiveKind::Reduce}) {
    if (primitiveName(kind) == name) return kind;
  }
  return std::nullopt;
}

namespace {

std::optional<BufferKind> parseBuffer(std::string_view name) {
  for (auto buffer : {BufferKind::Input, BufferKind::Output, BufferKind::Scratch}) {
    if (bufferName(buffer) == name) return buffer;
  }
  return std::nullopt;
}

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
              {"deps", std::move(deps)},
              {"hasDependents", entry.hasDependents}};
}

[[noreturn]] void fail(const SourceText& source, const std::string& message, SourceLoc loc = {}) {
  throw DiagnosticError(Diagnostic{Severity::Error, source.name(), loc, message});
}

// Typed field access with a message naming the JSON path.
class Reader {
 public:
  explicit Reader(const SourceText& source) : source_(source) {}

  const json& field(const json& object, const char* key, const std::string& path) const {
    if (!object.is_object()) fail(source_, path + " is not an object");
    auto it = object.find(key);
    if (it == object.end()) fail(source_, path + " has no \"" + key + "\"");
    return *it;
  }
  int64_t integer(const json& object, const char* key, const std::string& path, int64_t low, int64_t high) const {
    const json& value = field(object, key, path);
    if (!value.is_number_integer()) fail(source_, path + "." + key + " is not an integer");
    const auto number = value.get<int64_t>();
    if (number < low || number > high) {
      fail(source_, path + "." + key + " = " + std::to_string(number) + " is out of range [" + std::to_string(low) + ", " +
                        std::to_string(high) + "]");
    }
    return number;
  }
  std::string text(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_string()) fail(source_, path + "." + key + " is not a string");
    return value.get<std::string>();
  }
  bool boolean(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_boolean()) fail(source_, path + "." + key + " is not a boolean");
    return value.get<bool>();
  }
  const json& array(const json& object, const char* key, const std::string& path) const {
    const json& value = field(object, key, path);
    if (!value.is_array()) fail(source_, path + "." + key + " is not an array");
    return value;
  }
  BufferKind buffer(const json& object, const char* key, const std::string& path) const {
    auto buffer = parseBuffer(text(object, key, path));
    if (!buffer) fail(source_, path + "." + key + " is not input, output or scratch");
    return *buffer;
  }

 private:
  const SourceText& source_;
};

}  // namespace

std::string writePlanJson(const Plan& plan) {
  json ranks = json::array();
  for (const PlanRank& rank : plan.ranks) {
    json tbs = json::array();
    for (const PlanTb& tb : rank.tbs) {
      json entries = json::array();
      for (const PlanEntry& entry : tb.entries) entries.push_back(entryJson(entry));
      tbs.push_back(json{{"id", tb.id}, {"sendPeer", tb.sendPeer}, {"recvPeer", tb.recvPeer}, {"entries", std::move(entries)}});
    }
    ranks.push_back(json{{"rank", rank.rank}, {"tbs", std::move(tbs)}});
  }
  json document{
      {"format", "tuccl-plan"},
      {"version", kPlanFormatVersion},
      {"collective", plan.collective},
      {"algorithm", plan.algorithm},
      {"nRanks", plan.nRanks},
      {"root", plan.root},
      {"buffers",
       json{{"input", plan.bufferChunks[0]}, {"output", plan.bufferChunks[1]}, {"scratch", plan.bufferChunks[2]}}},
      {"inPlace", plan.inPlace},
      {"config", json{{"protocol", plan.config.protocol},
                      {"nThreads", plan.config.nThreads},
                      {"chunkSize", plan.config.chunkSize},
                      {"nChannels", plan.config.nChannels}}},
      {"scheduler", plan.scheduler},
      {"executionLevel", plan.executionLevel},
      {"tbAllocation", plan.tbAllocation},
      {"subPipelines", plan.subPipelines},
      {"ranks", std::move(ranks)},
  };
  return document.dump(1) + "\n";
}

Plan readPlanJson(const SourceText& source) {
  json document;
  try {
    document = json::parse(source.text());
  } catch (const json::parse_error& error) {
    const size_t offset = error.byte > 0 ? error.byte - 1 : 0;
    fail(source, std::string("not valid JSON: ") + error.what(), source.locationOf(std::min(offset, source.text().size())));
  }
  const Reader read(source);
  if (!document.is_object() || read.text(document, "format", "plan") != "tuccl-plan") {
    fail(source, "not a TuCCL plan (\"format\" must be \"tuccl-plan\")");
  }
  const int64_t version = read.integer(document, "version", "plan", 0, INT32_MAX);
  if (version != kPlanFormatVersion) {
    fail(source, "plan format version " + std::to_string(version) + " is not supported (this build reads version " +
                     std::to_string(kPlanFormatVersion) + ")");
  }
  constexpr int64_t kMax = INT32_MAX;
  Plan plan;
  plan.collective = read.text(document, "collective", "plan");
  if (!parseCollective(plan.collective)) fail(source, "plan.collective \"" + plan.collective + "\" is unknown");
  plan.algorithm = read.text(document, "algorithm", "plan");
  plan.nRanks = static_cast<int32_t>(read.integer(document, "nRanks", "plan", 1, (1 << 22) - 1));
  // Plans written before "root" existed have none (-1); validatePlan checks it fits the collective.
  if (document.contains("root")) plan.root = static_cast<int32_t>(read.integer(document, "root", "plan", -1, kMax));
  const json& buffers = read.field(document, "buffers", "plan");
  plan.bufferChunks = {static_cast<int32_t>(read.integer(buffers, "input", "plan.buffers", 0, kMax)),
                       static_cast<int32_t>(read.integer(buffers, "output", "plan.buffers", 0, kMax)),
                       static_cast<int32_t>(read.integer(buffers, "scratch", "plan.buffers", 0, kMax))};
  plan.inPlace = read.boolean(document, "inPlace", "plan");
  const json& config = read.field(document, "config", "plan");
  plan.config.protocol = read.text(config, "protocol", "plan.config");
  if (plan.config.protocol != "Simple" && plan.config.protocol != "LL" && plan.config.protocol != "LL128") {
    fail(source, "plan.config.protocol must be Simple, LL or LL128");
  }
  plan.config.nThreads = static_cast<int32_t>(read.integer(config, "nThreads", "plan.config", 1, 1024));
  plan.config.chunkSize = read.integer(config, "chunkSize", "plan.config", 1, INT64_MAX);
  plan.config.nChannels = static_cast<int32_t>(read.integer(config, "nChannels", "plan.config", 1, kMax));
  plan.scheduler = read.text(document, "scheduler", "plan");
  plan.executionLevel = read.text(document, "executionLevel", "plan");
  plan.tbAllocation = read.text(document, "tbAllocation", "plan");
  plan.subPipelines = static_cast<int32_t>(read.integer(document, "subPipelines", "plan", 0, kMax));
  const json& ranks = read.array(document, "ranks", "plan");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string rankPath = "plan.ranks[" + std::to_string(r) + "]";
    PlanRank rank;
    rank.rank = static_cast<int32_t>(read.integer(ranks[r], "rank", rankPath, 0, kMax));
    const json& tbs = read.array(ranks[r], "tbs", rankPath);
    for (size_t b = 0; b < tbs.size(); ++b) {
      const std::string tbPath = rankPath + ".tbs[" + std::to_string(b) + "]";
      PlanTb tb;
      tb.id = static_cast<int32_t>(read.integer(tbs[b], "id", tbPath, 0, kMax));
      tb.sendPeer = static_cast<int32_t>(read.integer(tbs[b], "sendPeer", tbPath, -2, kMax));
      tb.recvPeer = static_cast<int32_t>(read.integer(tbs[b], "recvPeer", tbPath, -2, kMax));
      const json& entries = read.array(tbs[b], "entries", tbPath);
      for (size_t e = 0; e < entries.size(); ++e) {
        const std::string path = tbPath + ".entries[" + std::to_string(e) + "]";
        const json& object = entries[e];
        PlanEntry entry;
        auto kind = parsePrimitiveKind(read.text(object, "kind", path));
        if (!kind) fail(source, path + ".kind must be send, recv, recvReduceCopy, copy or reduce");
        entry.kind = *kind;
        entry.peer = static_cast<int32_t>(read.integer(object, "peer", path, 0, kMax));
        entry.srcBuffer = read.buffer(object, "srcBuffer", path);
        entry.srcIndex = static_cast<int32_t>(read.integer(object, "srcIndex", path, 0, kMax));
        entry.dstBuffer = read.buffer(object, "dstBuffer", path);
        entry.dstIndex = static_cast<int32_t>(read.integer(object, "dstIndex", path, 0, kMax));
        entry.count = static_cast<int32_t>(read.integer(object, "count", path, 1, kMax));
        entry.step = static_cast<int32_t>(read.integer(object, "step", path, 0, kMax));
        entry.op = static_cast<int32_t>(read.integer(object, "op", path, 0, kMax));
        entry.subPipeline = static_cast<int32_t>(read.integer(object, "subPipeline", path, 0, kMax));
        entry.hasDependents = read.boolean(object, "hasDependents", path);
        const json& deps = read.array(object, "deps", path);
        for (const json& dep : deps) {
          if (!dep.is_array() || dep.size() != 2 || !dep[0].is_number_integer() || !dep[1].is_number_integer()) {
            fail(source, path + ".deps holds something other than [tb, entry] pairs");
          }
          const auto tbIndex = dep[0].get<int64_t>();
          const auto entryIndex = dep[1].get<int64_t>();
          if (tbIndex < 0 || tbIndex > kMax || entryIndex < 0 || entryIndex > kMax) fail(source, path + ".deps index out of range");
          entry.deps.push_back(EntryRef{static_cast<int32_t>(tbIndex), static_cast<int32_t>(entryIndex)});
        }
        tb.entries.push_back(std::move(entry));
      }
      rank.tbs.push_back(std::move(tb));
    }
    plan.ranks.push_back(std::move(rank));
  }
  if (auto problem = validatePlan(plan)) fail(source, "invalid plan: " + *problem);
  return plan;
}

std::optional<std::string> validatePlan(const Plan& plan) {
  auto where = [](int32_t rank, int32_t tb, size_t entry) {
    return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + " entry " + std::to_string(entry);
  };
  if (static_cast<int64_t>(plan.ranks.size()) != plan.nRanks) return "the plan lists " + std::to_string(plan.ranks.size()) + " ranks, not nRanks";
  if (auto kind = parseCollective(plan.collective); kind && hasRoot(*kind) && (plan.root < 0 || plan.root >= plan.nRanks)) {
    return "root " + std::to_string(plan.root) + " is not a rank of the " + plan.collective + " plan";
  }
  // Per directed connection (from, to): the sends of `from` and the receives of `to`. Entries of
  // one connection may sit in several TBs (channels); the k-th send pairs with the k-th receive
  // in (subPipeline, op) order, the order lowering emits them in (docs/plan-format.md).
  using Key = std::pair<int32_t, int32_t>;  // subPipeline, op
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<Key, const PlanEntry*>>> sends;
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<Key, const PlanEntry*>>> recvs;
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    const PlanRank& rank = plan.ranks[r];
    if (rank.rank != r) return "ranks are not listed in order at index " + std::to_string(r);
    std::vector<std::vector<bool>> depended(rank.tbs.size());
    for (size_t b = 0; b < rank.tbs.size(); ++b) depended[b].assign(rank.tbs[b].entries.size(), false);
    for (size_t b = 0; b < rank.tbs.size(); ++b) {
      const PlanTb& tb = rank.tbs[b];
      if (tb.id != static_cast<int32_t>(b)) return "rank " + std::to_string(r) + ": tb ids are not 0, 1, ...";
      for (size_t e = 0; e < tb.entries.size(); ++e) {
        const PlanEntry& entry = tb.entries[e];
        if (entry.peer >= plan.nRanks) return where(r, tb.id, e) + ": peer out of range";
        const bool local = entry.kind == PrimitiveKind::Copy || entry.kind == PrimitiveKind::Reduce;
        if (local != (entry.peer == r)) return where(r, tb.id, e) + ": a local primitive must name its own rank, a remote one another";
        if (int64_t{entry.srcIndex} + entry.count > plan.bufferChunks[static_cast<int>(entry.srcBuffer)] ||
            int64_t{entry.dstIndex} + entry.count > plan.bufferChunks[static_cast<int>(entry.dstBuffer)]) {
          return where(r, tb.id, e) + ": chunks out of the buffer";
        }
        if (entry.subPipeline >= plan.subPipelines) return where(r, tb.id, e) + ": subPipeline out of range";
        for (const EntryRef& dep : entry.deps) {
          if (dep.tb < 0 || static_cast<size_t>(dep.tb) >= rank.tbs.size() || dep.entry < 0 ||
              static_cast<size_t>(dep.entry) >= rank.tbs[dep.tb].entries.size()) {
            return where(r, tb.id, e) + ": dependency [" + std::to_string(dep.tb) + ", " + std::to_string(dep.entry) + "] does not exist";
          }
          if (dep.tb == tb.id && static_cast<size_t>(dep.entry) >= e) return where(r, tb.id, e) + ": depends on itself or a later entry of its TB";
          depended[dep.tb][dep.entry] = true;
        }
        const Key key{entry.subPipeline, entry.op};
        if (entry.kind == PrimitiveKind::Send) sends[{r, entry.peer}].emplace_back(key, &entry);
        if (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy) recvs[{entry.peer, r}].emplace_back(key, &entry);
      }
    }
    for (size_t b = 0; b < rank.tbs.size(); ++b) {
      for (size_t e = 0; e < rank.tbs[b].entries.size(); ++e) {
        if (rank.tbs[b].entries[e].hasDependents != depended[b][e]) return where(r, static_cast<int32_t>(b), e) + ": hasDependents is wrong";
      }
    }
  }
  for (auto& [connection, list] : sends) {
    auto it = recvs.find(connection);
    auto name = "connection " + std::to_string(connection.first) + " -> " + std::to_string(connection.second);
    if (it == recvs.end() || it->second.size() != list.size()) return name + ": sends and receives do not pair up";
    auto& other = it->second;
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::sort(other.begin(), other.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < list.size(); ++i) {
      const PlanEntry& s = *list[i].second;
      const PlanEntry& v = *other[i].second;
      if (s.op != v.op || s.count != v.count || s.srcBuffer != v.srcBuffer || s.srcIndex != v.srcIndex || s.dstBuffer != v.dstBuffer ||
          s.dstIndex != v.dstIndex || s.subPipeline != v.subPipeline) {
        return name + ": send " + std::to_string(i) + " (op " + std::to_string(s.op) + ") does not match receive " + std::to_string(i) +
               " (op " + std::to_string(v.op) + ")";
      }
    }
  }
  for (const auto& [connection, list] : recvs) {
    if (!sends.contains(connection)) return "connection " + std::to_string(connection.first) + " -> " + std::to_string(connection.second) + ": receives without sends";
  }
  return checkPlanDeadlockFree(plan);
}

}  // namespace tuccl
