#include "lang/algorithm.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace tuccl {

int32_t Algorithm::chunksPerRank() const { return collectiveChunkUnit(collective, nRanks, bufferChunks); }

int32_t Algorithm::maxStep() const {
  int32_t result = 0;
  for (const Operation& op : ops) result = std::max(result, op.step);
  return result;
}

std::array<int32_t, kBufferKinds> conventionalBufferChunks(Collective kind, int32_t nRanks, int32_t k,
                                                           int32_t scratch) {
  switch (kind) {
    case Collective::AllGather:
      return {k, nRanks * k, scratch};
    case Collective::ReduceScatter:
      return {nRanks * k, k, scratch};
    case Collective::AllToAll:
      return {nRanks * k, nRanks * k, scratch};
    default:
      return {k, k, scratch};
  }
}

StorageSlot inPlaceStorage(const Algorithm& algorithm, int32_t rank, BufferKind buffer, int32_t index) {
  if (!algorithm.inPlace) return {buffer, index};
  return inPlaceSlot(algorithm.collective, algorithm.chunksPerRank(), rank, buffer, index);
}

namespace {

Diagnostic errorAt(const Algorithm& algorithm, SourceLoc loc, std::string message) {
  return Diagnostic{Severity::Error, algorithm.sourceName, loc, std::move(message)};
}

std::string range(int64_t limit) { return "[0, " + std::to_string(limit) + ")"; }

std::optional<Diagnostic> firstStructureProblem(const Algorithm& algorithm) {
  const int64_t n = algorithm.nRanks;
  if (n <= 0) return errorAt(algorithm, {}, "the algorithm has no ranks (nRanks = " + std::to_string(n) + ")");
  if (algorithm.ranksPerNode < 0 || (algorithm.ranksPerNode > 0 && n % algorithm.ranksPerNode != 0)) {
    return errorAt(algorithm, {},
                   "nRanks = " + std::to_string(n) + " is not a multiple of the ranks per node (" +
                       std::to_string(algorithm.ranksPerNode) + ")");
  }
  for (int b = 0; b < kBufferKinds; ++b) {
    if (algorithm.bufferChunks[b] < 0) {
      return errorAt(algorithm, {}, std::string(bufferName(static_cast<BufferKind>(b))) + " buffer has a negative size");
    }
  }
  if (hasRoot(algorithm.collective) && (algorithm.root < 0 || algorithm.root >= n)) {
    return errorAt(algorithm, {},
                   std::string(collectiveName(algorithm.collective)) + " root " + std::to_string(algorithm.root) +
                       " out of range " + range(n));
  }
  const int32_t k = algorithm.chunksPerRank();
  if (k <= 0) return errorAt(algorithm, {}, "the collective has no chunks");
  if (algorithm.bufferChunks[0] != conventionalBufferChunks(algorithm.collective, algorithm.nRanks, k)[0] ||
      algorithm.bufferChunks[1] != conventionalBufferChunks(algorithm.collective, algorithm.nRanks, k)[1]) {
    return errorAt(algorithm, {},
                   "buffer sizes (input " + std::to_string(algorithm.bufferChunks[0]) + ", output " +
                       std::to_string(algorithm.bufferChunks[1]) + " chunks) do not fit a " +
                       std::string(collectiveName(algorithm.collective)) + " of " + std::to_string(n) + " ranks");
  }
  for (const Operation& op : algorithm.ops) {
    if (op.srcRank < 0 || op.srcRank >= n) {
      return errorAt(algorithm, op.loc, "source rank " + std::to_string(op.srcRank) + " out of range " + range(n));
    }
    if (op.dstRank < 0 || op.dstRank >= n) {
      return errorAt(algorithm, op.loc,
                     "destination rank " + std::to_string(op.dstRank) + " out of range " + range(n));
    }
    if (op.count <= 0) return errorAt(algorithm, op.loc, "chunk count " + std::to_string(op.count) + " is not positive");
    if (op.step < 0) return errorAt(algorithm, op.loc, "step " + std::to_string(op.step) + " is negative");
    const int64_t srcLimit = algorithm.chunks(op.srcBuffer);
    const int64_t dstLimit = algorithm.chunks(op.dstBuffer);
    if (op.srcIndex < 0 || int64_t{op.srcIndex} + op.count > srcLimit) {
      return errorAt(algorithm, op.loc,
                     "source chunk " + std::to_string(op.srcIndex) +
                         (op.count > 1 ? " (count " + std::to_string(op.count) + ")" : std::string()) +
                         " out of range " + range(srcLimit) + " of the " + std::string(bufferName(op.srcBuffer)) +
                         " buffer");
    }
    if (op.dstIndex < 0 || int64_t{op.dstIndex} + op.count > dstLimit) {
      return errorAt(algorithm, op.loc,
                     "destination chunk " + std::to_string(op.dstIndex) +
                         (op.count > 1 ? " (count " + std::to_string(op.count) + ")" : std::string()) +
                         " out of range " + range(dstLimit) + " of the " + std::string(bufferName(op.dstBuffer)) +
                         " buffer");
    }
  }
  return std::nullopt;
}

}  // namespace

Status validateStructure(const Algorithm& algorithm) {
  if (auto problem = firstStructureProblem(algorithm)) return Status(ErrorCode::InvalidInput, std::move(*problem));
  return {};
}

}  // namespace tuccl
