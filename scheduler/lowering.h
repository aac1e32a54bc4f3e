// The plan: the compiled artifact every later stage reads (design.md, "Plan"; docs/plan-format.md).
//
// In:  an Algorithm, its Dag, a Pipeline and a TbAllocation (lowerToPlan), or plan JSON text
//      (readPlanJson).
// Out: a Plan: for every rank its TBs, each an ordered list of primitive entries (ResCCL §4.5:
//      rank dimension, TB dimension, pipeline dimension), or the plan as deterministic JSON.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "scheduler/tb_allocation.h"
#include "support/source_text.h"

namespace tuccl {

inline constexpr int kPlanFormatVersion = 1;

enum class PrimitiveKind : uint8_t { Send, Recv, RecvReduceCopy, Copy, Reduce };

/// "send", "recv", "recvReduceCopy", "copy", "reduce".
std::string_view primitiveName(PrimitiveKind kind);
std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name);

/// An entry of a TB on the same rank.
struct EntryRef {
  int32_t tb = 0;
  int32_t entry = 0;
  friend bool operator==(const EntryRef&, const EntryRef&) = default;
  friend auto operator<=>(const EntryRef&, const EntryRef&) = default;
};

/// One primitive: a task's share on one rank. A send pushes the source slots into the peer's
/// destination slots; the matching recv / recvReduceCopy on the peer completes it. Both sides
/// carry the whole task (source on the sender, destination on the receiver).
struct PlanEntry {
  PrimitiveKind kind = PrimitiveKind::Send;
  int32_t peer = 0;  ///< the other rank; the own rank for copy and reduce
  BufferKind srcBuffer = BufferKind::Input;
  int32_t srcIndex = 0;
  BufferKind dstBuffer = BufferKind::Output;
  int32_t dstIndex = 0;
  int32_t count = 1;
  int32_t step = 0;         ///< the task's logical step
  int32_t op = 0;           ///< index into the algorithm's operations
  int32_t subPipeline = 0;  ///< ResCCL §4.5 pipeline dimension
  /// Entries of other TBs of this rank that must finish a micro-batch before this entry runs it
  /// (data dependencies through slots). Entries earlier in the same TB are implied and omitted.
  std::vector<EntryRef> deps;
  bool hasDependents = false;  ///< some entry lists this one in its deps
  friend bool operator==(const PlanEntry&, const PlanEntry&) = default;
};

struct PlanTb {
  int32_t id = 0;
  /// The peer of every send (recv) entry: -1 when there is none, -2 when there are several
  /// (a state-based TB may serve several connections one after another).
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  std::vector<PlanEntry> entries;
  friend bool operator==(const PlanTb&, const PlanTb&) = default;
};

struct PlanRank {
  int32_t rank = 0;
  std::vector<PlanTb> tbs;
  friend bool operator==(const PlanRank&, const PlanRank&) = default;
};

struct PlanConfig {
  std::string protocol = "Simple";  ///< Simple, LL, LL128
  int32_t nThreads = 512;           ///< per TB
  int64_t chunkSize = 1 << 20;      ///< bytes per micro-batch slice of a chunk
  int32_t nChannels = 1;
  friend bool operator==(const PlanConfig&, const PlanConfig&) = default;
};

struct Plan {
  std::string collective;  ///< collectiveName()
  std::string algorithm;   ///< Algorithm::name
  int32_t nRanks = 0;
  std::array<int32_t, kBufferKinds> bufferChunks{0, 0, 0};
  bool inPlace = false;
  PlanConfig config;
  std::string scheduler;       ///< Pipeline::scheduler
  std::string executionLevel;  ///< executionLevelName()
  std::string tbAllocation;    ///< tbPolicyName()
  int32_t subPipelines = 0;
  std::vector<PlanRank> ranks;
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// Primitive lowering (ResCCL §4.3 "task-to-primitive translation"): each remote task becomes a
/// send in its source rank's TB for that connection and a recv (copy) or recvReduceCopy (reduce)
/// in its destination rank's TB; a local task a copy or reduce. Entries of a TB follow the
/// pipeline order, so each connection's sends and receives pair up in order.
Plan lowerToPlan(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline, const TbAllocation& allocation,
                 const PlanConfig& config = {});

/// The plan as JSON text ("format": "tuccl-plan", "version": 1), byte-identical for equal plans.
std::string writePlanJson(const Plan& plan);

/// Parses plan JSON. Throws DiagnosticError (with the file name of `source`, and the line and
/// column of a syntax error) when the text is not a well-formed plan of this version.
Plan readPlanJson(const SourceText& source);

/// Structural and semantic check of a plan: ranges, dependency references, hasDependents,
/// send/recv pairing per connection (same task, same slots, same order) and freedom from
/// deadlock (checkPlanDeadlockFree). Returns the first problem, empty when the plan is valid.
std::optional<std::string> validatePlan(const Plan& plan);

/// Static deadlock check: every TB runs its entries in order, an entry waits for its deps, and a
/// send and its recv run together (rendezvous, the strictest flow control). The plan is deadlock
/// free when this wait-for graph is acyclic. Assumes the pairing is valid (validatePlan).
std::optional<std::string> checkPlanDeadlockFree(const Plan& plan);

}  // namespace tuccl
