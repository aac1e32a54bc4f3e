// The CUDA device against the recording fake driver (fake_cuda_driver.h), which runs the host
// build of the launched kernels: what the device asks of the driver (modules from the plan's
// CUBINs, grid and block, the KernelArgs and the ring table pointing into the right ranks'
// segments, IPC for other processes and pointers within one, cleanup), errors of the driver as a
// Status naming the call, hangs and aborts reported through the error sink, and AllReduce results
// checked element by element, for ranks as threads and for ranks as processes.
#include "backend/cuda_device.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "backend/staging_layout.h"
#include "fake_cuda_driver.h"
#include "kernelgen/device/peer.h"
#include "kernelgen/nvrtc.h"
#include "kernelgen/output_compare.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"

namespace tuccl::backend {
namespace {

constexpr int64_t kChunkBytes = 4096;  // a slice of 1024 floats
constexpr int32_t kStagingSlots = 4;
constexpr size_t kStagingBytes = size_t{1} << 20;
constexpr int32_t kThreads = 128;
constexpr double kTimeoutSeconds = 60;

const CudaDriver& fakeDriver() {
  static const std::unique_ptr<CudaDriver> driver = [] {
    Expected<std::unique_ptr<CudaDriver>> opened = openCudaDriver(TUCCL_FAKE_CUDA_LIBRARY);
    if (!opened) throw std::runtime_error(opened.status().toString());
    return std::move(*opened);
  }();
  return *driver;
}

// The example algorithm `name` on nRanks GPUs; with host CUBINs, images the fake runs.
// `channels`: the plan's (0: the algorithm's hint).
std::shared_ptr<const CompiledPlan> examplePlan(const std::string& name, int32_t nRanks, bool hostCubins = true,
                                                int32_t channels = 0) {
  static std::map<std::string, std::shared_ptr<const CompiledPlan>> cache;
  const std::string key =
      name + "/" + std::to_string(nRanks) + (hostCubins ? "/host" : "/nvrtc") + "/" + std::to_string(channels);
  auto& slot = cache[key];
  if (slot) return slot;
  Expected<Algorithm> algorithm =
      loadRescclAlgorithm(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl", nRanks, nRanks);
  EXPECT_TRUE(algorithm) << algorithm.status().toString();
  if (!algorithm) return nullptr;
  PlanRequest request;
  request.config.chunkSize = kChunkBytes;
  request.config.nThreads = kThreads;
  request.config.nChannels = channels;
  Targets targets;
  targets.hostKernels = hostCubins;
  Expected<CompiledPlan> built = compilePlan(buildPlan(*algorithm, request).value(), targets);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built) return nullptr;
  auto compiled = std::make_shared<CompiledPlan>(std::move(built).value());
  compiled->key = key;
  if (hostCubins) {
    for (size_t k = 0; k < compiled->kernels.kernels.size(); ++k) {
      compiled->cubins.push_back(fakecuda::hostCubin(compiled->host->libraryPath));
    }
  }
  slot = compiled;
  return slot;
}

std::shared_ptr<const CompiledPlan> ringAllReduce(int32_t nRanks, bool hostCubins = true) {
  return examplePlan("ring_allreduce", nRanks, hostCubins);
}

/// The buffers of every rank of a call (the same in every process for a seed) and its inputs.
struct CallData {
  CollectiveCall call;
  std::vector<std::vector<float>> inputBuffers;   ///< out of place only
  std::vector<std::vector<float>> outputBuffers;  ///< in place: the input too
  std::vector<std::vector<double>> inputs;

  void* input(int32_t rank) {
    return call.inPlace ? outputBuffers[rank].data() : static_cast<void*>(inputBuffers[rank].data());
  }
};

// Random inputs the sums of which floats hold exactly; in place, in the output's input position.
CallData callData(Collective collective, int32_t nRanks, int64_t count, bool inPlace, uint64_t seed) {
  CallData data;
  data.call = CollectiveCall{collective, nRanks, -1, DataType::Float32, ReduceOp::Sum, count, inPlace};
  std::mt19937_64 random(seed);
  const auto inputCount = static_cast<size_t>(inputElements(data.call));
  for (int32_t r = 0; r < nRanks; ++r) {
    std::vector<double>& input = data.inputs.emplace_back();
    for (size_t i = 0; i < inputCount; ++i) input.push_back(static_cast<double>(1 + random() % 64) / 8.0);
    std::vector<float>& output = data.outputBuffers.emplace_back(static_cast<size_t>(outputElements(data.call)), -1.0f);
    std::vector<float>& in = data.inputBuffers.emplace_back(inPlace ? 0 : inputCount);
    // NCCL's in-place layout: AllGather's input is block `rank` of its output.
    float* target = inPlace ? output.data() + (collective == Collective::AllGather ? r * count : 0) : in.data();
    for (size_t i = 0; i < inputCount; ++i) target[i] = static_cast<float>(input[i]);
  }
  return data;
}

CallData allReduceData(int32_t nRanks, int64_t count, uint64_t seed) {
  return callData(Collective::AllReduce, nRanks, count, true, seed);
}

// "" when rank `rank`'s output is the reference, else the first mismatches.
std::string checkOutput(const CallData& data, int32_t rank) {
  Expected<RankOutputs> expected = referenceOutputs(data.call, data.inputs);
  if (!expected) return expected.status().toString();
  std::vector<const void*> outputs;
  for (const std::vector<float>& buffer : data.outputBuffers) outputs.push_back(buffer.data());
  const RankComparison comparison = compareOutputs(data.call, *expected, outputs)[rank];
  if (comparison.ok()) return "";
  std::string text = "rank " + std::to_string(rank) + ": " + std::to_string(comparison.mismatches.count) + " mismatches";
  for (const std::string& line : comparison.mismatches.first) text += "\n  " + line;
  return text;
}

KernelCall kernelCall(const std::shared_ptr<const CompiledPlan>& plan, const PlanPlacement& placement,
                      CallData& data, int32_t rank, double timeoutSeconds = kTimeoutSeconds) {
  KernelCall call;
  call.plan = plan;
  call.placement = &placement;
  call.call = data.call;
  call.rank = rank;
  call.call.sendbuff = data.input(rank);
  call.call.recvbuff = data.outputBuffers[rank].data();
  call.sliceElems = kChunkBytes / static_cast<int64_t>(sizeof(float));
  call.timeoutSeconds = timeoutSeconds;
  return call;
}

Expected<PlanPlacement> placePlan(const CompiledPlan& plan) {
  StagingAllocator allocator(plan.plan.nRanks, static_cast<int64_t>(kStagingBytes));
  return allocator.place(plan.layout, kChunkBytes, kStagingSlots);
}

/// A communicator's ranks as threads of this process: device r runs rank r on GPU r.
struct Ranks {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::string> blobs;
  std::vector<uint64_t> segments;  ///< each rank's staging (device pointer, from the fake's log)
  PlanPlacement placement;
  std::mutex mutex;
  std::vector<Status> errors;  ///< what the error sinks got

