// tuccl-bench's command line, size series, nccl-tests conventions and output (cli/bench_report.h),
// and its check data (cli/bench_check.h), without libtuccl.
#include "cli/bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cli/bench_check.h"
#include "kernelgen/collective_reference.h"
#include "kernelgen/element_values.h"
#include "tune/nccl_tests_output.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

Expected<BenchOptions> parse(std::vector<std::string> args) { return parseBenchOptions(args); }

/// The parse error of a command line that must fail.
std::string errorOf(std::vector<std::string> args) {
  Expected<BenchOptions> options = parse(std::move(args));
  EXPECT_FALSE(options.ok());
  if (options.ok()) return "";
  EXPECT_EQ(options.status().code(), ErrorCode::InvalidArgument);
  return options.status().message();
}

TEST(BenchOptions, DefaultsAreNcclTests) {
  Expected<BenchOptions> o = parse({"allreduce"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->collective, Collective::AllReduce);
  EXPECT_EQ(o->minBytes, 32u << 20);
  EXPECT_EQ(o->maxBytes, 32u << 20);
  EXPECT_EQ(o->stepBytes, 1u << 20);
  EXPECT_EQ(o->stepFactor, 1u);
  EXPECT_EQ(o->iters, 20);
  EXPECT_EQ(o->warmupIters, 1);
  EXPECT_EQ(o->checkIters, 1);
  EXPECT_EQ(o->average, TimeAverage::Mean);
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::Float32});
  EXPECT_EQ(o->ops, std::vector<ReduceOp>{ReduceOp::Sum});
  EXPECT_EQ(o->root, 0);
  EXPECT_FALSE(o->blocking);
}

TEST(BenchOptions, ReadsEveryFlagInEverySpelling) {
  Expected<BenchOptions> o = parse({"-b",     "8",
                                    "-e128M", "--stepfactor",
                                    "2",      "reduce_scatter",
                                    "-n",     "5",
                                    "-w=3",   "--warmup_iters=4",
                                    "-c",     "0",
                                    "-o",     "max",
                                    "-d",     "bf16",
                                    "-r",     "all",
                                    "-z",     "1",
                                    "-a",     "3",
                                    "-m",     "2",
                                    "-t",     "1",
                                    "-g",     "1",
                                    "-i",     "1K"});
  // "-w=3" is -w with the value "=3": not an integer.
  EXPECT_FALSE(o.ok());
  o = parse({"-b",
             "8",
             "-e128M",
             "--stepfactor",
             "2",
             "reduce_scatter",
             "-n",
             "5",
             "--warmup_iters=4",
             "-c",
             "0",
             "-o",
             "max",
             "-d",
             "bf16",
             "-r",
             "all",
             "-z",
             "1",
             "-a",
             "3",
             "-m",
             "1",
             "-t",
             "1",
             "-g",
             "1",
             "-i",
             "1K"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->collective, Collective::ReduceScatter);
  EXPECT_EQ(o->minBytes, 8u);
  EXPECT_EQ(o->maxBytes, 128u << 20);
  EXPECT_EQ(o->stepFactor, 2u);
  EXPECT_EQ(o->stepBytes, 1024u);
  EXPECT_EQ(o->iters, 5);
  EXPECT_EQ(o->warmupIters, 4);
  EXPECT_EQ(o->checkIters, 0);
  EXPECT_EQ(o->ops, std::vector<ReduceOp>{ReduceOp::Max});
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::BFloat16});
  EXPECT_EQ(o->root, -1);
  EXPECT_TRUE(o->blocking);
  EXPECT_EQ(o->average, TimeAverage::Max);
  EXPECT_EQ(o->aggIters, 1);
  EXPECT_EQ(o->runCycles, 1);
  o = parse({"alltoall", "--agg_iters", "4", "-N", "3"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->aggIters, 4);
  EXPECT_EQ(o->runCycles, 3);
  o = parse({"allreduce", "--run_cycles=7"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->runCycles, 7);
}

TEST(BenchOptions, SizesBeyondTheMachineAreRefusedBeforeAllocating) {
  BenchOptions options;
  options.maxBytes = uint64_t{64} << 30;
  EXPECT_EQ(rankHostBytes(options), uint64_t{128} << 30);
  const Status refused = checkHostMemory(options, uint64_t{16} << 30);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(refused.message(), "-e 64G: one rank's send and receive buffers need 128 GiB of host memory, and this "
                               "machine has 16 GiB available");
  EXPECT_TRUE(checkHostMemory(options, uint64_t{128} << 30).ok());
  EXPECT_TRUE(checkHostMemory(options, 0).ok());  // not known: let through
  options.maxBytes = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(rankHostBytes(options), std::numeric_limits<uint64_t>::max());
  EXPECT_GT(availableHostBytes(), 0u);  // Linux: /proc/meminfo
}

TEST(BenchOptions, AllTypesAndOps) {
  Expected<BenchOptions> o = parse({"allreduce", "-d", "all", "-o", "all"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->types.size(), 10u);  // every datatype but fp8
  EXPECT_EQ(o->types.front(), DataType::Int8);  // nccl-tests' order
  EXPECT_EQ(parse({"allreduce", "-d", "f8e5m2"})->types, std::vector<DataType>{DataType::Float8E5M2});
  EXPECT_EQ(o->ops, (std::vector<ReduceOp>{ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min,
                                           ReduceOp::Avg}));
  o = parse({"allgather", "-d", "half", "-d", "double"});  // the last one wins, as with getopt
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->types, std::vector<DataType>{DataType::Float64});
}

TEST(BenchOptions, ListsOfTypesAndOpsRunInTheOrderGiven) {
  Expected<BenchOptions> o = parse({"allreduce", "-d", "bfloat16, float", "-o", "max,sum"});
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->types, (std::vector<DataType>{DataType::BFloat16, DataType::Float32}));
  EXPECT_EQ(o->ops, (std::vector<ReduceOp>{ReduceOp::Max, ReduceOp::Sum}));
  const std::string twice = errorOf({"allreduce", "-d", "float,FLOAT"});
  EXPECT_NE(twice.find("-d (--datatype)"), std::string::npos) << twice;
  EXPECT_NE(twice.find("listed twice"), std::string::npos) << twice;
  EXPECT_NE(errorOf({"allreduce", "-d", "float,float32"}).find("'float32' names one already listed"),
            std::string::npos);
  const std::string unknown = errorOf({"allreduce", "-o", "sum,mean"});
  EXPECT_NE(unknown.find("'mean' is not one"), std::string::npos) << unknown;
  EXPECT_NE(errorOf({"allreduce", "-d", ","}).find("the list is empty"), std::string::npos);
}

