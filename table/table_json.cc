// JSON tables, schema version 1 (docs/tuning-table.md). Unknown keys are errors, so a typo is
// reported instead of silently ignored.
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "support/text_values.h"
#include "table/table_io.h"
#include "table/tuner_constants.h"

namespace tuccl {
namespace {

// Read in file order too: the metadata and the constants are written back in the order read.
using Json = nlohmann::ordered_json;
using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kFormatName = "tuccl-tuning-table";

/// A semantic error at a JSON path; caught at the reader's boundary.
struct JsonSchemaError {
  std::string path;
  std::string message;
};

[[noreturn]] void fail(const std::string& path, std::string message) {
  throw JsonSchemaError{path, std::move(message)};
}

std::string describe(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

int64_t readInt(const Json& value, const std::string& path) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    double d = value.get<double>();
    // Whole and in range; compared through int64_t rather than std::floor, which Clang calls in
    // libm (the plugin needs nothing beyond libc).
    if (std::fabs(d) < 9.0e15 && static_cast<double>(static_cast<int64_t>(d)) == d)
      return static_cast<int64_t>(d);
  }
  fail(path, "expected an integer, got " + describe(value));
}

int32_t readIntIn(const Json& value, const std::string& path, int64_t lo, int64_t hi, bool allowAny) {
  int64_t v = readInt(value, path);
  if (allowAny && v == -1) return -1;
  if (v < lo || v > hi) {
    fail(path, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "]" + (allowAny ? " (or -1 for any)" : ""));
  }
  return static_cast<int32_t>(v);
}

uint64_t readBytes(const Json& value, const std::string& path) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) fail(path, "a byte size cannot be negative: " + describe(value));
  if (value.is_string()) {
    if (auto bytes = parseByteSize(value.get<std::string>())) return *bytes;
    fail(path, "expected a byte size such as 65536, \"64K\" or \"1M\", got " + describe(value));
  }
  fail(path, "expected a byte size (a number or a string such as \"1M\"), got " + describe(value));
}

std::string readString(const Json& value, const std::string& path) {
  if (!value.is_string()) fail(path, "expected a string, got " + describe(value));
  return value.get<std::string>();
}

void checkKeys(const Json& object, const std::string& path, std::initializer_list<std::string_view> allowed) {
  if (!object.is_object()) fail(path, "expected an object, got " + describe(object));
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) fail(path + "." + key, "unknown key \"" + key + "\"");
  }
}

bool isAny(std::string_view text) { return text == "-1" || equalsIgnoreCase(text, "any"); }

Choice readChoice(const Json& object, const std::string& path) {
  Choice choice;
  if (auto it = object.find("algorithm"); it != object.end()) {
    const std::string text = readString(*it, path + ".algorithm");
    auto algorithm = parseNcclAlgorithm(text);
    if (!algorithm && !isAny(text)) {
      fail(path + ".algorithm",
           "unknown algorithm " + describe(*it) +
               " (expected tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat "
               "or any)");
    }
    choice.algorithm = algorithm;
  }
  if (auto it = object.find("protocol"); it != object.end()) {
    const std::string text = readString(*it, path + ".protocol");
    auto protocol = parseProtocol(text);
    if (!protocol && !isAny(text))
      fail(path + ".protocol", "unknown protocol " + describe(*it) + " (expected ll, ll128, simple or any)");
    choice.protocol = protocol;
  }
  return choice;
}

void readKeyCommon(const Json& object, const std::string& path, int32_t& nNodes, int32_t& nRanks,
                   std::string& topology) {
  if (auto it = object.find("nNodes"); it != object.end())
    nNodes = readIntIn(*it, path + ".nNodes", 1, INT32_MAX, true);
  if (auto it = object.find("nRanks"); it != object.end())
    nRanks = readIntIn(*it, path + ".nRanks", 1, INT32_MAX, true);
  if (nNodes > 0 && nRanks > 0 && nRanks < nNodes) {
    fail(path + ".nRanks",
         "nRanks " + std::to_string(nRanks) + " is smaller than nNodes " + std::to_string(nNodes));
  }
  if (auto it = object.find("topology"); it != object.end()) {
    topology = readString(*it, path + ".topology");
    if (topology == "any" || topology == "*") topology.clear();
  }
}