  std::vector<Status> takeErrors() {
    std::lock_guard lock(mutex);
    return std::exchange(errors, {});
  }
};

// `remoteOfRank0`: the ranks rank 0 takes for another host's (setRemoteRanks); empty: one host.
void setUpRanks(Ranks& ranks, const CompiledPlan& plan, const std::vector<bool>& remoteOfRank0 = {}) {
  const int32_t nRanks = plan.plan.nRanks;
  for (int32_t r = 0; r < nRanks; ++r) {
    Expected<std::unique_ptr<Device>> device = createCudaDevice(fakeDriver(), r);
    ASSERT_TRUE(device) << device.status().toString();
    if (r == 0 && !remoteOfRank0.empty()) {
      ASSERT_TRUE((*device)->setRemoteRanks(remoteOfRank0));
    }
    (*device)->setErrorSink([&ranks](const Status& status) {
      std::lock_guard lock(ranks.mutex);
      ranks.errors.push_back(status);
    });
    Expected<std::string> blob = (*device)->createStaging(kStagingBytes);
    ASSERT_TRUE(blob) << blob.status().toString();
    ranks.segments.push_back(fakecuda::callsOf("cuMemAlloc_v2").back().values.at(1));
    ranks.blobs.push_back(*blob);
    ranks.devices.push_back(std::move(*device));
  }
  for (auto& device : ranks.devices) ASSERT_TRUE(device->openStaging(ranks.blobs));
  for (auto& device : ranks.devices) device->stagingShared();
  Expected<PlanPlacement> placement = placePlan(plan);
  ASSERT_TRUE(placement) << placement.status().toString();
  ranks.placement = *placement;
}

// Launches every rank of one call (from the test thread, or a thread per rank), waits, checks.
// `channels`: those the call runs (KernelCall::channels; 0: the plan's).
void runCall(Ranks& ranks, const std::shared_ptr<const CompiledPlan>& plan, CallData& data,
             const std::vector<tucclStream_t>& streams, bool threadPerRank, int32_t channels = 0) {
  const int32_t nRanks = plan->plan.nRanks;
  std::vector<Status> launched(static_cast<size_t>(nRanks));
  auto launch = [&](int32_t r) {
    KernelCall call = kernelCall(plan, ranks.placement, data, r);
    call.channels = channels;
    launched[r] = ranks.devices[r]->launch(call, streams[r]);
  };
  if (threadPerRank) {
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < nRanks; ++r) threads.emplace_back(launch, r);
    for (std::thread& thread : threads) thread.join();
  } else {
    for (int32_t r = 0; r < nRanks; ++r) launch(r);
  }
  for (int32_t r = 0; r < nRanks; ++r) ASSERT_TRUE(launched[r]) << launched[r].toString();
  for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
  for (const Status& error : ranks.takeErrors()) ADD_FAILURE() << error.toString();
  for (int32_t r = 0; r < nRanks; ++r) EXPECT_EQ(checkOutput(data, r), "");
}

dev::KernelArgs argsOf(const fakecuda::Call& launch) {
  dev::KernelArgs args;
  EXPECT_EQ(launch.bytes.size(), sizeof args);
  std::memcpy(&args, launch.bytes.data(), std::min(sizeof args, launch.bytes.size()));
  return args;
}

template <typename T>
T* at(uint64_t base, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(base + static_cast<uint64_t>(offset)));
}

// The ring table a launch passed points into the segments of the ring's ranks, at the placement.
void expectRingTable(const dev::KernelArgs& args, const PlanPlacement& placement,
                     const std::vector<uint64_t>& segments) {
  for (size_t i = 0; i < placement.rings.size(); ++i) {
    const RingPlacement& p = placement.rings[i];
    const dev::RingDevice& ring = args.rings[i];
    const uint64_t dst = segments[p.dstRank], src = segments[p.srcRank];
    EXPECT_EQ(ring.staging, at<char>(dst, p.stagingInDst)) << "ring " << i;
    EXPECT_EQ(ring.tags, at<uint64_t>(dst, p.tagsInDst)) << "ring " << i;
    EXPECT_EQ(ring.posted, at<uint64_t>(dst, p.postedInDst)) << "ring " << i;
    EXPECT_EQ(ring.recvCount, at<uint64_t>(dst, p.recvCountInDst)) << "ring " << i;
    EXPECT_EQ(ring.consumed, at<uint64_t>(src, p.consumedInSrc)) << "ring " << i;
    EXPECT_EQ(ring.sendCount, at<uint64_t>(src, p.sendCountInSrc)) << "ring " << i;
    EXPECT_EQ(ring.slotBytes, p.slotBytes);
    EXPECT_EQ(ring.nSlots, p.nSlots);
  }
}

class CudaDeviceRanks : public ::testing::TestWithParam<int32_t> {};