// Hostile numbers: a fractional or nan factor, sizes beyond any buffer, and steps that would make
// millions of sizes are refused with the range in human numbers.
TEST(BenchOptions, HostileNumbersAreRefusedWithTheRange) {
  EXPECT_NE(errorOf({"allreduce", "-f", "1.0000001"}).find("-f (--stepfactor)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-f", "nan"}).find("-f (--stepfactor)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-e", "2T"}).find("must be at most 1 TiB"), std::string::npos)
      << errorOf({"allreduce", "-e", "2T"});
  const std::string steps = errorOf({"allreduce", "-b", "8", "-e", "1G", "-i", "8"});
  EXPECT_NE(steps.find("option -i (--stepbytes): 8 B steps make 134,217,728 sizes from 8 B to 1 GiB; at most 65,536"),
            std::string::npos)
      << steps;
  EXPECT_NE(steps.find("use -i of at least 16385 or -f"), std::string::npos) << steps;
  EXPECT_TRUE(parse({"allreduce", "-b", "8", "-e", "1G", "-i", "16385"}).ok());
}

TEST(BenchOptions, BadValuesNameTheFlag) {
  EXPECT_NE(errorOf({"allreduce", "-b", "12Q"}).find("-b (--minbytes): invalid value '12Q'"),
            std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "--maxbytes=lots"}).find("-e (--maxbytes)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-n", "0"}).find("-n (--iters): invalid value '0': must be at least 1"),
            std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-n", "3x"}).find("not an integer"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-f", "-2"}).find("-f (--stepfactor)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-a", "4"}).find("-a (--average): invalid value '4': must be in [0, 3]"),
            std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-z", "2"}).find("-z (--blocking)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-d", "int7"}).find("-d (--datatype): invalid value 'int7'"),
            std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-o", "mulsum"}).find("-o (--op)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-r", "-2"}).find("-r (--root)"), std::string::npos);
  EXPECT_NE(
      errorOf({"allreduce", "-t", "2"}).find("-t (--nthreads): invalid value '2': one rank per process"),
      std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-g", "8"}).find("-g (--ngpus)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-b"}).find("-b (--minbytes): missing value"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-x", "1"}).find("unknown option '-x'"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "--help=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(errorOf({"allscatter"}).find("unknown collective 'allscatter'"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "allgather"}).find("unexpected argument 'allgather'"), std::string::npos);
  EXPECT_NE(errorOf({"-b", "8"}).find("missing COLLECTIVE"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-b", "1M", "-e", "1K"}).find("-b (--minbytes): 1048576 is larger than -e"),
            std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-z", "1", "-m", "4"}).find("-z (--blocking)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-N", "0"}).find("-N (--run_cycles): invalid value '0'"), std::string::npos)
      << errorOf({"allreduce", "-N", "0"});
  EXPECT_NE(errorOf({"allreduce", "-N", "-2"}).find("-N (--run_cycles)"), std::string::npos);
  EXPECT_NE(errorOf({"allreduce", "-b", "1K", "-e", "1M", "-i", "0"}).find("-i (--stepbytes)"),
            std::string::npos);
}

TEST(BenchOptions, HelpNeedsNoCollective) {
  Expected<BenchOptions> o = parse({"-h"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  EXPECT_NE(benchUsage("tuccl-bench").find("-b, --minbytes SIZE"), std::string::npos);
}

TEST(BenchOptions, RootMustBeARank) {
  Expected<BenchOptions> o = parse({"broadcast", "-r", "4"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(checkRoot(*o, 5).ok());
  Status bad = checkRoot(*o, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("-r (--root): root 4 is not a rank of the 4-rank communicator"),
            std::string::npos);
  EXPECT_EQ(benchRoots(*o, 8), std::vector<int32_t>{4});
  o = parse({"reduce", "-r", "-1"});
  EXPECT_EQ(benchRoots(*o, 3), (std::vector<int32_t>{0, 1, 2}));
  o = parse({"allreduce", "-r", "7"});  // no root: ignored, as nccl-tests does
  EXPECT_TRUE(checkRoot(*o, 4).ok());
  EXPECT_EQ(benchRoots(*o, 4), std::vector<int32_t>{-1});
}

TEST(BenchOptions, OpsOnlyForReductions) {
  Expected<BenchOptions> o = parse({"allgather", "-o", "all"});
  ASSERT_EQ(benchOps(*o).size(), 1u);
  EXPECT_FALSE(benchOps(*o)[0].has_value());
  o = parse({"reduce", "-o", "all"});
  EXPECT_EQ(benchOps(*o).size(), 5u);
}

TEST(BenchSizes, FactorAndIncrementSeries) {
  Expected<BenchOptions> o = parse({"allreduce", "-b", "8", "-e", "128M", "-f", "2"});
  std::vector<uint64_t> sizes = benchSizes(*o);
  ASSERT_EQ(sizes.size(), 25u);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes[1], 16u);
  EXPECT_EQ(sizes.back(), 128u << 20);
  o = parse({"allreduce", "-b", "1K", "-e", "3K", "-i", "1K"});
  EXPECT_EQ(benchSizes(*o), (std::vector<uint64_t>{1024, 2048, 3072}));
  o = parse({"allreduce", "-b", "1K", "-e", "300K", "-f", "4"});  // stops below the maximum
  EXPECT_EQ(benchSizes(*o), (std::vector<uint64_t>{1024, 4096, 16384, 65536, 262144}));
  o = parse({"allreduce", "-b", "0", "-e", "1K", "-f", "2"});  // 0 × factor never grows
  EXPECT_EQ(benchSizes(*o), std::vector<uint64_t>{0});
  // Sizes that large are refused on the command line; the walk itself still never overflows 2^64.
  EXPECT_FALSE(parse({"allreduce", "-b", "8388608T", "-e", "16777215T", "-f", "2"}).ok());
  o = parse({"allreduce", "-f", "2"});
  ASSERT_TRUE(o.ok());
  o->minBytes = 1ull << 63;
  o->maxBytes = (16777215ull << 40);
  EXPECT_EQ(benchSizes(*o), std::vector<uint64_t>{1ull << 63});
}

TEST(CollectiveCounts, NcclTestsConventions) {
  // 1 MB of floats on 4 ranks: 262144 elements.
  CollectiveCounts ar = collectiveCounts(Collective::AllReduce, 1 << 20, 4, 4);
  EXPECT_EQ(ar.param, 262144u);
  EXPECT_EQ(ar.rowBytes(4), 1u << 20);
  CollectiveCounts ag = collectiveCounts(Collective::AllGather, 1 << 20, 4, 4);
  EXPECT_EQ(ag.param, 65536u);  // per-rank send count
  EXPECT_EQ(ag.recv, 262144u);
  EXPECT_EQ(ag.rowBytes(4), 1u << 20);  // the size is the total received
  EXPECT_EQ(ag.sendInPlaceOffset, 65536u);
  EXPECT_EQ(ag.recvInPlaceOffset, 0u);
  CollectiveCounts rs = collectiveCounts(Collective::ReduceScatter, 1 << 20, 4, 4);
  EXPECT_EQ(rs.param, 65536u);
  EXPECT_EQ(rs.send, 262144u);
  EXPECT_EQ(rs.recvInPlaceOffset, 65536u);
  CollectiveCounts a2a = collectiveCounts(Collective::AllToAll, 1 << 20, 4, 4);
  EXPECT_EQ(a2a.param, 65536u);
  EXPECT_EQ(a2a.send, 262144u);
  EXPECT_EQ(a2a.recv, 262144u);
  // Sizes that do not divide: counts round down to whole elements per rank.
  CollectiveCounts odd = collectiveCounts(Collective::AllGather, 100, 4, 3);
  EXPECT_EQ(odd.param, 8u);
  EXPECT_EQ(odd.rowBytes(4), 96u);
  EXPECT_EQ(collectiveCounts(Collective::Broadcast, 10, 8, 4).param, 1u);
}

TEST(BenchOptions, PeerPatternsAreNamedAndHaveNoOpOrRoot) {
  for (const char* name : {"sendrecv", "SendRecv", "send_recv"}) {
    Expected<BenchOptions> o = parse({name, "-o", "all", "-r", "all"});
    ASSERT_TRUE(o.ok()) << name << ": " << o.status().message();
    EXPECT_EQ(o->collective, PeerPattern::SendRecv);
    EXPECT_FALSE(o->collective.collective().has_value());
    EXPECT_EQ(benchCollectiveName(o->collective), "sendrecv");
    EXPECT_EQ(benchOps(*o), std::vector<std::optional<ReduceOp>>{std::nullopt});
    EXPECT_EQ(benchRoots(*o, 4), std::vector<int32_t>{-1});
    EXPECT_TRUE(checkRoot(*o, 2).ok());
  }
  for (const char* name : {"alltoallv", "AllToAllv", "all_to_all_v"}) {
    Expected<BenchOptions> o = parse({name});
    ASSERT_TRUE(o.ok()) << name << ": " << o.status().message();
    EXPECT_EQ(o->collective, PeerPattern::AllToAllv);
    EXPECT_EQ(benchCollectiveName(o->collective), "alltoallv");
  }
  // The collectives keep their names; a Collective and the BenchCollective holding it compare equal.
  EXPECT_EQ(parse({"all_to_all"})->collective, Collective::AllToAll);
  EXPECT_EQ(benchCollectiveName(Collective::ReduceScatter), "reducescatter");
  EXPECT_NE(BenchCollective(Collective::AllToAll), BenchCollective(PeerPattern::AllToAllv));
  EXPECT_TRUE(checksInPlace(Collective::AllToAll));
  EXPECT_FALSE(checksInPlace(PeerPattern::SendRecv));
  EXPECT_FALSE(checksInPlace(PeerPattern::AllToAllv));
  EXPECT_NE(errorOf({"alltoallw"}).find("sendrecv or alltoallv"), std::string::npos);
  // --help defines both.
  const std::string usage = benchUsage("tuccl-bench");
  EXPECT_NE(usage.find("sendrecv   nccl-tests' sendrecv_perf"), std::string::npos) << usage;
  EXPECT_NE(usage.find("(i + j) % n"), std::string::npos) << usage;
  EXPECT_NE(usage.find("#wrong N/A"), std::string::npos) << usage;
}

TEST(CollectiveCounts, PeerPatterns) {
  // sendrecv (nccl-tests' SendRecvGetCollByteCount): count = bytes / size on both sides, no offsets.
  CollectiveCounts sr = collectiveCounts(PeerPattern::SendRecv, 1 << 20, 4, 4);
  EXPECT_EQ(sr.send, 262144u);
  EXPECT_EQ(sr.recv, 262144u);
  EXPECT_EQ(sr.param, 262144u);
  EXPECT_EQ(sr.sendInPlaceOffset, 0u);
  EXPECT_EQ(sr.recvInPlaceOffset, 0u);
  EXPECT_EQ(sr.rowBytes(4), 1u << 20);
  // alltoallv: alltoall's.
  for (auto [bytes, n] : {std::pair{1 << 20, 4}, std::pair{100, 3}, std::pair{4, 8}}) {
    CollectiveCounts v = collectiveCounts(PeerPattern::AllToAllv, bytes, 4, n);
    CollectiveCounts a = collectiveCounts(Collective::AllToAll, bytes, 4, n);
    EXPECT_EQ(v.send, a.send);
    EXPECT_EQ(v.recv, a.recv);
    EXPECT_EQ(v.param, a.param);
    EXPECT_EQ(v.sendInPlaceOffset, 0u);
    EXPECT_EQ(v.recvInPlaceOffset, 0u);
  }
}

// Every rank sends and receives n × block, like alltoall; what ranks i and j exchange is the same
// both ways and differs from pair to pair.
TEST(AllToAllvLayout, RowsAndColumnsSumToAllToAllsAndPairsDiffer) {
  for (int32_t n : {1, 2, 3, 4, 7, 8, 64}) {
    for (uint64_t block : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{1000}, uint64_t{1} << 38}) {
      for (int32_t i = 0; i < n; ++i) {
        uint64_t row = 0, column = 0;
        for (int32_t j = 0; j < n; ++j) {
          row += allToAllvPairCount(block, n, i, j);
          column += allToAllvPairCount(block, n, j, i);
          EXPECT_EQ(allToAllvPairCount(block, n, i, j), allToAllvPairCount(block, n, j, i));
          EXPECT_LE(allToAllvPairCount(block, n, i, j), 2 * block);
        }
        EXPECT_EQ(row, block * n) << "n " << n << " block " << block << " rank " << i;
        EXPECT_EQ(column, block * n) << "n " << n << " block " << block << " rank " << i;
        const PeerLayout layout = allToAllvLayout(block, n, i);
        ASSERT_EQ(layout.sendCounts.size(), static_cast<size_t>(n));
        size_t at = 0;
        for (int32_t j = 0; j < n; ++j) {
          EXPECT_EQ(layout.sendCounts[j], allToAllvPairCount(block, n, i, j));
          EXPECT_EQ(layout.sendDispls[j], at);
          at += layout.sendCounts[j];
        }
        EXPECT_EQ(layout.recvCounts, layout.sendCounts);
        EXPECT_EQ(layout.recvDispls, layout.sendDispls);
      }
    }
  }
  // 4 ranks, 1000 per pair in alltoall: 400, 800, 1200, 1600 by (i + j) % 4.
  EXPECT_EQ(allToAllvPairCount(1000, 4, 0, 0), 400u);
  EXPECT_EQ(allToAllvPairCount(1000, 4, 0, 1), 800u);
  EXPECT_EQ(allToAllvPairCount(1000, 4, 1, 1), 1200u);
  EXPECT_EQ(allToAllvPairCount(1000, 4, 3, 0), 1600u);
  EXPECT_EQ(allToAllvPairCount(1000, 4, 2, 2), 400u);
}

TEST(Bandwidths, PeerPatterns) {
  const uint64_t floats = 250000000;  // 1e9 bytes in 1 s
  const Bandwidths sr = bandwidths(PeerPattern::SendRecv, floats, 4, 4, 1.0);
  EXPECT_DOUBLE_EQ(sr.algGBps, 1.0);
  EXPECT_DOUBLE_EQ(sr.busGBps, 1.0);  // factor 1 (nccl-tests' SendRecvGetBw)
  const Bandwidths v = bandwidths(PeerPattern::AllToAllv, floats / 4, 4, 4, 1.0);
  EXPECT_DOUBLE_EQ(v.algGBps, 1.0);
  EXPECT_DOUBLE_EQ(v.busGBps, 0.75);  // alltoall's (n-1)/n
}

TEST(Bandwidths, BusFactors) {
  // 1e9 bytes in 1 s = 1 GB/s of algbw; busbw by nccl-tests' factors, 4 ranks.
  const uint64_t floats = 250000000;
  Bandwidths ar = bandwidths(Collective::AllReduce, floats, 4, 4, 1.0);
  EXPECT_DOUBLE_EQ(ar.algGBps, 1.0);
  EXPECT_DOUBLE_EQ(ar.busGBps, 1.5);
  EXPECT_DOUBLE_EQ(bandwidths(Collective::Broadcast, floats, 4, 4, 2.0).busGBps, 0.5);
  EXPECT_DOUBLE_EQ(bandwidths(Collective::Reduce, floats, 4, 4, 1.0).busGBps, 1.0);
  // AllGather, ReduceScatter and AllToAll count n × the per-rank count.
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll}) {
    Bandwidths bw = bandwidths(c, floats / 4, 4, 4, 1.0);
    EXPECT_DOUBLE_EQ(bw.algGBps, 1.0) << collectiveName(c);
    EXPECT_DOUBLE_EQ(bw.busGBps, 0.75) << collectiveName(c);
  }
  EXPECT_DOUBLE_EQ(bandwidths(Collective::AllReduce, floats, 4, 1, 1.0).busGBps, 0.0);
  EXPECT_DOUBLE_EQ(bandwidths(Collective::AllReduce, floats, 4, 4, 0.0).algGBps, 0.0);
}

TEST(BenchOutput, HeaderLinesMatchNcclTests) {
  Expected<BenchOptions> o = parse({"allreduce", "-b", "8", "-e", "128M", "-f", "2"});
  EXPECT_EQ(formatRunHeader(*o),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg "
            "iters: 1 "
            "validation: 1 graph: 0\n#\n");
  o = parse({"allreduce", "-z", "1"});
  EXPECT_NE(formatRunHeader(*o).find("step: 1048576(bytes)"), std::string::npos);
  EXPECT_NE(
      formatRunHeader(*o).find("# Blocking Enabled: wait for completion and barrier after each collective"),
      std::string::npos);
  const std::string header = formatColumnHeader();
  EXPECT_NE(header.find(
                "\n#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                "time   algbw   busbw #wrong\n"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(
                "\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
                "(us)  (GB/s)  (GB/s)       \n"),
            std::string::npos)
      << header;
  EXPECT_TRUE(
      header.starts_with("#                                                              out-of-place"));
  RankInfo rank{3, 4242, "node1", 0, "cpu", "Xeon"};
  EXPECT_EQ(formatDevices(std::span(&rank, 1)),
            "# Using devices\n#  Rank  3 Group  0 Pid   4242 on      node1 device  0 [cpu] Xeon\n#\n");
}

TEST(BenchOutput, RowsMatchNcclTests) {
  EXPECT_EQ(formatRowStart(8, 2, DataType::Float32, ReduceOp::Sum, -1),
            "           8             2     float     sum      -1");
  EXPECT_EQ(formatRowStart(1024, 64, DataType::BFloat16, std::nullopt, 3),
            "        1024            64  bfloat16    none       3");
  EXPECT_EQ(formatTime(10.534), "  10.53");
  EXPECT_EQ(formatTime(150.26), "  150.3");
  EXPECT_EQ(formatTime(12345.6), "  12346");
  EXPECT_EQ(formatHalf(10.534, {0.001, 0.0015}, 0), "    10.53    0.00    0.00      0");
  EXPECT_EQ(formatHalf(2048.5, {65.5, 98.25}, 12), "   2048.5   65.50   98.25     12");
  EXPECT_EQ(formatHalf(2048.5, {65.5, 98.25}, std::nullopt), "   2048.5   65.50   98.25    N/A");
}

TEST(BenchOutput, FooterSumsWrongAndAveragesBusBandwidth) {
  BenchSummary summary;
  summary.add(1.0, 0);
  summary.add(2.0, std::nullopt);
  summary.add(3.0, 0);
  EXPECT_EQ(summary.formatFooter(), "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 2 \n#\n");
  summary.add(6.0, 5);
  EXPECT_EQ(summary.wrong(), 5);
  EXPECT_EQ(summary.formatFooter(), "# Out of bounds values : 5 FAILED\n# Avg bus bandwidth    : 3 \n#\n");
}

// The tuner's nccl-tests reader (tune/nccl_tests_output.h) reads what the benchmark prints.
TEST(BenchOutput, TheTunersParserReadsIt) {
  Expected<BenchOptions> o = parse({"allgather", "-b", "1K", "-e", "4K", "-f", "2"});
  BenchSummary summary;
  std::string text = formatRunHeader(*o) + formatColumnHeader();
  for (uint64_t bytes : benchSizes(*o)) {
    const CollectiveCounts c = collectiveCounts(o->collective, bytes, 4, 4);
    const Bandwidths bw = bandwidths(o->collective, c.param, 4, 4, 20e-6);
    text += formatRowStart(c.rowBytes(4), c.param, DataType::Float32, std::nullopt, -1) +
            formatHalf(20, bw, 0) + formatHalf(20, bw, 0) + "\n";
    summary.add(bw.busGBps, 0);
    summary.add(bw.busGBps, 0);
  }
  text += summary.formatFooter();
  NcclTestsOutput parsed = parseNcclTestsOutput(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  ASSERT_EQ(parsed.rows.size(), 3u);
  EXPECT_EQ(parsed.rows[2].bytes, 4096u);
  EXPECT_EQ(parsed.rows[2].count, 256u);
  EXPECT_EQ(parsed.rows[2].type, "float");
  EXPECT_DOUBLE_EQ(parsed.rows[2].outOfPlace.timeUs, 20);
  EXPECT_NEAR(parsed.rows[2].inPlace.busBwGBps, 0.15, 0.005);
  EXPECT_EQ(parsed.rows[0].inPlace.wrong, 0);
  ASSERT_TRUE(parsed.avgBusBwGBps.has_value());
  EXPECT_NEAR(*parsed.avgBusBwGBps, summary.averageBusGBps(), 1e-4);
}

// ---- Check data ------------------------------------------------------------------------------------

/// Runs `call` on the host from every rank's bench input (the collective's reference) and returns
/// every rank's output as a correct implementation leaves it (unspecified outputs poisoned).
std::vector<std::vector<unsigned char>> correctOutputs(const CollectiveCall& call, uint64_t seed) {
  const int64_t size = dataTypeSize(call.dataType);
  std::vector<std::vector<double>> inputs(call.nRanks);
  for (int32_t q = 0; q < call.nRanks; ++q) {
    std::vector<unsigned char> bytes(inputElements(call) * size);
    fillBenchInput(call, q, seed, bytes.data());
    for (int64_t i = 0; i < inputElements(call); ++i)
      inputs[q].push_back(readElement(call.dataType, &bytes[i * size]));
  }
  Expected<RankOutputs> reference = referenceOutputs(call, inputs);
  EXPECT_TRUE(reference.ok());
  std::vector<std::vector<unsigned char>> outputs;
  for (int32_t r = 0; r < call.nRanks; ++r) {
    std::vector<unsigned char>& out = outputs.emplace_back(outputElements(call) * size, 0xA5);
    if (!(*reference)[r]) continue;
    for (size_t i = 0; i < (*reference)[r]->size(); ++i)
      writeElement(call.dataType, &out[i * size], (*(*reference)[r])[i]);
  }
  return outputs;
}

TEST(BenchCheck, CorrectOutputsHaveNoWrongElementForEveryCollectiveTypeAndOp) {
  const DataType types[] = {DataType::Uint8,   DataType::Int32,   DataType::Int64,    DataType::Float16,
                            DataType::Float32, DataType::Float64, DataType::BFloat16, DataType::Int8,
                            DataType::Uint32,  DataType::Uint64};
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg};
  for (int c = 0; c < kCollectives; ++c) {
    for (DataType type : types) {
      for (ReduceOp op : ops) {
        for (int32_t nRanks : {1, 3, 4, 16}) {
          CollectiveCall call{static_cast<Collective>(c), nRanks, nRanks - 1, type, op, 240, false};
          const std::vector<std::vector<unsigned char>> outputs = correctOutputs(call, 7);
          for (int32_t r = 0; r < nRanks; ++r) {
            ASSERT_EQ(countWrongElements(call, r, 7, outputs[r].data()), 0)
                << collectiveName(call.collective) << " " << dataTypeName(type) << " " << reduceOpName(op)
                << " n " << nRanks << " rank " << r;
          }
        }
      }
    }
  }
}

// The patterns' references, from the sender's input: what arrives from the right sender at the
// right place checks clean in every type, anything else is counted element by element.
TEST(BenchCheck, PeerPatternsCompareWhatArrivedWithTheSendersInput) {
  const DataType types[] = {DataType::Uint8,   DataType::Int32,   DataType::Int64,   DataType::Float16,
                            DataType::Float32, DataType::Float64, DataType::BFloat16};
  for (PeerPattern pattern : {PeerPattern::SendRecv, PeerPattern::AllToAllv}) {
    for (DataType type : types) {
      for (int32_t n : {1, 3, 4}) {
        CollectiveCall call{Collective::AllReduce, n, -1, type, ReduceOp::Prod, 333, false};
        const int64_t size = dataTypeSize(type);
        const auto elements = static_cast<size_t>(peerElements(pattern, call));
        std::vector<std::vector<unsigned char>> inputs(n, std::vector<unsigned char>(elements * size));
        for (int32_t q = 0; q < n; ++q) fillBenchInput(pattern, call, q, 9, inputs[q].data());
        for (int32_t r = 0; r < n; ++r) {
          std::vector<unsigned char> out(elements * size, 0xA5);
          if (pattern == PeerPattern::SendRecv) {
            out = inputs[(r - 1 + n) % n];
          } else {
            const PeerLayout mine = allToAllvLayout(333, n, r);
            for (int32_t q = 0; q < n; ++q) {
              const PeerLayout theirs = allToAllvLayout(333, n, q);
              std::memcpy(&out[mine.recvDispls[q] * size], &inputs[q][theirs.sendDispls[r] * size],
                          mine.recvCounts[q] * size);
            }
          }
          ASSERT_EQ(countWrongElements(pattern, call, r, 9, out.data()), 0)
              << benchCollectiveName(pattern) << " " << dataTypeName(type) << " n " << n << " rank " << r;
          // Another iteration's data, or this rank's own input (but its block to itself), is wrong
          // almost everywhere.
          EXPECT_GT(countWrongElements(pattern, call, r, 10, out.data()), static_cast<int64_t>(elements / 2));
          if (n > 1) {
            EXPECT_GT(countWrongElements(pattern, call, r, 9, inputs[r].data()),
                      static_cast<int64_t>(elements / 4))
                << benchCollectiveName(pattern) << " " << dataTypeName(type) << " n " << n;
          }
          writeElement(type, &out[(elements - 1) * size], 100);
          EXPECT_EQ(countWrongElements(pattern, call, r, 9, out.data()), 1);
        }
      }
    }
  }
  // A pattern's inputs are the plain values even with -o prod given: bytes, not reductions.
  CollectiveCall call{Collective::AllReduce, 4, -1, DataType::Float32, ReduceOp::Prod, 1000, false};
  std::vector<float> input(1000);
  fillBenchInput(PeerPattern::SendRecv, call, 1, 3, input.data());
  EXPECT_GT(std::count_if(input.begin(), input.end(), [](float x) { return x > 3 || x < -3; }), 300);
}

TEST(BenchCheck, WrongElementsAreCounted) {
  CollectiveCall call{Collective::AllReduce, 4, -1, DataType::Float32, ReduceOp::Sum, 200000, false};
  std::vector<unsigned char> out = correctOutputs(call, 1)[2];
  std::mt19937 random(5);
  for (int k = 0; k < 3; ++k) {
    const size_t i = random() % 200000;
    writeElement(call.dataType, out.data() + i * 4, readElement(call.dataType, out.data() + i * 4) + 0.5);
  }
  EXPECT_EQ(countWrongElements(call, 2, 1, out.data()), 3);
  // Another iteration's data differs almost everywhere.
  EXPECT_GT(countWrongElements(call, 2, 2, out.data()), 150000);
  // A NaN never matches.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(out.data(), &nan, 4);
  EXPECT_GE(countWrongElements(call, 2, 1, out.data()), 4);
}

TEST(BenchCheck, OnlyTheReduceRootIsChecked) {
  CollectiveCall call{Collective::Reduce, 4, 1, DataType::Int32, ReduceOp::Sum, 100, false};
  std::vector<unsigned char> garbage(400, 0xA5);
  EXPECT_EQ(countWrongElements(call, 0, 0, garbage.data()), 0);
  EXPECT_GT(countWrongElements(call, 1, 0, garbage.data()), 0);
}

TEST(BenchCheck, InputsDifferByRankAndIteration) {
  CollectiveCall call{Collective::AllGather, 4, -1, DataType::Int32, ReduceOp::Sum, 1000, false};
  int same = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += benchInputValue(call, 0, i, 0) == benchInputValue(call, 1, i, 0);
    same += benchInputValue(call, 0, i, 0) == benchInputValue(call, 0, i, 1);
  }
  EXPECT_LT(same, 300);  // 1/17 expected by chance for each
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_GE(benchInputValue(call, 2, i, 3), -8);
    EXPECT_LE(benchInputValue(call, 2, i, 3), 8);
  }
}

}  // namespace
