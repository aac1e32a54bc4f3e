#include "scheduler/tb_allocation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "scheduler/dag.h"
#include "scheduler/pipeline.h"
#include "test_algorithms.h"

namespace tuccl {
namespace {

struct Shape {
  int32_t nodes;
  int32_t gpus;
};
constexpr Shape kShapes[] = {{2, 4}, {2, 8}, {4, 4}, {4, 8}};  // ResCCL Table 3, Topo1..Topo4

// Oracle: the (rank, peer, direction) connections counted straight from the operations.
std::map<int32_t, std::set<std::tuple<int32_t, int>>> connectionsByRank(const Algorithm& algorithm) {
  std::map<int32_t, std::set<std::tuple<int32_t, int>>> result;
  for (const Operation& op : algorithm.ops) {
    if (op.isLocal()) {
      result[op.srcRank].insert({op.srcRank, 2});
    } else {
      result[op.srcRank].insert({op.dstRank, 0});
      result[op.dstRank].insert({op.srcRank, 1});
    }
  }
  return result;
}

TEST(TbAllocation, ConnectionBasedIsOneTbPerConnection) {
  for (const Shape& shape : kShapes) {
    for (const Algorithm& algorithm : {testing::hmAllReduce(shape.nodes, shape.gpus), testing::hmAllGather(shape.nodes, shape.gpus)}) {
      const Dag dag = buildDependencyDag(algorithm);
      const Pipeline pipeline = scheduleHpds(dag);
      const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, {TbPolicy::ConnectionBased, {}});
      const auto oracle = connectionsByRank(algorithm);
      for (int32_t r = 0; r < algorithm.nRanks; ++r) {
        EXPECT_EQ(allocation.tbCount[r], static_cast<int32_t>(oracle.at(r).size()));
        // HM: G - 1 intra-node peers each way plus ring next (send) and ring previous (recv).
        EXPECT_EQ(allocation.tbCount[r], 2 * shape.gpus);
      }
    }
  }
}

TEST(TbAllocation, SingleIsOneTbPerRank) {
  for (const Shape& shape : kShapes) {
    for (const Algorithm& algorithm : {testing::hmAllReduce(shape.nodes, shape.gpus), testing::hmAllGather(shape.nodes, shape.gpus)}) {
      const Dag dag = buildDependencyDag(algorithm);
      const Pipeline pipeline = scheduleHpds(dag);
      const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, {TbPolicy::Single, {}});
      EXPECT_EQ(allocation.policy, TbPolicy::Single);
      const auto oracle = connectionsByRank(algorithm);
      for (int32_t r = 0; r < algorithm.nRanks; ++r) {
        EXPECT_EQ(allocation.connectionBegin[r + 1] - allocation.connectionBegin[r],
                  static_cast<int64_t>(oracle.at(r).size()));
        EXPECT_EQ(allocation.tbCount[r], 1);
      }
      for (int32_t tb : allocation.tbOfConnection) EXPECT_EQ(tb, 0);
    }
  }
  // A rank without connections gets no TB.
  Algorithm broadcast = testing::emptyAlgorithm(Collective::Broadcast, 1, 3, 1);
  broadcast.root = 0;
  testing::addTransfer(broadcast, 0, 1, 0, 0, OpKind::Copy);
  const Dag dag = buildDependencyDag(broadcast);
  const TbAllocation allocation = allocateThreadBlocks(broadcast, dag, scheduleHpds(dag), {TbPolicy::Single, {}});
  EXPECT_EQ(allocation.tbCount, (std::vector<int32_t>{1, 1, 0}));
}

// The MSCCL counts of ResCCL Table 3 (14, 30, 14, 30 for both HM algorithms) are 4G - 2: the
// two intra-node mesh phases on separate channels, the ring on one (docs/scheduling.md).
TEST(TbAllocation, MscclChannelModelReproducesTable3) {
  for (const Shape& shape : kShapes) {
    for (const Algorithm& algorithm : {testing::hmAllReduce(shape.nodes, shape.gpus), testing::hmAllGather(shape.nodes, shape.gpus)}) {
      const Dag dag = buildDependencyDag(algorithm);
      const Pipeline pipeline = scheduleHpds(dag);
      const TbAllocation allocation =
          allocateThreadBlocks(algorithm, dag, pipeline, {TbPolicy::ConnectionBased, channelsByForwarding(algorithm, dag)});
      for (int32_t r = 0; r < algorithm.nRanks; ++r) EXPECT_EQ(allocation.tbCount[r], 4 * shape.gpus - 2) << shape.nodes << "x" << shape.gpus;
    }
  }
}

