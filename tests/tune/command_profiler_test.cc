#include "tune/command_profiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "tune/nccl_tests_output.h"

namespace tuccl {
namespace {

std::string dataPath(const std::string& name) { return std::string(TUCCL_SOURCE_DIR) + "/tests/data/tune/" + name; }

std::string readData(const std::string& name) {
  std::ifstream in(dataPath(name));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SearchSpace space() { return defaultSearchSpace({"ring"}, {"hpds"}); }

Configuration simple4x256() {
  SearchSpace s = space();
  return s.configurationFromJson({{"protocol", "Simple"}, {"nChannels", 4},      {"nThreads", 256},
                                  {"chunkBytes", 524288}, {"algorithm", "ring"}, {"scheduler", "hpds"}});
}

TEST(NcclTestsOutput, ParsesCurrentFormat) {
  NcclTestsOutput out = parseNcclTestsOutput(readData("all_reduce_perf_8gpu.txt"));
  ASSERT_TRUE(out.ok()) << out.error;
  ASSERT_EQ(out.rows.size(), 1u);
  const NcclTestsRow& row = out.rows[0];
  EXPECT_EQ(row.bytes, 1048576u);
  EXPECT_EQ(row.count, 262144u);
  EXPECT_EQ(row.type, "float");
  EXPECT_DOUBLE_EQ(row.outOfPlace.timeUs, 30.41);
  EXPECT_DOUBLE_EQ(row.outOfPlace.algBwGBps, 34.48);
  EXPECT_DOUBLE_EQ(row.outOfPlace.busBwGBps, 60.34);
  EXPECT_EQ(row.outOfPlace.wrong, 0);
  EXPECT_DOUBLE_EQ(row.inPlace.busBwGBps, 61.43);
  ASSERT_TRUE(out.avgBusBwGBps);
  EXPECT_DOUBLE_EQ(*out.avgBusBwGBps, 60.886);
}

TEST(NcclTestsOutput, ParsesOldFormatWithoutRedopAndRoot) {
  NcclTestsOutput out = parseNcclTestsOutput(readData("all_gather_perf_old.txt"));
  ASSERT_TRUE(out.ok()) << out.error;
  ASSERT_EQ(out.rows.size(), 3u);
  EXPECT_EQ(out.rows[1].bytes, 131072u);
  EXPECT_DOUBLE_EQ(out.rows[1].outOfPlace.timeUs, 21.07);
  EXPECT_FALSE(out.rows[1].outOfPlace.wrong);  // N/A
  EXPECT_EQ(findNcclTestsRow(out, 262144)->outOfPlace.busBwGBps, 7.04);
  EXPECT_EQ(findNcclTestsRow(out, 1000), nullptr);  // several rows, none of that size
}

TEST(NcclTestsOutput, ReportsMalformedRowsAndSkipsLogs) {
  NcclTestsOutput bad = parseNcclTestsOutput(readData("garbage.txt"));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("line 2: malformed nccl-tests result row"), std::string::npos) << bad.error;
  NcclTestsOutput logs = parseNcclTestsOutput(readData("nccl_failure.txt"));
  EXPECT_TRUE(logs.ok());
  EXPECT_TRUE(logs.rows.empty());
  EXPECT_TRUE(parseNcclTestsOutput("").rows.empty());
}

// One log per generation of nccl-tests' output (ecosystem-formats.md (c)), each a 1 MiB row with
// out-of-place time 30.41 us, busbw 60.34 and in-place busbw 61.43.
TEST(NcclTestsOutput, ParsesEveryGeneration) {
  struct Log {
    const char* name;
    std::string text;
    bool maxError;  ///< the check column is an older maximum deviation
  };
  const Log logs[] = {
      {"2017: res column, | separators",
       "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n"
       "#                                       out-of-place                    in-place\n"
       "#  bytes    N    type      op |  time  algbw  busbw   res |  time  algbw  busbw   res\n"
       "  1048576  262144  float   sum |  30.41  34.48  60.34  1e-07 |  29.87  35.10  61.43  1e-07\n",
       true},
      {"2019-2022 AllReduce: redop, error as %5.0le",
       "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
       "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
       "     1048576        262144   float     sum    30.41   34.48   60.34  0e+00    29.87   35.10   61.43  0e+00\n",
       true},
      {"2019-2022 Broadcast: root only, no header",
       "     1048576        262144   float       0    30.41   34.48   60.34  2e+00    29.87   35.10   61.43  0e+00\n",
       true},
      {"2019-2022 Reduce: redop and root",
       "#       size         count    type   redop    root     time   algbw   busbw  error     time   algbw   busbw  error\n"
       "     1048576        262144   float     sum       0    30.41   34.48   60.34  0e+00    29.87   35.10   61.43  0e+00\n",
       true},
      {"2022-08 on: redop root #wrong, timestamps (-S 1)",
       "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong  timestamp\n"
       "     1048576        262144     float     sum      -1    30.41   34.48   60.34      0    29.87   35.10   61.43      0  2025-03-01 12:00:07\n",
       false},
      {"2026: per-iteration columns (-I 1)",
       "#       size         count      type   redop    root     time   algbw   busbw #wrong   i_min   i_max   i_p99  i_cv%     time   algbw   busbw #wrong   i_min   i_max   i_p99  i_cv%\n"
       "     1048576        262144     float     sum      -1    30.41   34.48   60.34      0   29.90   31.20   31.10   1.20    29.87   35.10   61.43      0   29.50   30.40   30.30   0.90\n",
       false},
      {"mpirun --tag-output",
       "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n"
       "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
       "[1,0]<stdout>:     1048576        262144     float     sum      -1    30.41   34.48   60.34      0    29.87   35.10   61.43      0\n"
       "[1,0]<stdout>:# Avg bus bandwidth    : 60.885\n",
       false},
      {"srun --label",
       "0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
       "0:      1048576        262144     float     sum      -1    30.41   34.48   60.34      0    29.87   35.10   61.43      0\n",
       false},
  };
  for (const Log& log : logs) {
    SCOPED_TRACE(log.name);
    NcclTestsOutput out = parseNcclTestsOutput(log.text);
    ASSERT_TRUE(out.ok()) << out.error;
    ASSERT_EQ(out.rows.size(), 1u);
    const NcclTestsRow& row = out.rows[0];
    EXPECT_EQ(row.bytes, 1048576u);
    EXPECT_EQ(row.count, 262144u);
    EXPECT_EQ(row.type, "float");
    EXPECT_DOUBLE_EQ(row.outOfPlace.timeUs, 30.41);
    EXPECT_DOUBLE_EQ(row.outOfPlace.busBwGBps, 60.34);
    EXPECT_DOUBLE_EQ(row.inPlace.busBwGBps, 61.43);
    EXPECT_EQ(row.outOfPlace.maxError.has_value(), log.maxError);
    EXPECT_EQ(row.outOfPlace.wrong.has_value(), !log.maxError);
    if (!log.maxError) {
      EXPECT_EQ(*row.outOfPlace.wrong, 0);
    }
  }
  // A large #wrong (%6g) stays a count; a deviation is not a count.
  NcclTestsOutput many = parseNcclTestsOutput(
      "  1048576  262144  float  sum  -1  30.41  34.48  60.34  1e+06  29.87  35.10  61.43  12\n");
  ASSERT_TRUE(many.ok()) << many.error;
  EXPECT_EQ(many.rows[0].outOfPlace.wrong, 1000000);
  EXPECT_EQ(many.rows[0].inPlace.wrong, 12);
  NcclTestsOutput broadcast = parseNcclTestsOutput(logs[2].text);
  EXPECT_DOUBLE_EQ(*broadcast.rows[0].outOfPlace.maxError, 2.0);
  EXPECT_FALSE(broadcast.rows[0].outOfPlace.wrong);
}

TEST(CommandProfiler, EnvironmentOfAConfiguration) {
  SearchSpace s = space();
  auto env = ncclEnvironmentFor(s, simple4x256());
  std::vector<std::pair<std::string, std::string>> expected = {
      {"NCCL_PROTO", "Simple"},         {"NCCL_ALGO", "ring"},  {"NCCL_MIN_NCHANNELS", "4"},
      {"NCCL_MAX_NCHANNELS", "4"},      {"NCCL_NTHREADS", "256"}, {"NCCL_BUFFSIZE", "1048576"}};
  EXPECT_EQ(env, expected);  // a 512 KiB ring chunk: 4 of NCCL_STEPS = 8 steps of a 1 MiB buffer
  Configuration ll128 = simple4x256();
  ll128.index[s.dimensionIndex("protocol")] = 1;
  env = ncclEnvironmentFor(s, ll128);
  EXPECT_EQ(env[4].first, "NCCL_LL128_NTHREADS");
  EXPECT_EQ(env[5].first, "NCCL_LL128_BUFFSIZE");
  // A TuCCL algorithm program is not an NCCL_ALGO value.
  SearchSpace tuccl = defaultSearchSpace({"hm_allreduce"}, {"hpds"});
  Configuration c = tuccl.configurationFromJson({{"protocol", "LL"}, {"nChannels", 1}, {"nThreads", 64},
                                                 {"chunkBytes", 256}, {"algorithm", "hm_allreduce"},
                                                 {"scheduler", "hpds"}});
  for (const auto& [k, v] : ncclEnvironmentFor(tuccl, c)) EXPECT_NE(k, "NCCL_ALGO");
  // libtuccl's variables: its algorithm, protocol, channels and slice, each once; the caller's
  // table and runtime phase cleared (an empty variable is unset to libtuccl); the device unless set.
  unsetenv("TUCCL_DEVICE");
  const std::vector<std::pair<std::string, std::string>> libtuccl = {
      {"TUCCL_ALGO", "hm_allreduce"}, {"TUCCL_PROTO", "LL"}, {"TUCCL_NCHANNELS", "1"}, {"TUCCL_CHUNK_SIZE", "256"},
      {"TUCCL_TUNER_TABLE", ""},      {"TUCCL_ADAPT", "0"},  {"TUCCL_DEVICE", "cpu"}};
  EXPECT_EQ(tucclEnvironmentFor(tuccl, c), libtuccl);
  // The default: nothing set.
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"TUCCL_ALGO", ""},        {"TUCCL_PROTO", ""}, {"TUCCL_NCHANNELS", ""}, {"TUCCL_CHUNK_SIZE", ""},
      {"TUCCL_TUNER_TABLE", ""}, {"TUCCL_ADAPT", "0"}, {"TUCCL_DEVICE", "cpu"}};
  EXPECT_EQ(tucclDefaultEnvironment(), defaults);
  setenv("TUCCL_DEVICE", "cuda", 1);
  EXPECT_EQ(tucclDefaultEnvironment().size(), defaults.size() - 1);
  unsetenv("TUCCL_DEVICE");
}

