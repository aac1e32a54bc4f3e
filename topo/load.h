// One entry point for every topology source the tools accept.
//
// In:  a spec — "preset:NAME[:nodes=N,...]", "local", a .json file (TuCCL format) or a .xml file
//      (NCCL topology); a file of another name is XML when it starts with '<', JSON with '{'. An
//      empty file, a directory, or content other than its name says is an error naming the file
//      and the format expected. A single-node source (XML, local, a one-node JSON file) is composed
//      into `cluster.nodes` copies; a preset gets nodes=N (its own network); --nodes on a JSON file
//      that already has several nodes, or on a preset spec saying another node count, is an error.
//      options.gpuFabric, when set, replaces the GPU fabric of every node.
// Out: a Topology, plus the warnings the source produced (and missingNvlinkWarning's, logged once
//      to the "topo" logger, when no fabric is stated).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "support/source_text.h"
#include "support/status.h"
#include "topo/gpu_fabric.h"
#include "topo/topology.h"

namespace tuccl {

struct LoadOptions {
  ClusterOptions cluster;          ///< for single-node sources (XML, local, JSON); presets take nodes only
  std::string sysfsRoot = "/sys";  ///< for "local"
  /// The GPU fabric the user states (--gpu-fabric), replacing what the source gives on every node
  /// (gpu_fabric.h). Unset: the source's own, with a warning when it looks like a missing NVLink.
  std::optional<GpuFabric> gpuFabric;
};

struct LoadedTopology {
  Topology topology;
  std::vector<Diagnostic> warnings;
  std::vector<std::string> notes;  ///< what discovery found or could not see
};

/// The topology, or an error status: InvalidInput with file:line:col for a malformed file,
/// InvalidArgument naming the option for a bad spec, NotFound/IoError for a file that cannot be read.
Expected<LoadedTopology> loadTopology(std::string_view spec, const LoadOptions& options = {});

/// A readable multi-line summary: nodes, GPUs, NICs and the GPUs bound to each, link classes with
/// alpha and bandwidth, and the signature.
std::string describeTopology(const Topology& topology);

}  // namespace tuccl
