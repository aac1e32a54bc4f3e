// What the primitives do per slice, counted in the host build of real plans (docs/kernels.md,
// "Counted on the CPU"): the bytes each rank loads and stores, the flag waits, barriers and fences
// per slice, and the bytes a Simple flag wait covers. Every element of every rank is checked too.
#include <random>

#include <gtest/gtest.h>

#include "kernelgen/codegen.h"
#include "kernelgen/collective_reference.h"
#include "kernelgen/host_executor.h"
#include "kernelgen/output_compare.h"
#include "plan_fixtures.h"
#include "sim/network.h"
#include "sim/simulator.h"

namespace tuccl {
namespace {

using testing::compileExample;

struct Counted {
  std::vector<dev::PrimitiveCounters> counters;
  int64_t bytesPerRank = 0;  ///< S: the collective's bytes per rank (AllGather: the output)
};

// Runs `plan` on every rank with random float data, checks every element against the reference
// (and, out of place, that no input was written) and returns the counters. In place when the
// plan is, unless `outOfPlace`.
Counted runCounted(const Plan& plan, int64_t count, int64_t chunkBytes, Protocol protocol, bool outOfPlace = false) {
  Targets host;
  host.hostKernels = true;
  Expected<CompiledPlan> compiled = compilePlan(plan, host);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  if (!compiled) return {};
  const KernelLayout& layout = compiled->layout;
  const std::shared_ptr<const HostKernels>& kernels = compiled->host;
  CollectiveCall call;
  call.collective = layout.collective;
  call.nRanks = plan.nRanks;
  call.root = plan.root;
  call.dataType = DataType::Float32;
  call.count = count;
  call.inPlace = plan.inPlace && !outOfPlace;
  const RankBufferElements elements = planBufferElements(plan, layout, count);
  std::mt19937 random(11);
  std::vector<std::vector<float>> input(plan.nRanks), output(plan.nRanks), scratch(plan.nRanks);
  std::vector<std::vector<double>> values(plan.nRanks);
  std::vector<RankBuffers> buffers(plan.nRanks);
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    input[r].resize(static_cast<size_t>(std::max(elements.input, inputElements(call))));
    output[r].resize(static_cast<size_t>(std::max(elements.output, outputElements(call))));
    scratch[r].resize(static_cast<size_t>(elements.scratch));
    for (int64_t i = 0; i < inputElements(call); ++i) {
      input[r][i] = static_cast<float>(random() % 64) / 4.0f;
      values[r].push_back(input[r][i]);
    }
    if (call.inPlace) {
      // NCCL's in-place layout, one storage buffer: AllGather's input is block r of the output,
      // ReduceScatter's output block r of the input, the others' input is their output.
      output[r].resize(static_cast<size_t>(std::max({inputElements(call), outputElements(call), elements.input,
                                                     elements.output})));
      float* storage = output[r].data();
      const bool gather = layout.collective == Collective::AllGather;
      const bool scatter = layout.collective == Collective::ReduceScatter;
      float* in = gather ? storage + r * count : storage;
      std::copy(input[r].begin(), input[r].begin() + inputElements(call), in);
      buffers[r] = RankBuffers{in, scatter ? storage + r * count : storage, scratch[r].data()};
    } else {
      buffers[r] = RankBuffers{input[r].data(), output[r].data(), scratch[r].data()};
    }
  }
  HostStaging staging(layout, callGeometry(plan, layout, call, chunkBytes, 4, protocol));
  Expected<HostRun> run = runPlanOnHost(*kernels, plan, layout, call, buffers, staging);
  EXPECT_TRUE(run && run->completed) << (run ? run->status().toString() : run.status().toString());
  if (!run) return {};
  Expected<RankOutputs> expected = referenceOutputs(call, values);
  EXPECT_TRUE(expected);
  std::vector<const void*> outputs;
  for (const RankBuffers& b : buffers) outputs.push_back(b.output);
  for (const RankComparison& rank : compareOutputs(call, *expected, outputs)) EXPECT_TRUE(rank.ok()) << rank.rank;
  if (!call.inPlace) {
    for (int32_t r = 0; r < plan.nRanks; ++r) {
      int64_t written = 0;
      for (int64_t i = 0; i < inputElements(call); ++i) written += input[r][i] != static_cast<float>(values[r][i]);
      EXPECT_EQ(written, 0) << "rank " << r << " wrote into its input";
    }
  }
  return Counted{run->counters, outputElements(call) * 4};
}

uint64_t moved(const dev::PrimitiveCounters& c) { return c.bytesRead + c.bytesWritten; }

size_t entriesOfKind(const Plan& plan, PrimitiveKind kind) {
  size_t n = 0;
  for (const PlanRank& rank : plan.ranks) {
    for (const PlanTb& tb : rank.tbs) {
      for (const PlanEntry& entry : tb.entries) n += entry.kind == kind ? 1 : 0;
    }
  }
  return n;
}

// The ring AllReduce unfused (send, recv, recvReduceCopy: a receive stores the slice and a send
// reads it again) moves 9(n-1)S/n bytes per rank: the reduce-scatter's n-1 steps each read the
// slot and the chunk and write the chunk (3), then the chunk is read and written to the peer's
// slot (2); the all-gather's n-1 steps each read a slot and write the chunk (2), then the chunk is
// sent on (2) except after the last; plus the first send (2): (5 + 4)(n-1) S/n.
TEST(PrimitiveCounters, UnfusedRingAllReduceMovesNineBytesPerRankPerStep) {
  for (int32_t n : {4, 8}) {
    const Plan plan = unfusedPlan(compileExample("ring_allreduce", "hpds", true, n, n).plan);
    ASSERT_FALSE(hasFusedEntries(plan));
    const int64_t count = int64_t{1} << 16;  // 256 KiB a rank
    const Counted counted = runCounted(plan, count, 8192, Protocol::Simple);
    ASSERT_EQ(counted.counters.size(), static_cast<size_t>(n));
    const uint64_t S = static_cast<uint64_t>(counted.bytesPerRank);
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_EQ(moved(counted.counters[r]), 9 * (n - 1) * S / n) << "rank " << r << " of " << n;
    }
  }
}