TEST(CommandProfiler, TheMeasuredChunkIsTheServedChunkWithinNcclsBuffers) {
  // NCCL's chunk = BUFFSIZE / NCCL_STEPS × chunkSteps of data.
  EXPECT_EQ(ncclBufferForChunk(Protocol::Simple, /*ring=*/true, 2u << 20), 4u << 20);  // NCCL's default
  EXPECT_EQ(ncclBufferForChunk(Protocol::Simple, /*ring=*/false, 512u << 10), 4u << 20);
  EXPECT_EQ(ncclBufferForChunk(Protocol::LL, true, 32u << 10), 512u << 10);              // NCCL's default
  EXPECT_EQ(ncclBufferForChunk(Protocol::LL128, true, 576000), 4915200u);                // NCCL's default
  // The search space of the command profiler: no 256 B buffer, nothing NCCL would clamp.
  SearchSpace s(space().dimensions(), ncclChunkConstraints(/*ring=*/true));
  const size_t chunk = s.dimensionIndex("chunkBytes");
  size_t valid = 0;
  for (const Configuration& c : s.enumerateValid()) {
    ++valid;
    const std::optional<Protocol> protocol = protocolOf(s, c);
    ASSERT_TRUE(protocol);
    const auto bytes = static_cast<uint64_t>(s.dimension(chunk).levels[c.index[chunk]]);
    const uint64_t buffer = ncclBufferForChunk(*protocol, true, bytes);
    const uint64_t defaults[] = {512u << 10, 4915200, 4u << 20};
    EXPECT_LE(buffer, defaults[static_cast<int>(*protocol)]) << bytes;
    EXPECT_GE(buffer * 64, defaults[static_cast<int>(*protocol)]) << bytes;
    const auto env = ncclEnvironmentFor(s, c);
    EXPECT_EQ(env.back().second, std::to_string(buffer));
  }
  EXPECT_GT(valid, 0u);
}

