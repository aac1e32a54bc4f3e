// The host executor (host_executor.h): TBs as threads, bounded waits, a watchdog, and the
// diagnosis of every TB that did not finish.
#include "kernelgen/host_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "kernelgen/datatype.h"
#include "kernelgen/tb_pool.h"

namespace tuccl {
namespace {


Status invalid(const std::string& message) { return makeError(ErrorCode::InvalidArgument, "host executor: " + message); }

// The ranks to run: options.ranks, or all; each once and in range.
Expected<std::vector<int32_t>> ranksToRun(const Plan& plan, const HostRunOptions& options) {
  std::vector<int32_t> ranks = options.ranks;
  if (ranks.empty()) {
    for (int32_t r = 0; r < plan.nRanks; ++r) ranks.push_back(r);
  }
  std::vector<bool> seen(static_cast<size_t>(plan.nRanks), false);
  for (int32_t r : ranks) {
    if (r < 0 || r >= plan.nRanks) return invalid("rank " + std::to_string(r) + " is not a rank of the plan");
    if (seen[r]) return invalid("rank " + std::to_string(r) + " is listed twice");
    seen[r] = true;
  }
  return ranks;
}

// Everything a run needs must be there and agree with the plan.
Status checkRequest(const HostKernels& kernels, const Plan& plan, const KernelLayout& layout, const CollectiveCall& call,
                    std::span<const RankBuffers> buffers, const HostStaging& staging,
                    const std::vector<int32_t>& ranks) {
  if (Status status = checkCall(call); !status) return status;
  if (call.collective != layout.collective || call.nRanks != plan.nRanks) {
    return invalid("the call (" + std::string(collectiveName(call.collective)) + ", " + std::to_string(call.nRanks) +
                   " ranks) is not the plan's (" + std::string(collectiveName(plan.collective)) + ", " + std::to_string(plan.nRanks) + " ranks)");
  }
  if (hasRoot(call.collective) && call.root != plan.root) {
    return invalid("the plan's root is rank " + std::to_string(plan.root) + ", the call's rank " +
                   std::to_string(call.root));
  }
  if (static_cast<int32_t>(kernels.ranks.size()) != plan.nRanks || kernels.setBlock == nullptr) {
    return invalid("the host kernels are not those of the plan's " + std::to_string(plan.nRanks) + " ranks");
  }
  if (static_cast<int32_t>(buffers.size()) != plan.nRanks) {
    return invalid(std::to_string(buffers.size()) + " rank buffers for " + std::to_string(plan.nRanks) + " ranks");
  }
  const CallGeometry& geometry = staging.geometry();
  if (staging.ringCount() != layout.rings.size() || geometry.sliceElems < 1 ||
      geometry.microBatches != dev::microBatchCount(call.count, layout.chunksPerUnit, geometry.sliceElems,
                                                    layout.channels, static_cast<int32_t>(dataTypeSize(call.dataType)))) {
    return invalid("the staging was made for another layout or count");
  }
  if (geometry.slotBytes < stagingSlotBytes(geometry.protocol, geometry.sliceElems * dataTypeSize(call.dataType))) {
    return invalid("the staging's " + std::to_string(geometry.slotBytes) + "-byte slots cannot hold a slice of " +
                   std::to_string(geometry.sliceElems) + " " + std::string(dataTypeName(call.dataType)) + " elements in " +
                   std::string(protocolName(geometry.protocol)));
  }
  const RankBufferElements needed = planBufferElements(plan, layout, call.count);
  for (int32_t r : ranks) {
    const RankBuffers& b = buffers[r];
    auto missing = [&](const char* name) { return invalid("rank " + std::to_string(r) + " has no " + name + " buffer"); };
    if (b.input == nullptr && needed.input > 0) return missing("input");
    if (b.output == nullptr && needed.output > 0) return missing("output");
    if (b.scratch == nullptr && needed.scratch > 0) return missing("scratch");
  }
  return {};
}

// The per-rank state of one run: the kernel's arguments and the rank-private flags.
struct RankState {
  dev::KernelArgs args;
  std::vector<uint64_t> progress;
  std::vector<uint64_t> barrier = std::vector<uint64_t>(2, 0);
  std::vector<dev::TbReport> reports;
  std::unique_ptr<dev::PrimitiveCounters> counters = std::make_unique<dev::PrimitiveCounters>();
};

std::vector<RankState> rankStates(const HostKernels& kernels, const Plan& plan, const KernelLayout& layout,
                                  const CollectiveCall& call,
                                  std::span<const RankBuffers> buffers, HostStaging& staging, int64_t deadlineNs) {
  std::vector<RankState> states(static_cast<size_t>(plan.nRanks));
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    RankState& state = states[r];
    state.progress.assign(static_cast<size_t>(std::max(1, layout.progressCounters[r])), 0);
    state.reports.assign(static_cast<size_t>(layout.blocksOf(plan, r)), dev::TbReport{});
    dev::KernelArgs& a = state.args;
    a.input = buffers[r].input;
    a.output = buffers[r].output;
    a.scratch = buffers[r].scratch;
    a.count = call.count;
    a.sliceElems = staging.geometry().sliceElems;
    a.dtype = deviceDataType(call.dataType);
    a.op = deviceReduceOp(call.op);
    a.rank = r;
    a.nRanks = plan.nRanks;
    a.chunksPerUnit = layout.chunksPerUnit;
    a.inPlaceCall = call.inPlace ? 1 : 0;
    a.rings = staging.rings();
    a.progress = state.progress.data();
    a.barrier = state.barrier.data();
    a.reports = state.reports.data();
    a.abort = staging.abortFlag();
    a.deadlineNs = deadlineNs;
    a.protocol = deviceProtocol(staging.geometry().protocol);
    a.roleValues = kernels.valuesOf(r);
    a.counters = state.counters.get();
    a.channels = layout.channels;
    a.ringsPerChannel = layout.ringsPerChannel;
    a.progressPerChannel = layout.progressPerChannel[r];
  }
  return states;
}

// A pool of its own runs every TB of `ranks` (tb_pool.h); its watchdog raises the abort flag
// once the deadline and its grace have passed. Returns whether the watchdog fired.
Expected<bool> runThreads(const HostKernels& kernels, const std::vector<int32_t>& ranks,
                          const std::vector<RankState>& states, int32_t* abort,
                          std::chrono::steady_clock::time_point watchdogAt) {
  std::vector<HostLaunch> launches;
  for (int32_t r : ranks) {
    launches.push_back(HostLaunch{kernels.ranks[r], &states[r].args, static_cast<int32_t>(states[r].reports.size())});
  }
  const TbWatchdog watchdog{abort, watchdogAt};
  TbPool pool;
  Expected<bool> fired = pool.run(kernels, launches, &watchdog);
  if (!fired) return makeError(fired.status().code(), "host executor: " + fired.status().message());
  return fired;
}

}  // namespace

