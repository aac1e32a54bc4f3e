// The MSCCL++ execution-plan exporter: the lowering of each primitive, channel wiring, remote
// buffers, semaphores, the out-of-place prologue, the limits it reports and every error path. The
// semantics of every example's export are proved by tests/tools/mscclpp_semantics.py (ctest
// mscclpp_export.semantics).
#include "plan/mscclpp_export.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "sample_plans.h"
#include "lang/load_algorithm.h"
#include "scheduler/plan_builder.h"
#include "support/source_text.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

Plan examplePlan(const std::string& file, RescclParameters parameters, TbPolicy policy = TbPolicy::StateBased) {
  const fs::path source = fs::path(TUCCL_SOURCE_DIR) / "examples/algorithms" / (file + ".resccl");
  Expected<Algorithm> algorithm = loadRescclAlgorithm(source.string(), parameters);
  EXPECT_TRUE(algorithm.ok()) << algorithm.status().toString();
  PlanRequest request;
  request.tbAllocation = TbRequest{policy, false};
  request.fuse = false;  // separate send and receive TBs: the TB counts and dependencies checked here
  return buildPlan(*algorithm, request).value();
}

Plan ringAllReduce(int32_t ranks, TbPolicy policy = TbPolicy::StateBased) {
  return examplePlan("ring_allreduce", {{"nRanks", ranks}, {"GPUPerNode", ranks}}, policy);
}

std::vector<MscclppOpCode> codes(const MscclppThreadBlock& tb) {
  std::vector<MscclppOpCode> out;
  for (const MscclppOp& op : tb.ops) out.push_back(op.code);
  return out;
}

