// The algorithm IR: what a collective algorithm is, independent of the language it was written in.
//
// In:  nothing (front ends build it: ResCCLang, MSCCL XML, and synthesisers).
// Out: an Algorithm, read by the semantic checker, the scheduler and the simulator.
//
// An Algorithm is a collective (kind, ranks, buffer sizes in chunks) plus a flat list of
// Operations. An operation moves `count` contiguous chunks from (rank, buffer, index) to
// (rank, buffer, index) as a copy (dst = src) or a reduce (dst op= src), at a logical `step`:
// operations of smaller steps happen before those of larger steps; operations of one step are
// concurrent. Conventions follow NCCL's (design.md, "Algorithm IR").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/buffer_layout.h"
#include "support/source_text.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

/// Collective, BufferKind and their names come from the shared vocabulary (support/vocabulary.h).
enum class OpKind : uint8_t { Copy, Reduce };

/// One data movement. 36 bytes, so millions of them are cheap to hold.
struct Operation {
  int32_t srcRank = 0;
  int32_t srcIndex = 0;  ///< first chunk read, in srcBuffer
  int32_t dstRank = 0;
  int32_t dstIndex = 0;  ///< first chunk written, in dstBuffer
  int32_t count = 1;     ///< contiguous chunks moved
  int32_t step = 0;      ///< logical step; smaller steps happen first
  SourceLoc loc;         ///< where the operation was written (0:0 when generated)
  BufferKind srcBuffer = BufferKind::Input;
  BufferKind dstBuffer = BufferKind::Output;
  OpKind kind = OpKind::Copy;

  bool isLocal() const { return srcRank == dstRank; }
  friend bool operator==(const Operation&, const Operation&) = default;
};

/// A collective algorithm in the IR.
struct Algorithm {
  std::string name;            ///< e.g. "HM"
  std::string sourceName;      ///< the file it came from, for diagnostics
  Collective collective = Collective::AllReduce;
  int32_t nRanks = 0;
  int32_t ranksPerNode = 0;    ///< 0 when unknown
  int32_t nicsPerNode = 0;     ///< 0 when unknown
  int32_t root = -1;           ///< Broadcast and Reduce only
  bool inPlace = false;        ///< input and output are views of one buffer (NCCL's in-place layout)
  /// Chunks per rank in each buffer, indexed by BufferKind.
  std::array<int32_t, kBufferKinds> bufferChunks{0, 0, 0};
  int32_t nChannels = 0;       ///< hints carried from the source (ResCCLang header); 0 = unset
  int32_t nWarps = 0;
  std::vector<Operation> ops;

  int32_t chunks(BufferKind buffer) const { return bufferChunks[static_cast<int>(buffer)]; }
  int32_t nNodes() const { return ranksPerNode > 0 ? nRanks / ranksPerNode : 1; }
  /// The collective's chunk unit k: AllGather's input, ReduceScatter's output, AllToAll's input
  /// divided by the ranks, and the whole input of the others.
  int32_t chunksPerRank() const;
  /// Number of distinct steps used, and the largest step (both 0 for no operations).
  int32_t maxStep() const;
};

/// The buffer sizes NCCL's conventions give a collective with chunk unit k (see chunksPerRank).
std::array<int32_t, kBufferKinds> conventionalBufferChunks(Collective kind, int32_t nRanks, int32_t k,
                                                           int32_t scratch = 0);

/// Where chunk `index` of `buffer` on `rank` lives: inPlaceSlot (support/buffer_layout.h) when the
/// algorithm is in place, the buffer itself otherwise.
StorageSlot inPlaceStorage(const Algorithm& algorithm, int32_t rank, BufferKind buffer, int32_t index);

/// Structural validation: sizes, ranks, buffer ranges, counts, steps. Returns the first problem
/// as an InvalidInput status with a diagnostic at the operation's location (ok when the
/// algorithm is well-formed). The semantic checker assumes a structurally valid algorithm.
Status validateStructure(const Algorithm& algorithm);

}  // namespace tuccl
