// The CPU device (cpu_device.h).
#include "backend/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "backend/call_buffers.h"
#include "backend/cpu_stream.h"
#include "backend/kernel_call.h"
#include "kernelgen/datatype.h"
#include "kernelgen/device/datatypes.h"
#include "kernelgen/device/peer.h"
#include "kernelgen/tb_pool.h"
#include "kernelgen/tb_report.h"
#include "transport/staging_transport.h"

namespace tuccl::backend {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(value, 0.0, 86400.0)));
}

// Point-to-point on the host: one TB thread per transfer, in libtuccl itself (peer.h needs no
// generated code).
void hostPeerChain(dev::KernelArgs launch) { dev::peerChain(launch, 0); }
void setHostBlock(unsigned block) { dev::host::blockIdx.x = block; }

const HostKernels& hostPeerKernels() {
  static const HostKernels kernels = [] {
    HostKernels built;
    built.setBlock = setHostBlock;
    return built;
  }();
  return kernels;
}

// This rank's view of one placed plan: its rings and its private flags.
struct RankRuntime {
  std::vector<dev::RingDevice> rings;
  int32_t minSlots = INT32_MAX;  // the shallowest ring's slots
  std::vector<uint64_t> progress;
  std::vector<uint64_t> barrier = std::vector<uint64_t>(2, 0);
  std::vector<dev::TbReport> reports;
};

struct State {
  int32_t rank = 0;
  int32_t nRanks = 1;
  std::unique_ptr<transport::StagingTransport> transport;
  std::vector<char*> bases;  // every rank's segment, as the transport maps it here
  int32_t* abortWord = nullptr;

  std::mutex sinkMutex;
  ErrorSink sink;

  std::mutex pollMutex;
  HostPoll hostPoll;  // the inter-node proxy's progress, run by waiting TBs

  // The poll a call's TBs run (the copy keeps it alive for the call).
  HostPoll currentPoll() {
    std::lock_guard lock(pollMutex);
    return hostPoll;
  }
  static void attachPoll(dev::KernelArgs& args, const HostPoll& poll) {
    args.hostPoll = poll.poll;
    args.hostPollContext = poll.context.get();
  }
  static void pollEnded(const HostPoll& poll) {
    if (poll.ended != nullptr) poll.ended(poll.context.get());
  }

  // Calls run in sequence order.
  std::mutex orderMutex;
  std::condition_variable turn;
  uint64_t nextSequence = 0;
  std::atomic<int64_t> outstanding{0};

  std::map<const PlanPlacement*, RankRuntime> runtimes;  // touched by the call holding the turn
  std::vector<char> workspace;
  TbPool pool;  // this rank's TB threads, kept between calls

  bool aborted() const { return abortWord != nullptr && std::atomic_ref<int32_t>(*abortWord).load() != 0; }

  void report(const Status& status) {
    std::lock_guard lock(sinkMutex);
    if (sink) sink(status);
  }

  // The ring `p` in the segments as this rank maps them.
  dev::RingDevice ringOf(const RingPlacement& p) const {
    dev::RingDevice ring;
    char* dst = bases[p.dstRank];
    char* src = bases[p.srcRank];
    ring.staging = dst + p.stagingInDst;
    ring.tags = reinterpret_cast<uint64_t*>(dst + p.tagsInDst);
    ring.posted = reinterpret_cast<uint64_t*>(dst + p.postedInDst);
    ring.recvCount = reinterpret_cast<uint64_t*>(dst + p.recvCountInDst);
    ring.consumed = reinterpret_cast<uint64_t*>(src + p.consumedInSrc);
    ring.sendCount = reinterpret_cast<uint64_t*>(src + p.sendCountInSrc);
    ring.slotBytes = p.slotBytes;
    ring.nSlots = p.nSlots;
    return ring;
  }

