// The tuner plugin's edit of what NCCL hands a tuner: a table decision applied to NCCL's cost
// table (v3+) or to v2's algorithm and protocol.
//
// In:  a CompiledDecision and NCCL's call arguments (cost table, or v2's support flags). Cost
//      tables are NCCL's float[numAlgo][numProto], indexed by NcclAlgorithm and Protocol.
// Out: the arguments edited in place, and an AppliedDecision saying what was chosen and why.
//
// Rules (docs/tuning-table.md, "Semantics"): walk the entry's choices in order; a choice is taken
// only if NCCL marked it available (cost >= 0); a choice with "any" algorithm or protocol takes
// the cheapest available entry within its constraint; when no choice is available NCCL's own
// choice stands and nothing is written. nChannels is written only when the entry sets it and the
// decision was taken. All functions are noexcept and allocation-free.
#pragma once

#include <cstddef>
#include <cstdint>

#include "table/table_index.h"

namespace tuccl {

enum class DecisionOutcome : uint8_t {
  Applied,         ///< a choice was taken (or the entry has no choices and only sets nChannels)
  AllUnavailable,  ///< every choice was unavailable: NCCL's choice stands, nothing written
};

struct AppliedDecision {
  DecisionOutcome outcome = DecisionOutcome::AllUnavailable;
  int choice = -1;  ///< index into the entry's choices; -1: none (or no choices)
  Choice selected;  ///< what was selected: both set, or both empty (left to NCCL)
  bool channelsSet = false;
};

/// v3..v7: `costTable` is NCCL's contiguous float[numAlgo][numProto] (may be null; then only
/// nChannels can be set). The selected entry is set to 0.0; an available entry earlier in NCCL's
/// scan order that is already 0.0 is raised slightly so the selection wins NCCL's strict
/// less-than scan.
AppliedDecision applyToCostTable(const CompiledDecision& decision, float* costTable, int numAlgo,
                                 int numProto, int* nChannels) noexcept;

/// v2: plain algorithm / protocol outputs, no cost table. Only fully specified choices are taken
/// (NCCL 2.21 ignores a half choice); PAT never (2.21 has 6 algorithms); CollNet only with
/// collNetSupport, NVLS / NVLS_TREE only with nvlsSupport, and these four only with SIMPLE.
AppliedDecision applyToV2(const CompiledDecision& decision, int collNetSupport, int nvlsSupport,
                          int* algorithm, int* protocol, int* nChannels) noexcept;

/// v6+ getChunkSize: the entry's chunk size, when it sets one and NCCL's (algorithm, protocol) is
/// one the entry allows (any choice matches, or the entry has no choices); 0 otherwise.
uint64_t chunkSizeFor(const CompiledDecision& decision, NcclAlgorithm algorithm, Protocol protocol) noexcept;

}  // namespace tuccl