// What an entry and each of its configuration groups set besides the choice.
/// A non-negative finite number at `path`.
double readNonNegative(const Json& value, const std::string& path, const char* what) {
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0)
    fail(path, std::string("expected a non-negative number") + what + ", got " + describe(value));
  return value.get<double>();
}

/// "lowUs", "highUs", "samples": the evidence of a profiled time (TimeInterval).
void readInterval(const Json& object, const std::string& path, double timeUs, TimeInterval& interval) {
  if (auto it = object.find("lowUs"); it != object.end())
    interval.lowUs = readNonNegative(*it, path + ".lowUs", " of microseconds");
  if (auto it = object.find("highUs"); it != object.end())
    interval.highUs = readNonNegative(*it, path + ".highUs", " of microseconds");
  if (auto it = object.find("samples"); it != object.end())
    interval.samples = readIntIn(*it, path + ".samples", 1, INT32_MAX, false);
  const bool any = interval.lowUs >= 0 || interval.highUs >= 0 || interval.samples > 0;
  if (any && timeUs < 0) fail(path, "lowUs, highUs and samples describe a \"timeUs\", which is missing");
  if (interval.lowUs >= 0 && interval.lowUs > timeUs)
    fail(path + ".lowUs", "the interval's low end " + describe(object.at("lowUs")) + " is above timeUs");
  if (interval.highUs >= 0 && interval.highUs < timeUs)
    fail(path + ".highUs", "the interval's high end " + describe(object.at("highUs")) + " is below timeUs");
}

/// "versusDefault": {"ratio", "low", "high", "pairs", "won", "versus"}.
DefaultComparison readDefaultComparison(const Json& object, const std::string& path) {
  if (!object.is_object()) fail(path, "expected an object {\"ratio\", \"low\", \"high\", \"pairs\", \"won\"}");
  checkKeys(object, path, {"ratio", "low", "high", "pairs", "won", "versus"});
  DefaultComparison c;
  auto ratio = object.find("ratio");
  if (ratio == object.end()) fail(path, "missing \"ratio\"");
  c.ratio = readNonNegative(*ratio, path + ".ratio", "");
  if (!(c.ratio > 0)) fail(path + ".ratio", "a time ratio must be positive");
  if (auto it = object.find("low"); it != object.end()) c.low = readNonNegative(*it, path + ".low", "");
  if (auto it = object.find("high"); it != object.end()) c.high = readNonNegative(*it, path + ".high", "");
  if (c.low >= 0 && c.low > c.ratio) fail(path + ".low", "the interval's low end is above the ratio");
  if (c.high >= 0 && c.high < c.ratio) fail(path + ".high", "the interval's high end is below the ratio");
  if (auto it = object.find("pairs"); it != object.end()) c.pairs = readIntIn(*it, path + ".pairs", 1, INT32_MAX, false);
  if (auto it = object.find("won"); it != object.end()) c.won = readIntIn(*it, path + ".won", 0, INT32_MAX, false);
  if (c.won > c.pairs) fail(path + ".won", "more pairs won than \"pairs\"");
  if (auto it = object.find("versus"); it != object.end()) c.versus = readString(*it, path + ".versus");
  return c;
}

void readGroupSettings(const Json& object, const std::string& path, int32_t& nChannels, uint64_t& chunkSize,
                       std::string& tucclAlgorithm, double& timeUs) {
  if (auto it = object.find("nChannels"); it != object.end()) {
    int64_t channels = readInt(*it, path + ".nChannels");
    if (channels != -1 && channels != 0) nChannels = readIntIn(*it, path + ".nChannels", 1, kMaxChannels, false);
  }
  if (auto it = object.find("chunkSize"); it != object.end()) {
    chunkSize = readBytes(*it, path + ".chunkSize");
    if (chunkSize == 0) fail(path + ".chunkSize", "the chunk size must be positive (omit it to keep NCCL's)");
  }
  if (auto it = object.find("tucclAlgorithm"); it != object.end()) {
    tucclAlgorithm = readString(*it, path + ".tucclAlgorithm");
    if (tucclAlgorithm.empty())
      fail(path + ".tucclAlgorithm", "expected a built-in algorithm name or a ResCCLang file, got \"\"");
  }
  if (auto it = object.find("timeUs"); it != object.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      fail(path + ".timeUs", "expected a non-negative number of microseconds, got " + describe(*it));
    timeUs = it->get<double>();
  }
}

