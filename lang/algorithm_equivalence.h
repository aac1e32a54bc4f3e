// Semantic equality of two algorithms: whether they compute the same collective the same way as
// far as any caller can observe, whatever their step numbering, scratch use or operation split.
//
// In:  two Algorithms (lang/algorithm.h), each structurally valid and race-free (the semantic
//      checker passes), e.g. an imported MSCCL file and the import of its re-export.
// Out: ok, or InvalidInput naming the first difference ("rank 2 output chunk 3: ...").
//
// The definition (docs/msccl.md, "Round trips"): the two have the same collective, ranks, root
// (Broadcast, Reduce), call layout (in place or not) and input and output sizes in chunks; and
// after a symbolic run each input and output chunk of every rank holds the same value in both.
// A value is the multiset of the input chunks (rank, index) reduced into it, or "never written"
// (what a chunk held before the call, other than an input). The run applies the operations in
// step order, every operation of a step reading the state before the step (the checker proves
// operations of one step independent), copies replacing and reduces adding multisets, through
// each algorithm's own storage (inPlaceStorage), so aliasing is part of the result. Scratch,
// step numbers, the order of independent operations and how transfers are split or fused are
// not observable and not compared.
#pragma once

#include "lang/algorithm.h"
#include "support/status.h"

namespace tuccl {

Status compareAlgorithmSemantics(const Algorithm& expected, const Algorithm& actual);

}  // namespace tuccl
