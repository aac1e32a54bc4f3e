// Topology-side helpers of the simulator (see sim/network.h for why the engine sees the topology
// only through the Network view).
#pragma once

#include <string_view>

#include "sim/network.h"
#include "topo/topology.h"

namespace tuccl {

/// The simulator's view of `topology` (routes through topo/paths.h's Router).
Network makeNetwork(const Topology& topology);
/// makeNetwork, with an invalid topology as InvalidInput naming `where` (the spec or file it came from).
Expected<Network> networkFromTopology(const Topology& topology, std::string_view where);

}  // namespace tuccl