TEST(CommandProfiler, ExpandsTemplates) {
  std::map<std::string, std::string> v = {{"bytes", "1024"}, {"iters", "9"}};
  EXPECT_EQ(expandCommandTemplate("perf -b {bytes} -e {bytes} -n {iters}", v), "perf -b 1024 -e 1024 -n 9");
  EXPECT_THROW(expandCommandTemplate("perf {nope}", v), std::invalid_argument);
  EXPECT_THROW(expandCommandTemplate("perf {bytes", v), std::invalid_argument);
}

// The profiled command sees the configuration's environment and the substituted size.
TEST(CommandProfiler, MeasuresThroughACommand) {
  SearchSpace s = space();
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.commandTemplate = "test \"$NCCL_NTHREADS\" = 256 && test \"$NCCL_MAX_NCHANNELS\" = 4 && test {iters} = 27 && "
                      "test {protocol} = Simple && test {size} = 1048576 && cat '" +
                      dataPath("all_reduce_perf_8gpu.txt") + "'";
  CommandProfiler profiler(o);
  Measurement m = profiler.profile(s, simple4x256(), 27);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_DOUBLE_EQ(m.timeUs, 30.41);
  EXPECT_DOUBLE_EQ(m.busBwGBps, 60.34);
  EXPECT_EQ(m.cost, 27);
  o.inPlace = true;
  EXPECT_DOUBLE_EQ(CommandProfiler(o).profile(s, simple4x256(), 27).timeUs, 29.87);
}

