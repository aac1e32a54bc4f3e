// The plan: the compiled artifact every stage after the scheduler reads (design.md, "Plan";
// docs/plan-format.md). For every rank its TBs, each an ordered list of primitive entries
// (ResCCL §4.5: rank dimension, TB dimension, pipeline dimension).
//
// In:  nothing: the scheduler lowers an algorithm into a Plan (scheduler/lowering.h), and
//      readPlanJson reads one (plan/plan_json.h).
// Out: the Plan types, read by the validator (plan/plan_validate.h), the simulator (sim/) and the
//      kernel generator (kernelgen/). They depend on the shared vocabulary only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/source_text.h"
#include "support/vocabulary.h"

namespace tuccl {

enum class PrimitiveKind : uint8_t { Send, Recv, RecvReduceCopy, Copy, Reduce };

/// "send", "recv", "recvReduceCopy", "copy", "reduce".
std::string_view primitiveName(PrimitiveKind kind);
std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name);
/// Recv or RecvReduceCopy: the receiving side of a transfer.
bool isReceive(PrimitiveKind kind);
/// Copy or Reduce: a rank's own data movement, with no peer.
bool isLocal(PrimitiveKind kind);

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
  SourceLoc loc;            ///< the operation in Plan::sourceName (0:0 when unknown)
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
  Protocol protocol = Protocol::Simple;
  int32_t nThreads = 512;       ///< per TB
  int64_t chunkSize = 1 << 20;  ///< bytes per micro-batch slice of a chunk
  int32_t nChannels = 1;
  /// The flow control the entries' order relies on. 0: rendezvous (a send and its receive run
  /// together; deadlock free for any ring depth and any number of micro-batches). k > 0: a send
  /// may complete before its receive runs, while its connection holds at most k chunks sent and
  /// not yet received: the runtime needs rings of at least k x micro-batches slots.
  int32_t sendAhead = 0;
  friend bool operator==(const PlanConfig&, const PlanConfig&) = default;
};

struct Plan {
  Collective collective = Collective::AllReduce;
  std::string algorithm;   ///< the algorithm's name
  std::string sourceName;  ///< the file the algorithm came from; empty when unknown
  int32_t nRanks = 0;
  int32_t root = -1;  ///< Broadcast and Reduce: the root rank; -1 for the other collectives
  std::array<int32_t, kBufferKinds> bufferChunks{0, 0, 0};  ///< chunks per rank, by BufferKind
  bool inPlace = false;  ///< input and output are views of one buffer (plan/plan_storage.h)
  PlanConfig config;
  Scheduler scheduler = Scheduler::Hpds;
  ExecutionLevel executionLevel = ExecutionLevel::Task;
  TbPolicy tbAllocation = TbPolicy::StateBased;
  int32_t subPipelines = 0;
  std::vector<PlanRank> ranks;
  friend bool operator==(const Plan&, const Plan&) = default;
};

}  // namespace tuccl