// Three AllReduce calls of one plan (counters keep running across them): on the NULL streams, on
// streams of the caller, and launched by a thread per rank; every element checked.
TEST_P(CudaDeviceRanks, RunAllReduceAsThreadsOfOneProcess) {
  const int32_t nRanks = GetParam();
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(nRanks);
  ASSERT_TRUE(plan);
  const fakecuda::Resources before = fakecuda::resources();
  fakecuda::clearCalls();
  {
    Ranks ranks;
    setUpRanks(ranks, *plan);
    if (HasFatalFailure()) return;
    // One process: peers' pointers are used as they are, with peer access; no IPC.
    EXPECT_TRUE(fakecuda::callsOf("cuIpcOpenMemHandle_v2").empty());
    EXPECT_EQ(fakecuda::callsOf("cuCtxEnablePeerAccess").size(), static_cast<size_t>(nRanks * (nRanks - 1)));
    EXPECT_EQ(fakecuda::callsOf("cuMemHostRegister_v2").size(), static_cast<size_t>(nRanks));  // the abort page

    std::vector<tucclStream_t> nullStreams(static_cast<size_t>(nRanks), nullptr), streams;
    for (int32_t r = 0; r < nRanks; ++r) streams.push_back(fakecuda::createStream());
    const int64_t counts[] = {10000, 777, 4099};
    for (int i = 0; i < 3; ++i) {
      CallData data = allReduceData(nRanks, counts[i], 100 + static_cast<uint64_t>(i));
      runCall(ranks, plan, data, i == 0 ? nullStreams : streams, i == 2);
      if (HasFatalFailure()) return;
    }
    for (tucclStream_t stream : streams) fakecuda::destroyStream(stream);

    // Each rank's module is loaded once, from the plan's CUBIN, and its ring table uploaded once.
    const std::vector<fakecuda::Call> modules = fakecuda::callsOf("cuModuleLoadData");
    ASSERT_EQ(modules.size(), static_cast<size_t>(nRanks));
    for (const fakecuda::Call& module : modules) {
      EXPECT_EQ(module.bytes, plan->cubins[0]);
      EXPECT_EQ(module.text, plan->host->libraryPath);
    }
    // Per rank its ring table and, when its kernel reads one, its value table.
    size_t tables = 0;
    for (const RankKernel& rank : plan->kernels.ranks) tables += rank.values.empty() ? 0 : 1;
    EXPECT_EQ(fakecuda::callsOf("cuMemcpyHtoD_v2").size(), static_cast<size_t>(nRanks) + tables);
    // No memset per call: a call slot's counters are cleared once, and its calls number their values.
    EXPECT_EQ(fakecuda::callsOf("cuMemsetD8Async").size(), 0u);
    // No host function per call: each call's end is an event of its slot, read at the next launch,
    // drain or poll.
    EXPECT_EQ(fakecuda::callsOf("cuLaunchHostFunc").size(), 0u);
    EXPECT_EQ(fakecuda::callsOf("cuEventRecord").size(), static_cast<size_t>(3 * nRanks));

    const std::vector<fakecuda::Call> launches = fakecuda::callsOf("cuLaunchKernel");
    ASSERT_EQ(launches.size(), static_cast<size_t>(3 * nRanks));
    const std::vector<fakecuda::Call> registered = fakecuda::callsOf("cuMemHostRegister_v2");
    std::map<const void*, uint64_t> epochOfCounters;  // the calls on one slot's counters number them 1, 2, ...
    for (int i = 0; i < 3 * nRanks; ++i) {
      const dev::KernelArgs numbered = argsOf(launches[i]);
      uint64_t& last = epochOfCounters[numbered.progress];
      EXPECT_EQ(numbered.epoch, last + 1) << "launch " << i;
      last = numbered.epoch;
    }
    for (int i = 0; i < 3 * nRanks; ++i) {
      const fakecuda::Call& launch = launches[i];
      const dev::KernelArgs args = argsOf(launch);
      const int32_t r = args.rank;
      ASSERT_GE(r, 0);
      ASSERT_LT(r, nRanks);
      EXPECT_EQ(launch.values.at(9), static_cast<uint64_t>(r)) << "launched in GPU " << r << "'s context";
      EXPECT_EQ(launch.text, plan->kernels.kernelOf(r).kernelName);
      // The grid: the plan's TBs of every channel.
      EXPECT_EQ(launch.values.at(0),
                static_cast<uint64_t>(plan->kernels.kernelOf(r).nTbs * std::max(1, plan->plan.config.nChannels)));
      EXPECT_EQ(args.channels, std::max(1, plan->plan.config.nChannels));
      EXPECT_EQ(launch.values.at(3), static_cast<uint64_t>(kThreads));
      EXPECT_EQ(launch.values.at(1) * launch.values.at(2) * launch.values.at(4) * launch.values.at(5), 1u);
      EXPECT_EQ(args.count, counts[i / nRanks]);
      EXPECT_EQ(args.nRanks, nRanks);
      EXPECT_EQ(args.sliceElems, kChunkBytes / 4);
      EXPECT_EQ(args.dtype, dev::kFloat32);
      EXPECT_EQ(args.op, dev::kSum);
      EXPECT_EQ(args.chunksPerUnit, plan->layout.chunksPerUnit);
      EXPECT_EQ(args.inPlaceCall, 1);
      EXPECT_EQ(args.input, args.output);
      EXPECT_EQ(args.spinLimit, static_cast<int64_t>(kTimeoutSeconds * fakecuda::kClockKhz * 1000));
      EXPECT_EQ(args.deadlineNs, 0);
      EXPECT_EQ(reinterpret_cast<uint64_t>(args.abort), registered[r].values.at(0)) << "the host-mapped abort word";
      EXPECT_EQ(*args.abort, 0);
      expectRingTable(args, ranks.placement, ranks.segments);
      // The rank's value table, in (the fake's host-visible) device memory.
      const std::vector<int32_t>& values = plan->kernels.ranks[r].values;
      if (values.empty()) {
        EXPECT_EQ(args.roleValues, nullptr);
      } else {
        ASSERT_NE(args.roleValues, nullptr);
        EXPECT_EQ(std::vector<int32_t>(args.roleValues, args.roleValues + values.size()), values) << "rank " << r;
      }
    }
    // The caller's context is left as it was (none on this thread).
    CUcontext context = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(fakeDriver().cuCtxGetCurrent(&context), CUDA_SUCCESS);
    EXPECT_EQ(context, nullptr);
  }
  // Every allocation, registration, module and context the devices took is given back.
  const fakecuda::Resources after = fakecuda::resources();
  EXPECT_EQ(after.deviceAllocations, before.deviceAllocations);
  EXPECT_EQ(after.hostAllocations, before.hostAllocations);
  EXPECT_EQ(after.hostRegistrations, before.hostRegistrations);
  EXPECT_EQ(after.modules, before.modules);
  EXPECT_EQ(after.primaryContextRetains, before.primaryContextRetains);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CudaDeviceRanks, ::testing::Values(2, 3, 4),
                         [](const auto& param) { return std::to_string(param.param) + "Ranks"; });

// Out of place: the input is a buffer of its own, copied by the kernel's prologue.
TEST(CudaDevice, RunsAnOutOfPlaceAllGather) {
  std::shared_ptr<const CompiledPlan> plan = examplePlan("ring_allgather", 3);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  fakecuda::clearCalls();
  CallData data = callData(Collective::AllGather, 3, 3001, false, 21);
  runCall(ranks, plan, data, {nullptr, nullptr, nullptr}, false);
  for (const fakecuda::Call& launch : fakecuda::callsOf("cuLaunchKernel")) {
    const dev::KernelArgs args = argsOf(launch);
    EXPECT_EQ(args.inPlaceCall, 0);
    EXPECT_EQ(args.input, data.inputBuffers.at(args.rank).data());
    EXPECT_EQ(args.output, data.outputBuffers.at(args.rank).data());
    // The barrier words lead the slot's counters, where every plan finds them: a slot serves
    // calls of several plans, and a barrier word must never hold another plan's progress value.
    EXPECT_EQ(args.progress, args.barrier + 2);
  }
}

