#include "sim/lower_bound.h"

#include <algorithm>

namespace tuccl {

namespace {

constexpr double kBytesPerUsPerGBps = 1e3;

// Bytes rank `rank` must receive (nccl-tests sizes: AllGather S is the output, ReduceScatter S
// the input).
double ingressBytes(Collective collective, double s, int32_t n, int32_t rank, int32_t root) {
  const double share = static_cast<double>(n - 1) / n;
  switch (collective) {
    case Collective::AllReduce:
      return 2 * share * s;  // Patarasuk & Yuan (2009): every rank receives 2(n-1)/n·S
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return share * s;
    case Collective::Broadcast:
      return rank == root ? 0 : s;
    case Collective::Reduce:
      return rank == root ? share * s : 0;
  }
  return 0;
}

// Bytes that must enter one node (g ranks of n, m nodes) from outside: nodes as super-ranks.
double nodeIngressBytes(Collective collective, double s, int32_t n, int32_t g, int32_t m, bool hasRoot) {
  const double nodeShare = static_cast<double>(m - 1) / m;
  switch (collective) {
    case Collective::AllReduce:
      return 2 * nodeShare * s;
    case Collective::AllGather:
      return static_cast<double>(n - g) / n * s;
    case Collective::ReduceScatter:
      return nodeShare * s;
    case Collective::AllToAll:
      return static_cast<double>(g) * (n - g) / n * s;
    case Collective::Broadcast:
      return hasRoot ? 0 : s;
    case Collective::Reduce:
      return hasRoot ? nodeShare * s : 0;
  }
  return 0;
}

// Bytes that must cross from the second half of the ranks (nB of n) into the first (nA).
double crossingBytes(Collective collective, double s, int32_t n, int32_t nA, int32_t nB, bool rootInA) {
  switch (collective) {
    case Collective::AllReduce:  // at least its AllGather half
    case Collective::AllGather:
      return static_cast<double>(nB) / n * s;
    case Collective::ReduceScatter:
      return static_cast<double>(nA) / n * s;
    case Collective::AllToAll:
      return static_cast<double>(nA) * nB / n * s;
    case Collective::Broadcast:
      return rootInA ? 0 : s;
    case Collective::Reduce:
      return 0;
  }
  return 0;
}

}  // namespace

LowerBound collectiveLowerBound(Collective collective, int64_t bytes, const Network& network, int32_t root) {
  const int32_t n = network.nRanks();
  const double s = static_cast<double>(bytes);
  LowerBound bound;
  bound.binding = "ingress";
  if (n <= 1 || bytes <= 0) return bound;
  root = std::clamp(root, 0, n - 1);
  for (int32_t r = 0; r < n; ++r) {
    const double need = ingressBytes(collective, s, n, r, root);
    if (need <= 0 || network.ingressGBps(r) <= 0) continue;
    bound.ingressUs =
        std::max(bound.ingressUs, need / (network.ingressGBps(r) * kBytesPerUsPerGBps) + network.minAlphaIntoUs(r));
  }
  const int32_t m = network.nNodes();
  const int32_t g = network.maxGpusPerNode();
  if (m > 1 && g * m == n) {
    const int32_t rootNode = network.nodeOf(root);
    for (int32_t node = 0; node < m; ++node) {
      const double need = nodeIngressBytes(collective, s, n, g, m, node == rootNode);
      if (need > 0 && network.nicRxGBps(node) > 0)
        bound.nicUs = std::max(bound.nicUs, need / (network.nicRxGBps(node) * kBytesPerUsPerGBps) +
                                                network.minNetworkAlphaUs());
    }
    const int32_t mA = m / 2;
    const double crossing = crossingBytes(collective, s, n, mA * g, (m - mA) * g, rootNode < mA);
    if (crossing > 0 && network.bisectionGBps() > 0)
      bound.bisectionUs = crossing / (network.bisectionGBps() * kBytesPerUsPerGBps) + network.minNetworkAlphaUs();
  }
  bound.timeUs = bound.ingressUs;
  if (bound.nicUs > bound.timeUs) {
    bound.timeUs = bound.nicUs;
    bound.binding = "nic";
  }
  if (bound.bisectionUs > bound.timeUs) {
    bound.timeUs = bound.bisectionUs;
    bound.binding = "bisection";
  }
  return bound;
}

}  // namespace tuccl