// Runs `example` fused at 4 and 8 ranks (each plan holding every kind of `kinds`): every rank
// moves at most bound(n) S / n bytes (+5 %).
void expectFusedBytes(const char* example, std::initializer_list<PrimitiveKind> kinds, int64_t count,
                      int64_t (*bound)(int64_t n)) {
  for (int32_t n : {4, 8}) {
    const Plan& plan = compileExample(example, "hpds", true, n, n).plan;
    for (PrimitiveKind kind : kinds) EXPECT_GT(entriesOfKind(plan, kind), 0u) << example << " " << primitiveName(kind);
    const Counted counted = runCounted(plan, count, 8192, Protocol::Simple);
    ASSERT_EQ(counted.counters.size(), static_cast<size_t>(n));
    const uint64_t S = static_cast<uint64_t>(counted.bytesPerRank);
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_LE(moved(counted.counters[r]) * 100, static_cast<uint64_t>(bound(n)) * S / n * 105)
          << example << " rank " << r << " of " << n;
    }
  }
}

// Lowering fuses each receive with the send of its result, so a slice is read once. The ring
// AllReduce then moves at most (6n-4)S/n bytes per rank (+5 %): the first send (2), n-2
// recvReduceSends that read the slot and the chunk and write the next slot (3), a
// recvReduceCopySend that also stores the reduced chunk (4), n-2 recvCopySends (read 1, write 2)
// and the last recv (2) — NCCL's ring (shared/reference/nccl-data-path.md).
TEST(PrimitiveCounters, FusedRingAllReduceReadsEachSliceOnce) {
  expectFusedBytes("ring_allreduce",
                   {PrimitiveKind::RecvReduceSend, PrimitiveKind::RecvReduceCopySend, PrimitiveKind::RecvCopySend},
                   int64_t{1} << 16, [](int64_t n) { return 6 * n - 4; });  // 256 KiB a rank
}

// The ring AllGather fused: each forwarded chunk is read once from the slot and written to the
// output and the next slot (3); with the first send (2) and the last recv (2), at most
// (3n-2)S/n bytes per rank (+5 %), S the output.
TEST(PrimitiveCounters, FusedRingAllGatherReadsEachSliceOnce) {
  expectFusedBytes("ring_allgather", {PrimitiveKind::RecvCopySend}, int64_t{1} << 14,  // 64 KiB a rank's input
                   [](int64_t n) { return 3 * n - 2; });
}

// The ring ReduceScatter fused: its partial sums are stored in the input chunks (nothing
// overwrites them, so recvReduceCopySend, 4), with the first send (2) and the last
// recvReduceCopy (3): at most (4n-3)S/n bytes per rank (+5 %), S the input (nccl-tests' size), the
// bound bench/gpu_roofline.sh divides by.
TEST(PrimitiveCounters, FusedRingReduceScatterStoresItsPartialSums) {
  for (int32_t n : {4, 8}) {
    const Plan& plan = compileExample("ring_reducescatter", "hpds", true, n, n).plan;
    EXPECT_GT(entriesOfKind(plan, PrimitiveKind::RecvReduceCopySend), 0u) << n;
    const Counted counted = runCounted(plan, int64_t{1} << 14, 8192, Protocol::Simple);
    ASSERT_EQ(counted.counters.size(), static_cast<size_t>(n));
    const uint64_t S = static_cast<uint64_t>(counted.bytesPerRank) * n;  // the output is S/n
    for (int32_t r = 0; r < n; ++r) {
      EXPECT_LE(moved(counted.counters[r]) * 100, static_cast<uint64_t>(4 * n - 3) * S / n * 105) << "rank " << r;
    }
  }
}