  RankRuntime& runtimeFor(const KernelCall& call) {
    auto [it, fresh] = runtimes.try_emplace(call.placement);
    RankRuntime& runtime = it->second;
    if (fresh) {
      for (const RingPlacement& p : call.placement->rings) {
        runtime.rings.push_back(ringOf(p));
        runtime.minSlots = std::min(runtime.minSlots, p.nSlots);
      }
      const KernelLayout& layout = call.plan->layout;
      runtime.progress.assign(static_cast<size_t>(std::max(1, layout.progressCounters[call.rank])), 0);
      runtime.reports.assign(static_cast<size_t>(layout.blocksOf(call.plan->plan, call.rank)), dev::TbReport{});
    }
    return runtime;
  }

  // Waits for the turn of call `sequence`; false (with `error`) on timeout or abort.
  bool awaitTurn(uint64_t sequence, double timeoutSeconds, Status& error) {
    std::unique_lock lock(orderMutex);
    const auto deadline = Clock::now() + seconds(timeoutSeconds);
    while (nextSequence != sequence) {
      if (aborted()) break;
      if (turn.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50))) ==
              std::cv_status::timeout &&
          Clock::now() >= deadline) {
        error = makeError(ErrorCode::Timeout, "call " + std::to_string(sequence) +
                                                  " waited longer than the timeout for the calls issued before it");
        return false;
      }
    }
    return true;
  }

  void endTurn() {
    {
      std::lock_guard lock(orderMutex);
      ++nextSequence;
    }
    turn.notify_all();
  }

  Status execute(const KernelCall& call);
  Status runKernel(const KernelCall& call);
  Status executePeers(const PeerBatch& batch);
  Status runPeers(const PeerBatch& batch);
  Status abortedError() const {
    return makeError(ErrorCode::Aborted,
                     "the communicator was aborted (tucclCommAbort, or a rank that failed); destroy or abort it");
  }
};

Status State::execute(const KernelCall& call) {
  Status turnError;
  if (!awaitTurn(call.sequence, call.timeoutSeconds, turnError)) {
    endTurn();
    return turnError;
  }
  Status status;
  const auto started = call.completed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (call.testDelayMicros > 0) {
    // Spinning, not sleeping: a sleep of a few microseconds overshoots by tens (timer slack and
    // the scheduler), and the hook must make a group exactly that much slower.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(call.testDelayMicros);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  try {
    status = runKernel(call);
  } catch (const std::exception& error) {
    status = makeError(ErrorCode::Internal, std::string("CPU device: ") + error.what());
  }
  const double seconds =
      call.completed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() : 0;
  endTurn();
  // The next call's turn first: recording the timing is off the critical path.
  if (status && call.completed) call.completed(seconds);
  return status;
}

// A plan whose order relies on buffered sends (config.sendAhead) needs rings of sendAhead slots
// per micro-batch of the call; shallower ones could deadlock, so the call is refused instead.
Status checkSendAhead(const CompiledPlan& compiled, const dev::KernelArgs& args, int32_t minSlots) {
  const int64_t ahead = compiled.plan.config.sendAhead;
  if (ahead <= 0) return {};
  const int64_t microBatches = dev::microBatchCount(args.count, args.chunksPerUnit, args.sliceElems, args.channels,
                                                    dev::elementSize(args.dtype));
  if (microBatches * ahead <= minSlots) return {};
  return makeError(ErrorCode::Internal, "CPU device: the plan (" + compiled.description + ") posts sends ahead of " +
                                            std::to_string(ahead) + " chunk(s), which a call of " +
                                            std::to_string(microBatches) + " micro-batches on rings of " +
                                            std::to_string(minSlots) + " slots cannot hold");
}