// A call runs the channels it is given, fewer than its plan's: a grid of those channels' TBs, and
// the channels it leaves idle keep their rings' counts for the calls that run them again. Every
// element of every call checked; a call of more channels than its plan's is refused.
TEST(CudaDevice, CallsRunFewerChannelsThanTheirPlan) {
  constexpr int32_t kRanks = 3;
  std::shared_ptr<const CompiledPlan> plan = examplePlan("ring_allreduce", kRanks, true, 4);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->layout.channels, 4);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  const std::vector<tucclStream_t> streams(kRanks, nullptr);
  const int32_t channelsOfCalls[] = {1, 4, 2, 1, 3, 4, 0};
  for (size_t i = 0; i < std::size(channelsOfCalls); ++i) {
    const int32_t channels = channelsOfCalls[i];
    SCOPED_TRACE("call " + std::to_string(i) + " of " + std::to_string(channels) + " channels");
    fakecuda::clearCalls();
    CallData data = allReduceData(kRanks, 3000 + 97 * static_cast<int64_t>(i), 300 + i);
    runCall(ranks, plan, data, streams, i % 2 == 1, channels);
    if (HasFatalFailure()) return;
    const std::vector<fakecuda::Call> launches = fakecuda::callsOf("cuLaunchKernel");
    ASSERT_EQ(launches.size(), static_cast<size_t>(kRanks));
    const int32_t runs = channels > 0 ? channels : 4;
    for (const fakecuda::Call& launch : launches) {
      const dev::KernelArgs args = argsOf(launch);
      EXPECT_EQ(args.channels, runs);
      EXPECT_EQ(launch.values.at(0), static_cast<uint64_t>(plan->kernels.kernelOf(args.rank).nTbs * runs));
    }
  }
  CallData data = allReduceData(kRanks, 100, 9);
  KernelCall tooMany = kernelCall(plan, ranks.placement, data, 0);
  tooMany.channels = 5;
  const Status refused = ranks.devices[0]->launch(tooMany, nullptr);
  EXPECT_EQ(refused.code(), ErrorCode::InvalidArgument) << refused.toString();
  EXPECT_NE(refused.message().find("5 channels of a plan of 4"), std::string::npos) << refused.toString();
}

// A burst of calls launched back to back, none waited for, keeps at most 8 in flight per device:
// the ninth launch waits for the first call's event and reuses its slot (no slot, with its pinned
// reports and counters, per call). Every rank's output is checked after the burst.
TEST(CudaDevice, ABurstOfCallsReusesABoundedSetOfSlots) {
  constexpr int32_t kRanks = 2;
  constexpr int kCalls = 25;
  constexpr size_t kMaxSlots = 8;
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(kRanks);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  fakecuda::clearCalls();
  CallData data = callData(Collective::AllReduce, kRanks, 5003, false, 77);
  std::vector<tucclStream_t> streams;
  for (int32_t r = 0; r < kRanks; ++r) streams.push_back(fakecuda::createStream());
  std::vector<Status> launched(kRanks);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kCalls && launched[r]; ++i) {
        launched[r] = ranks.devices[r]->launch(kernelCall(plan, ranks.placement, data, r), streams[r]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& status : launched) EXPECT_TRUE(status) << status.toString();
  for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
  for (const Status& error : ranks.takeErrors()) ADD_FAILURE() << error.toString();
  for (int32_t r = 0; r < kRanks; ++r) EXPECT_EQ(checkOutput(data, r), "");
  EXPECT_EQ(fakecuda::callsOf("cuLaunchKernel").size(), static_cast<size_t>(kCalls * kRanks));
  // One set of pinned reports per slot: at most kMaxSlots per rank, not one per call.
  const size_t slots = fakecuda::callsOf("cuMemHostAlloc").size();
  EXPECT_GE(slots, static_cast<size_t>(kRanks));
  EXPECT_LE(slots, kMaxSlots * kRanks);
  for (tucclStream_t stream : streams) fakecuda::destroyStream(stream);
}

// The runtime phase's timings: a timed call's events bracket its work in stream order, its time
// reaches `completed` by the next launch or drain, the test delay lies inside it, events are
// reused across calls and the device destroys them.
TEST(CudaDevice, TimesCallsWithEventsAroundTheirWork) {
  constexpr int32_t kRanks = 2;
  constexpr int64_t kDelayMicros = 30000;
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(kRanks);
  ASSERT_TRUE(plan);
  const size_t eventsBefore = fakecuda::resources().events;
  std::mutex mutex;
  std::vector<std::vector<double>> times(kRanks);
  {
    Ranks ranks;
    setUpRanks(ranks, *plan);
    if (HasFatalFailure()) return;
    fakecuda::clearCalls();
    for (int call = 0; call < 4; ++call) {
      CallData data = allReduceData(kRanks, 4099, 40 + static_cast<uint64_t>(call));
      std::vector<Status> launched(kRanks);
      for (int32_t r = 0; r < kRanks; ++r) {
        KernelCall timed = kernelCall(plan, ranks.placement, data, r);
        timed.completed = [&mutex, &times, r](double seconds) {
          std::lock_guard lock(mutex);
          times[r].push_back(seconds);
        };
        timed.testDelayMicros = call == 1 ? kDelayMicros : 0;  // the second call is held
        launched[r] = ranks.devices[r]->launch(timed, nullptr);
      }
      for (const Status& status : launched) ASSERT_TRUE(status) << status.toString();
      for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
      for (const Status& error : ranks.takeErrors()) ADD_FAILURE() << error.toString();
      for (int32_t r = 0; r < kRanks; ++r) EXPECT_EQ(checkOutput(data, r), "");
      std::lock_guard lock(mutex);
      for (int32_t r = 0; r < kRanks; ++r) ASSERT_EQ(times[r].size(), static_cast<size_t>(call + 1)) << "rank " << r;
    }
    // Two timing events per rank and its call slot's completion event, reused by every call; each
    // call recorded all three on its stream.
    EXPECT_EQ(fakecuda::callsOf("cuEventCreate").size(), 3u * kRanks);
    EXPECT_EQ(fakecuda::callsOf("cuEventRecord").size(), 3u * 4 * kRanks);
    EXPECT_EQ(fakecuda::resources().events, eventsBefore + 3 * kRanks);
  }
  EXPECT_EQ(fakecuda::resources().events, eventsBefore);  // destroyed with the devices
  for (int32_t r = 0; r < kRanks; ++r) {
    for (int call = 0; call < 4; ++call) EXPECT_GT(times[r][call], 0.0) << "rank " << r << " call " << call;
    EXPECT_GE(times[r][1], kDelayMicros * 1e-6) << "rank " << r;  // the delay is inside the span
  }
}

// An untimed call records only its completion event (one per call slot, made with the slot); a
// timed call whose events cannot be made is refused naming the call.
TEST(CudaDevice, UntimedCallsMakeNoEventsAndEventFailuresAreNamed) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  fakecuda::clearCalls();
  CallData data = allReduceData(2, 1025, 7);
  runCall(ranks, plan, data, {nullptr, nullptr}, false);
  EXPECT_EQ(fakecuda::callsOf("cuEventCreate").size(), 2u);  // a slot per rank
  EXPECT_EQ(fakecuda::callsOf("cuEventRecord").size(), 2u);  // one per call
  CallData again = allReduceData(2, 1025, 8);
  runCall(ranks, plan, again, {nullptr, nullptr}, false);
  EXPECT_EQ(fakecuda::callsOf("cuEventCreate").size(), 2u);  // the slots are reused
  EXPECT_EQ(fakecuda::callsOf("cuEventRecord").size(), 4u);

  const size_t launches = fakecuda::callsOf("cuLaunchKernel").size();
  fakecuda::failNext("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);
  KernelCall timed = kernelCall(plan, ranks.placement, data, 0);
  timed.completed = [](double) {};
  const Status status = ranks.devices[0]->launch(timed, nullptr);
  fakecuda::clearFailures();
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("cuEventCreate"), std::string::npos) << status.toString();
  EXPECT_NE(status.message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << status.toString();
  EXPECT_EQ(fakecuda::callsOf("cuLaunchKernel").size(), launches);  // nothing was enqueued
}