TableEntry readEntry(const Json& object, const std::string& path, uint32_t index) {
  checkKeys(object, path,
            {"collective", "minBytes", "maxBytes", "nNodes", "nRanks", "topology", "numPipeOps", "regBuff",
             "algorithm", "protocol", "fallback", "nChannels", "chunkSize", "tucclAlgorithm", "timeUs", "lowUs",
             "highUs", "samples", "default", "versusDefault", "groups", "comment"});
  TableEntry entry;
  entry.origin = index;
  auto coll = object.find("collective");
  if (coll == object.end()) fail(path, "missing \"collective\"");
  auto collective = parseCollective(readString(*coll, path + ".collective"));
  if (!collective || !isTunerCollective(*collective)) {
    fail(path + ".collective", "unknown collective " + describe(*coll) +
                                   " (expected broadcast, reduce, allgather, reducescatter or allreduce)");
  }
  entry.collective = *collective;
  if (auto it = object.find("minBytes"); it != object.end())
    entry.minBytes = readBytes(*it, path + ".minBytes");
  if (auto it = object.find("maxBytes"); it != object.end()) {
    entry.maxBytes =
        it->is_number_integer() && it->get<int64_t>() == -1 ? UINT64_MAX : readBytes(*it, path + ".maxBytes");
  }
  if (entry.minBytes > entry.maxBytes) {
    fail(path, "minBytes " + std::to_string(entry.minBytes) + " is larger than maxBytes " +
                   std::to_string(entry.maxBytes));
  }
  readKeyCommon(object, path, entry.nNodes, entry.nRanks, entry.topology);
  if (auto it = object.find("numPipeOps"); it != object.end()) {
    entry.numPipeOps = readIntIn(*it, path + ".numPipeOps", 0, INT32_MAX, true);
  }
  if (auto it = object.find("regBuff"); it != object.end())
    entry.regBuff = readIntIn(*it, path + ".regBuff", 0, 1, true);
  if (object.contains("algorithm") || object.contains("protocol"))
    entry.choices.push_back(readChoice(object, path));
  if (auto it = object.find("fallback"); it != object.end()) {
    if (!it->is_array())
      fail(path + ".fallback", "expected an array of {\"algorithm\", \"protocol\"} objects");
    if (entry.choices.empty())
      fail(path + ".fallback", "a fallback list needs an \"algorithm\" or \"protocol\" first");
    for (size_t i = 0; i < it->size(); ++i) {
      std::string itemPath = path + ".fallback[" + std::to_string(i) + "]";
      checkKeys((*it)[i], itemPath, {"algorithm", "protocol"});
      entry.choices.push_back(readChoice((*it)[i], itemPath));
    }
    if (entry.choices.size() > static_cast<size_t>(kMaxChoices)) {
      fail(path + ".fallback", "at most " + std::to_string(kMaxChoices - 1) + " fallbacks per entry");
    }
  }
  readGroupSettings(object, path, entry.nChannels, entry.chunkSize, entry.tucclAlgorithm, entry.timeUs);
  readInterval(object, path, entry.timeUs, entry.interval);
  if (auto it = object.find("default"); it != object.end()) {
    if (!it->is_boolean()) fail(path + ".default", "expected true or false, got " + describe(*it));
    entry.isDefault = it->get<bool>();
    if (entry.isDefault && (!entry.choices.empty() || entry.nChannels > 0 || entry.chunkSize > 0 ||
                            !entry.tucclAlgorithm.empty()))
      fail(path + ".default",
           "a default entry keeps the defaults: it sets no algorithm, protocol, nChannels, chunkSize or "
           "tucclAlgorithm of its own (its alternatives go in \"groups\")");
  }
  if (auto it = object.find("versusDefault"); it != object.end())
    entry.versusDefault = readDefaultComparison(*it, path + ".versusDefault");
  if (auto it = object.find("groups"); it != object.end()) {
    if (!it->is_array()) fail(path + ".groups", "expected an array of configuration groups");
    if (it->size() > static_cast<size_t>(kMaxGroups - 1))
      fail(path + ".groups", "at most " + std::to_string(kMaxGroups - 1) + " alternative groups per entry");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string itemPath = path + ".groups[" + std::to_string(i) + "]";
      const Json& item = (*it)[i];
      checkKeys(item, itemPath,
                {"algorithm", "protocol", "nChannels", "chunkSize", "tucclAlgorithm", "timeUs", "lowUs", "highUs",
                 "samples"});
      ConfigGroup group;
      group.choice = readChoice(item, itemPath);
      readGroupSettings(item, itemPath, group.nChannels, group.chunkSize, group.tucclAlgorithm, group.timeUs);
      readInterval(item, itemPath, group.timeUs, group.interval);
      entry.groups.push_back(std::move(group));
    }
  }
  if (auto it = object.find("comment"); it != object.end())
    entry.comment = readString(*it, path + ".comment");
  return entry;
}

