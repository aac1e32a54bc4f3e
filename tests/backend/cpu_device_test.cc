// The CPU device on its own: ranks as threads of this process, each with its own device and
// staging segment, running the host build of a ring AllReduce plan through the shared rings.
#include "backend/cpu_device.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "backend/cpu_stream.h"
#include "backend/kernel_call.h"
#include "backend/staging_layout.h"
#include "kernelgen/compile.h"
#include "kernelgen/datatype.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"

namespace tuccl::backend {
namespace {

std::shared_ptr<const CompiledPlan> ringAllReduce(int32_t nRanks, int32_t channels = 1) {
  Expected<Algorithm> algorithm =
      loadRescclAlgorithm(std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/ring_allreduce.resccl", nRanks, nRanks);
  EXPECT_TRUE(algorithm.ok()) << algorithm.status().toString();
  PlanRequest request;
  request.config.chunkSize = 1024;
  request.config.nChannels = channels;
  Targets host;
  host.hostKernels = true;
  Expected<CompiledPlan> compiled = compilePlan(buildPlan(*algorithm, request).value(), host);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return std::make_shared<CompiledPlan>(std::move(compiled).value());
}

struct Ranks {
  std::vector<std::unique_ptr<Device>> devices;
  PlanPlacement placement;
};

// The same plan in another protocol: the kernels read it at run time, so the host build is shared.
std::shared_ptr<const CompiledPlan> inProtocol(const std::shared_ptr<const CompiledPlan>& compiled, Protocol protocol) {
  auto copy = std::make_shared<CompiledPlan>(*compiled);
  copy->plan.config.protocol = protocol;
  return copy;
}

Ranks openRanks(int32_t nRanks, const CompiledPlan& compiled) {
  Ranks ranks;
  std::vector<std::string> blobs;
  for (int32_t r = 0; r < nRanks; ++r) {
    ranks.devices.push_back(createCpuDevice(r, nRanks));
    Expected<std::string> blob = ranks.devices.back()->createStaging(4 << 20);
    EXPECT_TRUE(blob.ok()) << blob.status().toString();
    blobs.push_back(*blob);
  }
  for (auto& device : ranks.devices) EXPECT_TRUE(device->openStaging(blobs).ok());
  for (auto& device : ranks.devices) device->stagingShared();
  StagingAllocator allocator(nRanks, 4 << 20);
  Expected<PlanPlacement> placement =
      allocator.place(compiled.layout, stagingSlotBytes(compiled.plan.config.protocol, 1024), 4);
  EXPECT_TRUE(placement.ok()) << placement.status().toString();
  ranks.placement = *placement;
  return ranks;
}

KernelCall allReduceCall(const std::shared_ptr<const CompiledPlan>& plan, const PlanPlacement& placement, int32_t rank,
                         const float* send, float* recv, int64_t count, uint64_t sequence) {
  KernelCall call;
  call.plan = plan;
  call.placement = &placement;
  call.call = CollectiveCall{Collective::AllReduce, plan->plan.nRanks, -1, DataType::Float32, ReduceOp::Sum, count,
                             send == recv};
  call.rank = rank;
  call.call.sendbuff = send;
  call.call.recvbuff = recv;
  call.sliceElems = 1024 / 4;
  call.timeoutSeconds = 20;
  call.sequence = sequence;
  return call;
}

// One AllReduce of `count` random floats on every rank, a thread per rank, running `channels` of
// the plan's (0: all); every element of every rank checked.
void runAllReduce(Ranks& ranks, const std::shared_ptr<const CompiledPlan>& plan, int64_t count, uint64_t sequence,
                  std::mt19937& rng, int32_t channels = 0) {
  const auto n = static_cast<int32_t>(ranks.devices.size());
  std::vector<std::vector<float>> send(n, std::vector<float>(count));
  std::vector<std::vector<float>> recv(n, std::vector<float>(count, -1));
  std::vector<float> expected(count, 0);
  for (int32_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      send[r][i] = static_cast<float>(rng() % 1000);
      expected[i] += send[r][i];
    }
  }
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      KernelCall call = allReduceCall(plan, ranks.placement, r, send[r].data(), recv[r].data(), count, sequence);
      call.channels = channels;
      results[r] = ranks.devices[r]->launch(call, nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int32_t r = 0; r < n; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].toString();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(recv[r][i], expected[i]) << "rank " << r << " element " << i;
  }
}

// Every protocol: the ring counters keep running across calls, so LL / LL128 flags of later
// calls must never match the lines earlier calls left in the slots.
class CpuDeviceProtocol : public ::testing::TestWithParam<Protocol> {};

TEST_P(CpuDeviceProtocol, RanksAsThreadsRunSeveralAllReducesThroughSharedMemory) {
  const int32_t n = 4;
  static const std::shared_ptr<const CompiledPlan> simple = ringAllReduce(n);
  ASSERT_NE(simple->host, nullptr);
  auto plan = inProtocol(simple, GetParam());
  Ranks ranks = openRanks(n, *plan);
  std::mt19937 rng(7);
  uint64_t sequence = 0;  // these devices' calls, in issue order
  for (int64_t count : {int64_t{1}, int64_t{1237}, int64_t{10000}}) {
    runAllReduce(ranks, plan, count, sequence++, rng);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, CpuDeviceProtocol,
                         ::testing::Values(Protocol::Simple, Protocol::LL, Protocol::LL128),
                         [](const ::testing::TestParamInfo<Protocol>& p) { return std::string(protocolName(p.param)); });

// Calls of one 3-channel plan running 1, 3, 2, 1 and 3 of its channels in turn (KernelCall::channels):
// the rings a call leaves idle keep their counts for the next call that runs them; every element
// checked. More channels than the plan's are refused.
TEST(CpuDevice, CallsRunFewerChannelsThanTheirPlan) {
  const int32_t n = 3;
  const std::shared_ptr<const CompiledPlan> plan = ringAllReduce(n, 3);
  ASSERT_EQ(plan->layout.channels, 3);
  Ranks ranks = openRanks(n, *plan);
  std::mt19937 rng(11);
  uint64_t sequence = 0;
  for (const int32_t channels : {1, 3, 2, 1, 3, 0}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    runAllReduce(ranks, plan, 2000 + 31 * static_cast<int64_t>(sequence), sequence, rng, channels);
    ++sequence;
    if (HasFatalFailure()) return;
  }
  std::vector<float> buffer(10, 1.0f);
  KernelCall tooMany = allReduceCall(plan, ranks.placement, 0, buffer.data(), buffer.data(), 10, sequence);
  tooMany.channels = 4;
  const Status refused = ranks.devices[0]->launch(tooMany, nullptr);
  EXPECT_EQ(refused.code(), ErrorCode::InvalidArgument) << refused.toString();
}

// A placement of Simple-sized slots cannot carry an LL plan's slices: the call is refused.
TEST(CpuDevice, SlotsMustFitTheProtocol) {
  const auto simple = ringAllReduce(4);  // the plan (and host build) of the test above
  Ranks ranks = openRanks(4, *simple);    // 1024-byte slots
  std::vector<float> data(100, 1.0f);
  auto ll = inProtocol(simple, Protocol::LL);
  Status status = checkKernelCall(allReduceCall(ll, ranks.placement, 0, data.data(), data.data(), 100, 0));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("2048 in LL"), std::string::npos) << status.toString();
  EXPECT_TRUE(checkKernelCall(allReduceCall(simple, ranks.placement, 0, data.data(), data.data(), 100, 0)).ok());
}

TEST(CpuDevice, CallsOnCpuStreamsRunInSequenceOrder) {
  const int32_t n = 2;
  auto plan = ringAllReduce(n);
  ASSERT_NE(plan->host, nullptr);
  Ranks ranks = openRanks(n, *plan);
  const int64_t count = 513;
  std::vector<tucclStream_t> streams(n);
  for (auto& s : streams) {
    Expected<tucclStream_t> created = CpuStream::create();
    ASSERT_TRUE(created.ok());
    s = *created;
  }
  // Three calls per rank, each reducing the previous result in place: 2, 4, 8 times the input.
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  for (int32_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) data[r][i] = static_cast<float>(i % 17);
  }
  for (uint64_t sequence = 0; sequence < 3; ++sequence) {
    for (int32_t r = 0; r < n; ++r) {
      ASSERT_TRUE(ranks.devices[r]
                      ->launch(allReduceCall(plan, ranks.placement, r, data[r].data(), data[r].data(), count, sequence),
                               streams[r])
                      .ok());
    }
  }
  for (int32_t r = 0; r < n; ++r) {
    Status status = CpuStream::find(streams[r])->synchronize();
    ASSERT_TRUE(status.ok()) << status.toString();
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[r][i], static_cast<float>(8 * (i % 17)));
  }
  for (auto s : streams) EXPECT_TRUE(CpuStream::destroy(s).ok());
  EXPECT_FALSE(CpuStream::destroy(streams[0]).ok());  // a stale handle is refused
}