MscclppPlan lower(const Plan& plan, const MscclppExportOptions& options) {
  Expected<MscclppPlan> lowered = lowerToMscclpp(plan, options);
  EXPECT_TRUE(lowered.ok()) << lowered.status().toString();
  return lowered.ok() ? *lowered : MscclppPlan{};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using Op = MscclppOpCode;

TEST(MscclppExport, Names) {
  EXPECT_EQ(mscclppOpName(Op::Reduce), "re");
  EXPECT_EQ(mscclppOpName(Op::Pwsf), "pwsf");
  EXPECT_EQ(mscclppOpName(Op::SemAcquire), "sem_acquire");
  EXPECT_EQ(mscclppChannelTypeName(MscclppChannelType::Port), "port");
  const MscclppLimitViolation v{"ops per thread block", "gpu 3 tb 5", 70, 64};
  EXPECT_EQ(v.message(), "gpu 3 tb 5: ops per thread block is 70, the most is 64");
}

TEST(MscclppExport, LowersSendRecvAndCopyOfTwoRanks) {
  const Plan plan = testing::twoRankAllGather();
  MscclppExportOptions options;
  options.inPlace = false;
  const MscclppPlan out = lower(plan, options);
  ASSERT_EQ(out.gpus.size(), 2u);
  for (int32_t r = 0; r < 2; ++r) {
    const MscclppGpu& gpu = out.gpus[r];
    const int32_t peer = 1 - r;
    EXPECT_EQ(gpu.inputChunks, 1);
    EXPECT_EQ(gpu.outputChunks, 2);
    EXPECT_EQ(gpu.scratchChunks, 1);  // the landing area of the one incoming transfer
    // One channel per lane: rank 0's transfer to 1, then 1's to 0, listed alike on both ranks.
    EXPECT_EQ(gpu.memoryPeers, (std::vector<int32_t>{peer, peer}));
    EXPECT_TRUE(gpu.portPeers.empty());
    ASSERT_EQ(gpu.remoteBuffers.size(), 1u);
    EXPECT_EQ(gpu.remoteBuffers[0].rank, peer);
    EXPECT_EQ(gpu.remoteBuffers[0].buffer, BufferKind::Scratch);
    EXPECT_EQ(gpu.semaphores, 0);
    ASSERT_EQ(gpu.threadBlocks.size(), 2u);
    // TB 0: the local copy, then put (no hazard: both only read the input), nop, signal.
    const MscclppThreadBlock& send = gpu.threadBlocks[0];
    EXPECT_EQ(codes(send), (std::vector<Op>{Op::Copy, Op::Put, Op::Nop, Op::Signal}));
    EXPECT_EQ(send.ops[0].src[0], (MscclppBufferRef{BufferKind::Input, -1, 0, 1}));
    EXPECT_EQ(send.ops[0].dst[0], (MscclppBufferRef{BufferKind::Output, -1, r, 1}));
    EXPECT_EQ(send.ops[1].channelType, MscclppChannelType::Memory);
    EXPECT_EQ(send.ops[1].channelIds, (std::vector<int32_t>{0}));
    EXPECT_EQ(send.ops[1].dst[0], (MscclppBufferRef{BufferKind::Scratch, 0, 0, 1}));
    EXPECT_EQ(send.memoryChannels, (std::vector<int32_t>{r}));
    EXPECT_EQ(send.memoryBuffers, (std::vector<int32_t>{0}));
    // TB 1: wait, nop, copy from the landing area into place.
    const MscclppThreadBlock& recv = gpu.threadBlocks[1];
    EXPECT_EQ(codes(recv), (std::vector<Op>{Op::Wait, Op::Nop, Op::Copy}));
    EXPECT_EQ(recv.ops[2].src[0], (MscclppBufferRef{BufferKind::Scratch, -1, 0, 1}));
    EXPECT_EQ(recv.ops[2].dst[0], (MscclppBufferRef{BufferKind::Output, -1, peer, 1}));
    EXPECT_EQ(recv.memoryChannels, (std::vector<int32_t>{peer}));
    EXPECT_TRUE(recv.memoryBuffers.empty());
  }
  EXPECT_TRUE(checkMscclppLimits(out).empty());
}

TEST(MscclppExport, RecvReduceCopyBecomesReduceWithTheDestinationFirst) {
  const MscclppPlan out = lower(ringAllReduce(4), {});
  bool found = false;
  for (const MscclppThreadBlock& tb : out.gpus[0].threadBlocks) {
    for (size_t o = 0; o < tb.ops.size(); ++o) {
      if (tb.ops[o].code != Op::Reduce) continue;
      found = true;
      ASSERT_EQ(tb.ops[o].src.size(), 2u);
      EXPECT_EQ(tb.ops[o].src[0], tb.ops[o].dst[0]);  // dst = dst + landing
      EXPECT_EQ(tb.ops[o].src[1].buffer, BufferKind::Scratch);
      EXPECT_EQ(tb.ops[o].dst[0].buffer, BufferKind::Input);  // in place: every collective but AllGather in i
      ASSERT_GE(o, 2u);
      EXPECT_EQ(tb.ops[o - 1].code, Op::Nop);
      EXPECT_EQ(tb.ops[o - 2].code, Op::Wait);
    }
  }
  EXPECT_TRUE(found);
}

TEST(MscclppExport, InPlaceAllGatherUsesTheOutput) {
  const Plan plan = examplePlan("ring_allgather", {{"nRanks", 4}, {"GPUPerNode", 4}});
  const MscclppPlan out = lower(plan, {});
  for (const MscclppGpu& gpu : out.gpus) {
    for (const MscclppThreadBlock& tb : gpu.threadBlocks) {
      for (const MscclppOp& op : tb.ops) {
        for (const auto* list : {&op.src, &op.dst}) {
          for (const MscclppBufferRef& ref : *list) EXPECT_NE(ref.buffer, BufferKind::Input);
        }
      }
    }
  }
}

TEST(MscclppExport, TwoNodesUsePortChannelsBetweenNodes) {
  MscclppExportOptions options;
  options.ranksPerNode = 2;
  const MscclppPlan out = lower(ringAllReduce(4), options);
  for (const MscclppGpu& gpu : out.gpus) {
    for (int32_t peer : gpu.memoryPeers) EXPECT_EQ(peer / 2, gpu.id / 2);
    for (int32_t peer : gpu.portPeers) EXPECT_NE(peer / 2, gpu.id / 2);
    EXPECT_FALSE(gpu.portPeers.empty());
    for (const MscclppRemoteBuffer& b : gpu.remoteBuffers) {
      EXPECT_EQ(b.access, b.rank / 2 == gpu.id / 2 ? MscclppChannelType::Memory : MscclppChannelType::Port);
    }
    for (const MscclppThreadBlock& tb : gpu.threadBlocks) {
      for (const MscclppOp& op : tb.ops) {
        // A port transfer is one pwsf (put, signal, flush): no separate signal on port channels.
        if (op.channelType == MscclppChannelType::Port) {
          EXPECT_NE(op.code, Op::Signal);
        }
        if (op.code == Op::Pwsf) {
          EXPECT_EQ(op.channelType, MscclppChannelType::Port);
        }
      }
    }
  }
}

// The k-th channel from A to B meets the k-th from B to A: both ranks list the channels of their
// pair equally often, and the ops that use the k-th channel signal on one side and wait on the other.
TEST(MscclppExport, ChannelsPairUpAcrossRanks) {
  for (TbPolicy policy : {TbPolicy::StateBased, TbPolicy::ConnectionBased, TbPolicy::Single}) {
    const MscclppPlan out = lower(ringAllReduce(4, policy), {});
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::multiset<Op>> use;  // (rank, peer, k) -> ops
    for (const MscclppGpu& gpu : out.gpus) {
      for (const MscclppGpu& other : out.gpus) {
        EXPECT_EQ(std::count(gpu.memoryPeers.begin(), gpu.memoryPeers.end(), other.id),
                  std::count(other.memoryPeers.begin(), other.memoryPeers.end(), gpu.id));
      }
      for (const MscclppThreadBlock& tb : gpu.threadBlocks) {
        for (const MscclppOp& op : tb.ops) {
          if (op.code != Op::Signal && op.code != Op::Wait) continue;
          const int32_t global = tb.memoryChannels[op.channelIds[0]];
          const int32_t peer = gpu.memoryPeers[global];
          const auto k = static_cast<int32_t>(std::count(gpu.memoryPeers.begin(), gpu.memoryPeers.begin() + global, peer));
          use[{gpu.id, peer, k}].insert(op.code);
        }
      }
    }
    for (const auto& [key, ops] : use) {
      const auto [rank, peer, k] = key;
      const auto back = use.find({peer, rank, k});
      ASSERT_NE(back, use.end());
      EXPECT_EQ(ops.count(Op::Signal), back->second.count(Op::Wait)) << rank << " -> " << peer << " channel " << k;
    }
  }
}

TEST(MscclppExport, DependenciesBecomeSemaphorePairs) {
  const MscclppPlan out = lower(ringAllReduce(4), {});
  int32_t total = 0;
  for (const MscclppGpu& gpu : out.gpus) {
    std::map<int32_t, std::pair<int32_t, int32_t>> counts;  // semaphore -> (releases, acquires)
    std::map<int32_t, std::set<int32_t>> releasers, acquirers;
    for (const MscclppThreadBlock& tb : gpu.threadBlocks) {
      for (size_t o = 0; o < tb.ops.size(); ++o) {
        const MscclppOp& op = tb.ops[o];
        for (int32_t s : op.semaphoreIds) {
          ASSERT_LT(s, gpu.semaphores);
          if (op.code == Op::SemRelease) {
            ++counts[s].first;
            releasers[s].insert(tb.id);
            // No data op since the last nop: the data is done before the release.
            for (size_t p = o; p-- > 0 && tb.ops[p].code != Op::Nop;) {
              EXPECT_TRUE(tb.ops[p].code == Op::Signal || tb.ops[p].code == Op::SemRelease);
            }
          } else {
            ++counts[s].second;
            acquirers[s].insert(tb.id);
          }
        }
      }
    }
    for (const auto& [s, c] : counts) {
      EXPECT_EQ(c.first, c.second) << "gpu " << gpu.id << " semaphore " << s;
      EXPECT_EQ(releasers[s].size(), 1u);  // one producer and one consumer thread block each
      EXPECT_EQ(acquirers[s].size(), 1u);
    }
    total += gpu.semaphores;
  }
  EXPECT_GT(total, 0);
}

TEST(MscclppExport, OutOfPlacePrologueCopiesTheInputBehindABarrier) {
  const Plan plan = examplePlan("ring_allgather", {{"nRanks", 4}, {"GPUPerNode", 4}});
  MscclppExportOptions options;
  options.inPlace = false;
  const MscclppPlan out = lower(plan, options);
  EXPECT_FALSE(out.inPlace);
  for (const MscclppGpu& gpu : out.gpus) {
    ASSERT_GE(gpu.threadBlocks.size(), 2u);
    const MscclppOp& copy = gpu.threadBlocks[0].ops[0];
    EXPECT_EQ(copy.code, Op::Copy);
    EXPECT_EQ(copy.src[0], (MscclppBufferRef{BufferKind::Input, -1, 0, 1}));
    EXPECT_EQ(copy.dst[0], (MscclppBufferRef{BufferKind::Output, -1, gpu.id, 1}));  // the rank's block
    for (const MscclppThreadBlock& tb : gpu.threadBlocks) {
      const MscclppOp& barrier = tb.ops[tb.id == 0 ? 1 : 0];
      EXPECT_EQ(barrier.code, Op::Barrier);
      EXPECT_EQ(barrier.barrierId, 0);
      EXPECT_EQ(barrier.numThreadblocks, static_cast<int32_t>(gpu.threadBlocks.size()));
    }
  }
}

TEST(MscclppExport, RefusesBadOptions) {
  const Plan plan = ringAllReduce(4);
  MscclppExportOptions options;
  options.ranksPerNode = 3;
  Expected<std::string> json = exportMscclppJson(plan, options);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(json.status().message(), "ranksPerNode 3 does not divide the plan's 4 ranks"));

  options = {};
  options.ranksPerNode = -1;
  EXPECT_EQ(exportMscclppJson(plan, options).status().code(), ErrorCode::InvalidArgument);

  options = {};
  options.bufferAlignment = 0;
  json = exportMscclppJson(plan, options);
  ASSERT_FALSE(json.ok());
  EXPECT_TRUE(contains(json.status().message(), "bufferAlignment 0 is not positive"));

  options = {};
  options.minBytes = 1024;
  options.maxBytes = 512;
  json = exportMscclppJson(plan, options);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(json.status().message(), "minBytes 1024 is larger than maxBytes 512"));
}

