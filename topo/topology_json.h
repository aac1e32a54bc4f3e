// TuCCL's own topology file format (JSON), documented in docs/topology-format.md.
//
// In:  a Topology, or the text of a .json file.   Out: the other; reading then writing is lossless
// (readTopologyJson(writeTopologyJson(t)) == t).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "support/source_text.h"
#include "topo/topology.h"

namespace tuccl {

nlohmann::json topologyToJson(const Topology& topology);
/// Throws DiagnosticError naming `file` and the JSON path of the offending value
/// ("links[3].kind: unknown link kind 'nvlnk'").
Topology topologyFromJson(const nlohmann::json& json, const std::string& file = "");

/// Pretty-printed JSON text, ending in a line break.
std::string writeTopologyJson(const Topology& topology);
/// Parses and converts; syntax errors carry the line and column.
Topology readTopologyJson(const SourceText& source);

}  // namespace tuccl