TEST(CpuDevice, AMissingRankTimesOutAndAbortStopsEveryRank) {
  const int32_t n = 2;
  auto plan = ringAllReduce(n);
  ASSERT_NE(plan->host, nullptr);
  Ranks ranks = openRanks(n, *plan);
  std::vector<float> send(100, 1), recv(100, 0);
  KernelCall call = allReduceCall(plan, ranks.placement, 0, send.data(), recv.data(), 100, 0);
  call.timeoutSeconds = 0.5;
  Status status = ranks.devices[0]->launch(call, nullptr);  // rank 1 never calls
  EXPECT_EQ(status.code(), ErrorCode::Timeout) << status.toString();
  EXPECT_NE(status.message().find("rank 0 tb"), std::string::npos) << status.toString();
  // The failure raised the shared abort word: rank 1's next call fails at once.
  call = allReduceCall(plan, ranks.placement, 1, send.data(), recv.data(), 100, 0);
  status = ranks.devices[1]->launch(call, nullptr);
  EXPECT_EQ(status.code(), ErrorCode::Aborted) << status.toString();
}

TEST(CpuDevice, AbortFromAnotherThreadUnblocksAWaitingCall) {
  const int32_t n = 2;
  auto plan = ringAllReduce(n);
  ASSERT_NE(plan->host, nullptr);
  Ranks ranks = openRanks(n, *plan);
  std::vector<float> send(100, 1), recv(100, 0);
  KernelCall call = allReduceCall(plan, ranks.placement, 0, send.data(), recv.data(), 100, 0);
  call.timeoutSeconds = 60;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ranks.devices[0]->abort();
  });
  Status status = ranks.devices[0]->launch(call, nullptr);
  aborter.join();
  EXPECT_EQ(status.code(), ErrorCode::Aborted) << status.toString();
}

}  // namespace
}  // namespace tuccl::backend