EnvRecommendation readEnvironment(const Json& object, const std::string& path, uint32_t index) {
  checkKeys(object, path,
            {"nNodes", "nRanks", "topology", "comment", kEnvSettingNames[0], kEnvSettingNames[1],
             kEnvSettingNames[2], kEnvSettingNames[3], kEnvSettingNames[4]});
  EnvRecommendation env;
  env.origin = index;
  readKeyCommon(object, path, env.nNodes, env.nRanks, env.topology);
  if (auto it = object.find("comment"); it != object.end()) env.comment = readString(*it, path + ".comment");
  for (std::string_view name : kEnvSettingNames) {
    auto it = object.find(std::string(name));
    if (it == object.end()) continue;
    std::string settingPath = path + "." + std::string(name);
    std::string value;
    if (name == "NCCL_NTHREADS" || name == "NCCL_LL128_NTHREADS") {
      // NCCL: multiples of 32 (warps); 64..512 for Simple/LL, 160..640 for LL128.
      bool ll128 = name == "NCCL_LL128_NTHREADS";
      int32_t threads = readIntIn(*it, settingPath, ll128 ? 160 : 64, ll128 ? 640 : 512, false);
      if (threads % 32 != 0) fail(settingPath, std::to_string(threads) + " is not a multiple of 32");
      value = std::to_string(threads);
    } else {
      uint64_t bytes = readBytes(*it, settingPath);
      if (bytes == 0) fail(settingPath, "the buffer size must be positive");
      value = std::to_string(bytes);
    }
    env.settings.emplace_back(std::string(name), value);
  }
  if (env.settings.empty()) fail(path, "an environment entry needs at least one NCCL_* setting");
  return env;
}

void readConstants(const Json& node, const std::string& path, std::vector<ConstantOverride>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items())
      readConstants(value, path.empty() ? key : path + "." + key, out);
    return;
  }
  std::string fullPath = "constants." + path;
  std::optional<std::string> name = canonicalTunerConstantName(path);
  if (!name) {
    fail(fullPath,
         "not a constant of NCCL's cost model (e.g. baseLatencies.RING.LL, hwLatencies.NET.TREE.SIMPLE, "
         "llMaxBws.HOPPER.2, llMaxBws.RUBIN.2)");
  }
  if (!node.is_number()) fail(fullPath, "expected a number, got " + describe(node));
  double value = node.get<double>();
  if (!std::isfinite(value) || value < 0) fail(fullPath, "expected a finite, non-negative number");
  for (const ConstantOverride& other : out) {
    if (other.name == *name) fail(fullPath, "set twice (also as " + other.name + ")");
  }
  out.push_back({std::move(*name), value});
}

