// The host executor: runs the host build of a plan's kernels (host_build.h) on host memory, every
// TB of the chosen ranks a thread (design.md "Kernels"; docs/kernels.md "CPU execution").
//
// In:  the HostKernels, the Plan and its KernelLayout, the call (datatype, op, count, in place),
//      the buffers of every rank run (the caller's: input, output and scratch pointers), and the
//      HostStaging the ranks communicate through.
// Out: a HostRun: whether every TB finished and, for each TB that did not, where it stopped and
//      what it waited for (a hang: a data flag, a credit, another entry, the rank barrier; or a
//      receive that got another entry's slice: an order mismatch). Malformed requests (a missing
//      buffer, a rank out of range, staging of another geometry) come back as a Status.
//
// The caller owns the rank buffers and may run any subset of the ranks per call, e.g. one call per
// rank thread, all sharing one HostStaging. The TBs run on a TbPool of the call's own
// (tb_pool.h), the runner libtuccl's CPU device keeps per rank for its calls (its staging is
// shared memory, its abort word the host's, its deadlines the communicator's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernelgen/collective_reference.h"
#include "kernelgen/device/kernel_args.h"
#include "kernelgen/host_buffer.h"
#include "kernelgen/host_build.h"
#include "kernelgen/kernel_layout.h"
#include "kernelgen/tb_report.h"
#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// The micro-batch geometry of a call (docs/kernels.md, "Chunk geometry").
struct CallGeometry {
  int64_t sliceElems = 1;    ///< elements of one micro-batch slice of a chunk
  int64_t microBatches = 1;  ///< micro-batches of every entry
  int32_t stagingSlots = 1;  ///< slots per staging ring
  int64_t slotBytes = 16;    ///< bytes of a slot: stagingSlotBytes(protocol, a slice's bytes)
  Protocol protocol = Protocol::Simple;  ///< the plan's (config.protocol): how slices sit in slots
  friend bool operator==(const CallGeometry&, const CallGeometry&) = default;
};

/// The geometry of `call` run by `plan`: slices of `chunkSize` bytes (0: the plan's
/// config.chunkSize), `stagingSlots` clamped to at most min(micro-batches, 64) and at least
/// minStagingSlots(plan), slots sized for `protocol` (nullopt: the plan's config.protocol). The run uses the geometry's protocol: the
/// kernels read it at run time, so one build of a plan runs every protocol.
CallGeometry callGeometry(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call, int64_t chunkSize,
                          int32_t stagingSlots, std::optional<Protocol> protocol = std::nullopt);

/// Elements of the buffers a rank needs for `plan` at `count` (unit blocks of the plan's chunks).
struct RankBufferElements {
  int64_t input = 0;
  int64_t output = 0;
  int64_t scratch = 0;
};
RankBufferElements planBufferElements(const Plan& plan, const KernelLayout& layout, int64_t count);

/// One rank's buffers. In place, input and output follow NCCL's in-place layout (kernels.md).
struct RankBuffers {
  void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
};

/// The staging memory of one call: per ring of the layout `stagingSlots` slots of `slotBytes`
/// (each ring's slots followed by a canary; poisoned for Simple, zeroed for LL and LL128, whose
/// line flags start at 0, the flag of no slice), their tags and flags, and the abort flag every TB
/// watches. The runs of all ranks of one call share it; it serves that one call.
class HostStaging {
 public:
  HostStaging(const KernelLayout& layout, const CallGeometry& geometry);
  HostStaging(HostStaging&&) = default;
  HostStaging& operator=(HostStaging&&) = default;

  const CallGeometry& geometry() const { return geometry_; }
  size_t ringCount() const { return rings_.size(); }
  dev::RingDevice* rings() { return rings_.data(); }
  int32_t* abortFlag() { return abort_.get(); }
  /// Rings whose slots a kernel wrote past.
  std::vector<int32_t> overrunRings() const;

 private:
  CallGeometry geometry_;
  std::vector<HostBuffer> slots_;
  std::vector<uint64_t> counters_;  // per ring: posted, consumed, sendCount, recvCount
  std::vector<std::vector<uint64_t>> tags_;
  std::vector<dev::RingDevice> rings_;
  std::unique_ptr<int32_t> abort_ = std::make_unique<int32_t>(0);
};

struct HostRunOptions {
  std::vector<int32_t> ranks;  ///< the ranks this call runs; empty: every rank of the plan
  double timeoutSeconds = 30;  ///< a wait longer than this gives up (a hang)
  /// Past the timeout plus this grace the watchdog raises the abort flag, stopping every TB.
  double watchdogGraceSeconds = 5;
};

struct HostRun {
  bool completed = false;      ///< every TB of the ranks run finished
  bool hang = false;           ///< a wait timed out
  bool orderMismatch = false;  ///< a receive got a slice of another entry (send/recv order differs)
  bool watchdogFired = false;  ///< TBs were still running past the timeout and its grace
  std::vector<StoppedTb> stopped;  ///< every TB that did not finish, by rank and TB
  double runSeconds = 0;
  /// By rank (zero for the ranks not run): the bytes the rank's TBs loaded and stored, its
  /// slices, waits, barriers and fences (dev::PrimitiveCounters; docs/kernels.md "Counted on
  /// the CPU").
  std::vector<dev::PrimitiveCounters> counters;

  /// Ok when completed; otherwise stoppedTbsStatus: Timeout (a hang), Internal (an order
  /// mismatch: a plan whose sends and receives disagree) or Aborted, with every stopped TB.
  Status status() const;
};

/// Runs every TB of the chosen ranks (options.ranks) of `plan` as a thread and waits for all of
/// them; never hangs (bounded waits, then the watchdog). `buffers[r]` are rank r's buffers, sized
/// by planBufferElements, for every rank run (`buffers` is indexed by rank).
Expected<HostRun> runPlanOnHost(const HostKernels& kernels, const Plan& plan, const KernelLayout& layout,
                                const CollectiveCall& call, std::span<const RankBuffers> buffers, HostStaging& staging,
                                const HostRunOptions& options = {});

}  // namespace tuccl
