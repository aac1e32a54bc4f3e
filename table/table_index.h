// The per-communicator index of a lookup table: what getCollInfo searches.
//
// In:  a LookupTable and a communicator's key (nNodes, nRanks, topology signature).
// Out: a CommIndex: for every collective (and, only when the table filters on them, every
//      numPipeOps / regBuff class) a sorted array of disjoint byte ranges, each naming the entry
//      that wins there. Entries that cannot match the communicator are left out; where several
//      entries cover a byte count, the first in match order wins (MatchOrder). A lookup is one
//      binary search: O(log n), no allocation, no lock, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "table/lookup_table.h"

namespace tuccl {

/// What identifies a communicator to the table.
struct CommKey {
  int32_t nNodes = 1;
  int32_t nRanks = 1;
  std::string topology;  ///< empty: the communicator has no signature (topology entries never match)
  friend bool operator==(const CommKey&, const CommKey&) = default;
};

/// Whether an entry (or environment recommendation) applies to a communicator.
bool keyMatches(int32_t nNodes, int32_t nRanks, const std::string& topology, const CommKey& comm);

/// Entry indices in match order: file order, or for MatchOrder::SpecificFirst the most specific
/// key first (topology 4 + nRanks 2 + nNodes 1 points), file order among equals.
std::vector<uint32_t> entriesInMatchOrder(const LookupTable& table);

/// The environment recommendation for a communicator: the most specific match, first in file
/// order among equals; nullptr when none applies.
const EnvRecommendation* recommendEnvironment(const LookupTable& table, const CommKey& comm);

/// An entry's decision, flattened for the hot path.
struct CompiledDecision {
  std::array<Choice, kMaxChoices> choices{};
  uint8_t numChoices = 0;
  int32_t nChannels = 0;    ///< 0: keep
  uint64_t chunkSize = 0;   ///< 0: keep
  uint32_t entryIndex = 0;  ///< in LookupTable::entries
  uint32_t origin = 0;      ///< JSON entry index or CSV line, for logs
};

class CommIndex {
 public:
  static CommIndex build(const LookupTable& table, const CommKey& comm);

  /// The winning entry's decision, or nullptr. numPipeOps < 0 and regBuff outside {0, 1} mean
  /// "unknown": entries that filter on them do not match.
  const CompiledDecision* lookup(int collective, uint64_t nBytes, int numPipeOps, int regBuff) const noexcept;

  /// Entries of the table that can match this communicator.
  size_t candidateEntries() const { return decisions_.size(); }
  /// Byte ranges over all collectives and classes (the size of the search arrays).
  size_t rangeCount() const;

 private:
  struct Ranges {
    std::vector<uint64_t> starts;  ///< ascending; starts[0] == 0
    std::vector<int32_t> winners;  ///< index into decisions_, -1: no entry
  };
  std::vector<int32_t> pipeOpsValues_;  ///< sorted distinct numPipeOps filters; class = position
  int regBuffClasses_ = 1;              ///< 3 (0, 1, unknown) when some entry filters on regBuff
  int classesPerCollective_ = 1;
  std::array<std::vector<Ranges>, kTunerCollectives> ranges_;
  std::vector<CompiledDecision> decisions_;
};

}  // namespace tuccl
