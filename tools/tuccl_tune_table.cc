#include "tools/tuccl_tune_table.h"

#include <stdexcept>

#include "plugin/lookup_table.h"

namespace tuccl::tune_tool {

std::string formatTableBytes(uint64_t bytes) { return formatByteSize(bytes); }

RenderedTable renderTunedTable(const TunedTable& tuned, const std::string& jsonName) {
  LookupTable table;
  for (const TunedEntry& t : tuned.entries) {
    TableEntry e;
    auto collective = parseTableCollective(t.collective);
    if (!collective) throw std::runtime_error("unknown collective " + t.collective);
    e.collective = *collective;
    e.minBytes = t.minBytes;
    e.maxBytes = t.maxBytes;
    e.nNodes = tuned.nNodes;
    e.nRanks = tuned.nRanks;
    e.topology = tuned.topology;
    Choice choice;
    if (!t.ncclAlgorithm.empty()) {
      auto a = parseAlgorithm(t.ncclAlgorithm);
      if (!a) throw std::runtime_error("not an NCCL algorithm: " + t.ncclAlgorithm);
      choice.algorithm = *a;
    }
    if (!t.protocol.empty()) {
      auto p = parseChoiceProtocol(t.protocol);
      if (!p) throw std::runtime_error("not an NCCL protocol: " + t.protocol);
      choice.protocol = *p;
    }
    if (choice.algorithm != kAny || choice.protocol != kAny) e.choices.push_back(choice);
    e.nChannels = t.nChannels;
    e.chunkSize = t.chunkSize;
    table.entries.push_back(e);
  }
  if (!tuned.environment.empty()) {
    EnvRecommendation env;
    env.nNodes = tuned.nNodes;
    env.nRanks = tuned.nRanks;
    env.topology = tuned.topology;
    env.settings = tuned.environment;
    table.environment.push_back(env);
  }
  // The writer knows the schema; comments, generator and metadata (free-form in the schema) are
  // added to its output.
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(writeTableJson(table));
  for (size_t i = 0; i < tuned.entries.size(); ++i)
    if (!tuned.entries[i].comment.empty()) doc["entries"][i]["comment"] = tuned.entries[i].comment;
  if (!tuned.generator.empty()) doc["generator"] = tuned.generator;
  if (!tuned.description.empty()) doc["description"] = tuned.description;
  if (!tuned.metadata.is_null()) doc["metadata"] = tuned.metadata;
  RenderedTable out;
  out.json = doc.dump(2) + "\n";
  TableResult check = readTableJson(out.json, jsonName);
  if (!check.ok()) throw std::logic_error("the table does not read back: " + formatTableError(check.error));
  if (check.table->entries != table.entries || check.table->environment != table.environment) {
    // origin differs by construction; compare the decisions only
    for (size_t i = 0; i < table.entries.size(); ++i) {
      TableEntry a = table.entries[i], b = check.table->entries[i];
      a.origin = b.origin = 0;
      if (!(a == b)) throw std::logic_error("entry " + std::to_string(i) + " does not read back as written");
    }
  }
  std::string error;
  auto csv = writeTableCsv(table, /*lossy=*/true, &error, &out.csvDropped);
  if (!csv) throw std::runtime_error("CSV: " + error);
  out.csv = tuned.csvHeader + *csv;
  return out;
}

}  // namespace tuccl::tune_tool