// A shell command printing one nccl-tests row per {reps} cycle, of the given out-of-place times.
std::string rowsCommand(const std::vector<std::string>& timesUs) {
  std::string command = "( echo '#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong'";
  for (const std::string& t : timesUs)
    command += "; echo '     1048576        262144     float     sum      -1    " + t + "   10.00   20.00      0    " + t +
               "   10.00   20.00      0'";
  return command + " )";
}

// With {reps}, the resource is repetitions: one result row each, their median the time, with the
// median's interval and the spread; {iters} is the iterations of one repetition.
TEST(CommandProfiler, RepetitionsAreSamples) {
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.iterations = 7;
  o.commandTemplate = "test {reps} = 5 && test {iters} = 7 && " + rowsCommand({"30", "10", "50", "20", "40"});
  Measurement m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_EQ(m.samplesUs, (std::vector<double>{30, 10, 50, 20, 40}));
  EXPECT_DOUBLE_EQ(m.timeUs, 30);
  EXPECT_DOUBLE_EQ(m.spreadUs, 20);  // 40 - 20
  EXPECT_LT(m.lowUs, 30);
  EXPECT_GT(m.highUs, 30);
  EXPECT_NEAR(m.highUs - 30, 1.58 * 20 / std::sqrt(5.0), 1e-9);  // McGill's notch
  EXPECT_DOUBLE_EQ(m.busBwGBps, 20.0 * 30 / 30);  // the rows' busbw x time (on average), at the median
  EXPECT_EQ(m.cost, 5);
  // Rows missing: the command did not run what {reps} asked.
  Measurement short3 = CommandProfiler(o).profile(space(), simple4x256(), 3);
  EXPECT_FALSE(short3.ok);
  o.commandTemplate = rowsCommand({"30", "10", "50"}) + " # {reps}";
  short3 = CommandProfiler(o).profile(space(), simple4x256(), 4);
  EXPECT_FALSE(short3.ok);
  EXPECT_NE(short3.error.find("3 result rows for 1048576 bytes where {reps} asked for 4"), std::string::npos)
      << short3.error;
}

