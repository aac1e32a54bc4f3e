// Validation of the simulator against closed forms (issue 5): one transfer, fair sharing of a NIC,
// the contention curve of ResCCL Figure 4, a pipelined ring AllGather, and the lower bound.
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "sim/lower_bound.h"
#include "sim/metrics.h"
#include "sim_test_support.h"

namespace tuccl {
namespace {

using testing::bareCostModel;
using testing::examplePath;
using testing::pointToPointPlan;

constexpr double kMiB = 1024.0 * 1024.0;

TEST(Simulator, OneTransferCostsAlphaPlusCBeta) {
  const Network box = testing::nvswitchBox(2, 100.0, 0.35);  // path alpha 0.7 µs, 100 GB/s
  const int64_t bytes = 64 << 20;
  const Plan plan = pointToPointPlan(2, {{0, 1}}, bytes);
  SimOptions options;
  options.messageBytes = bytes;
  options.cost = bareCostModel();
  const SimResult bare = simulatePlan(plan, box, options).value();
  EXPECT_NEAR(bare.timeUs, 0.7 + bytes / 100e3, 1e-6);
  EXPECT_EQ(bare.transfers, 1);

  // Defaults: launch (Simple base 8.4) + sync + c / min(TB cap 24, 100) + alpha + Simple NVLink hop
  // 3.4 + the receive's sync.
  options.cost = defaultCostModel();
  const SimResult full = simulatePlan(plan, box, options).value();
  EXPECT_NEAR(full.timeUs, 8.4 + 1.0 + bytes / 24e3 + 0.7 + 3.4 + 1.0, 1e-6);

  // Sliced into 1 MiB micro-batches, the slices pipeline: the sync overhead is paid per slice, the
  // latency once.
  const Plan sliced = pointToPointPlan(2, {{0, 1}}, 1 << 20);
  const SimResult pipelined = simulatePlan(sliced, box, options).value();
  EXPECT_EQ(pipelined.slices, 64);
  EXPECT_NEAR(pipelined.timeUs, 8.4 + 64 * (1.0 + kMiB / 24e3) + 0.7 + 3.4 + 1.0, 1e-6);
}

TEST(Simulator, TwoFlowsThroughOneNicEachGetHalf) {
  const Network network = testing::twoNodesSharedNic(25.0);
  const int64_t bytes = 32 << 20;
  SimOptions options;
  options.messageBytes = bytes;
  options.cost = bareCostModel();
  const double alpha = 0.5 + 0.5 + 0.85 + 0.85 + 0.5 + 0.5;  // gpu-pcie-nic-tor-nic-pcie-gpu
  const SimResult one = simulatePlan(pointToPointPlan(4, {{0, 2}}, bytes), network, options).value();
  EXPECT_NEAR(one.timeUs, alpha + bytes / 25e3, 1e-6);
  const SimResult two = simulatePlan(pointToPointPlan(4, {{0, 2}, {1, 3}}, bytes), network, options).value();
  EXPECT_NEAR(two.timeUs, alpha + bytes / 12.5e3, 1e-6);
  // The NIC was busy the whole time, at full capacity.
  const Metrics metrics = computeMetrics(pointToPointPlan(4, {{0, 2}, {1, 3}}, bytes), network, two);
  EXPECT_NEAR(metrics.linkUtilisationMax, bytes * 2 / 25e3 / two.timeUs, 1e-9);
}

// ResCCL §3, Figure 4: k TBs pushing over one NIC; bandwidth grows up to 4 TBs and drops beyond.
TEST(Simulator, ContentionOverOneNicHasTheShapeOfFigure4) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2").value();
  const int64_t bytes = 64 << 20;
  std::vector<double> bandwidth;
  for (int k = 1; k <= 8; ++k) {
    std::vector<std::pair<int32_t, int32_t>> transfers(k, {0, 8});  // GPU 0 -> GPU 8 through NIC 0
    SimOptions options;
    options.messageBytes = bytes;
    const SimResult result = simulatePlan(pointToPointPlan(16, transfers, 1 << 20), network, options).value();
    bandwidth.push_back(k * static_cast<double>(bytes) / result.timeUs / 1e3);
  }
  for (int k = 1; k < 4; ++k) EXPECT_GT(bandwidth[k], bandwidth[k - 1] * 1.2) << "k=" << k + 1;
  for (int k = 4; k < 8; ++k) EXPECT_LT(bandwidth[k], bandwidth[k - 1]) << "k=" << k + 1;
  EXPECT_GT(bandwidth[3], 0.9 * 25.0);
  EXPECT_LE(bandwidth[3], 25.0);
  EXPECT_LT(bandwidth[7], 0.9 * bandwidth[3]);  // 8 TBs: z = 2, 1 / (1 + 0.15) of the link
}

// A pipelined ring AllGather on N uniform GPUs against its closed form (docs/simulator.md):
//   task level:      T = launch + (N-1)·n·(sync + τ) + λ + sync
//   algorithm level: T = launch + n·[(N-2)·(2·sync + τ + λ) + sync + τ] + λ + sync
// with n micro-batches per chunk, τ = slice / min(TB cap, link), λ = path alpha + hop latency.
TEST(Simulator, PipelinedRingAllGatherMatchesItsClosedForm) {
  constexpr int n = 8;
  const Network box = testing::nvswitchBox(n, 300.0, 0.35);
  const Algorithm ring = loadRescclAlgorithm(examplePath("ring_allgather"), n, n).value();
  const int64_t slice = 1 << 20;
  const int64_t bytes = 256LL << 20;  // 32 MiB per chunk: 32 micro-batches
  const double launch = 8.4, sync = 1.0, tau = slice / 24e3, lambda = 0.7 + 3.4;
  const double micro = bytes / n / slice;
  for (Scheduler scheduler : {Scheduler::Hpds, Scheduler::AlgorithmLevel}) {
    PlanRequest request;
    request.scheduler = scheduler;
    request.config.chunkSize = slice;
    request.config.nChannels = 1;
    request.fuse = false;  // the closed forms are of a send TB and a receive TB per rank
    const Plan plan = buildPlan(ring, request).value();
    SimOptions options;
    options.messageBytes = bytes;
    const SimResult result = simulatePlan(plan, box, options).value();
    ASSERT_EQ(result.slices, micro);
    const double expected =
        scheduler == Scheduler::Hpds
            ? launch + (n - 1) * micro * (sync + tau) + lambda + sync
            : launch + micro * ((n - 2) * (2 * sync + tau + lambda) + sync + tau) + lambda + sync;
    EXPECT_NEAR(result.timeUs / expected, 1.0, 0.01) << schedulerName(scheduler) << ": " << result.timeUs << " vs " << expected;
  }
}

TEST(Simulator, NeverBelowTheLowerBound) {
  struct Shape {
    const char* topo;
    int32_t ranks;
    int32_t perNode;
  };
  const std::vector<Shape> shapes = {{"preset:resccl-a100:nodes=2,gpus=4", 8, 4}, {"preset:resccl-a100:nodes=2", 16, 8}};
  for (const Shape& shape : shapes) {
    const Network network = loadNetwork(shape.topo).value();
    for (const char* example : {"hm_allreduce", "hm_allgather", "ring_allreduce", "ring_allgather", "direct_allgather"}) {
      const Algorithm algorithm = loadRescclAlgorithm(examplePath(example), shape.ranks, shape.perNode).value();
      for (Scheduler scheduler :
           {Scheduler::Hpds, Scheduler::RoundRobin, Scheduler::AlgorithmLevel, Scheduler::StageLevel}) {
        PlanRequest request;
        request.scheduler = scheduler;
        request.config.chunkSize = 256 << 10;
        const Plan plan = buildPlan(algorithm, request).value();
        for (int64_t bytes : {int64_t{1} << 10, int64_t{1} << 20, int64_t{16} << 20}) {
          SimOptions options;
          options.messageBytes = bytes;
          const SimResult result = simulatePlan(plan, network, options).value();
          const LowerBound bound = collectiveLowerBound(plan.collective, bytes, network);
          EXPECT_GE(result.timeUs, bound.timeUs)
              << example << " " << schedulerName(scheduler) << " " << bytes << " on " << shape.topo;
          // The bare model (topology only) is still above the bound.
          options.cost = bareCostModel();
          const SimResult bare = simulatePlan(plan, network, options).value();
          EXPECT_GE(bare.timeUs * (1 + 1e-9), bound.timeUs) << example << " " << schedulerName(scheduler) << " bare " << bytes;
        }
      }
    }
  }
}

TEST(Simulator, TaskLevelBeatsAlgorithmLevelOnHierarchicalMesh) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  const Algorithm hm = loadRescclAlgorithm(examplePath("hm_allreduce"), 8, 4).value();
  SimOptions options;
  options.messageBytes = 256LL << 20;
  double hpds = 0, algorithmLevel = 0;
  for (Scheduler scheduler : {Scheduler::Hpds, Scheduler::AlgorithmLevel}) {
    PlanRequest request;
    request.scheduler = scheduler;
    const SimResult result = simulatePlan(buildPlan(hm, request).value(), network, options).value();
    (scheduler == Scheduler::Hpds ? hpds : algorithmLevel) = result.timeUs;
  }
  EXPECT_LT(hpds, algorithmLevel);
}

TEST(Simulator, RejectsPlansThatDoNotFit) {
  const Network box = testing::nvswitchBox(2, 100.0, 0.35);
  SimOptions options;
  EXPECT_EQ(simulatePlan(pointToPointPlan(3, {{0, 1}}, 1 << 20), box, options).status().code(), ErrorCode::InvalidArgument);
  Plan unpaired = pointToPointPlan(2, {{0, 1}}, 1 << 20);
  unpaired.ranks[1].tbs.clear();
  EXPECT_EQ(simulatePlan(unpaired, box, options).status().code(), ErrorCode::InvalidArgument);
}

TEST(Simulator, IsDeterministic) {
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  const Algorithm hm = loadRescclAlgorithm(examplePath("hm_allgather"), 8, 4).value();
  const Plan plan = buildPlan(hm, PlanRequest{}).value();
  SimOptions options;
  options.messageBytes = 8 << 20;
  EXPECT_EQ(simulatePlan(plan, network, options).value().timeUs, simulatePlan(plan, network, options).value().timeUs);
}

}  // namespace
}  // namespace tuccl