CallGeometry callGeometry(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call, int64_t chunkSize,
                          int32_t stagingSlots, std::optional<Protocol> protocol) {
  const int64_t elementSize = dataTypeSize(call.dataType);
  CallGeometry geometry;
  geometry.sliceElems = std::max<int64_t>(1, (chunkSize > 0 ? chunkSize : plan.config.chunkSize) / elementSize);
  geometry.microBatches = dev::microBatchCount(call.count, layout.chunksPerUnit, geometry.sliceElems, layout.channels,
                                               static_cast<int32_t>(elementSize));
  // Never more slots than micro-batches (a slot per slice in flight is enough), never fewer than
  // the plan needs to make progress (minStagingSlots: 2 with fused entries).
  geometry.stagingSlots = static_cast<int32_t>(
      std::clamp<int64_t>(std::min<int64_t>(stagingSlots, geometry.microBatches), minStagingSlots(plan), 64));
  geometry.protocol = protocol.value_or(plan.config.protocol);
  geometry.slotBytes = stagingSlotBytes(geometry.protocol, geometry.sliceElems * elementSize);
  return geometry;
}

RankBufferElements planBufferElements(const Plan& plan, const KernelLayout& layout, int64_t count) {
  auto elementsOf = [&](BufferKind buffer) {
    const int64_t chunks = plan.bufferChunks[static_cast<int>(buffer)];
    return (chunks + layout.chunksPerUnit - 1) / layout.chunksPerUnit * count;
  };
  return {elementsOf(BufferKind::Input), elementsOf(BufferKind::Output), elementsOf(BufferKind::Scratch)};
}

