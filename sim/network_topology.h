// Topology-side helpers of the simulator (see sim/network.h for why the engine sees the topology
// only through the Network view).
#pragma once

#include <string_view>

#include "sim/network.h"
#include "topo/topology.h"

namespace tuccl {

/// The simulator's view of `topology` (routes through topo/paths.h's Router).
Network makeNetwork(const Topology& topology);

}  // namespace tuccl
