// Sketch stage 2 on its own (sketch.h): NIC groups and the rail of each NIC. A file of its own so
// that a program needing only the grouping (the net plugin's rail ids) links nothing else of topo/.
#include <algorithm>
#include <cmath>
#include <limits>

#include "topo/sketch.h"

namespace tuccl {

// TuCCL §III-B stage 2: "greedily pairing NICs with minimal intra-group bandwidth variance,
// ensuring no two NICs from the same node reside in one group".
std::vector<std::vector<int32_t>> groupNics(const Topology& topology) {
  std::vector<std::vector<int32_t>> groups;
  std::vector<double> sums;
  for (int32_t node = 0; node < topology.nNodes(); ++node) {
    std::vector<int32_t> nics = nicsOfNode(topology, node);
    std::stable_sort(nics.begin(), nics.end(), [&](int32_t a, int32_t b) {
      return topology.nics[a].bandwidthGBps > topology.nics[b].bandwidthGBps;
    });
    std::vector<bool> taken(groups.size(), false);
    for (int32_t nic : nics) {
      double bandwidth = topology.nics[nic].bandwidthGBps;
      int32_t best = -1;
      double bestDistance = std::numeric_limits<double>::infinity();
      for (size_t g = 0; g < groups.size(); ++g) {
        if (taken[g]) continue;
        double distance = std::abs(sums[g] / static_cast<double>(groups[g].size()) - bandwidth);
        if (distance < bestDistance) {
          bestDistance = distance;
          best = static_cast<int32_t>(g);
        }
      }
      if (best < 0) {
        groups.push_back({});
        sums.push_back(0);
        taken.push_back(false);
        best = static_cast<int32_t>(groups.size()) - 1;
      }
      groups[best].push_back(nic);
      sums[best] += bandwidth;
      taken[best] = true;
    }
  }
  return groups;
}

std::vector<int32_t> railOfNics(const Topology& topology) {
  std::vector<int32_t> rail(topology.nics.size(), -1);
  const std::vector<std::vector<int32_t>> groups = groupNics(topology);
  for (size_t g = 0; g < groups.size(); ++g)
    for (int32_t nic : groups[g]) rail[static_cast<size_t>(nic)] = static_cast<int32_t>(g);
  return rail;
}

}  // namespace tuccl