Status State::runKernel(const KernelCall& call) {
  if (aborted()) return abortedError();
  if (Status status = checkCallChannels(call); !status) return status;
  const CompiledPlan& compiled = *call.plan;
  if (!compiled.host || compiled.host->ranks.size() <= static_cast<size_t>(call.rank)) {
    return makeError(ErrorCode::Internal, "CPU device: the plan has no host build for rank " + std::to_string(call.rank));
  }
  RankRuntime& runtime = runtimeFor(call);
  std::fill(runtime.progress.begin(), runtime.progress.end(), 0);
  std::fill(runtime.barrier.begin(), runtime.barrier.end(), 0);
  std::fill(runtime.reports.begin(), runtime.reports.end(), dev::TbReport{});

  const WorkspaceLayout layout = workspaceLayout(call);
  if (workspace.size() < layout.total) workspace.resize(layout.total);
  const CallBuffers buffers = resolveCallBuffers(call, workspace.data());
  if (buffers.before.bytes > 0) std::memmove(buffers.before.dst, buffers.before.src, buffers.before.bytes);

  dev::KernelArgs args = callKernelArgs(call, buffers);
  args.rings = runtime.rings.data();
  args.progress = runtime.progress.data();
  args.barrier = runtime.barrier.data();
  args.reports = runtime.reports.data();
  args.abort = abortWord;
  args.roleValues = compiled.host->valuesOf(call.rank);
  if (Status fits = checkSendAhead(compiled, args, runtime.minSlots); !fits) {
    std::atomic_ref<int32_t>(*abortWord).store(1);  // the other ranks stop too
    return fits;
  }
  args.deadlineNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        (Clock::now() + seconds(call.timeoutSeconds)).time_since_epoch())
                        .count();

  const HostKernels& kernels = *compiled.host;
  // The blocks of the channels the call runs (at most the plan's, for which the reports are sized).
  const int32_t blocks = compiled.layout.blocksOf(compiled.plan, call.rank, args.channels);
  const std::span<const dev::TbReport> reports(runtime.reports.data(), static_cast<size_t>(blocks));
  const HostLaunch launch{kernels.ranks[call.rank], &args, blocks};
  const HostPoll poll = currentPoll();
  attachPoll(args, poll);
  const Expected<bool> ran = pool.run(kernels, std::span(&launch, 1));
  pollEnded(poll);
  if (!ran) {
    std::atomic_ref<int32_t>(*abortWord).store(1);
    return ran.status();
  }

  const Status stopped = stoppedTbsStatus(stoppedTbs(compiled.plan, compiled.layout, call.rank, reports));
  if (!stopped) {
    std::atomic_ref<int32_t>(*abortWord).store(1);  // the other ranks stop too
    return makeError(stopped.code(), std::string(collectiveName(call.call.collective)) + " on rank " +
                                         std::to_string(call.rank) + " failed: " + stopped.message());
  }
  if (buffers.after.bytes > 0) std::memmove(buffers.after.dst, buffers.after.src, buffers.after.bytes);
  return {};
}

Status State::executePeers(const PeerBatch& batch) {
  Status status;
  if (awaitTurn(batch.sequence, batch.timeoutSeconds, status)) {
    try {
      status = runPeers(batch);
    } catch (const std::exception& error) {
      status = makeError(ErrorCode::Internal, std::string("CPU device: ") + error.what());
    }
  }
  endTurn();
  return status;
}

