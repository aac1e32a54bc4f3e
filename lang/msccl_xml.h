// The MSCCL algorithm XML front end: lifts an MSCCL (msccl-tools, TACCL, msccl-executor, RCCL)
// algorithm file into the algorithm IR, and keeps the file's own thread blocks and channels beside it.
//
// In:  the text of an MSCCL XML file (<algo> <gpu> <tb> <step>, TACCL's <copy>).
// Out: an ImportedMscclAlgorithm: an Algorithm (lang/algorithm.h) whose operations carry the
//      line:col of the <step> (or <copy>) they came from, and the MscclSchedule, the file's thread
//      blocks with the IR operations each of their steps took part in; or a Status whose diagnostic
//      names file:line:col, the element and the attribute at fault.
//
// The mapping (docs/msccl.md has the full table):
//  - Sends pair with receives positionally: the k-th sending step (s, rcs, rrs, rrcs) of rank A's
//    <tb send=B chan=c> with the k-th receiving step (r, rcs, rrs, rrc, rrcs) of rank B's
//    <tb recv=A chan=c>. Each pair is one IR operation from the sender's slot to the receiver's,
//    located at the receiving <step>; a copy for r/rcs, a reduce for rrc/rrcs.
//  - What a sending step sends: s its src; rcs and rrcs the dst they stored; rrs (which stores
//    nothing) a fresh scratch slot: the received data is copied there, the local src reduced into
//    it, and that slot is sent on. rrc/rrcs with src != dst copy the received data into dst and
//    reduce src into it (two operations). cpy is a local copy, re a local reduce (dst op= src),
//    nop (and any step with cnt 0) no operation.
//  - <copy i_off o_off [cnt]> of a <gpu> is a local input -> output copy before the schedule.
//  - Logical steps: the happens-before DAG of the file (program order within a <tb>, the depid/deps
//    dependencies, send before its receive, and a receive before the next step of the sending
//    <tb> that overwrites what was sent) is ordered by longest path; each operation's step is the
//    depth of the event that performs it, so the IR's step order respects the DAG.
//  - Capture at the send: MSCCL copies what a step sends when it sends. Where another thread block
//    of the rank rewrites the sent slot after the send (ordered by dependencies) but no later
//    than the peer's receive in that order, the send first copies the slot into fresh scratch
//    chunks and the receive reads those, so the order keeps the data the runtime sends.
//  - inplace="1": Algorithm::inPlace, with NCCL's aliasing (support/buffer_layout.h), which is the
//    layout MSCCLang's in-place files address through one buffer.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lang/algorithm.h"
#include "support/source_text.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

// MscclStepType and its names (mscclStepTypeName, parseMscclStepType) are in support/vocabulary.h.

/// One <step> of a thread block and the IR operations it takes part in: the receive (a copy or a
/// reduce from the peer), a local operation, the snapshot of what it sends (a copy into scratch,
/// where the sent slot is rewritten before the peer's receive), and the operation that carries
/// what it sends (owned by the peer's receiving step, listed here too). At most four.
struct MscclScheduleStep {
  int32_t index = 0;  ///< the step's `s`
  MscclStepType type = MscclStepType::Nop;
  int8_t nOps = 0;
  std::array<int32_t, 4> ops{-1, -1, -1, -1};  ///< indices into Algorithm::ops, in execution order
  SourceLoc loc;
};

/// One <tb>: its connection and its steps in program order.
struct MscclThreadBlock {
  int32_t id = 0;
  int32_t sendPeer = -1;  ///< -1: sends nothing
  int32_t recvPeer = -1;  ///< -1: receives nothing
  int32_t channel = 0;
  std::vector<MscclScheduleStep> steps;
  SourceLoc loc;
};

/// The file's own schedule: per rank, its thread blocks in id order; and the IR operations that
/// come before every thread block (<copy> elements).
struct MscclSchedule {
  std::vector<std::vector<MscclThreadBlock>> ranks;
  std::vector<int32_t> preCopyOps;
};

/// An imported file: the IR, the schedule, and the <algo> attributes the IR has no place for.
struct ImportedMscclAlgorithm {
  Algorithm algorithm;
  MscclSchedule schedule;
  std::optional<Protocol> protocol;  ///< algo.proto
  bool outOfPlace = false;           ///< algo.outofplace (or inplace="0")
  int64_t minBytes = 0;              ///< algo.minBytes
  int64_t maxBytes = 0;              ///< algo.maxBytes (0: no limit)
  int32_t nThreads = 0;              ///< algo.nthreads (0: unset)
  std::string redop;                 ///< algo.redop as written (generators write "nop", "sum", ...)
  /// How an ambiguous file was read (each kind said once, at its first place): print them.
  std::vector<Diagnostic> warnings;
};

struct MscclImportOptions {
  /// Chunks moved by all steps together (sum of cnt); beyond it the file is refused as too large.
  int64_t maxChunkWork = int64_t{1} << 30;
};

/// Imports an MSCCL XML file held in memory; `fileName` names it in diagnostics. Never crashes on
/// any input.
Expected<ImportedMscclAlgorithm> importMscclXml(std::string_view fileName, std::string_view text,
                                                const MscclImportOptions& options = {});
Expected<ImportedMscclAlgorithm> importMscclXml(const SourceText& source, const MscclImportOptions& options = {});

/// Reads the file at `path` and imports it (NotFound / IoError / InvalidInput naming the file).
Expected<ImportedMscclAlgorithm> importMscclXmlFile(const std::string& path, const MscclImportOptions& options = {});

}  // namespace tuccl
