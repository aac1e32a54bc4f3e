// Export of a plan as an MSCCL++ execution plan (JSON), the file microsoft/mscclpp's executor and
// its NCCL shim load (docs/msccl.md, "Export to MSCCL++").
//
// In:  a valid Plan (plan/plan_validate.h) and MscclppExportOptions (call layout, ranks per node,
//      message size range).
// Out: an MscclppPlan (the file's content, typed), the executor's limits it violates, and the JSON
//      text; or a Status saying why not.
//
// One MSCCL++ thread block per plan TB. Every transfer is pushed: the sender `put`s its chunks
// into a landing area of its own in the receiver's scratch (never reused, so no credits are
// needed) and signals; the receiver `wait`s, then `copy`s (recv) or reduces with `re`
// (recvReduceCopy) into place. Memory channels join ranks of one node, port channels ranks of
// different nodes; a channel per lane (the transfers one TB sends and one TB receives on a
// directed rank pair). Cross-TB dependencies are semaphores; a `nop` separates dependent ops of a
// thread block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

struct MscclppExportOptions {
  /// In-place calls (`"inplace": true`) or out-of-place calls. An in-place plan runs out of place
  /// after a copy of the input into the output (not ReduceScatter, whose in-place storage is the
  /// input); an out-of-place plan cannot serve in-place calls.
  bool inPlace = true;
  /// Ranks of one node (consecutive ranks); 0: every rank on one node. Must divide nRanks.
  int32_t ranksPerNode = 0;
  uint64_t minBytes = 0;  ///< smallest message (the output for AllGather, the input otherwise)
  /// Largest message, inclusive; 0: the largest whose buffers keep 32-bit offsets.
  uint64_t maxBytes = 0;
  int32_t bufferAlignment = 16;
};

enum class MscclppChannelType : uint8_t { None, Memory, Port };
/// "none", "memory", "port".
std::string_view mscclppChannelTypeName(MscclppChannelType type);

/// The op codes TuCCL writes (a subset of the executor's).
enum class MscclppOpCode : uint8_t { Nop, Barrier, Signal, Wait, Put, Pwsf, Copy, Reduce, SemAcquire, SemRelease };
/// The executor's spelling: "nop", "barrier", "signal", "wait", "put", "pwsf", "copy", "re",
/// "sem_acquire", "sem_release".
std::string_view mscclppOpName(MscclppOpCode code);

/// A buffer operand: local (`bufferId` -1, `buffer`) or remote (`bufferId` indexes the thread
/// block's remote buffers of the op's channel type). Index and size in chunks.
struct MscclppBufferRef {
  BufferKind buffer = BufferKind::Input;
  int32_t bufferId = -1;
  int64_t index = 0;
  int64_t size = 0;
  friend bool operator==(const MscclppBufferRef&, const MscclppBufferRef&) = default;
};

struct MscclppOp {
  MscclppOpCode code = MscclppOpCode::Nop;
  MscclppChannelType channelType = MscclppChannelType::None;
  std::vector<int32_t> channelIds;  ///< indexes into the thread block's channels of channelType
  std::vector<MscclppBufferRef> src;
  std::vector<MscclppBufferRef> dst;
  int32_t barrierId = -1;
  int32_t numThreadblocks = 0;
  std::vector<int32_t> semaphoreIds;
};

struct MscclppThreadBlock {
  int32_t id = 0;
  std::vector<int32_t> memoryChannels;  ///< global memory channel indexes of the GPU
  std::vector<int32_t> portChannels;
  std::vector<int32_t> memoryBuffers;  ///< remote buffer ids reached through memory channels
  std::vector<int32_t> portBuffers;
  std::vector<MscclppOp> ops;
};

struct MscclppRemoteBuffer {
  int32_t rank = 0;
  BufferKind buffer = BufferKind::Scratch;
  MscclppChannelType access = MscclppChannelType::Memory;
};

struct MscclppGpu {
  int32_t id = 0;
  int32_t inputChunks = 0;
  int32_t outputChunks = 0;
  int32_t scratchChunks = 0;
  std::vector<int32_t> memoryPeers;  ///< connected_to of the memory channels, one per channel
  std::vector<int32_t> portPeers;
  std::vector<MscclppRemoteBuffer> remoteBuffers;
  std::vector<MscclppThreadBlock> threadBlocks;
  int32_t semaphores = 0;  ///< each with init_value 0
};

struct MscclppPlan {
  std::string name;
  Collective collective = Collective::AllReduce;
  bool inPlace = true;
  int32_t numThreadsPerBlock = 1024;
  int32_t bufferAlignment = 16;
  uint64_t minMessageSize = 0;
  uint64_t maxMessageSize = 0;
  std::vector<MscclppGpu> gpus;
};

/// One executor limit the plan exceeds.
struct MscclppLimitViolation {
  std::string limit;  ///< e.g. "ops per thread block"
  std::string where;  ///< e.g. "gpu 3 tb 5"; "plan" for the whole file
  uint64_t value = 0;
  uint64_t maximum = 0;
  /// "gpu 3 tb 5: ops per thread block is 70, the most is 64".
  std::string message() const;
};

/// The plan in MSCCL++'s model. InvalidArgument for bad options, Unsupported for a call layout
/// the plan cannot serve, InvalidInput for an invalid plan.
Expected<MscclppPlan> lowerToMscclpp(const Plan& plan, const MscclppExportOptions& options);

/// Every executor limit (execution_common.hpp) the plan exceeds: ops per thread block (pipeline
/// ops included), memory and port channels per thread block, channels per op, operands per list,
/// barriers, semaphores, and 32-bit byte offsets at the largest message; empty when it loads.
std::vector<MscclppLimitViolation> checkMscclppLimits(const MscclppPlan& plan);

/// The JSON text (keys in the executor's reading order, two-space indentation, trailing newline).
std::string writeMscclppJson(const MscclppPlan& plan);

/// lowerToMscclpp, checkMscclppLimits and writeMscclppJson: the file, or ResourceExhausted
/// listing every violated limit (one per line).
Expected<std::string> exportMscclppJson(const Plan& plan, const MscclppExportOptions& options);

}  // namespace tuccl
