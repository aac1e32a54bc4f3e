// nccl-tests' bus bandwidth: the factor that turns a collective's algorithm bandwidth (bytes /
// time) into the bandwidth each rank's links carry, so results of different collectives and rank
// counts compare against one hardware peak (nccl-tests doc/PERFORMANCE.md).
//
// Standard library only: the simulator, the tuner and the benchmarks share it.
#pragma once

#include <cstdint>

#include "support/vocabulary.h"

namespace tuccl {

/// AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce 1.
double busBandwidthFactor(Collective collective, int32_t nRanks);

}  // namespace tuccl
