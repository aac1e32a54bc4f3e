// The reference result of a collective call, computed from the collective's definition alone
// (NCCL's semantics, design.md "Algorithm IR"), never from a plan: what every rank's output must
// hold after the call, given every rank's input.
//
// In:  a CollectiveCall (collective, ranks, root, datatype, op, count, in place) and the input
//      elements of every rank as float64 values (already rounded to the datatype; integers are
//      taken as their type holds them, wrapped to its width as writeElement stores them: -1 is
//      uint32's 4294967295).
// Out: per rank the expected output elements, or nothing where the call leaves the output
//      unspecified; integers as the kernels compute them (wrapping), floats in float64.
//
// Per rank r, with n ranks and count c (NCCL's count of the call):
//   AllReduce      input c, output c:   the element-wise reduction over all ranks
//   AllGather      input c, output n·c: block q is rank q's input
//   ReduceScatter  input n·c, output c: block r of the reduction
//   AllToAll       input n·c, output n·c: block q is block r of rank q's input
//   Broadcast      input c, output c:   the root's input (the others' inputs are not read)
//   Reduce         input c, output c:   the reduction at the root; unspecified elsewhere — NCCL
//                  ignores recvbuff on non-roots, and a plan may use a non-root's output (in
//                  place: its data buffer) as working storage for partial reductions
// The result does not depend on `inPlace` (NCCL's in-place calls compute the same values); what
// in place changes is where the input lives and whether it must survive, which the comparison
// checks (output_compare.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "support/collective_call.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

/// Per rank the expected output elements; nullopt where the output is unspecified.
using RankOutputs = std::vector<std::optional<std::vector<double>>>;

/// Element j of rank q's input, for referenceElement.
using InputElement = std::function<double(int32_t q, int64_t j)>;

/// Element `index` of rank `rank`'s output computed from `input` alone, for callers that check
/// one rank's output without holding every rank's input (tuccl-bench regenerates the inputs). The
/// call must be well-formed (checkCall), `index` in [0, outputElements(call)), and the rank's
/// output specified (not a non-root of Reduce).
double referenceElement(const CollectiveCall& call, int32_t rank, int64_t index, const InputElement& input);

/// The reference outputs of `call`; `inputs[r]` holds rank r's inputElements(call) values. An
/// InvalidArgument status when the call is malformed or an input has the wrong length.
Expected<RankOutputs> referenceOutputs(const CollectiveCall& call, const std::vector<std::vector<double>>& inputs);

}  // namespace tuccl