// ---- Ranks as processes ---------------------------------------------------------------------------

// Bounded pipe I/O between the two processes of a test.
bool writeAll(int fd, const std::string& bytes) {
  const uint64_t size = bytes.size();
  return write(fd, &size, sizeof size) == static_cast<ssize_t>(sizeof size) &&
         write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

bool readExactly(int fd, char* out, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 120000) != 1) return false;
    const ssize_t n = read(fd, out + done, bytes - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool readMessage(int fd, std::string& message) {
  uint64_t size = 0;
  if (!readExactly(fd, reinterpret_cast<char*>(&size), sizeof size) || size > (1u << 20)) return false;
  message.assign(size, '\0');
  return readExactly(fd, message.data(), size);
}

// One rank of a 2-rank AllReduce in this process, its peer in another: blobs and barriers over
// the pipes. Returns "" on success, else what went wrong (no gtest in a forked child).
std::string runRankOfTwoProcesses(int32_t rank, const std::shared_ptr<const CompiledPlan>& plan, int in, int out,
                                  uint64_t* openedPeer) {
  fakecuda::clearCalls();
  Expected<std::unique_ptr<Device>> device = createCudaDevice(fakeDriver(), rank);
  if (!device) return device.status().toString();
  Device& gpu = **device;
  Expected<std::string> blob = gpu.createStaging(kStagingBytes);
  if (!blob) return blob.status().toString();
  std::string peerBlob, barrier;
  if (!writeAll(out, *blob) || !readMessage(in, peerBlob)) return "blob exchange failed";
  const std::vector<std::string> blobs = rank == 0 ? std::vector{*blob, peerBlob} : std::vector{peerBlob, *blob};
  if (Status status = gpu.openStaging(blobs); !status) return status.toString();
  if (!writeAll(out, "opened") || !readMessage(in, barrier)) return "barrier after openStaging failed";
  gpu.stagingShared();
  const std::vector<fakecuda::Call> opened = fakecuda::callsOf("cuIpcOpenMemHandle_v2");
  if (opened.size() != 1 || opened[0].result != CUDA_SUCCESS || opened[0].values.size() != 4) {
    return "expected one successful cuIpcOpenMemHandle";
  }
  *openedPeer = opened[0].values[3];

  Expected<PlanPlacement> placement = placePlan(*plan);
  if (!placement) return placement.status().toString();
  std::vector<Status> errors;
  std::mutex mutex;
  gpu.setErrorSink([&](const Status& status) {
    std::lock_guard lock(mutex);
    errors.push_back(status);
  });
  for (uint64_t seed : {7, 8}) {
    CallData data = allReduceData(2, 5000 + static_cast<int64_t>(seed), seed);
    if (Status status = gpu.launch(kernelCall(plan, *placement, data, rank), nullptr); !status) return status.toString();
    if (Status status = gpu.drain(kTimeoutSeconds); !status) return status.toString();
    if (!errors.empty()) return errors.front().toString();
    if (std::string mismatch = checkOutput(data, rank); !mismatch.empty()) return mismatch;
  }
  // The peer may still read this rank's segment until it is done too.
  if (!writeAll(out, "done") || !readMessage(in, barrier)) return "barrier before destruction failed";
  return "";
}

TEST(CudaDevice, RanksOfTwoProcessesShareStagingThroughIpc) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  fakeDriver();
  int toChild[2], toParent[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(toParent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(toChild[1]);
    close(toParent[0]);
    uint64_t opened = 0;
    const std::string failure = runRankOfTwoProcesses(1, plan, toChild[0], toParent[1], &opened);
    if (!failure.empty()) std::fprintf(stderr, "child (rank 1): %s\n", failure.c_str());
    _exit(failure.empty() ? 0 : 1);
  }
  close(toChild[0]);
  close(toParent[1]);
  uint64_t opened = 0;
  const std::string failure = runRankOfTwoProcesses(0, plan, toParent[0], toChild[1], &opened);
  close(toChild[1]);
  close(toParent[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(failure, "");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child (rank 1) failed";

  // Rank 0 opened rank 1's segment by its IPC handle (the child's pid) and closed it when its device went.
  const std::vector<fakecuda::Call> opens = fakecuda::callsOf("cuIpcOpenMemHandle_v2");
  ASSERT_EQ(opens.size(), 1u);
  EXPECT_EQ(opens[0].values.at(0), static_cast<uint64_t>(child));
  EXPECT_EQ(opens[0].values.at(2), CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  const std::vector<fakecuda::Call> closes = fakecuda::callsOf("cuIpcCloseMemHandle");
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].values.at(0), opened);
  EXPECT_EQ(closes[0].result, CUDA_SUCCESS);
  EXPECT_TRUE(fakecuda::callsOf("cuCtxEnablePeerAccess").empty()) << "IPC enables peer access itself";
}

// ---- Hangs, aborts and errors ---------------------------------------------------------------------

TEST(CudaDevice, AHangIsReportedToTheErrorSinkWithEveryStoppedTb) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  CallData data = allReduceData(2, 3000, 5);
  // Rank 1 never runs: rank 0 waits for its data until its spin limit (0.3 s of the fake's clock).
  ASSERT_TRUE(ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0, 0.3), nullptr));
  ASSERT_TRUE(ranks.devices[0]->drain(kTimeoutSeconds));
  const std::vector<Status> errors = ranks.takeErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::Timeout);
  EXPECT_NE(errors[0].message().find("hang: a wait timed out"), std::string::npos) << errors[0].message();
  EXPECT_NE(errors[0].message().find("rank 0 tb "), std::string::npos) << errors[0].message();
  EXPECT_NE(errors[0].message().find("waiting for data on ring"), std::string::npos) << errors[0].message();
}

TEST(CudaDevice, AbortOnAnyRankStopsTheKernelsOfTheHost) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  CallData data = allReduceData(2, 3000, 6);
  ASSERT_TRUE(ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0, 600), nullptr));
  // Rank 1's device raises the abort word rank 0's kernel watches (rank 0's control page).
  ranks.devices[1]->abort();
  ASSERT_TRUE(ranks.devices[0]->drain(kTimeoutSeconds));
  const std::vector<Status> errors = ranks.takeErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::Aborted) << errors[0].message();
  EXPECT_NE(errors[0].message().find("rank 0 tb"), std::string::npos) << errors[0].message();
}

