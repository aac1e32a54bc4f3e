// CPU verification of a plan: generate its kernels, build them for the host, run every rank's
// TBs concurrently as threads on host memory (host_executor.h) and compare every output element
// (output_compare.h) with a reference computed from the inputs alone, never from the plan
// (collective_reference.h). It is the composition of those three building blocks.
//
// In:  a Plan and VerifyOptions (datatype, op, element count, chunk size, in-place, seed, ...).
// Out: a CpuVerifyReport: per rank ok or the first mismatches; a diagnosed hang (every blocked TB
//      and the flag or credit it waits for); or the Status saying why the plan was refused (static
//      checks, an unsupported call, the host build).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernelgen/codegen.h"
#include "kernelgen/datatype.h"
#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// The largest element count the CPU verification accepts at all (a command line's bound); the
/// memory a call needs is checked against verifyMemoryLimit() as well.
inline constexpr int64_t kMaxVerifyCount = int64_t{1} << 40;

/// The host memory a verification may hold: half of this machine's physical memory. A call that
/// needs more is refused (InvalidArgument, naming the largest count that fits) before any
/// allocation.
uint64_t verifyMemoryLimit();

struct VerifyOptions {
  DataType dataType = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  /// Elements of the collective's unit, NCCL's `count`: AllReduce/Broadcast/Reduce the buffer,
  /// AllGather each rank's input, ReduceScatter each rank's output, AllToAll per peer.
  int64_t count = 4096;
  int64_t chunkSize = 0;     ///< bytes of a micro-batch slice; 0: the plan's config.chunkSize
  bool inPlace = true;       ///< in-place call (NCCL's layout) or separate input and output
  uint64_t seed = 0;         ///< 0: a fresh random seed (reported)
  double timeoutSeconds = 30;  ///< a wait longer than this is a hang
  int32_t stagingSlots = 4;  ///< slots per staging ring (at most the micro-batches; 1..64)
  /// Run validatePlan and checkPlanRaceFree first (off only to test the run-time detection of
  /// wrong plans: order mismatches and hangs).
  bool staticChecks = true;
  /// The protocol the kernels run; nullopt: the plan's config.protocol. The kernels read it at
  /// run time (KernelArgs::protocol), so one host build runs every protocol.
  std::optional<Protocol> protocol;
  /// How the kernels are generated (rerolled loops, kernels shared by rank roles).
  KernelGenOptions kernelGen;
};

struct RankVerifyReport {
  int32_t rank = 0;
  bool ok = false;
  bool compared = true;  ///< false: the call leaves this rank's output unspecified (Reduce off the root)
  int64_t mismatches = 0;
  std::vector<std::string> firstMismatches;  ///< up to 4 lines "output[i]: expected E, got G"
};

struct CpuVerifyReport {
  bool ok = false;
  Status refusal;       ///< an error: the plan was not run (static check, unsupported call, build error)
  bool hang = false;    ///< a wait timed out: `blocked` names every stopped TB
  bool orderMismatch = false;  ///< a receive got another entry's slice (send/recv order differs)
  std::vector<std::string> blocked;
  std::vector<RankVerifyReport> ranks;
  uint64_t seed = 0;
  int64_t microBatches = 0;
  int32_t stagingSlots = 0;
  Protocol protocol = Protocol::Simple;  ///< the protocol run
  double runSeconds = 0;
  bool buildCached = false;

  bool refused() const { return !refusal.ok(); }

  /// Multi-line human-readable summary (one line per rank, every blocked TB).
  std::string summary() const;
};

/// Runs the whole verification. Never hangs: waits are bounded by `timeoutSeconds`.
CpuVerifyReport verifyPlanOnCpu(const Plan& plan, const VerifyOptions& options = {});

}  // namespace tuccl
