// Presets: the machines of the papers, by name, each composable into an N-node cluster.
//
// In:  a spec "preset:NAME[:KEY=VALUE,...]" with keys nodes=N, gpus=K (the first K GPUs of each
//      node, reduceNodeGpus), fabric=switch|clos, oversub=R (Clos uplink oversubscription),
//      rack=K (nodes per ToR, Clos only).
// Out: a Topology. Names: dgx1-v100, tuccl-v100, dgx-a100, resccl-a100, dgx-h100, ndv2.
// Every number is cited in presets.cc; docs/topology-format.md lists what each preset contains.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"
#include "topo/topology.h"

namespace tuccl {

/// The preset names, in the order of the documentation.
std::vector<std::string> presetNames();
/// One node of a preset (no network yet), e.g. "dgx-a100"; throws std::invalid_argument for an
/// unknown name.
Topology presetNode(std::string_view name);
/// The network options a preset uses when the spec does not override them (fabric, NIC alpha).
ClusterOptions presetClusterOptions(std::string_view name);
/// A preset spec, parsed and checked.
struct PresetSpec {
  std::string name;        ///< "dgx-a100"
  ClusterOptions cluster;  ///< the preset's own options with the spec's applied
  int32_t gpus = 0;        ///< GPUs kept per node (reduceNodeGpus); 0: all of them
};
/// Parses "preset:dgx-a100:nodes=2,gpus=4,fabric=clos,oversub=2,rack=2". InvalidArgument naming
/// the preset or option at fault: an unknown preset or key, an item that is not KEY=VALUE, a
/// value that is not a number or out of range (nodes, rack >= 1; oversub >= 1; gpus 1 .. the
/// preset's GPUs per node; fabric switch or clos).
Expected<PresetSpec> parsePresetSpec(std::string_view spec);
/// Builds the cluster of a spec (parsePresetSpec, then the node, reduced to `gpus`, composed);
/// throws std::invalid_argument with parsePresetSpec's message on a bad spec.
Topology makePreset(std::string_view spec);
/// Whether `spec` names a preset (starts with "preset:").
bool isPresetSpec(std::string_view spec);

}  // namespace tuccl