TEST(CudaDevice, DriverErrorsComeBackNamingTheCallAndTheResult) {
  const CudaDriver& cu = fakeDriver();
  Expected<std::unique_ptr<Device>> missing = createCudaDevice(cu, 9);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::InvalidArgument);

  fakecuda::failNext("cuDevicePrimaryCtxRetain", CUDA_ERROR_INVALID_DEVICE);
  Expected<std::unique_ptr<Device>> refused = createCudaDevice(cu, 0);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("cuDevicePrimaryCtxRetain (GPU 0) failed: CUDA_ERROR_INVALID_DEVICE"),
            std::string::npos)
      << refused.status().message();

  Expected<std::unique_ptr<Device>> device = createCudaDevice(cu, 0);
  ASSERT_TRUE(device);
  fakecuda::failNext("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
  Expected<std::string> blob = (*device)->createStaging(kStagingBytes);
  ASSERT_FALSE(blob);
  EXPECT_EQ(blob.status().code(), ErrorCode::ResourceExhausted);
  EXPECT_NE(blob.status().message().find("cuMemAlloc"), std::string::npos) << blob.status().message();
  EXPECT_NE(blob.status().message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
  device->reset();

  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  CallData data = allReduceData(2, 2000, 9);
  fakecuda::failNext("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE);
  Status load = ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0), nullptr);
  EXPECT_EQ(load.code(), ErrorCode::SystemError);
  EXPECT_NE(load.message().find("cuModuleLoadData (" + plan->kernels.kernelOf(0).fileName), std::string::npos) << load.message();
  EXPECT_NE(load.message().find("CUDA_ERROR_INVALID_IMAGE"), std::string::npos) << load.message();

  fakecuda::failNext("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED);
  Status launch = ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0), nullptr);
  EXPECT_NE(launch.message().find("cuLaunchKernel (" + plan->kernels.kernelOf(0).kernelName + " <<<"), std::string::npos) << launch.message();
  EXPECT_NE(launch.message().find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << launch.message();
  EXPECT_TRUE(ranks.devices[0]->drain(1)) << "a failed launch leaves no call in flight";

  // Nothing half-done stays behind: the same ranks then run the call.
  runCall(ranks, plan, data, {nullptr, nullptr}, false);
}

TEST(CudaDevice, RefusesStagingItCannotMap) {
  const CudaDriver& cu = fakeDriver();
  Expected<std::unique_ptr<Device>> a = createCudaDevice(cu, 0), b = createCudaDevice(cu, 1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)->openStaging({"x"}).code(), ErrorCode::InvalidArgument) << "before createStaging";
  Expected<std::string> blobA = (*a)->createStaging(kStagingBytes), blobB = (*b)->createStaging(kStagingBytes);
  ASSERT_TRUE(blobA && blobB);
  Status garbage = (*a)->openStaging({*blobA, "not a blob"});
  EXPECT_EQ(garbage.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(garbage.message().find("rank 1 is not a CUDA device's"), std::string::npos) << garbage.message();
  Status notMine = (*a)->openStaging({*blobB});
  EXPECT_NE(notMine.message().find("not among"), std::string::npos) << notMine.message();

  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Expected<PlanPlacement> placement = placePlan(*plan);
  ASSERT_TRUE(placement);
  CallData data = allReduceData(2, 100, 1);
  Status early = (*a)->launch(kernelCall(plan, *placement, data, 0), nullptr);
  EXPECT_EQ(early.code(), ErrorCode::InvalidArgument) << "launch before openStaging";
}

// Rings joining a rank to another host's lie in host memory the inter-node proxy reaches
// (hostSegments): the rank's own view and a shadow of each remote rank's segment. The kernel's
// ring table points into them for those rings (the fake maps registered memory at its host
// address, as UVA does) and into the GPU segments for the others; only the blocks those rings
// touch are registered, and destroying the device unregisters them.
TEST(CudaDevice, RingsToOtherHostsLieInHostMemoryTheProxyReaches) {
  const fakecuda::Resources before = fakecuda::resources();
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(3);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan, {false, false, true});
  if (HasFatalFailure()) return;
  const HostSegments host = ranks.devices[0]->hostSegments();
  ASSERT_EQ(host.bases.size(), 3u);
  EXPECT_NE(host.bases[0], nullptr);
  EXPECT_EQ(host.bases[1], nullptr) << "a rank of this host has no view";
  EXPECT_NE(host.bases[2], nullptr);
  EXPECT_EQ(host.segmentBytes, kStagingBytes);
  EXPECT_NE(host.abortWord, nullptr);
  EXPECT_TRUE(ranks.devices[1]->hostSegments().bases.empty()) << "one host: no views";
  fakecuda::clearCalls();
  CallData data = allReduceData(3, 1000, 5);
  ASSERT_TRUE(ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0, 0.5), nullptr));
  const std::vector<fakecuda::Call> launches = fakecuda::callsOf("cuLaunchKernel");
  ASSERT_EQ(launches.size(), 1u);
  const dev::KernelArgs args = argsOf(launches[0]);
  size_t crossing = 0;
  for (size_t i = 0; i < ranks.placement.rings.size(); ++i) {
    const RingPlacement& p = ranks.placement.rings[i];
    const dev::RingDevice& ring = args.rings[i];
    if (p.srcRank != 0 && p.dstRank != 0) continue;
    if (p.srcRank == 2 || p.dstRank == 2) {
      ++crossing;
      EXPECT_EQ(ring.staging, host.bases[p.dstRank] + p.stagingInDst) << "ring " << i;
      EXPECT_EQ(ring.tags, reinterpret_cast<uint64_t*>(host.bases[p.dstRank] + p.tagsInDst)) << "ring " << i;
      EXPECT_EQ(ring.posted, reinterpret_cast<uint64_t*>(host.bases[p.dstRank] + p.postedInDst)) << "ring " << i;
      EXPECT_EQ(ring.consumed, reinterpret_cast<uint64_t*>(host.bases[p.srcRank] + p.consumedInSrc)) << "ring " << i;
    } else {
      EXPECT_EQ(ring.staging, at<char>(ranks.segments[p.dstRank], p.stagingInDst)) << "ring " << i;
      EXPECT_EQ(ring.consumed, at<uint64_t>(ranks.segments[p.srcRank], p.consumedInSrc)) << "ring " << i;
    }
  }
  EXPECT_GT(crossing, 0u);
  const size_t registered = fakecuda::callsOf("cuMemHostRegister_v2").size();
  EXPECT_EQ(registered, 2u) << "each view (1 MiB here) is one block, registered once";
  // Rank 2 never runs: the call times out on its own and goes to the error sink.
  EXPECT_TRUE(ranks.devices[0]->drain(kTimeoutSeconds));
  EXPECT_FALSE(ranks.takeErrors().empty());
  ranks.devices.clear();
  EXPECT_EQ(fakecuda::resources().hostRegistrations, before.hostRegistrations);
}

