// The NCCL model: its choices behave like NCCL's, and its one-node ring bandwidths match the
// published nccl-tests figures (a property of the model, not a timing).
#include "sim/nccl_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "topo/paths.h"
#include "topo/presets.h"

namespace tuccl {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

NcclGraph graphOf(const std::string& spec) { return searchNcclGraph(makePreset(spec)); }

double ringAllReduceBusBw(const std::string& spec, uint64_t bytes) {
  return evaluateNcclChoice(graphOf(spec), Collective::AllReduce, bytes, NcclAlgorithm::Ring, Protocol::Simple)
      .value()
      .busBwGBs;
}

TEST(NcclModel, OneNodeRingMatchesPublishedBusBandwidth) {
  // nccl-tests: 8xA100 NVSwitch ring AllReduce ~230 GB/s at 8 GB; 8xH100 ~370 GB/s without NVLS.
  EXPECT_NEAR(ringAllReduceBusBw("preset:dgx-a100", 8 * kGiB), 230.0, 0.15 * 230.0);
  EXPECT_NEAR(ringAllReduceBusBw("preset:dgx-h100", 8 * kGiB), 370.0, 0.15 * 370.0);
  // And NCCL's own choice at that size is that ring with Simple.
  const NcclChoice choice = ncclModelChoice(makePreset("preset:dgx-a100"), Collective::AllReduce, 8 * kGiB);
  EXPECT_EQ(choice.algorithm, NcclAlgorithm::Ring);
  EXPECT_EQ(choice.protocol, Protocol::Simple);
  EXPECT_FALSE(choice.p2p);
}

TEST(NcclModel, GraphSearchCountsNvlinksAtNcclsRateAndChannelsPerNic) {
  const NcclGraph a100 = graphOf("preset:dgx-a100");
  EXPECT_EQ(a100.nChannels * a100.bwPerChannelGBps, 240.0);  // 12 NVLinks × 20 GB/s (NCCL topo.h)
  EXPECT_EQ(a100.intraHop, HopClass::NVLink);
  EXPECT_TRUE(a100.ll128);
  // Two nodes: one channel per 200 Gb/s NIC at 24 GB/s; four NICs (two GPUs each) give half.
  const NcclGraph twoNodes = graphOf("preset:dgx-a100:nodes=2");
  EXPECT_EQ(twoNodes.nChannels, 8);
  EXPECT_DOUBLE_EQ(twoNodes.bwPerChannelGBps, 24.0);
  const NcclGraph resccl = graphOf("preset:resccl-a100:nodes=2");
  EXPECT_EQ(resccl.nChannels * resccl.bwPerChannelGBps, 96.0);
  // NDv2: one NIC without GPUDirect RDMA; LL128 stays off (NCCL enables it only under a PCIe switch).
  const NcclGraph ndv2 = graphOf("preset:ndv2:nodes=2");
  EXPECT_EQ(ndv2.nChannels, 1);
  EXPECT_FALSE(ndv2.ll128);
  EXPECT_TRUE(graphOf("preset:ndv2").ll128);
}

TEST(NcclModel, GraphSearchKeepsItsRingsAsPermutationsRepeatedNodeByNode) {
  const NcclGraph dgx1 = graphOf("preset:dgx1-v100");
  ASSERT_EQ(dgx1.rings.size(), 2u);  // two NVLink rings, duplicated into 4 channels
  EXPECT_EQ(dgx1.nChannels, 4);
  const Topology topology = makePreset("preset:dgx1-v100");
  const Router router(topology);
  for (const std::vector<int32_t>& ring : dgx1.rings) {
    std::vector<int32_t> sorted = ring;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    for (size_t i = 0; i < ring.size(); ++i)
      EXPECT_EQ(router.pathBetween(ring[i], ring[(i + 1) % ring.size()]).kind, PathKind::NVLink);
  }
  // Several nodes: every node runs the channel's local order, node after node.
  const NcclGraph two = graphOf("preset:dgx-a100:nodes=2");
  ASSERT_EQ(two.rings.size(), 8u);
  for (const std::vector<int32_t>& ring : two.rings) {
    ASSERT_EQ(ring.size(), 16u);
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(ring[i + 8], ring[i] + 8);
  }
}

TEST(NcclModel, LowLatencyProtocolAtSmallSizesSimpleAtLargeOnes) {
  for (const char* spec : {"preset:dgx-a100", "preset:dgx-h100:nodes=2", "preset:resccl-a100:nodes=4", "preset:ndv2:nodes=2"}) {
    const NcclGraph graph = graphOf(spec);
    for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                  Collective::Broadcast, Collective::Reduce, Collective::AllToAll}) {
      SCOPED_TRACE(std::string(spec) + " " + std::string(collectiveName(collective)));
      EXPECT_EQ(ncclModelChoice(graph, collective, 1 * kKiB).protocol, Protocol::LL);
      EXPECT_EQ(ncclModelChoice(graph, collective, 4 * kGiB).protocol, Protocol::Simple);
    }
  }
}

