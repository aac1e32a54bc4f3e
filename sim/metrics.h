// Metrics of one simulated run: what nccl-tests prints, the efficiency against the lower bound,
// link utilisation (ResCCL Table 1), TB busy / idle (Table 3) and pipeline bubbles.
//
// In:  the Plan, the Network and the SimResult of simulatePlan.
// Out: Metrics, and text renderings of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "support/bus_bandwidth.h"
#include "support/vocabulary.h"
#include "sim/lower_bound.h"
#include "sim/simulator.h"

namespace tuccl {

struct LinkUse {
  int32_t resource = 0;
  std::string name;
  double bytes = 0;
  double utilisation = 0;   ///< bytes / (capacity × completion time)
  double busyFraction = 0;  ///< time with at least one flow / completion time
  double bubbleUs = 0;      ///< idle time between its first and last use
};

struct Metrics {
  double timeUs = 0;
  double algBwGBps = 0;   ///< bytes / time
  double busBwGBps = 0;   ///< algBw × busBandwidthFactor
  LowerBound bound;
  double efficiency = 0;  ///< bound / time, in (0, 1]
  // TBs (ResCCL Table 3). A TB's lifetime is its rank's kernel, from launch to the rank's last
  // activity; busy = time running primitives, idle = the rest (waiting for data, credits, peers).
  int32_t minTbsPerRank = 0;
  int32_t maxTbsPerRank = 0;
  int64_t totalTbs = 0;
  double tbBusyMean = 0;
  double tbIdleMean = 0;
  double tbIdleMax = 0;
  // Links (ResCCL Table 1): over the resources that carried data.
  int32_t usedLinks = 0;
  double linkUtilisationMean = 0;
  double linkUtilisationMax = 0;
  double linkBusyMean = 0;
  /// Pipeline bubbles: the idle time of used links between their first and last transfer, as a
  /// fraction of those spans.
  double bubbleFraction = 0;
  std::vector<LinkUse> links;  ///< used resources, busiest first
};

Metrics computeMetrics(const Plan& plan, const Network& network, const SimResult& result);

/// A multi-line report: time, bandwidths, bound, TBs, links (the `maxLinks` busiest).
std::string formatMetrics(const Metrics& metrics, int32_t maxLinks = 8);

}  // namespace tuccl