// Every chain (the transfers of one ring and direction) on its own TB thread, all at once: a batch
// never waits on the order of its transfers. The rings' running counts live in the segments, so
// consecutive batches continue them.
Status State::runPeers(const PeerBatch& batch) {
  if (aborted()) return abortedError();
  const size_t n = batch.transfers.size();
  if (n == 0) return {};
  std::vector<dev::RingDevice> rings(n);
  std::vector<std::array<int32_t, 2>> values(n);
  std::vector<dev::TbReport> reports(n);
  std::vector<dev::KernelArgs> args(n);
  const HostPoll poll = currentPoll();
  for (size_t i = 0; i < n; ++i) {
    const PeerTransfer& transfer = batch.transfers[i];
    rings[i] = ringOf(batch.placement->rings[transfer.ring]);
    values[i] = peerValues(transfer);
    args[i] = peerKernelArgs(transfer, batch.sliceBytes, rank);
    args[i].rings = &rings[i];
    args[i].reports = &reports[i];
    args[i].roleValues = values[i].data();
    attachPoll(args[i], poll);
  }
  // One launch of one block per chain: its values are the chain's {first, count}.
  const std::vector<int32_t> chains = peerChains(batch);
  const size_t nChains = chains.size() / 2;
  std::vector<dev::KernelArgs> chainArgs(nChains);
  std::vector<HostLaunch> launches(nChains);
  const int64_t deadline = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               (Clock::now() + seconds(batch.timeoutSeconds)).time_since_epoch())
                               .count();
  for (size_t c = 0; c < nChains; ++c) {
    chainArgs[c].scratch = args.data();
    chainArgs[c].roleValues = &chains[2 * c];
    chainArgs[c].abort = abortWord;
    chainArgs[c].deadlineNs = deadline;
    launches[c] = HostLaunch{hostPeerChain, &chainArgs[c], 1};
  }
  const Expected<bool> ran = pool.run(hostPeerKernels(), launches);
  pollEnded(poll);
  if (!ran) {
    std::atomic_ref<int32_t>(*abortWord).store(1);
    return ran.status();
  }
  Status stopped = peerBatchStatus(batch, reports);
  if (!stopped) std::atomic_ref<int32_t>(*abortWord).store(1);  // the peers stop too
  return stopped;
}

class CpuDevice final : public Device {
 public:
  CpuDevice(int32_t rank, int32_t nRanks) : state_(std::make_shared<State>()) {
    state_->rank = rank;
    state_->nRanks = nRanks;
    state_->transport = transport::makeSharedMemoryTransport(rank, nRanks);
  }
  // Queued calls hold the state (segments, runtimes) until they ran; nothing to wait for here.
  ~CpuDevice() override = default;

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  int deviceOrdinal() const override { return -1; }

  Status setRemoteRanks(const std::vector<bool>& remote) override {
    remote_ = remote;
    state_->transport = transport::makeSharedMemoryTransport(state_->rank, state_->nRanks, remote);
    return {};
  }

  HostSegments hostSegments() const override {
    return HostSegments{state_->bases, state_->transport->segmentBytes(), state_->abortWord};
  }

  Expected<std::string> createStaging(size_t bytes) override {
    return state_->transport->exportSegment(bytes);
  }

  Status openStaging(const std::vector<std::string>& blobs) override {
    State& s = *state_;
    if (Status status = s.transport->importSegments(blobs); !status) return status;
    s.bases.assign(blobs.size(), nullptr);
    for (size_t r = 0; r < blobs.size(); ++r) s.bases[r] = s.transport->base(static_cast<int32_t>(r));
    // The host's first rank holds the abort word every TB of the host watches.
    size_t first = 0;
    while (first < remote_.size() && remote_[first]) ++first;
    s.abortWord = reinterpret_cast<int32_t*>(s.bases[first]);
    return {};
  }

  void stagingShared() override { state_->transport->shared(); }

  Status resetStaging() override {
    State& s = *state_;
    if (s.bases.empty()) return makeError(ErrorCode::Internal, "CPU device: staging reset before it was opened");
    const size_t bytes = s.transport->segmentBytes();
    std::memset(s.bases[s.rank] + kSegmentHeaderBytes, 0, bytes - static_cast<size_t>(kSegmentHeaderBytes));
    s.runtimes.clear();  // keyed by placements that are gone
    return {};
  }

  Status checkStream(tucclStream_t stream) const override {
    if (stream == nullptr || CpuStream::find(stream)) return {};
    return makeError(ErrorCode::InvalidArgument,
                     "the stream is not a TuCCL CPU stream (communicators on the CPU device take NULL or a stream "
                     "from tucclStreamCreate)");
  }

