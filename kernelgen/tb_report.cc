// Descriptions of TBs that did not finish (tb_report.h).
#include "kernelgen/tb_report.h"

#include <sstream>

namespace tuccl {
namespace {

const char* stateName(int32_t state) {
  switch (state) {
    case dev::kTbRunning: return "never finished";
    case dev::kTbTimedOut: return "timed out";
    case dev::kTbAborted: return "stopped after another TB gave up";
    case dev::kTbTagMismatch: return "got a slice of another entry";
    default: return "done";
  }
}

std::string ringText(const KernelLayout& layout, int32_t ring) {
  std::ostringstream out;
  out << "ring " << ring;
  if (ring >= 0 && ring < static_cast<int32_t>(layout.rings.size())) {
    const RingInfo& info = layout.rings[ring];
    out << " (rank " << info.srcRank << " tb " << info.srcTb << " -> rank " << info.dstRank << " tb " << info.dstTb
        << ")";
  }
  return out.str();
}

// What the TB was running: "entry 1 (send to rank 2, op 15) micro-batch 0", or the prologue.
std::string entryText(const Plan& plan, int32_t rank, int32_t tb, const dev::TbReport& report) {
  const auto& entries = plan.ranks[rank].tbs[tb].entries;
  if (report.entry < 0 || report.entry >= static_cast<int32_t>(entries.size())) return "prologue/epilogue";
  const PlanEntry& entry = entries[report.entry];
  std::ostringstream out;
  out << "entry " << report.entry << " (" << primitiveName(entry.kind);
  if (entry.kind != PrimitiveKind::Copy && entry.kind != PrimitiveKind::Reduce) {
    out << (entry.kind == PrimitiveKind::Send ? " to rank " : " from rank ") << entry.peer;
  }
  if (isFused(entry.kind)) out << " to rank " << entry.next.peer << ", next op " << entry.next.op;
  out << ", op " << entry.op << ") micro-batch " << report.microBatch;
  return out.str();
}

// A progress or barrier count of the waiter's call: the low half of an epoch-numbered value
// (dev::epochValue), 0 when the counter still holds an earlier call's.
uint64_t countOfCall(const dev::TbReport& report) {
  return (report.seen >> 32) == (report.expected >> 32) ? report.seen & 0xffffffffu : 0;
}

// What the TB waited for when it stopped.
std::string waitText(const KernelLayout& layout, const dev::TbReport& report) {
  std::ostringstream out;
  switch (report.wait) {
    case dev::kWaitData:
      if (report.state == dev::kTbTagMismatch) {
        out << ": on " << ringText(layout, report.ring) << " expected op " << (report.expected >> 32) << " slice "
            << (report.expected & 0xffffffffu) << ", received op " << (report.seen >> 32) << " slice "
            << (report.seen & 0xffffffffu);
      } else {
        out << ", waiting for data on " << ringText(layout, report.ring) << ": posted flag is " << report.seen
            << ", needs " << report.expected;
      }
      break;
    case dev::kWaitLine:
      out << ", waiting for a line of data on " << ringText(layout, report.ring) << ": its flag is " << report.seen
          << ", needs " << report.expected;
      break;
    case dev::kWaitCredit:
      out << ", waiting for a credit on " << ringText(layout, report.ring) << ": consumed flag is " << report.seen
          << ", needs " << report.expected;
      break;
    case dev::kWaitDependency:
      out << ", waiting for tb " << report.depTb << " entry " << report.depEntry << ": it finished "
          << countOfCall(report) << " micro-batches, needs " << (report.expected & 0xffffffffu);
      break;
    case dev::kWaitBarrier:
      // The barrier's word: (generation << 32) | arrivals; the waiter needs the next generation.
      out << ", waiting at the rank barrier: "
          << ((report.seen >> 32) + 1 == (report.expected >> 32) ? report.seen & 0xffffffffu : 0) << " of "
          << report.depEntry << " TBs arrived";
      break;
    default:
      break;
  }
  return out.str();
}

}  // namespace

std::string describeStoppedTb(const Plan& plan, const KernelLayout& layout, int32_t rank, int32_t tb,
                              const dev::TbReport& report) {
  // Block tb runs the plan's TB tb % (the rank's TBs), of channel tb / (the rank's TBs).
  const auto tbs = static_cast<int32_t>(plan.ranks[rank].tbs.size());
  const int32_t planTb = tbs > 0 ? tb % tbs : tb;
  const std::string channel = layout.channels > 1 && tbs > 0 ? " (channel " + std::to_string(tb / tbs) + ")" : "";
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb) + channel + " " +
         entryText(plan, rank, planTb, report) + ": " + stateName(report.state) + waitText(layout, report);
}

std::vector<StoppedTb> stoppedTbs(const Plan& plan, const KernelLayout& layout, int32_t rank,
                                  std::span<const dev::TbReport> reports) {
  std::vector<StoppedTb> stopped;
  for (size_t tb = 0; tb < reports.size(); ++tb) {
    const dev::TbReport& report = reports[tb];
    if (report.state == dev::kTbDone) continue;
    const auto id = static_cast<int32_t>(tb);
    stopped.push_back(StoppedTb{rank, id, report, describeStoppedTb(plan, layout, rank, id, report)});
  }
  return stopped;
}

Status stoppedTbsStatus(std::span<const StoppedTb> stopped, bool watchdogFired) {
  if (stopped.empty() && !watchdogFired) return {};
  bool hang = watchdogFired, orderMismatch = false, aborted = false;
  for (const StoppedTb& tb : stopped) {
    hang = hang || tb.report.state == dev::kTbTimedOut;
    orderMismatch = orderMismatch || tb.report.state == dev::kTbTagMismatch;
    aborted = aborted || tb.report.state == dev::kTbAborted;
  }
  std::string message = hang            ? "hang: a wait timed out"
                        : orderMismatch ? "order mismatch: a receive got a slice of another entry"
                        : aborted       ? "aborted: the TBs stopped at an abort before finishing"
                                        : "the kernel ended with TBs that never finished";
  if (watchdogFired) message += " (the watchdog stopped TBs still running past the timeout)";
  for (const StoppedTb& tb : stopped) message += "\n  " + tb.description;
  const ErrorCode code = hang                         ? ErrorCode::Timeout
                         : aborted && !orderMismatch ? ErrorCode::Aborted
                                                     : ErrorCode::Internal;
  return makeError(code, message);
}

}  // namespace tuccl
