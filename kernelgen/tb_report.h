// What a TB that did not finish was doing, from the report it wrote (kernelgen/device/flags.h:
// TbReport), for every executor of the generated kernels: the host executor and the runtime's
// devices (CPU threads, CUDA kernels whose reports sit in host-mapped memory).
//
// In:  the Plan and its KernelLayout, a rank and that rank's TB reports after a run.
// Out: the TBs that did not finish, each described ("rank 2 tb 0 entry 0 (recv from rank 1, op 14)
//      micro-batch 0: timed out, waiting for data on ring 3 (rank 1 tb 0 -> rank 2 tb 0): posted
//      flag is 0, needs 1"), and the Status of a run that stopped them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernelgen/device/kernel_args.h"
#include "kernelgen/kernel_layout.h"
#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// A TB that did not finish.
struct StoppedTb {
  int32_t rank = 0;
  int32_t tb = 0;
  dev::TbReport report;
  /// "rank 2 tb 0 entry 0 (recv from rank 1, op 14) micro-batch 0: timed out, waiting for ..."
  std::string description;
};

/// Where TB `tb` of `rank` stopped and what it waited for.
std::string describeStoppedTb(const Plan& plan, const KernelLayout& layout, int32_t rank, int32_t tb,
                              const dev::TbReport& report);

/// The TBs of `rank` whose report is not kTbDone (reports[tb] is TB tb's), described.
std::vector<StoppedTb> stoppedTbs(const Plan& plan, const KernelLayout& layout, int32_t rank,
                                  std::span<const dev::TbReport> reports);

/// Ok when nothing stopped. Otherwise, with every stopped TB on its own line: Timeout when a wait
/// timed out or `watchdogFired` (a hang); Internal when a receive got a slice of another entry (a
/// plan whose sends and receives disagree) or when TBs never finished without giving up (a kernel
/// that ended early); Aborted when the TBs were stopped by an abort alone.
Status stoppedTbsStatus(std::span<const StoppedTb> stopped, bool watchdogFired = false);

}  // namespace tuccl