  Status launch(const KernelCall& call, tucclStream_t stream) override {
    if (state_->bases.empty()) return makeError(ErrorCode::Internal, "CPU device: launch before the staging was opened");
    if (stream == nullptr) return state_->execute(call);
    return enqueueOn(stream, [call](State& state) { return state.execute(call); });
  }

  Status launchPeers(const PeerBatch& batch, tucclStream_t stream) override {
    if (state_->bases.empty()) return makeError(ErrorCode::Internal, "CPU device: launch before the staging was opened");
    if (stream == nullptr) return state_->executePeers(batch);
    return enqueueOn(stream, [batch](State& state) { return state.executePeers(batch); });
  }

  Status copy(void* dst, const void* src, size_t bytes, tucclStream_t stream) override {
    if (bytes == 0 || dst == src) return {};
    if (stream == nullptr) {
      std::memmove(dst, src, bytes);
      return {};
    }
    return enqueueOn(stream, [dst, src, bytes](State&) {
      std::memmove(dst, src, bytes);
      return Status();
    });
  }

  Status scale(void* dst, const void* src, int64_t elems, DataType type, uint64_t scalarBits,
               const void* scalarAddress, tucclStream_t stream) override {
    auto run = [dst, src, elems, type, scalarBits, scalarAddress] {
      dev::scaleElements(deviceDataType(type), dst, src, elems, scalarAddress != nullptr ? scalarAddress : &scalarBits);
    };
    if (elems <= 0) return {};
    if (stream == nullptr) {
      run();
      return {};
    }
    return enqueueOn(stream, [run](State&) {
      run();
      return Status();
    });
  }

  Status drain(double timeoutSeconds) override {
    State& s = *state_;
    std::unique_lock lock(s.orderMutex);
    const auto deadline = Clock::now() + seconds(timeoutSeconds);
    while (s.outstanding.load() > 0) {
      if (s.turn.wait_until(lock, deadline) == std::cv_status::timeout && s.outstanding.load() > 0) {
        return makeError(ErrorCode::Timeout, std::to_string(s.outstanding.load()) +
                                                 " enqueued calls did not finish within the timeout");
      }
    }
    return {};
  }

  void abort() override {
    if (state_->abortWord != nullptr) std::atomic_ref<int32_t>(*state_->abortWord).store(1);
    state_->turn.notify_all();
  }

  void setErrorSink(ErrorSink sink) override {
    std::lock_guard lock(state_->sinkMutex);
    state_->sink = std::move(sink);
  }

  void setHostPoll(HostPoll poll) override {
    std::lock_guard lock(state_->pollMutex);
    state_->hostPoll = std::move(poll);
  }

 private:
  // Queues `work` on the CPU stream behind what it holds; its error goes to the sink too (the
  // caller returned long ago), and drain() counts it as outstanding until it ran.
  Status enqueueOn(tucclStream_t stream, std::function<Status(State&)> work) {
    std::shared_ptr<CpuStream> cpuStream = CpuStream::find(stream);
    if (!cpuStream) {
      return makeError(ErrorCode::InvalidArgument,
                       "the stream is not a TuCCL CPU stream (communicators on the CPU device take NULL or a stream "
                       "from tucclStreamCreate)");
    }
    state_->outstanding.fetch_add(1);
    cpuStream->enqueue([state = state_, work = std::move(work)] {
      Status status = work(*state);
      if (!status) state->report(status);
      if (state->outstanding.fetch_sub(1) == 1) {
        std::lock_guard lock(state->orderMutex);
        state->turn.notify_all();
      }
      return status;
    });
    return {};
  }

  std::shared_ptr<State> state_;
  std::vector<bool> remote_;  // by rank: on another host
};

}  // namespace

std::unique_ptr<Device> createCpuDevice(int32_t rank, int32_t nRanks) {
  return std::make_unique<CpuDevice>(rank, nRanks);
}

}  // namespace tuccl::backend
