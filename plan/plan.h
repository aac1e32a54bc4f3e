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

/// The fused kinds receive a slice and send it on in the same pass (NCCL's recvCopySend,
/// recvReduceSend and recvReduceCopySend; ResCCL §4.3): RecvCopySend stores the slice and forwards
/// it; RecvReduceCopySend stores the reduced slice and forwards it; RecvReduceSend forwards the
/// reduced slice without storing it (lowering emits it only where nothing reads the stored value).
enum class PrimitiveKind : uint8_t { Send, Recv, RecvReduceCopy, Copy, Reduce, RecvCopySend, RecvReduceSend, RecvReduceCopySend };

/// "send", "recv", "recvReduceCopy", "copy", "reduce", "recvCopySend", "recvReduceSend",
/// "recvReduceCopySend".
std::string_view primitiveName(PrimitiveKind kind);
std::optional<PrimitiveKind> parsePrimitiveKind(std::string_view name);
/// The kind names as a reader's error lists them ("send, recv, ... or recvReduceCopySend").
const char* primitiveNameList();
/// Recv, RecvReduceCopy or a fused kind: the receiving side of a transfer.
bool isReceive(PrimitiveKind kind);
/// Copy or Reduce: a rank's own data movement, with no peer.
bool isLocal(PrimitiveKind kind);
/// RecvCopySend, RecvReduceSend, RecvReduceCopySend: a receive that also sends (PlanEntry::next).
bool isFused(PrimitiveKind kind);
/// Send or a fused kind: the sending side of a transfer.
bool isSending(PrimitiveKind kind);
/// The receives that reduce the incoming slice into the destination.
bool reducesIncoming(PrimitiveKind kind);
/// The fused kind of a receive (Recv or RecvReduceCopy) that forwards its result; `stores`:
/// whether the result is also stored (always for a copy).
PrimitiveKind fusedKind(PrimitiveKind receive, bool stores);
/// The receive a fused kind begins with (RecvReduceSend: RecvReduceCopy).
PrimitiveKind receiveOf(PrimitiveKind kind);

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
  /// Fused kinds: the send of this entry's result (its destination slots) that runs in the same
  /// pass — the task `next.op`, to rank `next.peer`'s slots (next.dstBuffer, next.dstIndex), the
  /// same `count`. Its own fields for every other kind are the defaults.
  struct Next {
    int32_t peer = -1;
    BufferKind dstBuffer = BufferKind::Input;
    int32_t dstIndex = 0;
    int32_t step = 0;
    int32_t op = 0;
    int32_t subPipeline = 0;
    SourceLoc loc;
    friend bool operator==(const Next&, const Next&) = default;
  } next;
  friend bool operator==(const PlanEntry&, const PlanEntry&) = default;
};

/// The send a Send or fused entry performs: to `peer`, task `op` in `subPipeline`, from this
/// rank's (srcBuffer, srcIndex) to the peer's (dstBuffer, dstIndex), `count` chunks.
struct SendSide {
  int32_t peer = 0;
  int32_t op = 0;
  int32_t subPipeline = 0;
  int32_t step = 0;
  BufferKind srcBuffer = BufferKind::Input;
  int32_t srcIndex = 0;
  BufferKind dstBuffer = BufferKind::Output;
  int32_t dstIndex = 0;
  int32_t count = 1;
  SourceLoc loc;
};
/// The send side of a Send or fused entry (a fused entry sends its own destination slots).
SendSide sendSideOf(const PlanEntry& entry);

struct PlanTb {
  int32_t id = 0;
  /// The peer of every send (recv) entry — a fused entry's `next.peer` counts as a send's —: -1
  /// when there is none, -2 when there are several (a state-based TB may serve several
  /// connections one after another).
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

/// The plan with every fused entry split into its receive (Recv or RecvReduceCopy) followed by
/// its Send in the same TB; dependencies renumbered (a dependency on a fused entry becomes one on
/// its send, which the TB runs after the receive). The same data movement in the same order per
/// connection, for readers that reason about transfers one direction at a time. An
/// algorithm-level plan gets config.sendAhead of at least 1: its fused sends never waited for
/// their receivers, and split they still need not (the buffered order). With
/// `splitReceives`, per rank, TB and entry of the result: whether it is the receive half of a
/// split fused entry (its send is the next entry; the kernels run the two slice by slice).
Plan unfusedPlan(const Plan& plan, std::vector<std::vector<std::vector<bool>>>* splitReceives = nullptr);
/// Whether any entry of the plan is fused.
bool hasFusedEntries(const Plan& plan);

/// The slots a staging ring needs for the plan to make progress: a fused entry holds its incoming
/// slot until its outgoing slot is free, so a ring of fused entries (each waiting for the next)
/// needs a second slot — 2 for plans with fused entries (checkPlanDeadlockFree checks them so),
/// 1 otherwise. Runtimes give every ring at least this many, whatever their ring-depth setting.
int32_t minStagingSlots(const Plan& plan);

}  // namespace tuccl
