// Topology-side helpers of the simulator (see sim/network.h for why the engine sees the topology
// only through the Network view).
#pragma once

#include <string_view>

#include "sim/network.h"
#include "topo/topology.h"

namespace tuccl {

/// The simulator's view of `topology` (routes through topo/paths.h's Router).
Network makeNetwork(const Topology& topology);

/// The first `gpus` GPUs of a one-node topology with what serves them: the switches they hang
/// from (NVSwitch, their PCIe switches and those switches' root complexes), the NICs on those PCIe
/// switches, and the links among kept devices. resccl-a100 with gpus=4 keeps socket 0: GPUs 0-3,
/// two PCIe switches, two NICs (still two GPUs per NIC).
Topology reduceNodeGpus(const Topology& node, int32_t gpus);

/// loadTopology(spec), plus `gpus=K` among a preset's options ("preset:resccl-a100:nodes=2,gpus=4"):
/// the preset's node reduced to K GPUs (reduceNodeGpus), composed into the cluster as the preset's
/// own options say.
Topology loadSimTopology(std::string_view spec);

}  // namespace tuccl