HostStaging::HostStaging(const KernelLayout& layout, const CallGeometry& geometry) : geometry_(geometry) {
  const size_t nRings = layout.rings.size();
  counters_.assign(nRings * 4, 0);
  tags_.resize(nRings);
  rings_.resize(nRings);
  for (size_t i = 0; i < nRings; ++i) {
    slots_.emplace_back(static_cast<size_t>(geometry.slotBytes * geometry.stagingSlots));
    if (geometry.protocol != Protocol::Simple) std::memset(slots_.back().data(), 0, slots_.back().bytes());
    tags_[i].assign(2 * static_cast<size_t>(geometry.stagingSlots), ~uint64_t{0});  // tags, then slice sizes
    dev::RingDevice& ring = rings_[i];
    ring.staging = reinterpret_cast<char*>(slots_.back().data());
    ring.tags = tags_[i].data();
    ring.posted = &counters_[i * 4 + 0];
    ring.consumed = &counters_[i * 4 + 1];
    ring.sendCount = &counters_[i * 4 + 2];
    ring.recvCount = &counters_[i * 4 + 3];
    ring.slotBytes = geometry.slotBytes;
    ring.nSlots = geometry.stagingSlots;
  }
}

std::vector<int32_t> HostStaging::overrunRings() const {
  std::vector<int32_t> rings;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].canaryIntact()) rings.push_back(static_cast<int32_t>(i));
  }
  return rings;
}

Status HostRun::status() const {
  if (completed) return {};
  return stoppedTbsStatus(stopped, watchdogFired);
}

Expected<HostRun> runPlanOnHost(const HostKernels& kernels, const Plan& plan, const KernelLayout& layout,
                                const CollectiveCall& call, std::span<const RankBuffers> buffers, HostStaging& staging,
                                const HostRunOptions& options) {
  Expected<std::vector<int32_t>> ranks = ranksToRun(plan, options);
  if (!ranks) return ranks.status();
  if (Status status = checkRequest(kernels, plan, layout, call, buffers, staging, *ranks); !status) return status;

  // Bounded to a day, so the time points cannot overflow.
  auto seconds = [](double value) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(std::clamp(value, 0.0, 86400.0)));
  };
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + seconds(options.timeoutSeconds);
  const auto watchdogAt = deadline + seconds(options.watchdogGraceSeconds);
  std::vector<RankState> states = rankStates(kernels, plan, layout, call, buffers, staging,
                                             std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 deadline.time_since_epoch()).count());
  Expected<bool> fired = runThreads(kernels, *ranks, states, staging.abortFlag(), watchdogAt);
  if (!fired) return fired.status();

  HostRun run;
  run.runSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.watchdogFired = *fired;
  for (int32_t r : *ranks) {
    for (StoppedTb& tb : stoppedTbs(plan, layout, r, states[r].reports)) {
      run.hang = run.hang || tb.report.state == dev::kTbTimedOut;
      run.orderMismatch = run.orderMismatch || tb.report.state == dev::kTbTagMismatch;
      run.stopped.push_back(std::move(tb));
    }
  }
  run.counters.resize(static_cast<size_t>(plan.nRanks));
  for (int32_t r : *ranks) run.counters[r] = *states[r].counters;
  run.hang = run.hang || run.watchdogFired;
  run.completed = run.stopped.empty();
  return run;
}

}  // namespace tuccl