LookupTable readTable(const Json& root) {
  if (!root.is_object()) fail("", "a table is a JSON object with \"version\" and \"entries\"");
  checkKeys(root, "",
            {"format", "version", "matchOrder", "entries", "environment", "constants", "description",
             "generator", "metadata"});
  LookupTable table;
  if (auto it = root.find("description"); it != root.end())
    table.description = readString(*it, "description");
  if (auto it = root.find("generator"); it != root.end()) table.generator = readString(*it, "generator");
  if (auto it = root.find("metadata"); it != root.end()) {
    if (!it->is_object()) fail("metadata", "expected an object, got " + describe(*it));
    table.metadataJson = it->dump();
  }
  if (auto it = root.find("format"); it != root.end() && readString(*it, "format") != kFormatName) {
    fail("format", "expected \"" + std::string(kFormatName) + "\", got " + describe(*it));
  }
  auto version = root.find("version");
  if (version == root.end()) fail("", "missing \"version\" (this plugin reads version 1)");
  table.version = static_cast<int>(readInt(*version, "version"));
  if (table.version != kTableFormatVersion) {
    fail("version", "unsupported table version " + std::to_string(table.version) +
                        " (this plugin reads version " + std::to_string(kTableFormatVersion) + ")");
  }
  if (auto it = root.find("matchOrder"); it != root.end()) {
    std::string order = readString(*it, "matchOrder");
    if (order == "specific-first") {
      table.matchOrder = MatchOrder::SpecificFirst;
    } else if (order == "file") {
      table.matchOrder = MatchOrder::FileOrder;
    } else {
      fail("matchOrder", "expected \"specific-first\" or \"file\", got " + describe(*it));
    }
  }
  std::set<int32_t> pipeOpsValues;
  if (auto it = root.find("entries"); it != root.end()) {
    if (!it->is_array()) fail("entries", "expected an array");
    if (it->size() > kMaxTableEntries) {
      fail("entries", std::to_string(it->size()) + " entries, more than the limit of " +
                          std::to_string(kMaxTableEntries));
    }
    table.entries.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      table.entries.push_back(
          readEntry((*it)[i], "entries[" + std::to_string(i) + "]", static_cast<uint32_t>(i)));
      if (table.entries.back().numPipeOps >= 0) pipeOpsValues.insert(table.entries.back().numPipeOps);
      if (pipeOpsValues.size() > static_cast<size_t>(kMaxPipeOpsValues)) {
        fail("entries[" + std::to_string(i) + "].numPipeOps",
             "more than " + std::to_string(kMaxPipeOpsValues) + " distinct numPipeOps values in one table");
      }
    }
  }
  if (auto it = root.find("environment"); it != root.end()) {
    if (!it->is_array()) fail("environment", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      table.environment.push_back(
          readEnvironment((*it)[i], "environment[" + std::to_string(i) + "]", static_cast<uint32_t>(i)));
    }
  }
  if (auto it = root.find("constants"); it != root.end()) {
    if (!it->is_object())
      fail("constants", "expected an object such as {\"baseLatencies\": {\"RING\": {\"LL\": 6.6}}}");
    readConstants(*it, "", table.constants);
  }
  return table;
}

/// Line and column (from 1) of byte `offset`.
std::pair<uint32_t, uint32_t> lineColumn(std::string_view text, size_t offset) {
  uint32_t line = 1;
  uint32_t column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

OrderedJson byteSizeJson(uint64_t bytes) { return OrderedJson(bytes); }

void writeChoice(OrderedJson& object, const Choice& choice) {
  if (choice.algorithm) object["algorithm"] = toLowerCase(ncclAlgorithmName(*choice.algorithm));
  if (choice.protocol) object["protocol"] = toLowerCase(protocolName(*choice.protocol));
  if (!choice.algorithm && !choice.protocol) object["algorithm"] = "any";
}

void writeGroupSettings(OrderedJson& e, int32_t nChannels, uint64_t chunkSize, const std::string& tucclAlgorithm,
                        double timeUs) {
  if (nChannels > 0) e["nChannels"] = nChannels;
  if (chunkSize > 0) e["chunkSize"] = byteSizeJson(chunkSize);
  if (!tucclAlgorithm.empty()) e["tucclAlgorithm"] = tucclAlgorithm;
  if (timeUs >= 0) e["timeUs"] = timeUs;
}

void writeInterval(OrderedJson& e, const TimeInterval& interval) {
  if (interval.lowUs >= 0) e["lowUs"] = interval.lowUs;
  if (interval.highUs >= 0) e["highUs"] = interval.highUs;
  if (interval.samples > 0) e["samples"] = interval.samples;
}

OrderedJson defaultComparisonJson(const DefaultComparison& c) {
  OrderedJson j;
  j["ratio"] = c.ratio;
  if (c.low >= 0) j["low"] = c.low;
  if (c.high >= 0) j["high"] = c.high;
  if (c.pairs > 0) j["pairs"] = c.pairs;
  if (c.pairs > 0) j["won"] = c.won;
  if (!c.versus.empty()) j["versus"] = c.versus;
  return j;
}

}  // namespace

Expected<LookupTable> readTableJson(std::string_view text, std::string_view file) {
  const std::string fileName(file);
  auto error = [&](SourceLoc loc, std::string message) {
    return makeError(ErrorCode::InvalidInput, fileName, loc, std::move(message));
  };
  try {
    Json root = Json::parse(text.begin(), text.end());
    return readTable(root);
  } catch (const Json::parse_error& e) {
    // nlohmann's byte position is one past the offending character.
    auto [line, column] = lineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (auto colon = what.find("syntax error"); colon != std::string::npos) what = what.substr(colon);
    return error(SourceLoc{line, column}, "invalid JSON: " + what);
  } catch (const JsonSchemaError& e) {
    return error({}, e.path.empty() ? e.message : e.path + ": " + e.message);
  } catch (const std::exception& e) {
    return error({}, std::string("invalid table: ") + e.what());
  } catch (...) {
    return error({}, "invalid table");
  }
}

