#include "table/table_index.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace tuccl {
namespace {

int specificity(int32_t nNodes, int32_t nRanks, const std::string& topology) {
  return (topology.empty() ? 0 : 4) + (nRanks >= 0 ? 2 : 0) + (nNodes >= 0 ? 1 : 0);
}

/// Appends a range start, merging with the previous range when the winner is the same.
void pushRange(std::vector<uint64_t>& starts, std::vector<int32_t>& winners, uint64_t start, int32_t winner) {
  if (!starts.empty() && starts.back() == start) {
    winners.back() = winner;
    if (winners.size() >= 2 && winners[winners.size() - 2] == winner) {
      starts.pop_back();
      winners.pop_back();
    }
    return;
  }
  if (!winners.empty() && winners.back() == winner) return;
  starts.push_back(start);
  winners.push_back(winner);
}

}  // namespace

bool keyMatches(int32_t nNodes, int32_t nRanks, const std::string& topology, const CommKey& comm) {
  return (nNodes < 0 || nNodes == comm.nNodes) && (nRanks < 0 || nRanks == comm.nRanks) &&
         (topology.empty() || topology == comm.topology);
}

std::vector<uint32_t> entriesInMatchOrder(const LookupTable& table) {
  std::vector<uint32_t> order(table.entries.size());
  std::iota(order.begin(), order.end(), 0u);
  if (table.matchOrder == MatchOrder::SpecificFirst) {
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const TableEntry& x = table.entries[a];
      const TableEntry& y = table.entries[b];
      return specificity(x.nNodes, x.nRanks, x.topology) > specificity(y.nNodes, y.nRanks, y.topology);
    });
  }
  return order;
}

const EnvRecommendation* recommendEnvironment(const LookupTable& table, const CommKey& comm) {
  const EnvRecommendation* best = nullptr;
  int bestScore = -1;
  for (const EnvRecommendation& env : table.environment) {
    if (!keyMatches(env.nNodes, env.nRanks, env.topology, comm)) continue;
    int score = specificity(env.nNodes, env.nRanks, env.topology);
    if (table.matchOrder == MatchOrder::FileOrder) score = 0;
    if (score > bestScore) {
      best = &env;
      bestScore = score;
    }
  }
  return best;
}

CommIndex CommIndex::build(const LookupTable& table, const CommKey& comm) {
  CommIndex index;
  // The candidates, in match order; their position is their priority (lower wins).
  std::vector<uint32_t> candidates;
  std::set<int32_t> pipeOps;
  bool regBuffFilter = false;
  for (uint32_t i : entriesInMatchOrder(table)) {
    const TableEntry& entry = table.entries[i];
    if (!keyMatches(entry.nNodes, entry.nRanks, entry.topology, comm)) continue;
    candidates.push_back(i);
    if (entry.numPipeOps >= 0) pipeOps.insert(entry.numPipeOps);
    regBuffFilter = regBuffFilter || entry.regBuff >= 0;
    CompiledDecision decision;
    decision.numChoices = static_cast<uint8_t>(std::min<size_t>(entry.choices.size(), kMaxChoices));
    std::copy_n(entry.choices.begin(), decision.numChoices, decision.choices.begin());
    decision.nChannels = entry.nChannels;
    decision.chunkSize = entry.chunkSize;
    decision.entryIndex = i;
    decision.origin = entry.origin;
    index.decisions_.push_back(decision);
  }
  index.pipeOpsValues_.assign(pipeOps.begin(), pipeOps.end());
  index.regBuffClasses_ = regBuffFilter ? 3 : 1;
  int pipeClasses = static_cast<int>(index.pipeOpsValues_.size()) + 1;
  index.classesPerCollective_ = pipeClasses * index.regBuffClasses_;

  struct Event {
    uint64_t position;
    bool add;
    uint32_t priority;
  };
  std::vector<Event> events;
  // Candidate priorities per collective, ascending.
  std::array<std::vector<uint32_t>, kTunerCollectives> byCollective;
  for (uint32_t priority = 0; priority < candidates.size(); ++priority) {
    byCollective[static_cast<size_t>(table.entries[candidates[priority]].collective)].push_back(priority);
  }
  for (int coll = 0; coll < kTunerCollectives; ++coll) {
    index.ranges_[coll].resize(index.classesPerCollective_);
    for (int pipeClass = 0; pipeClass < pipeClasses; ++pipeClass) {
      for (int regClass = 0; regClass < index.regBuffClasses_; ++regClass) {
        events.clear();
        for (uint32_t priority : byCollective[coll]) {
          const TableEntry& entry = table.entries[candidates[priority]];
          if (entry.numPipeOps >= 0 &&
              (pipeClass == pipeClasses - 1 || index.pipeOpsValues_[pipeClass] != entry.numPipeOps)) {
            continue;
          }
          if (entry.regBuff >= 0 && entry.regBuff != regClass) continue;  // class 2 (unknown) never equals
          events.push_back({entry.minBytes, true, priority});
          if (entry.maxBytes != UINT64_MAX) events.push_back({entry.maxBytes + 1, false, priority});
        }
        std::sort(events.begin(), events.end(),
                  [](const Event& a, const Event& b) { return a.position < b.position; });
        Ranges& ranges = index.ranges_[coll][pipeClass * index.regBuffClasses_ + regClass];
        ranges.starts.push_back(0);
        ranges.winners.push_back(-1);
        std::set<uint32_t> active;
        for (size_t e = 0; e < events.size();) {
          uint64_t position = events[e].position;
          for (; e < events.size() && events[e].position == position; ++e) {
            if (events[e].add) {
              active.insert(events[e].priority);
            } else {
              active.erase(events[e].priority);
            }
          }
          pushRange(ranges.starts, ranges.winners, position,
                    active.empty() ? -1 : static_cast<int32_t>(*active.begin()));
        }
        ranges.starts.shrink_to_fit();
        ranges.winners.shrink_to_fit();
      }
    }
  }
  return index;
}

const CompiledDecision* CommIndex::lookup(int collective, uint64_t nBytes, int numPipeOps,
                                          int regBuff) const noexcept {
  if (collective < 0 || collective >= kTunerCollectives || decisions_.empty()) return nullptr;
  int pipeClass = static_cast<int>(pipeOpsValues_.size());
  if (numPipeOps >= 0 && !pipeOpsValues_.empty()) {
    auto it = std::lower_bound(pipeOpsValues_.begin(), pipeOpsValues_.end(), numPipeOps);
    if (it != pipeOpsValues_.end() && *it == numPipeOps)
      pipeClass = static_cast<int>(it - pipeOpsValues_.begin());
  }
  int regClass = regBuffClasses_ == 1 ? 0 : (regBuff == 0 || regBuff == 1 ? regBuff : 2);
  const Ranges& ranges = ranges_[collective][pipeClass * regBuffClasses_ + regClass];
  // The last range starting at or before nBytes; starts[0] == 0, so there is one.
  size_t position = static_cast<size_t>(std::upper_bound(ranges.starts.begin(), ranges.starts.end(), nBytes) -
                                        ranges.starts.begin()) -
                    1;
  int32_t winner = ranges.winners[position];
  return winner < 0 ? nullptr : &decisions_[winner];
}

size_t CommIndex::rangeCount() const {
  size_t count = 0;
  for (const auto& perCollective : ranges_) {
    for (const Ranges& ranges : perCollective) count += ranges.starts.size();
  }
  return count;
}

}  // namespace tuccl
