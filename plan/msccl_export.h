// Export of a plan as an MSCCL algorithm XML file, the format microsoft/msccl,
// msccl-executor-nccl and RCCL load (docs/msccl.md, "Export").
//
// In:  a valid Plan (plan/plan_validate.h) and MscclExportOptions (target runtime, in-place or
//      out-of-place calls, replicas over channels, size range).
// Out: an MscclAlgorithm (the file's content, typed), the limit violations of a target runtime,
//      and the XML text written to the runtimes' lexical rules; or a Status saying why not.
//
// MSCCL's model is narrower than a plan's: a thread block (TB) has at most one send peer, one
// receive peer and one channel, and each (peer, direction, channel) connection of a GPU belongs to
// one TB, whose steps pair with the peer's in program order. A plan TB that serves several
// connections one after another (state-based allocation) is cut into order-preserving parts that
// each fit; the order the cut removes is kept by dependencies (depid/deps, nop steps for several),
// dropped only where another kept dependency already implies it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// The runtimes that read MSCCL XML; they differ in spellings and limits.
enum class MscclRuntime : uint8_t { Msccl, Executor, Rccl };
inline constexpr int kMscclRuntimes = 3;

/// "msccl" (microsoft/msccl), "executor" (msccl-executor-nccl), "rccl".
std::string_view mscclRuntimeName(MscclRuntime runtime);
std::optional<MscclRuntime> parseMscclRuntime(std::string_view name);

struct MscclExportOptions {
  /// Spellings (coll="reduce_scatter" for msccl, "reducescatter" otherwise; maxBytes exclusive
  /// for msccl, inclusive otherwise) and the limits exportMscclXml checks.
  MscclRuntime runtime = MscclRuntime::Executor;
  /// In-place calls (inplace="1") or out-of-place calls (outofplace="1"). An in-place plan runs
  /// out of place after a copy of the input into the output (not for ReduceScatter, whose in-place
  /// storage is the input); an out-of-place plan cannot run in place.
  bool inPlace = true;
  /// Copies of the algorithm over disjoint data, each on its own channels (MSCCL's instances);
  /// 0 takes the plan's config.nChannels.
  int32_t replicas = 0;
  uint64_t minBytes = 0;  ///< smallest call, in bytes of the collective's total (MSCCL's nBytes)
  uint64_t maxBytes = 0;  ///< largest call, inclusive; 0 = no limit
  /// Fuse a receive and the send of the same data right after it into rcs / rrcs.
  bool fuse = true;
};

// MscclStepType (support/vocabulary.h): TuCCL writes every type but rrs (whose result stays only
// on the wire) and never "ra", which no interpreter runs.

struct MscclStep {
  MscclStepType type = MscclStepType::Nop;
  BufferKind srcBuffer = BufferKind::Input;
  int32_t srcOffset = -1;  ///< -1: unused
  BufferKind dstBuffer = BufferKind::Input;
  int32_t dstOffset = -1;
  int32_t count = 0;
  int32_t depTb = -1;  ///< the TB of this GPU whose step `depStep` must be done first; -1: none
  int32_t depStep = -1;
  bool hasDependents = false;  ///< hasdep: another TB waits for this step
};

struct MscclTb {
  int32_t id = 0;
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  int32_t channel = 0;
  std::vector<MscclStep> steps;
};

struct MscclGpu {
  int32_t id = 0;
  int32_t inputChunks = 0;
  int32_t outputChunks = 0;
  int32_t scratchChunks = 0;
  std::vector<MscclTb> tbs;
};

struct MscclAlgorithm {
  std::string name;
  Collective collective = Collective::AllReduce;
  Protocol protocol = Protocol::Simple;
  int32_t nChannels = 1;
  int32_t nChunksPerLoop = 0;
  int32_t nThreads = 0;  ///< 0: the runtime's default
  bool inPlace = true;
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;  ///< inclusive; 0 = no limit
  std::vector<MscclGpu> gpus;
};

/// One limit of a target runtime that the algorithm exceeds.
struct MscclLimitViolation {
  MscclRuntime runtime = MscclRuntime::Executor;
  std::string limit;  ///< e.g. "steps per tb"
  std::string where;  ///< e.g. "gpu 3 tb 5"; "algo" for the whole file
  int64_t value = 0;
  int64_t maximum = 0;
  /// "executor: gpu 3 tb 5: steps per tb is 70, the most is 64".
  std::string message() const;
};

/// The plan in MSCCL's model: TBs cut to one send peer, one receive peer and one channel, steps
/// with their dependencies. InvalidArgument for bad options, Unsupported for a call layout the
/// plan cannot serve (see MscclExportOptions::inPlace), InvalidInput for a plan whose transfers
/// do not pair.
Expected<MscclAlgorithm> lowerToMsccl(const Plan& plan, const MscclExportOptions& options);

/// Every limit of `runtime` (the reference's limits table and the parser's) the algorithm exceeds;
/// empty when the runtime loads it.
std::vector<MscclLimitViolation> checkMscclLimits(const MscclAlgorithm& algorithm, MscclRuntime runtime);

/// The XML text in the spelling of `runtime`: no prolog, one start tag per line, attributes
/// separated by single spaces, values in double quotes, a name without characters the runtimes'
/// reader cannot take.
std::string writeMscclXml(const MscclAlgorithm& algorithm, MscclRuntime runtime);

/// lowerToMsccl, checkMscclLimits and writeMscclXml: the file, or ResourceExhausted listing every
/// limit violation of options.runtime (one per line) instead of a file the runtime rejects.
Expected<std::string> exportMscclXml(const Plan& plan, const MscclExportOptions& options);

}  // namespace tuccl