std::string writeTableJson(const LookupTable& table) {
  OrderedJson root;
  root["format"] = std::string(kFormatName);
  root["version"] = table.version;
  root["matchOrder"] = table.matchOrder == MatchOrder::FileOrder ? "file" : "specific-first";
  OrderedJson entries = OrderedJson::array();
  for (const TableEntry& entry : table.entries) {
    OrderedJson e;
    e["collective"] = toLowerCase(collectiveName(entry.collective));
    e["minBytes"] = byteSizeJson(entry.minBytes);
    if (entry.maxBytes != UINT64_MAX) e["maxBytes"] = byteSizeJson(entry.maxBytes);
    if (entry.nNodes >= 0) e["nNodes"] = entry.nNodes;
    if (entry.nRanks >= 0) e["nRanks"] = entry.nRanks;
    if (!entry.topology.empty()) e["topology"] = entry.topology;
    if (entry.numPipeOps >= 0) e["numPipeOps"] = entry.numPipeOps;
    if (entry.regBuff >= 0) e["regBuff"] = entry.regBuff;
    if (!entry.choices.empty()) writeChoice(e, entry.choices[0]);
    if (entry.choices.size() > 1) {
      OrderedJson fallback = OrderedJson::array();
      for (size_t i = 1; i < entry.choices.size(); ++i) {
        OrderedJson c = OrderedJson::object();
        writeChoice(c, entry.choices[i]);
        fallback.push_back(std::move(c));
      }
      e["fallback"] = std::move(fallback);
    }
    writeGroupSettings(e, entry.nChannels, entry.chunkSize, entry.tucclAlgorithm, entry.timeUs);
    writeInterval(e, entry.interval);
    if (entry.isDefault) e["default"] = true;
    if (entry.versusDefault) e["versusDefault"] = defaultComparisonJson(*entry.versusDefault);
    if (!entry.groups.empty()) {
      OrderedJson groups = OrderedJson::array();
      for (const ConfigGroup& group : entry.groups) {
        OrderedJson g = OrderedJson::object();
        writeChoice(g, group.choice);
        writeGroupSettings(g, group.nChannels, group.chunkSize, group.tucclAlgorithm, group.timeUs);
        writeInterval(g, group.interval);
        groups.push_back(std::move(g));
      }
      e["groups"] = std::move(groups);
    }
    if (!entry.comment.empty()) e["comment"] = entry.comment;
    entries.push_back(std::move(e));
  }
  root["entries"] = std::move(entries);
  if (!table.environment.empty()) {
    OrderedJson environment = OrderedJson::array();
    for (const EnvRecommendation& env : table.environment) {
      OrderedJson e;
      if (env.nNodes >= 0) e["nNodes"] = env.nNodes;
      if (env.nRanks >= 0) e["nRanks"] = env.nRanks;
      if (!env.topology.empty()) e["topology"] = env.topology;
      for (const auto& [name, value] : env.settings) e[name] = std::stoull(value);
      if (!env.comment.empty()) e["comment"] = env.comment;
      environment.push_back(std::move(e));
    }
    root["environment"] = std::move(environment);
  }
  if (!table.constants.empty()) {
    OrderedJson constants = OrderedJson::object();
    for (const ConstantOverride& constant : table.constants) {
      OrderedJson* node = &constants;
      std::string_view name = constant.name;
      size_t start = 0;
      while (true) {
        size_t dot = name.find('.', start);
        std::string part(
            name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (dot == std::string_view::npos) {
          (*node)[part] = constant.value;
          break;
        }
        node = &(*node)[part];
        start = dot + 1;
      }
    }
    root["constants"] = std::move(constants);
  }
  if (!table.generator.empty()) root["generator"] = table.generator;
  if (!table.description.empty()) root["description"] = table.description;
  if (!table.metadataJson.empty()) root["metadata"] = OrderedJson::parse(table.metadataJson);
  return root.dump(2) + "\n";
}

}  // namespace tuccl