TEST(CudaDevice, CompilesTheKernelForTheGpuWhenThePlanHasNoCubin) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2, false);
  ASSERT_TRUE(plan);
  Ranks ranks;
  setUpRanks(ranks, *plan);
  if (HasFatalFailure()) return;
  CallData data = allReduceData(2, 1000, 3);
  fakecuda::clearCalls();
  Status launched = ranks.devices[1]->launch(kernelCall(plan, ranks.placement, data, 1), nullptr);
  if (!nvrtcAvailable()) {
    EXPECT_EQ(launched.code(), ErrorCode::Unsupported);
    EXPECT_NE(launched.message().find("without NVRTC"), std::string::npos) << launched.message();
    return;
  }
  ASSERT_TRUE(launched) << launched.toString();
  ASSERT_TRUE(ranks.devices[1]->drain(kTimeoutSeconds));
  // The fake records a real CUBIN but cannot run it: the TBs never report, and the sink says so.
  const std::vector<Status> errors = ranks.takeErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::Internal);
  EXPECT_NE(errors[0].message().find("never finished"), std::string::npos) << errors[0].message();

  const Expected<NvrtcOutput> expected = compileWithNvrtc(plan->kernels.kernelOf(1), "sm_90");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  const std::vector<fakecuda::Call> modules = fakecuda::callsOf("cuModuleLoadData");
  ASSERT_EQ(modules.size(), 1u);
  EXPECT_EQ(modules[0].bytes.size(), expected->cubin.size());
  EXPECT_TRUE(modules[0].bytes == expected->cubin) << "the CUBIN NVRTC makes for sm_90";
  const std::vector<fakecuda::Call> functions = fakecuda::callsOf("cuModuleGetFunction");
  ASSERT_EQ(functions.size(), 1u);
  EXPECT_EQ(functions[0].text, plan->kernels.kernelOf(1).kernelName);
  EXPECT_EQ(functions[0].result, CUDA_SUCCESS) << "the CUBIN defines the kernel";
}

// ---- Point-to-point -----------------------------------------------------------------------------

// Byte i of what rank `from` sends in batch `batch`.
uint8_t peerByte(int32_t from, int32_t batch, size_t i) {
  return static_cast<uint8_t>((static_cast<uint64_t>(from + 1) * 2654435761u + static_cast<uint64_t>(batch) * 977 +
                               i * 40503u) >> 5);
}

// The ranks' devices with the point-to-point rings placed and the host build of the peer kernel
// as the image the fake runs.
PlanPlacement setUpPeers(Ranks& ranks, int32_t nRanks, int64_t slotBytes) {
  setUpRanks(ranks, *ringAllReduce(nRanks));
  for (auto& device : ranks.devices) setCudaPeerKernelImage(*device, fakecuda::hostCubin(TUCCL_HOST_PEER_LIBRARY));
  StagingAllocator allocator(nRanks, static_cast<int64_t>(kStagingBytes));
  Expected<PlanPlacement> placed = allocator.placePeerRings(slotBytes, kStagingSlots);
  EXPECT_TRUE(placed) << placed.status().toString();
  return placed ? *placed : PlanPlacement{};
}

// Every rank sends to the next and receives from the previous one in one batch, twice (the rings'
// counts and the transfer numbers continue), from a thread per rank; every byte checked; the
// launch is one grid of a TB per transfer.
TEST(CudaDevice, RunsPointToPointBatchesAsThreadsOfOneProcess) {
  constexpr int32_t kRanks = 3;
  constexpr int64_t kSlot = 4096;
  Ranks ranks;
  const PlanPlacement peers = setUpPeers(ranks, kRanks, kSlot);
  if (HasFatalFailure()) return;
  fakecuda::clearCalls();
  for (int32_t round = 0; round < 2; ++round) {
    const size_t bytes = round == 0 ? 1000 : 5 * kSlot + 3;  // one slice; more slices than slots
    std::vector<std::vector<uint8_t>> sent(kRanks), received(kRanks);
    std::vector<Status> launched(kRanks);
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < kRanks; ++r) {
      sent[r].resize(bytes);
      for (size_t i = 0; i < bytes; ++i) sent[r][i] = peerByte(r, round, i);
      received[r].assign(bytes, 0);
    }
    for (int32_t r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        const int32_t next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
        PeerBatch batch;
        batch.rank = r;
        batch.placement = &peers;
        batch.sliceBytes = kSlot;
        batch.timeoutSeconds = kTimeoutSeconds;
        batch.transfers.push_back(PeerTransfer{false, prev, received[r].data(), static_cast<int64_t>(bytes),
                                               static_cast<uint32_t>(round), peerRingIndex(prev, r, kRanks)});
        batch.transfers.push_back(PeerTransfer{true, next, sent[r].data(), static_cast<int64_t>(bytes),
                                               static_cast<uint32_t>(round), peerRingIndex(r, next, kRanks)});
        launched[r] = ranks.devices[r]->launchPeers(batch, nullptr);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int32_t r = 0; r < kRanks; ++r) ASSERT_TRUE(launched[r]) << launched[r].toString();
    for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
    for (const Status& error : ranks.takeErrors()) ADD_FAILURE() << error.toString();
    for (int32_t r = 0; r < kRanks; ++r) {
      const int32_t prev = (r + kRanks - 1) % kRanks;
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(received[r][i], peerByte(prev, round, i)) << "rank " << r << " byte " << i << " round " << round;
      }
    }
  }
  const std::vector<fakecuda::Call> launches = fakecuda::callsOf("cuLaunchKernel");
  ASSERT_EQ(launches.size(), static_cast<size_t>(2 * kRanks));
  for (const fakecuda::Call& launch : launches) {
    EXPECT_EQ(launch.text, "tuccl_peer_transfers");
    EXPECT_EQ(launch.values[0], 2u) << "a TB per transfer";
    EXPECT_EQ(launch.values[3], static_cast<uint64_t>(dev::kPeerThreads));
  }
  EXPECT_EQ(fakecuda::callsOf("cuModuleLoadData").size(), static_cast<size_t>(kRanks)) << "one module per device";
}

// Two sends to one peer in one batch share its ring: they run as one chain (one TB), in order, and
// so do the two receives.
TEST(CudaDevice, TransfersOfOneRingInOneBatchRunAsAChain) {
  constexpr int64_t kSlot = 4096;
  Ranks ranks;
  const PlanPlacement peers = setUpPeers(ranks, 2, kSlot);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> first(9000), second(5000), gotFirst(9000, 0), gotSecond(5000, 0);
  for (size_t i = 0; i < first.size(); ++i) first[i] = peerByte(0, 7, i);
  for (size_t i = 0; i < second.size(); ++i) second[i] = peerByte(0, 8, i);
  const int32_t ring = peerRingIndex(0, 1, 2);
  PeerBatch sends{{PeerTransfer{true, 1, first.data(), 9000, 0, ring}, PeerTransfer{true, 1, second.data(), 5000, 1, ring}},
                  &peers, kSlot, 0, kTimeoutSeconds, 0};
  PeerBatch receives{{PeerTransfer{false, 0, gotFirst.data(), 9000, 0, ring},
                      PeerTransfer{false, 0, gotSecond.data(), 5000, 1, ring}},
                     &peers, kSlot, 1, kTimeoutSeconds, 0};
  fakecuda::clearCalls();
  ASSERT_TRUE(ranks.devices[0]->launchPeers(sends, nullptr));
  ASSERT_TRUE(ranks.devices[1]->launchPeers(receives, nullptr));
  for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
  for (const Status& error : ranks.takeErrors()) ADD_FAILURE() << error.toString();
  EXPECT_EQ(gotFirst, first);
  EXPECT_EQ(gotSecond, second);
  for (const fakecuda::Call& launch : fakecuda::callsOf("cuLaunchKernel")) EXPECT_EQ(launch.values[0], 1u) << "one TB";
}