namespace tuccl::backend {
namespace {

// A rank of another host gets a private zero-filled shadow of its segment (the inter-node proxy
// carries it); the host's abort word is its first rank's segment.
TEST(CpuDevice, RanksOfAnotherHostGetPrivateShadows) {
  constexpr size_t kBytes = 1 << 20;
  std::unique_ptr<Device> a = createCpuDevice(0, 3), b = createCpuDevice(1, 3);
  ASSERT_TRUE(a->setRemoteRanks({false, false, true}));
  ASSERT_TRUE(b->setRemoteRanks({false, false, true}));
  Expected<std::string> blobA = a->createStaging(kBytes), blobB = b->createStaging(kBytes);
  ASSERT_TRUE(blobA && blobB);
  // Rank 2's blob is never opened: its host is another.
  ASSERT_TRUE(a->openStaging({*blobA, *blobB, "unused"}));
  ASSERT_TRUE(b->openStaging({*blobA, *blobB, "unused"}));
  a->stagingShared();
  b->stagingShared();
  const HostSegments sa = a->hostSegments(), sb = b->hostSegments();
  ASSERT_EQ(sa.bases.size(), 3u);
  EXPECT_GE(sa.segmentBytes, kBytes);
  EXPECT_EQ(sa.abortWord, reinterpret_cast<int32_t*>(sa.bases[0]));
  EXPECT_EQ(sb.abortWord, reinterpret_cast<int32_t*>(sb.bases[0]));
  // The host's segments are shared: a write through one mapping shows in the other.
  sa.bases[1][4096] = 42;
  EXPECT_EQ(sb.bases[1][4096], 42);
  // The shadows are private and zero-filled.
  EXPECT_NE(sa.bases[2], sb.bases[2]);
  sa.bases[2][100] = 7;
  EXPECT_EQ(sb.bases[2][100], 0);
  EXPECT_EQ(sa.bases[2][kBytes - 1], 0);
}

}  // namespace
}  // namespace tuccl::backend