TEST(NcclModel, TreeOnlyForAllReduce) {
  const NcclGraph graph = graphOf("preset:dgx-a100:nodes=4");
  bool treeChosen = false;
  for (uint64_t bytes = 1 * kKiB; bytes <= 4 * kGiB; bytes *= 4) {
    for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                  Collective::Broadcast, Collective::Reduce}) {
      const NcclChoice choice = ncclModelChoice(graph, collective, bytes);
      if (collective != Collective::AllReduce) {
        EXPECT_EQ(choice.algorithm, NcclAlgorithm::Ring);
      }
      treeChosen = treeChosen || choice.algorithm == NcclAlgorithm::Tree;
    }
    for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
      EXPECT_FALSE(evaluateNcclChoice(graph, Collective::AllGather, bytes, NcclAlgorithm::Tree, protocol));
      EXPECT_TRUE(evaluateNcclChoice(graph, Collective::AllReduce, bytes, NcclAlgorithm::Tree, protocol));
    }
  }
  EXPECT_TRUE(treeChosen);  // the tree's log latency wins small multi-node AllReduces
  EXPECT_FALSE(evaluateNcclChoice(graph, Collective::AllReduce, kMiB, NcclAlgorithm::Nvls, Protocol::Simple));
  EXPECT_FALSE(evaluateNcclChoice(graphOf("preset:ndv2:nodes=2"), Collective::AllReduce, kMiB, NcclAlgorithm::Ring,
                                  Protocol::LL128));
}

TEST(NcclModel, MoreNodesLowerBusBandwidth) {
  for (const char* preset : {"resccl-a100", "dgx-a100", "dgx-h100", "ndv2"}) {
    for (uint64_t bytes : {64 * kKiB, 16 * kMiB, 1 * kGiB}) {
      for (Collective collective : {Collective::AllReduce, Collective::AllGather, Collective::AllToAll}) {
        double previous = 0;
        for (int nodes : {1, 2, 4, 8}) {
          const std::string spec = std::string("preset:") + preset + ":nodes=" + std::to_string(nodes);
          SCOPED_TRACE(spec + " " + std::to_string(bytes) + " " + std::string(collectiveName(collective)));
          const double busBw = ncclModelChoice(makePreset(spec), collective, bytes).busBwGBs;
          EXPECT_GT(busBw, 0);
          if (nodes > 1) {
            EXPECT_LT(busBw, previous);
          }
          previous = busBw;
        }
      }
    }
  }
}

TEST(NcclModel, ChoiceIsTheFastestAvailableAndTimesAddUp) {
  const NcclGraph graph = graphOf("preset:dgx-h100:nodes=2");
  for (uint64_t bytes = 256; bytes <= kGiB; bytes *= 8) {
    const NcclChoice choice = ncclModelChoice(graph, Collective::AllReduce, bytes);
    for (NcclAlgorithm algorithm : {NcclAlgorithm::Tree, NcclAlgorithm::Ring}) {
      for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
        Expected<NcclChoice> other = evaluateNcclChoice(graph, Collective::AllReduce, bytes, algorithm, protocol);
        ASSERT_TRUE(other);
        EXPECT_LE(choice.timeUs, other->timeUs);
      }
    }
    EXPECT_NEAR(choice.algBwGBs, bytes / (1000 * choice.timeUs), 1e-9);
    EXPECT_NEAR(choice.busBwGBs, choice.algBwGBs * 2 * 15 / 16, 1e-9);
    EXPECT_EQ(describeNcclChoice(choice).find(ncclAlgorithmName(choice.algorithm)), 0u);
  }
  const NcclChoice alltoall = ncclModelChoice(graph, Collective::AllToAll, kGiB);
  EXPECT_TRUE(alltoall.p2p);
  EXPECT_EQ(describeNcclChoice(alltoall).rfind("P2P/Simple/", 0), 0u);
  EXPECT_THROW(searchNcclGraph(Topology{}), std::invalid_argument);
}

}  // namespace
}  // namespace tuccl