TEST(MscclppExport, RefusesCallLayoutsThePlanCannotServe) {
  Plan outOfPlace = ringAllReduce(4);
  outOfPlace.inPlace = false;
  Expected<std::string> json = exportMscclppJson(outOfPlace, {});
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(json.status().message(), "cannot serve in-place calls"));

  const Plan reduceScatter = examplePlan("ring_reducescatter", {{"nRanks", 4}, {"GPUPerNode", 4}});
  MscclppExportOptions options;
  options.inPlace = false;
  json = exportMscclppJson(reduceScatter, options);
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(json.status().message(), "cannot serve out-of-place calls"));
}

TEST(MscclppExport, RefusesAnInvalidPlan) {
  Plan plan = ringAllReduce(4);
  plan.ranks[1].tbs[0].entries.pop_back();
  Expected<MscclppPlan> lowered = lowerToMscclpp(plan, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().code(), ErrorCode::InvalidInput);
}

TEST(MscclppExport, ReportsEveryViolatedLimitOfAnExport) {
  const Plan plan = ringAllReduce(8);  // 14 steps in two thread blocks: more than 64 ops each
  Expected<std::string> json = exportMscclppJson(plan, {});
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), ErrorCode::ResourceExhausted);
  const std::string message = json.status().message();
  EXPECT_TRUE(contains(message, "the MSCCL++ execution plan exceeds 16 limits of the executor:")) << message;
  EXPECT_TRUE(contains(message, "\n  gpu 7 tb 1: ops per thread block is "));
  EXPECT_TRUE(checkMscclppLimits(lower(plan, {})).size() == 16u);
}

