// NCCL's algorithms as plans in the simulator (tune/nccl_baseline.h): the plans have NCCL's
// shape, and TuCCL's ring generator on NCCL's rings simulates as NCCL's ring does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "scheduler/plan_builder.h"
#include "sim/network.h"
#include "sim/network_topology.h"
#include "sim/simulator.h"
#include "synth/generators.h"
#include "topo/load.h"
#include "topo/presets.h"
#include "topo/sketch.h"
#include "tune/nccl_baseline.h"

namespace tuccl {
namespace {

struct Machine {
  Topology topology;
  Network network;
  explicit Machine(const std::string& spec)
      : topology(loadTopology(spec).value().topology), network(networkFromTopology(topology, spec).value()) {}
};

TEST(NcclBaseline, ChannelsAndThreadsShrinkForSmallSizesAsNcclsEnqueue) {
  NcclGraph graph;
  graph.nRanks = 8;
  graph.nChannels = 6;  // the communicator runs 12
  // 64 B per Simple thread: 12 channels x 512 threads need 393,216 B.
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::Simple, 64 << 20).nChannels, 12);
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::Simple, 393'216).nChannels, 12);
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::Simple, 393'215).nChannels, 11);
  graph.nChannels = 40;
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::Simple, 1 << 30).nChannels, 64);
  graph.nChannels = 6;
  const NcclLaunch tiny = ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::Simple, 1024);
  EXPECT_EQ(tiny.nChannels, 1);
  EXPECT_EQ(tiny.nThreads, 128);  // halved while a multiple of 128
  // Ring LL: 8 B x nRanks per thread.
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::LL, 12 * 512 * 64).nChannels, 12);
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Ring, Protocol::LL, 12 * 512 * 64 - 1).nChannels, 11);
  EXPECT_EQ(ncclLaunch(graph, NcclAlgorithm::Tree, Protocol::LL128, 1 << 30).nThreads, 640);
}

TEST(NcclBaseline, ChunksFollowNcclsProtocolBuffers) {
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Ring, Protocol::Simple, Collective::AllReduce, false, false), 1 << 20);
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Ring, Protocol::Simple, Collective::Broadcast, false, false), 512 << 10);
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Tree, Protocol::Simple, Collective::AllReduce, false, false), 512 << 10);
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Ring, Protocol::LL, Collective::AllGather, false, true), 32 << 10);
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Ring, Protocol::LL128, Collective::AllGather, false, true), 576'000);
  EXPECT_EQ(ncclChunkBytes(NcclAlgorithm::Ring, Protocol::Simple, Collective::AllToAll, true, true), 128 << 10);
  // Tree LL128 on 2 nodes x 8 (ppn 8, s = 2.8): 4 MB over 16 channels is 0.46 chunks of 576,000 B
  // per channel, below 64 s / ppn = 22.4: halved while above 128 KiB, to 72,000 B (3.6 chunks),
  // then below 16 s / ppn = 5.6 once more, to 36,000 B (7.3 chunks); a GiB keeps the whole chunk.
  EXPECT_EQ(ncclTreeLL128ChunkBytes(576'000, 4 << 20, 16, 16, 2), 36'000);
  EXPECT_EQ(ncclTreeLL128ChunkBytes(576'000, uint64_t{1} << 30, 16, 16, 2), 576'000);
}

// On an NVSwitch node every ring has one order: one ring, NCCL's 24 channels as replicas, one
// block per channel running fused primitives, in place (NCCL folds the copy into its primitives).
TEST(NcclBaseline, RingPlanHasNcclsShape) {
  Machine m("preset:dgx-a100");
  NcclBaseline baseline(m.topology, m.network, defaultCostModel());
  ASSERT_EQ(baseline.graph().rings.size(), 6u);
  Plan plan = baseline.plan(Collective::AllReduce, 256 << 20, NcclAlgorithm::Ring, Protocol::Simple).value();
  EXPECT_EQ(plan.algorithm, "nccl-ring");
  EXPECT_TRUE(plan.inPlace);
  EXPECT_EQ(plan.config.nChannels, 24);
  EXPECT_EQ(plan.config.nThreads, 512);
  EXPECT_EQ(plan.config.chunkSize, 1 << 20);
  EXPECT_EQ(plan.executionLevel, ExecutionLevel::Algorithm);
  for (const PlanRank& rank : plan.ranks) {
    ASSERT_EQ(rank.tbs.size(), 1u) << "rank " << rank.rank;
    const std::vector<PlanEntry>& entries = rank.tbs[0].entries;
    // NCCL's loop: send, 6 x recvReduceSend, recvReduceCopySend, 6 x recvCopySend, recv.
    ASSERT_EQ(entries.size(), 15u);
    EXPECT_EQ(entries.front().kind, PrimitiveKind::Send);
    EXPECT_EQ(entries[1].kind, PrimitiveKind::RecvReduceSend);
    EXPECT_EQ(entries[7].kind, PrimitiveKind::RecvReduceCopySend);
    EXPECT_EQ(entries[8].kind, PrimitiveKind::RecvCopySend);
    EXPECT_EQ(entries.back().kind, PrimitiveKind::Recv);
  }
  // A 1 KB call runs on one channel with 128 threads.
  Plan small = baseline.plan(Collective::AllReduce, 1024, NcclAlgorithm::Ring, Protocol::Simple).value();
  EXPECT_EQ(small.config.nChannels, 1);
  EXPECT_EQ(small.config.nThreads, 128);
}

TEST(NcclBaseline, TreeAndP2pPlans) {
  Machine m("preset:dgx-a100:nodes=2");
  NcclBaseline baseline(m.topology, m.network, defaultCostModel());
  NcclSimulated tree = baseline.evaluate(Collective::AllReduce, 1 << 20, NcclAlgorithm::Tree, Protocol::LL128).value();
  EXPECT_EQ(tree.generator, "double-binary-tree");
  EXPECT_GT(tree.choice.timeUs, 0);
  EXPECT_GT(tree.model.timeUs, 0);
  Plan treePlan = baseline.plan(Collective::AllReduce, 64 << 20, NcclAlgorithm::Tree, Protocol::LL128).value();
  EXPECT_EQ(treePlan.algorithm, "nccl-tree");
  // 16 channels: 8 parts of each tree, each its own connections and TBs (NCCL's channels), the
  // parts' trees through the node's NICs in turn.
  const int32_t k = treePlan.bufferChunks[static_cast<int>(BufferKind::Output)];
  EXPECT_EQ(k, 16);
  EXPECT_EQ(treePlan.config.nChannels, 1);
  for (const PlanRank& rank : treePlan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (const PlanEntry& entry : tb.entries)
        EXPECT_EQ(entry.dstIndex % k, tb.entries.front().dstIndex % k) << "rank " << rank.rank << " tb " << tb.id;
    }
  }
  NcclSimulated a2a = baseline.evaluate(Collective::AllToAll, 64 << 20).value();
  EXPECT_TRUE(a2a.choice.p2p);
  EXPECT_EQ(a2a.generator, "direct");
  EXPECT_GT(a2a.choice.timeUs, 0);
  // NCCL runs no Tree for AllGather: refused as the model refuses it.
  EXPECT_FALSE(baseline.evaluate(Collective::AllGather, 1 << 20, NcclAlgorithm::Tree, Protocol::Simple));
}

