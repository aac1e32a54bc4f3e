#include "topo/load.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "support/log.h"
#include "topo/discovery.h"
#include "topo/nccl_xml.h"
#include "topo/presets.h"
#include "topo/topology_json.h"

namespace tuccl {

namespace {

enum class TopologyFileFormat { Unknown, TucclJson, NcclXml };

constexpr const char* kExpectXml = "an NCCL topology XML document (starting with '<', e.g. <system version=\"1\">)";
constexpr const char* kExpectJson = "a TuCCL topology JSON object (starting with '{')";

/// The format a file name says: .xml or .json, any case.
TopologyFileFormat formatOfName(const std::string& name) {
  std::string extension = std::filesystem::path(name).extension().string();
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (extension == ".xml") return TopologyFileFormat::NcclXml;
  if (extension == ".json") return TopologyFileFormat::TucclJson;
  return TopologyFileFormat::Unknown;
}

/// The format a document's first non-blank character says: '<' XML, '{' JSON.
TopologyFileFormat formatOfContent(char first) {
  if (first == '<') return TopologyFileFormat::NcclXml;
  if (first == '{') return TopologyFileFormat::TucclJson;
  return TopologyFileFormat::Unknown;
}

/// The character found where a topology should start, as a message quotes it.
std::string describeFound(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x20 && byte < 0x7f) return std::string("'") + c + "'";
  char hex[16];
  std::snprintf(hex, sizeof hex, "byte 0x%02x", byte);
  return hex;
}

/// The format of a topology file. A `.xml` or `.json` name says which one the content must be;
/// another name lets the first non-blank character decide. An empty file, or one that starts with
/// anything else, is a DiagnosticError naming the file and what was expected.
TopologyFileFormat topologyFileFormat(const SourceText& source) {
  const TopologyFileFormat named = formatOfName(source.name());
  const std::string expected = named == TopologyFileFormat::NcclXml     ? kExpectXml
                               : named == TopologyFileFormat::TucclJson ? kExpectJson
                                   : std::string(kExpectXml) + " or " + kExpectJson;
  const size_t first = source.text().find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    throw DiagnosticError(Diagnostic{Severity::Error, source.name(), {},
                                     "the topology file is " +
                                         std::string(source.text().empty() ? "empty" : "empty (only blanks)") +
                                         ": expected " + expected});
  }
  const char c = source.text()[first];
  const TopologyFileFormat found = formatOfContent(c);
  if (found != TopologyFileFormat::Unknown && (named == TopologyFileFormat::Unknown || found == named)) return found;
  std::string message = "not a topology file: expected " + expected + ", found " + describeFound(c);
  if (found == TopologyFileFormat::NcclXml) message += " (XML: name the file .xml)";
  if (found == TopologyFileFormat::TucclJson) message += " (JSON: name the file .json)";
  throw DiagnosticError(Diagnostic{Severity::Error, source.name(), source.locationOf(first), std::move(message)});
}

/// A preset spec with --nodes applied: "preset:NAME[:...]" gains nodes=N; a spec that already
/// says another node count is refused (which of the two was meant?).
std::string presetWithNodes(std::string_view spec, int32_t nodes) {
  if (nodes <= 1) return std::string(spec);
  Expected<PresetSpec> parsed = parsePresetSpec(spec);
  if (!parsed) throw std::invalid_argument(parsed.status().message());
  if (parsed->cluster.nodes == nodes) return std::string(spec);
  if (parsed->cluster.nodes > 1) {
    throw std::invalid_argument("--nodes " + std::to_string(nodes) + " and nodes=" +
                                std::to_string(parsed->cluster.nodes) + " in " + std::string(spec) +
                                " disagree; give the node count once");
  }
  const bool hasOptions = spec.substr(7).find(':') != std::string_view::npos;
  return std::string(spec) + (hasOptions ? "," : ":") + "nodes=" + std::to_string(nodes);
}

/// Whether the topology already has a network (ToR or aggregation switches).
bool hasNetworkSwitches(const Topology& topology) {
  for (const Switch& sw : topology.switches)
    if (isNetworkSwitch(sw.kind)) return true;
  return false;
}

// The readers below unwind with DiagnosticError (files) or std::invalid_argument (specs, options);
// loadTopology turns them into a Status.
LoadedTopology loadSource(std::string_view spec, const LoadOptions& options) {
  LoadedTopology loaded;
  if (isPresetSpec(spec)) {
    loaded.topology = makePreset(presetWithNodes(spec, options.cluster.nodes));
    return loaded;
  }
  Topology single;
  if (spec == "local") {
    DiscoveryOptions discovery;
    discovery.sysfsRoot = options.sysfsRoot;
    DiscoveryResult found = discoverLocalTopology(discovery);
    loaded.notes = found.notes;
    if (found.topology.empty()) {
      loaded.topology = found.topology;
      return loaded;
    }
    single = std::move(found.topology);
  } else {
    SourceText source = readSourceFile(std::string(spec));
    if (topologyFileFormat(source) == TopologyFileFormat::TucclJson) {
      loaded.topology = readTopologyJson(source);
      if (options.cluster.nodes <= 1) return loaded;
      if (loaded.topology.nNodes() != 1 || hasNetworkSwitches(loaded.topology)) {
        throw std::invalid_argument(source.name() + " already describes " + std::to_string(loaded.topology.nNodes()) +
                                    " nodes and their network; --nodes composes copies of a one-node topology");
      }
      single = std::move(loaded.topology);
      loaded = LoadedTopology{};
    } else {
      NcclXmlImport imported = importNcclXml(source);
      loaded.warnings = std::move(imported.warnings);
      single = std::move(imported.topology);
      single.name = std::filesystem::path(std::string(spec)).stem().string();
    }
  }
  std::string name = single.name;
  loaded.topology = composeCluster(single, options.cluster);
  if (options.cluster.nodes > 1) name += ":nodes=" + std::to_string(options.cluster.nodes);
  loaded.topology.name = name;
  return loaded;
}

// The source, then the stated GPU fabric or the warning that one is probably missing.
LoadedTopology loadOrThrow(std::string_view spec, const LoadOptions& options) {
  LoadedTopology loaded = loadSource(spec, options);
  if (loaded.topology.empty()) return loaded;
  if (options.gpuFabric) {
    std::string name = loaded.topology.name;
    loaded.topology = withGpuFabric(std::move(loaded.topology), *options.gpuFabric);
    loaded.topology.name = name + ":gpu-fabric=" + std::string(gpuFabricName(*options.gpuFabric));
  } else if (std::optional<std::string> warning = missingNvlinkWarning(loaded.topology)) {
    logLine(LogLevel::Warn, kLogGraph, -1, "topo: " + std::string(spec) + ": " + *warning);
    loaded.warnings.push_back(Diagnostic{Severity::Warning, std::string(spec), {}, *warning});
  }
  return loaded;
}

}  // namespace

Expected<LoadedTopology> loadTopology(std::string_view spec, const LoadOptions& options) {
  try {
    return loadOrThrow(spec, options);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error);
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidArgument, std::string(spec), SourceLoc{}, error.what());
  }
}

}  // namespace tuccl