TEST(MscclppExport, ChecksEveryLimit) {
  MscclppPlan plan = lower(testing::twoRankAllGather(), MscclppExportOptions{false, 0, 0, 0, 16});
  ASSERT_TRUE(checkMscclppLimits(plan).empty());
  MscclppGpu& gpu = plan.gpus[0];
  MscclppThreadBlock& tb = gpu.threadBlocks[0];
  tb.ops.resize(65);
  for (int32_t c = 0; c < 17; ++c) {
    tb.memoryChannels.push_back(c);
    tb.portChannels.push_back(c);
  }
  tb.ops[10].channelIds.assign(9, 0);
  tb.ops[11].src.assign(3, MscclppBufferRef{});
  tb.ops[12].dst.assign(9, MscclppBufferRef{BufferKind::Scratch, 0, 0, 1});
  tb.ops[13].code = Op::Barrier;
  tb.ops[13].barrierId = 16;
  gpu.semaphores = 17;
  plan.maxMessageSize = uint64_t{1} << 33;  // an AllGather's 8 GiB output: 4 GiB per chunk
  std::map<std::string, MscclppLimitViolation> found;
  for (const MscclppLimitViolation& v : checkMscclppLimits(plan)) found.emplace(v.limit, v);
  const std::vector<std::tuple<std::string, uint64_t, uint64_t>> expected = {
      {"ops per thread block", 65, 64},
      {"memory channels per thread block", 18, 16},
      {"port channels per thread block", 17, 16},
      {"channels per op", 9, 8},
      {"local operands per list", 3, 2},
      {"remote operands per list", 9, 8},
      {"barrier id", 16, 15},
      {"semaphores", 17, 16},
      {"input bytes at the largest message", uint64_t{1} << 32, 4294967295u},
      {"output bytes at the largest message", uint64_t{1} << 33, 4294967295u},
  };
  for (const auto& [limit, value, maximum] : expected) {
    const auto v = found.find(limit);
    ASSERT_NE(v, found.end()) << limit;
    EXPECT_EQ(v->second.value, value) << limit;
    EXPECT_EQ(v->second.maximum, maximum) << limit;
  }
  EXPECT_EQ(found.at("ops per thread block").where, "gpu 0 tb 0");
  EXPECT_EQ(found.at("channels per op").where, "gpu 0 tb 0 op 10");
}

