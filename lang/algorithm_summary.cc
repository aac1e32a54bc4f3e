#include "lang/algorithm_summary.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace tuccl {
namespace {

void sortUnique(std::vector<int32_t>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

AlgorithmSummary summarizeAlgorithm(const Algorithm& algorithm) {
  AlgorithmSummary summary;
  const size_t n = static_cast<size_t>(std::max(algorithm.nRanks, 0));
  summary.sendPeers.resize(n);
  summary.recvPeers.resize(n);
  summary.sendOps.assign(n, 0);
  summary.recvOps.assign(n, 0);
  std::vector<int32_t> steps;
  steps.reserve(algorithm.ops.size());
  for (const Operation& op : algorithm.ops) {
    ++summary.operations;
    (op.kind == OpKind::Copy ? summary.copies : summary.reduces) += 1;
    summary.chunksMoved += op.count;
    steps.push_back(op.step);
    if (op.isLocal()) {
      ++summary.localOps;
      continue;
    }
    if (op.srcRank < 0 || static_cast<size_t>(op.srcRank) >= n || op.dstRank < 0 ||
        static_cast<size_t>(op.dstRank) >= n) {
      continue;  // structurally invalid; the checker reports it
    }
    summary.sendPeers[op.srcRank].push_back(op.dstRank);
    summary.recvPeers[op.dstRank].push_back(op.srcRank);
    ++summary.sendOps[op.srcRank];
    ++summary.recvOps[op.dstRank];
  }
  for (size_t r = 0; r < n; ++r) {
    sortUnique(summary.sendPeers[r]);
    sortUnique(summary.recvPeers[r]);
  }
  sortUnique(steps);
  summary.distinctSteps = static_cast<int32_t>(steps.size());
  if (!steps.empty()) {
    summary.firstStep = steps.front();
    summary.lastStep = steps.back();
  }
  return summary;
}

std::string formatRankList(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::string renderSummary(const Algorithm& algorithm, const AlgorithmSummary& summary, int32_t maxRankLines) {
  std::ostringstream out;
  out << "algorithm    " << (algorithm.name.empty() ? "(unnamed)" : algorithm.name);
  if (!algorithm.sourceName.empty()) out << " (" << algorithm.sourceName << ")";
  out << '\n';
  out << "collective   " << collectiveName(algorithm.collective);
  if (hasRoot(algorithm.collective)) out << ", root " << algorithm.root;
  out << (algorithm.inPlace ? ", in place" : ", out of place") << '\n';
  out << "ranks        " << algorithm.nRanks;
  if (algorithm.ranksPerNode > 0) {
    out << " (" << algorithm.nNodes() << " nodes x " << algorithm.ranksPerNode << " GPUs";
    if (algorithm.nicsPerNode > 0) out << ", " << algorithm.nicsPerNode << " NICs per node";
    out << ')';
  }
  out << '\n';
  out << "chunks       " << algorithm.chunksPerRank() << " per rank (buffers: input "
      << algorithm.chunks(BufferKind::Input) << ", output " << algorithm.chunks(BufferKind::Output) << ", scratch "
      << algorithm.chunks(BufferKind::Scratch) << ")\n";
  out << "operations   " << summary.operations << " (" << summary.copies << " recv, " << summary.reduces << " rrc, "
      << summary.localOps << " local; " << summary.chunksMoved << " chunks moved)\n";
  out << "steps        " << summary.distinctSteps;
  if (summary.distinctSteps > 0) out << " (" << summary.firstStep << " .. " << summary.lastStep << ")";
  out << '\n';
  if (algorithm.nChannels > 0 || algorithm.nWarps > 0) {
    out << "hints        nChannels " << algorithm.nChannels << ", nWarps " << algorithm.nWarps << '\n';
  }
  out << "peers        rank: sends (ops) to | receives (ops) from\n";
  const int32_t n = algorithm.nRanks;
  const int32_t shown = maxRankLines < 0 ? n : std::min(n, maxRankLines);
  for (int32_t r = 0; r < shown; ++r) {
    char rank[32];
    std::snprintf(rank, sizeof(rank), "%6d", r);
    out << rank << ": " << formatRankList(summary.sendPeers[r]) << " (" << summary.sendOps[r] << ") | "
        << formatRankList(summary.recvPeers[r]) << " (" << summary.recvOps[r] << ")\n";
  }
  if (shown < n) out << "  ... " << (n - shown) << " more ranks (--ranks all lists every rank)\n";
  return out.str();
}

}  // namespace tuccl
