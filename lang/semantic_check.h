// The semantic checker: proves a collective algorithm correct, or names the first violation.
//
// In:  a structurally valid Algorithm (lang/algorithm.h).
// Out: a CheckReport: either "the <Collective> postcondition holds" or the first Violation with
//      the operation and source location that caused it.
//
// It runs the operations symbolically in step order, tracking for every (rank, buffer, chunk)
// slot which chunk it holds and which ranks' contributions have been combined into it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lang/algorithm.h"
#include "support/source_text.h"

namespace tuccl {

enum class ViolationKind : uint8_t {
  Structure,         ///< out-of-range rank/chunk/step, bad buffer sizes (validateStructure)
  UnwrittenRead,     ///< an operation reads a slot that holds no data
  LostContribution,  ///< a copy overwrites data that nothing else holds and nothing has read
  DoubleCount,       ///< a reduce combines a contribution already present in the destination
  MixedChunks,       ///< a reduce combines different chunks
  Race,              ///< two operations of one step touch one slot and at least one writes it
  Postcondition,     ///< the end state does not satisfy the collective (names rank and chunk)
};

std::string_view violationName(ViolationKind kind);

struct Violation {
  ViolationKind kind = ViolationKind::Postcondition;
  std::string message;   ///< one sentence naming ranks, buffers and chunks
  int64_t opIndex = -1;  ///< index into Algorithm::ops of the operation at fault, -1 if none
  SourceLoc loc;         ///< that operation's location
  int64_t otherOpIndex = -1;  ///< the other operation of a race, or the writer of a bad slot
  SourceLoc otherLoc;
};

struct CheckReport {
  std::optional<Violation> violation;  ///< empty when the postcondition holds
  bool ok() const { return !violation.has_value(); }
};

/// Checks the algorithm. Does structural validation first (ViolationKind::Structure).
CheckReport checkAlgorithm(const Algorithm& algorithm);

/// The violation as diagnostics for the user: the error at the operation, and a note at the
/// other operation when there is one.
std::vector<Diagnostic> violationDiagnostics(const Algorithm& algorithm, const Violation& violation);

}  // namespace tuccl