// The default runs with no configuration set: not the configuration's variables, only the
// default environment; a template naming a configuration value cannot run it.
TEST(CommandProfiler, TheDefaultRunsWithNothingSet) {
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.environment = {{"FROM_CALLER", "1"}};
  o.defaultEnvironment = [] { return std::vector<std::pair<std::string, std::string>>{{"ONLY_DEFAULT", "yes"}}; };
  o.commandTemplate = "test -z \"$NCCL_NTHREADS\" && test \"$ONLY_DEFAULT\" = yes && test \"$FROM_CALLER\" = 1 && " +
                      rowsCommand({"12", "11", "13"}) + " # {reps}";
  CommandProfiler profiler(o);
  EXPECT_TRUE(profiler.hasDefault());
  Measurement m = profiler.profileDefault(3);
  ASSERT_TRUE(m.ok) << m.error;
  EXPECT_DOUBLE_EQ(m.timeUs, 12);
  EXPECT_EQ(m.samplesUs.size(), 3u);
  // A configuration's run does not get the default's environment.
  EXPECT_FALSE(profiler.profile(space(), simple4x256(), 3).ok);
  o.commandTemplate = "perf -p {protocol} # {reps}";
  m = CommandProfiler(o).profileDefault(3);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("the default configuration cannot be measured"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("{protocol}"), std::string::npos) << m.error;
}

TEST(CommandProfiler, FailingCommandIsAClearError) {
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.commandTemplate = "cat '" + dataPath("nccl_failure.txt") + "'; exit 3";
  Measurement m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("exited with status 3"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("Invalid NCCL_LL128_NTHREADS"), std::string::npos) << m.error;
  EXPECT_EQ(m.cost, 5);

  o.commandTemplate = "kill -SEGV $$";
  m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("signal 11"), std::string::npos) << m.error;

  o.commandTemplate = "/nonexistent/all_reduce_perf -b {bytes}";
  m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("exited with status 127"), std::string::npos) << m.error;

  o.commandTemplate = "perf -n {warmup}";
  m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("unknown placeholder {warmup}"), std::string::npos) << m.error;
}

TEST(CommandProfiler, GarbageAndMissingRowsAreErrors) {
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.commandTemplate = "cat '" + dataPath("garbage.txt") + "'";
  Measurement m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("malformed nccl-tests result row"), std::string::npos) << m.error;

  o.commandTemplate = "echo 'hello, this is not nccl-tests'";
  m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("no nccl-tests result row for 1048576 bytes"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("hello, this is not nccl-tests"), std::string::npos) << m.error;

  o.commandTemplate = "cat '" + dataPath("all_reduce_perf_wrong.txt") + "'";
  m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("12 wrong elements"), std::string::npos) << m.error;
}

TEST(CommandProfiler, TimeoutKillsTheProcessGroup) {
  CommandProfilerOptions o;
  o.bytes = 1048576;
  o.timeoutSeconds = 0.3;
  o.commandTemplate = "echo started; sleep 30 & sleep 30";
  const auto start = std::chrono::steady_clock::now();
  Measurement m = CommandProfiler(o).profile(space(), simple4x256(), 5);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("timed out after 0.3 s"), std::string::npos) << m.error;
  EXPECT_NE(m.error.find("started"), std::string::npos) << m.error;
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace tuccl
