// TuCCL §III-B stage 1, GPU-NIC binding: each GPU uses the NIC that shares its PCIe switch (or, failing
// that, its root complex).
//
// In:  a Topology.   Out: for every rank the index of its NIC, or -1 when its node has no NIC.
//
// "Shares" is measured as hops through the node's host fabric (PCIe and CPU-interconnect links,
// passing only through switches and root complexes): the NICs at the smallest distance are the
// candidates, and GPUs (in rank order) take the candidate with the fewest GPUs bound so far, the
// lowest index on ties — two GPUs and two NICs under one switch pair off one to one; two GPUs and
// one NIC share it. A NIC the host fabric does not reach (e.g. no PCIe link given) is a candidate
// only when no NIC is reachable.
#pragma once

#include <cstdint>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

std::vector<int32_t> bindGpusToNics(const Topology& topology);

/// Host-fabric hop distance from `from` to every device of the topology (flat order: GPUs, NICs,
/// switches), -1 where unreachable. Transit only through PCIe switches and root complexes.
std::vector<int32_t> hostFabricDistances(const Topology& topology, DeviceRef from);

}  // namespace tuccl