// Out of place, the prologue copies a rank's input into its storage position. Where the rank's
// plan never writes that unit (AllGather's own block, a Broadcast's root) its TBs read the unit
// from the input and none waits for the copy: the same flag waits as in place. Where the plan
// writes it (AllReduce reduces into it, a Broadcast's other ranks receive into it), every TB of
// the rank waits once at the prologue's rank barrier.
TEST(PrimitiveCounters, AnOutOfPlaceCopyThePlanNeverOverwritesIsNotAwaited) {
  for (const char* name : {"ring_allgather", "hm_allgather", "ring_allreduce", "chain_broadcast"}) {
    const Plan& plan = compileExample(name, "hpds", true, 8, 4).plan;
    const Counted inPlace = runCounted(plan, int64_t{1} << 12, 4096, Protocol::Simple);
    const Counted outOfPlace = runCounted(plan, int64_t{1} << 12, 4096, Protocol::Simple, true);
    ASSERT_EQ(outOfPlace.counters.size(), static_cast<size_t>(plan.nRanks)) << name;
    for (int32_t r = 0; r < plan.nRanks; ++r) {
      const bool awaited = plan.collective == Collective::AllReduce ||
                           (plan.collective == Collective::Broadcast && r != plan.root);
      const uint64_t barrierWaits = awaited ? plan.ranks[r].tbs.size() : 0;
      EXPECT_EQ(outOfPlace.counters[r].entryWaits, inPlace.counters[r].entryWaits + barrierWaits)
          << name << " rank " << r;
    }
  }
}

// Per slice of a remote primitive, whatever the protocol: one wait for its data (Simple: the data
// flag; LL and LL128: the slice's lines), at most two barriers, and one fence per direction (an
// acquire after a received slice's data, a release before a sent slice's flag or lines); a wait on
// another entry costs one barrier and one acquire, a post one release; a TB ends with one
// barrier. Simple: two barriers per pass, a fused pass receiving and sending a slice included.
TEST(PrimitiveCounters, TwoBarriersAndOneFencePerSliceAndDirection) {
  const Plan& plan = compileExample("ring_allreduce", "hpds", true, 4, 4).plan;
  for (Protocol protocol : {Protocol::Simple, Protocol::LL, Protocol::LL128}) {
    // Slices of 960 floats: one piece of an LL / LL128 receiver's reduce buffer (3,840 bytes).
    const Counted counted = runCounted(plan, 960 * 4 * 3, 3840, protocol);
    for (int32_t r = 0; r < plan.nRanks; ++r) {
      const dev::PrimitiveCounters& c = counted.counters[r];
      ASSERT_GT(c.slices, 0u);
      EXPECT_EQ(c.dataWaits * 2, c.slices) << protocolName(protocol) << ": a ring rank receives what it sends";
      // Plus the epilogue's one barrier per TB.
      const uint64_t rest = c.entryWaits + plan.ranks[r].tbs.size();
      EXPECT_LE(c.barriers, 2 * c.slices + rest) << protocolName(protocol);
      if (protocol == Protocol::Simple) {
        EXPECT_EQ(c.barriers, 2 * c.passes + rest);
      }
      EXPECT_LT(c.passes, c.slices) << protocolName(protocol) << ": fused passes move two slices";
      EXPECT_EQ(c.fences, c.slices + c.entryWaits + c.entryPosts) << protocolName(protocol);
    }
  }
}

// Simple at 1 MiB chunks: a flag wait (data, credit or dependency) covers at least 256 KiB.
TEST(PrimitiveCounters, SimpleWaitsCoverAQuarterMebibyteAtOneMebibyteChunks) {
  const Plan& plan = compileExample("ring_allreduce", "hpds", true, 4, 4).plan;
  const int64_t count = int64_t{4} << 20;  // 16 MiB a rank: 4 MiB chunks, 4 slices each
  const Counted counted = runCounted(plan, count, 1 << 20, Protocol::Simple);
  for (const dev::PrimitiveCounters& c : counted.counters) {
    const uint64_t waits = c.dataWaits + c.creditWaits + c.entryWaits;
    ASSERT_GT(waits, 0u);
    EXPECT_GE(moved(c) / waits, uint64_t{256} << 10) << "bytes per flag wait";
  }
}

