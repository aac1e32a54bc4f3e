#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace tuccl {

namespace {
constexpr double kBytesPerUsPerGBps = 1e3;
}  // namespace

Metrics computeMetrics(const Plan& plan, const Network& network, const SimResult& result) {
  Metrics metrics;
  const Collective collective = plan.collective;
  metrics.timeUs = result.timeUs;
  if (result.timeUs > 0) {
    metrics.algBwGBps = static_cast<double>(result.messageBytes) / (result.timeUs * kBytesPerUsPerGBps);
    metrics.busBwGBps = metrics.algBwGBps * busBandwidthFactor(collective, plan.nRanks);
  }
  metrics.bound = collectiveLowerBound(collective, result.messageBytes, network, std::max(0, plan.root));
  metrics.efficiency = result.timeUs > 0 ? metrics.bound.timeUs / result.timeUs : 0;

  // TBs.
  std::vector<int32_t> perRank(plan.nRanks, 0);
  double busySum = 0;
  for (const SimTb& tb : result.tbs) {
    ++perRank[tb.rank];
    const double lifetime = result.rankEndUs[tb.rank];
    const double busy = lifetime > 0 ? std::min(1.0, tb.busyUs / lifetime) : 1.0;
    busySum += busy;
    metrics.tbIdleMax = std::max(metrics.tbIdleMax, 1 - busy);
  }
  metrics.totalTbs = static_cast<int64_t>(result.tbs.size());
  if (!perRank.empty()) {
    metrics.minTbsPerRank = *std::min_element(perRank.begin(), perRank.end());
    metrics.maxTbsPerRank = *std::max_element(perRank.begin(), perRank.end());
  }
  if (!result.tbs.empty()) {
    metrics.tbBusyMean = busySum / result.tbs.size();
    metrics.tbIdleMean = 1 - metrics.tbBusyMean;
  }

  // Links.
  double spanSum = 0;
  double bubbleSum = 0;
  const auto& resources = network.resources();
  for (size_t r = 0; r < result.resources.size() && r < resources.size(); ++r) {
    const FlowNetwork::ResourceStats& stats = result.resources[r];
    if (stats.bytes <= 0) continue;
    LinkUse use;
    use.resource = static_cast<int32_t>(r);
    use.name = resources[r].name;
    use.bytes = stats.bytes;
    if (result.timeUs > 0) {
      use.utilisation = stats.bytes / (resources[r].capacityGBps * kBytesPerUsPerGBps * result.timeUs);
      use.busyFraction = stats.busyUs / result.timeUs;
    }
    const double span = stats.lastUs - stats.firstUs;
    use.bubbleUs = std::max(0.0, span - stats.busyUs);
    spanSum += std::max(0.0, span);
    bubbleSum += use.bubbleUs;
    metrics.links.push_back(use);
  }
  metrics.usedLinks = static_cast<int32_t>(metrics.links.size());
  for (const LinkUse& use : metrics.links) {
    metrics.linkUtilisationMean += use.utilisation;
    metrics.linkBusyMean += use.busyFraction;
    metrics.linkUtilisationMax = std::max(metrics.linkUtilisationMax, use.utilisation);
  }
  if (metrics.usedLinks > 0) {
    metrics.linkUtilisationMean /= metrics.usedLinks;
    metrics.linkBusyMean /= metrics.usedLinks;
  }
  metrics.bubbleFraction = spanSum > 0 ? bubbleSum / spanSum : 0;
  std::stable_sort(metrics.links.begin(), metrics.links.end(),
                   [](const LinkUse& a, const LinkUse& b) { return a.utilisation > b.utilisation; });
  return metrics;
}

std::string formatMetrics(const Metrics& m, int32_t maxLinks) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "time %.2f us, algbw %.2f GB/s, busbw %.2f GB/s\n", m.timeUs, m.algBwGBps,
                m.busBwGBps);
  out << line;
  std::snprintf(line, sizeof line,
                "lower bound %.2f us (%s; ingress %.2f, nic %.2f, bisection %.2f), efficiency %.1f%%\n",
                m.bound.timeUs, m.bound.binding.c_str(), m.bound.ingressUs, m.bound.nicUs, m.bound.bisectionUs,
                100 * m.efficiency);
  out << line;
  std::snprintf(line, sizeof line, "TBs %lld (%d..%d per rank), busy %.1f%%, idle mean %.1f%% max %.1f%%\n",
                static_cast<long long>(m.totalTbs), m.minTbsPerRank, m.maxTbsPerRank, 100 * m.tbBusyMean,
                100 * m.tbIdleMean, 100 * m.tbIdleMax);
  out << line;
  std::snprintf(line, sizeof line, "links used %d, utilisation mean %.1f%% max %.1f%%, busy mean %.1f%%, bubbles %.1f%%\n",
                m.usedLinks, 100 * m.linkUtilisationMean, 100 * m.linkUtilisationMax, 100 * m.linkBusyMean,
                100 * m.bubbleFraction);
  out << line;
  for (int32_t i = 0; i < maxLinks && i < static_cast<int32_t>(m.links.size()); ++i) {
    const LinkUse& use = m.links[i];
    std::snprintf(line, sizeof line, "  %-36s util %5.1f%%  busy %5.1f%%  %12.0f B\n", use.name.c_str(),
                  100 * use.utilisation, 100 * use.busyFraction, use.bytes);
    out << line;
  }
  return out.str();
}

}  // namespace tuccl
