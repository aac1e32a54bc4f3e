// Presets: the machines of the papers, by name, each composable into an N-node cluster.
//
// In:  a spec "preset:NAME[:KEY=VALUE,...]" with keys nodes=N, fabric=switch|clos, oversub=R
//      (Clos uplink oversubscription), rack=K (nodes per ToR, Clos only).
// Out: a Topology. Names: dgx1-v100, tuccl-v100, dgx-a100, resccl-a100, dgx-h100, ndv2.
// Every number is cited in presets.cc; docs/topology-format.md lists what each preset contains.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

/// The preset names, in the order of the documentation.
std::vector<std::string> presetNames();
/// One node of a preset (no network yet), e.g. "dgx-a100"; throws std::invalid_argument for an
/// unknown name.
Topology presetNode(std::string_view name);
/// The network options a preset uses when the spec does not override them (fabric, NIC alpha).
ClusterOptions presetClusterOptions(std::string_view name);
/// Parses a full spec ("preset:dgx-a100:nodes=2,fabric=clos,oversub=2") and builds the cluster;
/// throws std::invalid_argument with a readable message on a bad spec.
Topology makePreset(std::string_view spec);
/// Whether `spec` names a preset (starts with "preset:").
bool isPresetSpec(std::string_view spec);

}  // namespace tuccl
