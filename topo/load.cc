#include "topo/load.h"

#include <filesystem>
#include <stdexcept>

#include "support/log.h"
#include "topo/discovery.h"
#include "topo/nccl_xml.h"
#include "topo/presets.h"
#include "topo/topology_json.h"

namespace tuccl {

namespace {

bool looksLikeXml(const SourceText& source) {
  for (char c : source.text()) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '<';
  }
  return false;
}

// The readers below unwind with DiagnosticError (files) or std::invalid_argument (specs, options);
// loadTopology turns them into a Status.
LoadedTopology loadSource(std::string_view spec, const LoadOptions& options) {
  LoadedTopology loaded;
  if (isPresetSpec(spec)) {
    loaded.topology = makePreset(spec);
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
    if (!looksLikeXml(source)) {
      loaded.topology = readTopologyJson(source);
      return loaded;
    }
    NcclXmlImport imported = importNcclXml(source);
    loaded.warnings = std::move(imported.warnings);
    single = std::move(imported.topology);
    single.name = std::filesystem::path(std::string(spec)).stem().string();
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
    componentLogger("topo")->warn("{}: {}", spec, *warning);
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