// A receive that meets a send of another size stops, and the sink names the disagreement.
TEST(CudaDevice, APointToPointMismatchIsReportedToTheErrorSink) {
  constexpr int64_t kSlot = 4096;
  Ranks ranks;
  const PlanPlacement peers = setUpPeers(ranks, 2, kSlot);
  if (HasFatalFailure()) return;
  std::vector<uint8_t> sent(3000, 7), received(2000, 0);
  PeerBatch send{{PeerTransfer{true, 1, sent.data(), 3000, 0, peerRingIndex(0, 1, 2)}}, &peers, kSlot, 0, 10, 0};
  PeerBatch receive{{PeerTransfer{false, 0, received.data(), 2000, 0, peerRingIndex(0, 1, 2)}}, &peers, kSlot, 1, 10, 0};
  ASSERT_TRUE(ranks.devices[0]->launchPeers(send, nullptr));
  ASSERT_TRUE(ranks.devices[1]->launchPeers(receive, nullptr));
  for (auto& device : ranks.devices) ASSERT_TRUE(device->drain(kTimeoutSeconds));
  const std::vector<Status> errors = ranks.takeErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code(), ErrorCode::InvalidArgument);
  EXPECT_NE(errors[0].message().find("disagree on the size"), std::string::npos) << errors[0].message();
}

// Without an image, the device compiles the point-to-point kernel with NVRTC for the GPU's
// architecture: the CUBIN it loads is NVRTC's for sm_90 (the fake's GPUs) and defines the kernel.
TEST(CudaDevice, CompilesThePointToPointKernelForTheGpu) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without NVRTC";
  Ranks ranks;
  setUpRanks(ranks, *ringAllReduce(2));
  if (HasFatalFailure()) return;
  StagingAllocator allocator(2, static_cast<int64_t>(kStagingBytes));
  const PlanPlacement peers = allocator.placePeerRings(4096, kStagingSlots).value();
  std::vector<uint8_t> sent(100, 1);
  fakecuda::clearCalls();
  PeerBatch send{{PeerTransfer{true, 1, sent.data(), 100, 0, peerRingIndex(0, 1, 2)}}, &peers, 4096, 0, 2, 0};
  ASSERT_TRUE(ranks.devices[0]->launchPeers(send, nullptr));
  ASSERT_TRUE(ranks.devices[0]->drain(kTimeoutSeconds));
  ranks.takeErrors();  // the fake cannot run a real CUBIN: the TB never reports
  const std::vector<fakecuda::Call> modules = fakecuda::callsOf("cuModuleLoadData");
  ASSERT_EQ(modules.size(), 1u);
  GeneratedKernel kernel;
  kernel.fileName = "tuccl_peer_transfers.cu";
  kernel.kernelName = "tuccl_peer_transfers";
  kernel.source = "#include \"peer.h\"\n";
  const Expected<NvrtcOutput> expected = compileWithNvrtc(kernel, "sm_90");
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  EXPECT_TRUE(modules[0].bytes == expected->cubin) << "the CUBIN NVRTC makes for sm_90";
  const std::vector<fakecuda::Call> functions = fakecuda::callsOf("cuModuleGetFunction");
  ASSERT_EQ(functions.size(), 1u);
  EXPECT_EQ(functions[0].result, CUDA_SUCCESS) << "the CUBIN defines tuccl_peer_transfers";
}

// A call on a stream being captured into a CUDA graph is refused, saying why, before anything is
// enqueued (the capture stays valid); once the capture ended the same call runs.
TEST(CudaDevice, RefusesCallsOnAStreamBeingCapturedIntoAGraph) {
  std::shared_ptr<const CompiledPlan> plan = ringAllReduce(2);
  ASSERT_TRUE(plan);
  Ranks ranks;
  const PlanPlacement peers = setUpPeers(ranks, 2, 4096);
  if (HasFatalFailure()) return;
  std::vector<tucclStream_t> streams = {fakecuda::createStream(), fakecuda::createStream()};
  fakecuda::setCapturing(streams[0], true);
  fakecuda::clearCalls();
  CallData data = allReduceData(2, 1000, 5);
  std::vector<uint8_t> bytes(100, 3), copy(100, 0);
  PeerBatch send{{PeerTransfer{true, 1, bytes.data(), 100, 0, peerRingIndex(0, 1, 2)}}, &peers, 4096, 0, 10, 0};
  for (const Status& refused : {ranks.devices[0]->launch(kernelCall(plan, ranks.placement, data, 0), streams[0]),
                                ranks.devices[0]->launchPeers(send, streams[0]),
                                ranks.devices[0]->copy(copy.data(), bytes.data(), 100, streams[0])}) {
    EXPECT_EQ(refused.code(), ErrorCode::Unsupported);
    EXPECT_NE(refused.message().find("captured into a CUDA graph"), std::string::npos) << refused.message();
  }
  EXPECT_TRUE(fakecuda::callsOf("cuLaunchKernel").empty());
  EXPECT_TRUE(fakecuda::callsOf("cuMemcpyDtoDAsync_v2").empty());
  fakecuda::setCapturing(streams[0], false);
  runCall(ranks, plan, data, streams, false);
  for (tucclStream_t stream : streams) fakecuda::destroyStream(stream);
}

TEST(CudaDevice, CurrentOrdinalIsTheCallingThreadsContext) {
  const CudaDriver& cu = fakeDriver();
  std::thread([&] {
    Expected<int> none = currentCudaOrdinal(cu);
    ASSERT_TRUE(none);
    EXPECT_EQ(*none, 0);
    CUcontext context = nullptr;
    ASSERT_EQ(cu.cuDevicePrimaryCtxRetain(&context, 2), CUDA_SUCCESS);
    ASSERT_EQ(cu.cuCtxSetCurrent(context), CUDA_SUCCESS);
    Expected<int> two = currentCudaOrdinal(cu);
    ASSERT_TRUE(two);
    EXPECT_EQ(*two, 2);
    EXPECT_EQ(cu.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cu.cuDevicePrimaryCtxRelease(2), CUDA_SUCCESS);
  }).join();
  Expected<std::string> arch = cudaArchitecture(cu, 3);
  ASSERT_TRUE(arch);
  EXPECT_EQ(*arch, "sm_90");
}

}  // namespace
}  // namespace tuccl::backend
