#include "support/bus_bandwidth.h"

#include <algorithm>

namespace tuccl {

double busBandwidthFactor(Collective collective, int32_t nRanks) {
  const double n = std::max(1, nRanks);
  switch (collective) {
    case Collective::AllReduce:
      return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
      return 1;
  }
  return 1;
}

}  // namespace tuccl
