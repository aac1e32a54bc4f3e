// The alpha-beta lower bound of a collective on a topology: no schedule can beat it.
//
// In:  a collective, its size in bytes (nccl-tests convention), the Network of a topology.
// Out: a LowerBound: the largest of three bandwidth bounds, each plus the smallest latency the
//      bytes behind it must pay.
//   - per-rank ingress: the bytes every rank must receive over the sum of the capacities of the
//     links into its GPU (AllReduce 2(n-1)/n·S, Patarasuk & Yuan; AllGather, ReduceScatter,
//     AllToAll (n-1)/n·S; Broadcast S at every non-root), plus the fastest path into the rank;
//   - per-node NIC: the bytes that must enter a node from outside over the sum of its NICs' rx
//     capacity (nodes as super-ranks: AllReduce 2(M-1)/M·S, AllGather (N-G)/N·S, ...), plus the
//     fastest network path;
//   - bisection: the first half of the nodes against the second: the bytes that must cross into
//     the first half over the narrower of its NICs' rx capacity and its racks' aggregation
//     downlinks (when the racks fall on one side), plus the fastest network path.
// Physical numbers only: no protocol efficiency, TB caps or launch latency, so every simulated
// time is at least the bound (tests/sim check this for every example and schedule).
#pragma once

#include <cstdint>
#include <string>

#include "support/vocabulary.h"
#include "sim/network.h"

namespace tuccl {

struct LowerBound {
  double timeUs = 0;        ///< the largest of the three
  double ingressUs = 0;     ///< per-rank ingress bound (with its latency)
  double nicUs = 0;         ///< per-node NIC bound; 0 on one node
  double bisectionUs = 0;   ///< bisection bound; 0 on one node
  std::string binding;      ///< "ingress", "nic" or "bisection"
};

LowerBound collectiveLowerBound(Collective collective, int64_t bytes, const Network& network, int32_t root = 0);

}  // namespace tuccl