// Channels: the kernels run C replicas of the plan's TBs, replica c on its share of every transfer.
// On every example, C = 1, 2 and 4 give the right result on every rank; each rank moves the same
// bytes whatever C, and its slices are C replicas times the micro-batches of a share (each replica
// sends and receives every slice of its share; an empty slice still exchanges its flags).
TEST(PrimitiveCounters, ChannelsReplicateTheTbsAndSplitTheBytes) {
  struct Example {
    const char* name;
    int32_t ranks;
    int32_t perNode;
    int32_t root;
  };
  const Example examples[] = {{"ring_allreduce", 4, 4, -1},   {"ring_allgather", 4, 4, -1},
                              {"ring_reducescatter", 4, 4, -1}, {"hm_allreduce", 8, 4, -1},
                              {"direct_alltoall", 4, 4, -1},    {"chain_broadcast", 4, 4, 1},
                              {"binomial_reduce", 4, 4, 2}};
  for (const Example& example : examples) {
    const Plan& base = compileExample(example.name, "hpds", true, example.ranks, example.perNode, example.root).plan;
    std::vector<dev::PrimitiveCounters> one;
    int64_t oneBatches = 0;
    for (int32_t channels : {1, 2, 4}) {
      Plan plan = base;
      plan.config.nChannels = channels;
      const KernelLayout layout = layoutKernels(plan).value();
      EXPECT_EQ(layout.blocksOf(plan, 0), channels * static_cast<int32_t>(plan.ranks[0].tbs.size()));
      const int64_t batches = dev::microBatchCount(1000, layout.chunksPerUnit, 64, channels, 4);
      // 1,000 floats a unit: shares of 256 (16-byte multiples) and a short last one, in slices of 64.
      const Counted counted = runCounted(plan, 1000, 256, Protocol::Simple);
      ASSERT_EQ(counted.counters.size(), static_cast<size_t>(plan.nRanks)) << example.name << " C=" << channels;
      if (channels == 1) {
        one = counted.counters;
        oneBatches = batches;
        continue;
      }
      for (int32_t r = 0; r < plan.nRanks; ++r) {
        const dev::PrimitiveCounters& c = counted.counters[r];
        EXPECT_EQ(moved(c), moved(one[r])) << example.name << " rank " << r << " C=" << channels;
        EXPECT_EQ(c.slices * static_cast<uint64_t>(oneBatches), one[r].slices * channels * static_cast<uint64_t>(batches))
            << example.name << " rank " << r << " C=" << channels;
      }
    }
  }
}

// The simulator models the kernels that run: with C channels it simulates C replicas of the plan,
// and on every example, for C = 1, 2 and 4, the kernels' blocks per rank are the simulated TBs per
// rank and the slices the kernels send are the simulated transfers (message sizes where both cut
// the data alike: shares and slices of whole 16-byte multiples).
TEST(PrimitiveCounters, TheSimulatorSimulatesTheChannelsTheKernelsRun) {
  struct Example {
    const char* name;
    int32_t root;
  };
  const Example examples[] = {{"ring_allreduce", -1},  {"ring_allgather", -1}, {"ring_reducescatter", -1},
                              {"direct_allreduce", -1}, {"direct_alltoall", -1}, {"hm_allreduce", -1},
                              {"chain_broadcast", 1},   {"binomial_reduce", 2}};
  const Network network = loadNetwork("preset:resccl-a100:nodes=2,gpus=4").value();
  for (const Example& example : examples) {
    const Plan& base = compileExample(example.name, "hpds", true, 8, 4, example.root).plan;
    for (int32_t channels : {1, 2, 4}) {
      Plan plan = base;
      plan.config.nChannels = channels;
      plan.config.chunkSize = 4096;
      const KernelLayout layout = layoutKernels(plan).value();
      // 2,048 floats a unit: every chunk, share and slice a whole number of 16-byte packs.
      const int64_t count = 2048 * layout.chunksPerUnit;
      const Counted counted = runCounted(plan, count, plan.config.chunkSize, Protocol::Simple);
      ASSERT_EQ(counted.counters.size(), static_cast<size_t>(plan.nRanks)) << example.name;
      SimOptions options;
      options.messageBytes = counted.bytesPerRank;
      if (layout.collective == Collective::ReduceScatter || layout.collective == Collective::AllToAll) {
        options.messageBytes = count * 4 * plan.nRanks;  // nccl-tests' size: the input
      }
      Expected<SimResult> simulated = simulatePlan(plan, network, options);
      ASSERT_TRUE(simulated) << example.name << ": " << simulated.status().toString();
      uint64_t sent = 0;
      for (int32_t r = 0; r < plan.nRanks; ++r) {
        int32_t tbs = 0;
        for (const SimTb& tb : simulated->tbs) tbs += tb.rank == r ? 1 : 0;
        EXPECT_EQ(tbs, layout.blocksOf(plan, r)) << example.name << " rank " << r << " C=" << channels;
        sent += counted.counters[r].slices - counted.counters[r].dataWaits;
      }
      EXPECT_EQ(static_cast<int64_t>(sent), simulated->transfers) << example.name << " C=" << channels;
    }
  }
}

}  // namespace
}  // namespace tuccl
