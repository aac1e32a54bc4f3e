// A compact description of an algorithm for people: counts, steps and who talks to whom.
//
// In:  an Algorithm.  Out: an AlgorithmSummary, and its text rendering for tuccl-compile --check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/algorithm.h"

namespace tuccl {

struct AlgorithmSummary {
  int64_t operations = 0;
  int64_t copies = 0;      ///< recv
  int64_t reduces = 0;     ///< rrc
  int64_t localOps = 0;    ///< source and destination on one rank
  int64_t chunksMoved = 0; ///< sum of counts
  int32_t distinctSteps = 0;
  int32_t firstStep = 0;
  int32_t lastStep = 0;
  /// Per rank, the sorted distinct peers it sends to and receives from (local ops excluded).
  std::vector<std::vector<int32_t>> sendPeers;
  std::vector<std::vector<int32_t>> recvPeers;
  /// Per rank, operations it sends and receives (remote only).
  std::vector<int64_t> sendOps;
  std::vector<int64_t> recvOps;
};

AlgorithmSummary summarizeAlgorithm(const Algorithm& algorithm);

/// "0-3,8,12-15": sorted ranks with runs collapsed.
std::string formatRankList(const std::vector<int32_t>& ranks);

/// The report printed by `tuccl-compile --check`: header lines, then one line per rank (at most
/// `maxRankLines`, the rest elided with a count).
std::string renderSummary(const Algorithm& algorithm, const AlgorithmSummary& summary, int32_t maxRankLines);

}  // namespace tuccl