TEST(MscclppExport, DefaultMessageRangeKeepsOffsetsWithin32Bits) {
  const MscclppPlan plan = lower(ringAllReduce(4), {});
  ASSERT_FALSE(plan.gpus.empty());
  const uint64_t chunks = static_cast<uint64_t>(plan.gpus[0].inputChunks);
  const uint64_t biggest = static_cast<uint64_t>(
      std::max({plan.gpus[0].inputChunks, plan.gpus[0].outputChunks, plan.gpus[0].scratchChunks}));
  EXPECT_LE(plan.maxMessageSize / chunks * biggest, uint64_t{0xffffffff});
  EXPECT_GT((plan.maxMessageSize / chunks + 16 * 2) * biggest, uint64_t{0xffffffff} - 16 * biggest);
  EXPECT_TRUE(checkMscclppLimits(plan).empty());

  MscclppExportOptions options;
  options.maxBytes = uint64_t{1} << 40;
  Expected<std::string> json = exportMscclppJson(ringAllReduce(4), options);
  ASSERT_FALSE(json.ok());
  EXPECT_TRUE(contains(json.status().message(), "input bytes at the largest message is "));
}

TEST(MscclppExport, WritesTheExecutorsKeys) {
  MscclppExportOptions options;
  options.ranksPerNode = 2;
  options.minBytes = 4096;
  options.maxBytes = 1 << 20;
  Expected<std::string> json = exportMscclppJson(ringAllReduce(4), options);
  ASSERT_TRUE(json.ok()) << json.status().toString();
  for (const char* key :
       {"\"name\": \"Ring\"", "\"collective\": \"allreduce\"", "\"protocol\": \"Simple\"", "\"inplace\": true",
        "\"min_message_size\": 4096", "\"max_message_size\": 1048576", "\"input_chunks\": 4",
        "\"channel_type\": \"port\"", "\"connected_to\": [", "\"remote_buffers\": [", "\"access_channel_types\": [",
        "\"threadblocks\": [", "\"remote_buffer_refs\": [", "\"remote_buffer_ids\": [", "\"name\": \"pwsf\"",
        "\"buffer_id\": 0", "\"semaphores\": [", "\"init_value\": 0", "\"semaphore_ids\": [", "\"reduce_op\": \"sum\""}) {
    EXPECT_TRUE(contains(*json, key)) << key;
  }
  EXPECT_EQ(json->back(), '\n');
  EXPECT_EQ(*json, *exportMscclppJson(ringAllReduce(4), options));  // deterministic
}

}  // namespace
}  // namespace tuccl
