// The engine's constants per hardware class, and the cost model a topology names.
//
// In:  a hardware class name, or a Topology (its GPUs' compute capability; the cost-model file
//      it names, Topology::costModel) and the path it was read from.
// Out: a CostModel: the class's file (sim/cost/<class>.json, embedded at build time: every number
//      with its source), the topology's calibrated file (tuccl-calibrate), or the defaults.
//
// Classes by the smallest compute capability of the topology's GPUs: volta (7.x), ampere (8.x),
// hopper (9.x), blackwell (10.x and later); GPUs of unknown capability (a probed topology of CPU
// ranks) take the defaults, which are ampere's numbers (defaultCostModel).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_model.h"
#include "support/status.h"
#include "topo/topology.h"

namespace tuccl {

/// The classes with a file, oldest first.
const std::vector<std::string>& hardwareClasses();

/// The class of a topology's GPUs; empty when the capability is unknown or older than Volta.
std::string hardwareClassOf(const Topology& topology);

/// The class's file; NotFound naming the classes for an unknown one.
Expected<CostModel> costModelForClass(std::string_view hardwareClass);

/// The model for simulating on `topology`: the file it names (relative to `topologyPath`'s
/// directory unless absolute; NotFound / InvalidInput naming the file when it cannot be read),
/// else its class's file, else defaultCostModel().
Expected<CostModel> costModelForTopology(const Topology& topology, const std::string& topologyPath);

}  // namespace tuccl