TEST(TbAllocation, StateBasedMergesOnlyDisjointIntervals) {
  for (const Shape& shape : kShapes) {
    for (const Algorithm& algorithm : {testing::hmAllReduce(shape.nodes, shape.gpus), testing::hmAllGather(shape.nodes, shape.gpus),
                                       testing::stagedRingAllReduce(shape.gpus)}) {
      const Dag dag = buildDependencyDag(algorithm);
      for (const Pipeline& pipeline : {scheduleHpds(dag), scheduleRoundRobin(dag), scheduleAlgorithmLevel(algorithm, dag)}) {
        for (bool channels : {false, true}) {
          TbAllocationOptions options{TbPolicy::StateBased, channels ? channelsByForwarding(algorithm, dag) : std::vector<int32_t>{}};
          const TbAllocation merged = allocateThreadBlocks(algorithm, dag, pipeline, options);
          options.policy = TbPolicy::ConnectionBased;
          const TbAllocation plain = allocateThreadBlocks(algorithm, dag, pipeline, options);
          // Oracle: recompute each connection's interval from the tasks; two connections on one
          // TB never overlap.
          std::map<int32_t, std::pair<int32_t, int32_t>> interval;
          for (int32_t t = 0; t < dag.nTasks; ++t) {
            for (int32_t c : {merged.sendConnectionOf[t], merged.recvConnectionOf[t]}) {
              if (c < 0) continue;
              auto [it, fresh] = interval.try_emplace(c, pipeline.subPipelineOf[t], pipeline.subPipelineOf[t]);
              it->second.first = std::min(it->second.first, pipeline.subPipelineOf[t]);
              it->second.second = std::max(it->second.second, pipeline.subPipelineOf[t]);
            }
          }
          for (auto& [a, ia] : interval) {
            for (auto& [b, ib] : interval) {
              if (a >= b || merged.connections[a].rank != merged.connections[b].rank) continue;
              if (merged.tbOfConnection[a] != merged.tbOfConnection[b]) continue;
              EXPECT_TRUE(ia.second < ib.first || ib.second < ia.first) << "overlapping connections share a TB";
            }
          }
          for (int32_t r = 0; r < algorithm.nRanks; ++r) {
            EXPECT_LE(merged.tbCount[r], plain.tbCount[r]);
            EXPECT_GE(merged.tbCount[r], 1);
          }
        }
      }
    }
  }
}

TEST(TbAllocation, Table3) {
  std::printf("%-10s %-6s %-11s %-22s %5s %5s %6s %6s %6s\n", "algorithm", "shape", "scheduler", "allocation", "minTB",
              "maxTB", "busy", "idle", "maxIdl");
  for (const Shape& shape : kShapes) {
    for (int which = 0; which < 2; ++which) {
      const Algorithm algorithm = which == 0 ? testing::hmAllReduce(shape.nodes, shape.gpus) : testing::hmAllGather(shape.nodes, shape.gpus);
      const Dag dag = buildDependencyDag(algorithm);
      const auto channels = channelsByForwarding(algorithm, dag);
      for (const Pipeline& pipeline : {scheduleHpds(dag), scheduleRoundRobin(dag)}) {
        const struct {
          const char* name;
          TbAllocationOptions options;
        } rows[] = {{"connection", {TbPolicy::ConnectionBased, {}}},
                    {"connection+channels", {TbPolicy::ConnectionBased, channels}},
                    {"state", {TbPolicy::StateBased, {}}},
                    {"state+channels", {TbPolicy::StateBased, channels}}};
        for (const auto& row : rows) {
          const TbAllocation allocation = allocateThreadBlocks(algorithm, dag, pipeline, row.options);
          const TbUsage usage = measureTbUsage(algorithm, pipeline, allocation);
          std::printf("%-10s %dx%-4d %-11s %-22s %5d %5d %5.1f%% %5.1f%% %5.1f%%\n", which == 0 ? "AllReduce" : "AllGather",
                      shape.nodes, shape.gpus, std::string(schedulerName(pipeline.scheduler)).c_str(), row.name, usage.minTbs, usage.maxTbs,
                      100 * usage.busyFraction, 100 * usage.meanIdle, 100 * usage.maxIdle);
          EXPECT_GE(usage.busyFraction, 0.0);
          EXPECT_LE(usage.busyFraction, 1.0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tuccl