// The engine charges the same algorithm the same: TuCCL's ring generator on NCCL's rings, with
// NCCL's channels, protocol, chunk and threads and the same execution, simulates within 5 % of
// NCCL's ring on every preset (one node and two), for the three ring collectives.
TEST(NcclBaseline, TucclRingOnNcclsRingsSimulatesAsNcclsRing) {
  for (const std::string& preset : presetNames()) {
    for (const std::string& spec : {"preset:" + preset, "preset:" + preset + ":nodes=2"}) {
      Machine m(spec);
      NcclBaseline baseline(m.topology, m.network, defaultCostModel());
      for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
        const int64_t bytes = int64_t{256} << 20;
        const NcclSimulated nccl =
            baseline.evaluate(collective, bytes, NcclAlgorithm::Ring, Protocol::Simple).value();
        const Plan ncclPlan = baseline.plan(collective, bytes, NcclAlgorithm::Ring, Protocol::Simple).value();
        GeneratorOptions options;
        options.inPlace = true;
        for (const std::vector<int32_t>& ring : baseline.graph().rings)
          if (std::find(options.rings.begin(), options.rings.end(), ring) == options.rings.end())
            options.rings.push_back(ring);
        Algorithm ring = generateAlgorithm("ring", collective, m.topology, Sketch{}, options).value();
        PlanRequest request;
        request.scheduler = Scheduler::AlgorithmLevel;
        request.tbAllocation.policy = TbPolicy::StateBased;
        request.config = ncclPlan.config;
        SimOptions sim;
        sim.messageBytes = bytes;
        const double tucclUs = simulatePlan(buildPlan(ring, request).value(), m.network, sim).value().timeUs;
        EXPECT_LE(std::abs(tucclUs / nccl.choice.timeUs - 1), 0.05)
            << spec << " " << collectiveName(collective) << ": TuCCL's ring " << tucclUs << " us, NCCL's "
            << nccl.choice.timeUs << " us";
      }
    }
  }
}

}  // namespace
}  // namespace tuccl
