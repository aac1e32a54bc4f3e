// The tuning run as a library: request -> result -> LookupTable; compiled to an empty test program
// when the simulator is not built.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>

#include "table/table_io.h"
#include "tune/tuning_run.h"

namespace tuccl {
namespace {

namespace fs = std::filesystem;

fs::path freshDir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("tuning_run_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// 8 ranks on 2 nodes, two sizes, one scheduler, a small budget.
TuningRequest smallRequest(const fs::path& dir) {
  TuningRequest request;
  request.topology = "preset:resccl-a100:nodes=2,gpus=4";
  request.collectives = {Collective::AllReduce};
  request.sizes = *parseSizeGrid("64K:128K");
  request.schedulers = {"hpds"};
  request.budget = 400;
  request.seed = 3;
  request.examplesDir = std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms";
  request.logPath = (dir / "run.trials.jsonl").string();
  request.ncclChoice = false;  // the candidates' own results; NCCL's choice is tested on its own
  return request;
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Counts what the run reports.
struct CountingObserver : TuningObserver {
  size_t trials = 0;
  size_t done = 0;
  size_t candidateLists = 0;
  void candidates(Collective, const std::vector<AlgorithmCandidate>& list) override {
    candidateLists += !list.empty();
  }
  void trial(const TunedWorkload&, size_t, size_t total, const Trial&, double spent, double budget) override {
    ++trials;
    EXPECT_EQ(total, 2u);
    EXPECT_LE(spent, budget);
  }
  void workloadDone(const TunedWorkload& w, size_t index, size_t, double gridCost) override {
    EXPECT_EQ(index, done);
    EXPECT_TRUE(w.result.best.has_value());
    EXPECT_GT(gridCost, w.result.cost);
    ++done;
  }
};

TEST(TuningRun, NoEntryIsSlowerThanWhatNcclWouldDo) {
  const fs::path dir = freshDir("nccl_choice");
  TuningRequest request = smallRequest(dir);
  request.ncclChoice = true;
  request.sizes = *parseSizeGrid("1K:64M", 16);
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  const LookupTable table = tableFromResult(*result);
  ASSERT_EQ(table.entries.size(), result->ranges.size());
  for (size_t i = 0; i < result->ranges.size(); ++i) {
    const TunedRange& r = result->ranges[i];
    const TunedWorkload& w = result->workloads[r.workload];
    EXPECT_LE(r.timeUs, w.nccl.timeUs) << r.algorithm << " at " << w.bytes;
    EXPECT_LE(r.timeUs, w.exactUs) << r.algorithm << " at " << w.bytes;
    if (r.algorithm != kNcclOwnChoice) continue;
    // NCCL's own choice is what the plugin hands NCCL: its algorithm, protocol and channels.
    EXPECT_DOUBLE_EQ(r.timeUs, w.nccl.timeUs);
    const TableEntry& e = table.entries[i];
    ASSERT_EQ(e.choices.size(), 1u);
    EXPECT_EQ(e.choices[0].algorithm, w.nccl.algorithm);
    EXPECT_EQ(e.choices[0].protocol, w.nccl.protocol);
    EXPECT_EQ(e.nChannels, w.nccl.nChannels);
    EXPECT_NE(e.comment.find("NCCL's own choice"), std::string::npos) << e.comment;
  }
  // Without it, every entry is a candidate's.
  request.ncclChoice = false;
  request.logPath = (dir / "candidates.trials.jsonl").string();
  Expected<TuningResult> candidates = runTuning(request);
  ASSERT_TRUE(candidates) << candidates.status().toString();
  for (const TunedRange& r : candidates->ranges) EXPECT_NE(r.algorithm, kNcclOwnChoice);
}

TEST(TuningRun, RequestToResultToTable) {
  const fs::path dir = freshDir("table");
  CountingObserver observer;
  Expected<TuningResult> result = runTuning(smallRequest(dir), &observer);
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_EQ(result->nNodes, 2);
  EXPECT_EQ(result->nRanks, 8);
  ASSERT_EQ(result->workloads.size(), 2u);
  EXPECT_EQ(observer.done, 2u);
  EXPECT_EQ(observer.candidateLists, 1u);
  size_t trials = 0;
  for (const TunedWorkload& w : result->workloads) trials += w.result.trials.size();
  EXPECT_EQ(observer.trials, trials);
  ASSERT_FALSE(result->ranges.empty());
  // The ranges tile [0, inf) and account for every size's search.
  uint64_t next = 0;
  size_t rangeTrials = 0;
  for (const TunedRange& r : result->ranges) {
    EXPECT_EQ(r.sizes.minBytes, next);
    next = r.sizes.maxBytes == UINT64_MAX ? 0 : r.sizes.maxBytes + 1;
    EXPECT_TRUE(r.protocol.has_value());
    EXPECT_FALSE(r.program.empty());
    EXPECT_EQ(r.scheduler, "hpds");
    EXPECT_GT(r.timeUs, 0);
    rangeTrials += r.trials;
  }
  EXPECT_EQ(next, 0u);
  EXPECT_EQ(rangeTrials, trials);

  const LookupTable table = tableFromResult(*result);
  ASSERT_EQ(table.entries.size(), result->ranges.size());
  for (size_t i = 0; i < table.entries.size(); ++i) {
    const TableEntry& e = table.entries[i];
    const TunedRange& r = result->ranges[i];
    EXPECT_EQ(e.collective, Collective::AllReduce);
    EXPECT_EQ(e.nNodes, 2);
    EXPECT_EQ(e.nRanks, 8);
    EXPECT_TRUE(e.topology.empty());
    ASSERT_EQ(e.choices.size(), 1u);
    EXPECT_EQ(e.choices[0].protocol, r.protocol);
    // Only the rank-order ring is NCCL's RING; TuCCL's programs leave NCCL's algorithm free.
    EXPECT_EQ(e.choices[0].algorithm.has_value(), r.algorithm == "ring");
    EXPECT_EQ(e.chunkSize, r.chunkBytes);
    EXPECT_NE(e.comment.find("sketch " + r.sketch), std::string::npos) << e.comment;
    // The next best configuration groups (TuningRequest::groups = 3 by default), fastest first,
    // each a decision of its own.
    EXPECT_DOUBLE_EQ(e.timeUs, r.timeUs);
    EXPECT_EQ(e.groups, r.alternatives);
    EXPECT_FALSE(e.groups.empty()) << "the search measured more than one configuration";
    EXPECT_LE(e.groups.size(), 2u);
    const std::vector<ConfigGroup> groups = entryGroups(e);
    for (size_t a = 0; a < groups.size(); ++a) {
      if (a > 0) {
        EXPECT_GT(groups[a].timeUs, 0);
        if (a > 1) {
          EXPECT_LE(groups[a - 1].timeUs, groups[a].timeUs);
        }
      }
      for (size_t b = 0; b < a; ++b) {
        EXPECT_FALSE(groups[a].choice == groups[b].choice && groups[a].nChannels == groups[b].nChannels &&
                     groups[a].chunkSize == groups[b].chunkSize && groups[a].tucclAlgorithm == groups[b].tucclAlgorithm)
            << "groups " << b << " and " << a << " of entry " << i << " decide the same";
      }
    }
  }
  ASSERT_EQ(table.environment.size(), 1u);
  EXPECT_NE(table.description.find("8 ranks on 2 nodes"), std::string::npos);
  // What the file says is what was produced.
  const std::string json = writeTableJson(table);
  Expected<LookupTable> again = readTableJson(json, "t.json");
  ASSERT_TRUE(again) << again.status().toString();
  LookupTable expected = table;
  for (size_t i = 0; i < expected.entries.size(); ++i) expected.entries[i].origin = static_cast<uint32_t>(i);
  EXPECT_EQ(*again, expected);
  EXPECT_NE(json.find("\"metadata\""), std::string::npos);
}

TEST(TuningRun, SameSeedSameTableAndResumeFromACutLog) {
  const fs::path dir = freshDir("seed");
  TuningRequest first = smallRequest(dir);
  Expected<TuningResult> a = runTuning(first);
  ASSERT_TRUE(a) << a.status().toString();
  TuningRequest second = first;
  second.logPath = (dir / "other.trials.jsonl").string();
  Expected<TuningResult> b = runTuning(second);
  ASSERT_TRUE(b) << b.status().toString();
  EXPECT_EQ(writeTableJson(tableFromResult(*a)), writeTableJson(tableFromResult(*b)));
  EXPECT_EQ(readAll(first.logPath), readAll(second.logPath));

  // An existing log needs resume; a cut one resumes to the same table and log.
  Expected<TuningResult> refused = runTuning(first);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("--resume"), std::string::npos) << refused.status().message();
  const std::string log = readAll(first.logPath);
  TuningRequest cut = first;
  cut.logPath = (dir / "cut.trials.jsonl").string();
  cut.resume = true;
  std::ofstream(cut.logPath, std::ios::binary) << log.substr(0, log.find('\n', log.size() / 2) + 1);
  Expected<TuningResult> resumed = runTuning(cut);
  ASSERT_TRUE(resumed) << resumed.status().toString();
  EXPECT_GT(resumed->workloads.front().replayed, 0u);
  EXPECT_EQ(writeTableJson(tableFromResult(*resumed)), writeTableJson(tableFromResult(*a)));
  EXPECT_EQ(readAll(cut.logPath), log);
}

TEST(TuningRun, OneGroupKeepsOnlyTheWinner) {
  const fs::path dir = freshDir("one-group");
  TuningRequest request = smallRequest(dir);
  request.groups = 1;
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  for (const TableEntry& e : tableFromResult(*result).entries) EXPECT_TRUE(e.groups.empty());
}

TEST(TuningRun, SignatureKeysTheEntries) {
  const fs::path dir = freshDir("signature");
  TuningRequest request = smallRequest(dir);
  request.sizes = {65536};
  request.keyBySignature = true;
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  const LookupTable table = tableFromResult(*result);
  ASSERT_EQ(result->signature.size(), 16u);
  for (const TableEntry& e : table.entries) EXPECT_EQ(e.topology, result->signature);
  EXPECT_EQ(table.environment.at(0).topology, result->signature);
}

TEST(TuningRun, BadRequestsAreStatusesNamingTheProblem) {
  const fs::path dir = freshDir("bad");
  auto failure = [&](auto edit) {
    TuningRequest request = smallRequest(dir);
    edit(request);
    Expected<TuningResult> result = runTuning(request);
    EXPECT_FALSE(result);
    return result ? Status() : result.status();
  };
  Status status = failure([](TuningRequest& r) { r.collectives = {Collective::AllToAll}; });
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(status.message().find("'alltoall' cannot be tuned"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.schedulers = {"hpds", "fifo"}; });
  EXPECT_NE(status.message().find("unknown scheduler 'fifo'"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.method = "annealing"; });
  EXPECT_NE(status.message().find("annealing"), std::string::npos) << status.message();
  // This machine's ranks: the libtuccl profiler only, without a topology or a signature.
  status = failure([](TuningRequest& r) { r.ranks = 4; });
  EXPECT_NE(status.message().find("--ranks is for --profiler tuccl"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) {
    r.profiler = ProfilerKind::Tuccl;
    r.ranks = 4;
  });
  EXPECT_NE(status.message().find("give --topo or --ranks"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) {
    r.profiler = ProfilerKind::Tuccl;
    r.ranks = 4;
    r.topology.clear();
    r.keyBySignature = true;
  });
  EXPECT_NE(status.message().find("--ranks has none"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) {
    r.profiler = ProfilerKind::Tuccl;
    r.ranks = 300;
    r.topology.clear();
  });
  EXPECT_NE(status.message().find("--ranks must be in [1, 256]; got 300"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.confirmMinRounds = 1; });
  EXPECT_NE(status.message().find("--confirm-rounds MIN:MAX needs 2 <= MIN <= MAX <= 1000; got 1:12"),
            std::string::npos)
      << status.message();
  status = failure([](TuningRequest& r) { r.iterations = -1; });
  EXPECT_NE(status.message().find("must not be negative"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.profiler = ProfilerKind::Command; });
  EXPECT_NE(status.message().find("--command"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) {
    r.profiler = ProfilerKind::Command;
    r.commandTemplate = "true";
    r.algorithms = {"ring", "hm"};
  });
  EXPECT_NE(status.message().find("'hm' is not one"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.algorithms = {"nope"}; });
  EXPECT_NE(status.message().find("leaves no candidate"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.topology = "preset:resccl-a100:gpus=x"; });
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(status.message().find("gpus=x is not a number"), std::string::npos) << status.message();
  status = failure([](TuningRequest& r) { r.sizes.clear(); });
  EXPECT_NE(status.message().find("no message sizes"), std::string::npos) << status.message();

  // Space files: bad JSON with its place, a protocol that is not one, an unknown key.
  const fs::path space = dir / "space.json";
  std::ofstream(space) << "{\"dimensions\": [\n  {\"name\": \"protocol\", \"values\": [\"LL\",]}]}";
  status = failure([&](TuningRequest& r) { r.spaceFile = space.string(); });
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
  EXPECT_EQ(status.diagnostic().file, space.string());
  EXPECT_EQ(status.diagnostic().loc.line, 2u);
  std::ofstream(space) << R"({"dimensions": [{"name": "protocol", "values": ["LL", "LL256"]}]})";
  status = failure([&](TuningRequest& r) { r.spaceFile = space.string(); });
  EXPECT_NE(status.message().find("protocol 'LL256' is not a protocol"), std::string::npos) << status.message();
  std::ofstream(space) << R"({"dimension": []})";
  status = failure([&](TuningRequest& r) { r.spaceFile = space.string(); });
  EXPECT_EQ(status.diagnostic().file, space.string());
  EXPECT_NE(status.message().find("dimension"), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(dir / "run.trials.jsonl")) << "a refused request writes no log";
}

TEST(TuningRun, ACommandThatNeverWorksIsAnError) {
  const fs::path dir = freshDir("command");
  TuningRequest request = smallRequest(dir);
  request.profiler = ProfilerKind::Command;
  request.commandTemplate = "exit 3";
  Expected<TuningResult> result = runTuning(request);
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().code(), ErrorCode::Internal);
  EXPECT_FALSE(result.status().message().empty());
}

/// A benchmark command (a script in `dir`) whose AllReduce takes 400 / NCCL_MAX_NCHANNELS us, the
/// default (no variable) `defaultUs`, each of its {reps} rows with +-1 % noise.
std::string channelBenchmark(const fs::path& dir, double defaultUs) {
  const fs::path script = dir / "bench.sh";
  std::ofstream(script) << "awk -v reps=\"$1\" -v ch=\"$NCCL_MAX_NCHANNELS\" 'BEGIN { srand(); t = (ch == \"\" ? "
                        << defaultUs
                        << " : 400 / ch); for (i = 0; i < reps; i++) { x = t * (1 + 0.02 * (rand() - 0.5)); "
                           "printf \"     1048576        262144     float     sum      -1 %.3f 1.00 1.00 0 %.3f 1.00 "
                           "1.00 0\\n\", x, x } }'\n";
  return "sh '" + script.string() + "' {reps}";
}

/// A command-profiler request over channels 1..8 only (a space file), two sizes.
TuningRequest channelRequest(const fs::path& dir, double defaultUs) {
  TuningRequest request = smallRequest(dir);
  request.profiler = ProfilerKind::Command;
  request.topology = "preset:dgx-a100:gpus=4";
  request.commandTemplate = channelBenchmark(dir, defaultUs);
  request.spaceFile = (dir / "space.json").string();
  std::ofstream(request.spaceFile) << R"({"remove": ["protocol", "nThreads", "chunkBytes"],
      "dimensions": [{"name": "nChannels", "values": [1, 2, 4, 8]}]})";
  request.budget = 30;
  request.maxResource = 3;
  request.confirmResource = 5;
  return request;
}

// Every size's best few are confirmed against the default in interleaved rounds: a significant
// win is the entry, with its ratio to the default and the groups fastest first (the default among
// them); a resumed run replays the confirmation's runs too.
TEST(TuningRun, ASignificantWinOverTheDefaultIsTheEntry) {
  const fs::path dir = freshDir("confirmed-win");
  TuningRequest request = channelRequest(dir, 150);
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  for (const TunedWorkload& w : result->workloads) {
    ASSERT_TRUE(w.confirmation.has_value());
    EXPECT_FALSE(w.confirmation->keepDefault);
    EXPECT_EQ(w.confirmation->rounds, request.confirmMinRounds);  // decided at once
  }
  const LookupTable table = tableFromResult(*result);
  ASSERT_EQ(table.entries.size(), 1u);  // both sizes chose 8 channels
  const TableEntry& e = table.entries[0];
  EXPECT_FALSE(e.isDefault);
  EXPECT_EQ(e.nChannels, 8);
  EXPECT_NEAR(e.timeUs, 50, 1);
  EXPECT_LE(e.interval.lowUs, e.timeUs);
  EXPECT_GE(e.interval.highUs, e.timeUs);
  EXPECT_EQ(e.interval.samples, request.confirmMinRounds);
  ASSERT_TRUE(e.versusDefault.has_value());
  EXPECT_NEAR(e.versusDefault->ratio, 50.0 / 150, 0.01);
  EXPECT_LT(e.versusDefault->high, 1);
  EXPECT_EQ(e.versusDefault->won, e.versusDefault->pairs);
  // Groups fastest first: 4 channels (100 us), then the default (150 us: nothing set).
  ASSERT_EQ(e.groups.size(), 2u);
  EXPECT_EQ(e.groups[0].nChannels, 4);
  EXPECT_EQ(e.groups[1].nChannels, 0);
  EXPECT_FALSE(e.groups[1].choice.algorithm.has_value());
  EXPECT_NEAR(e.groups[1].timeUs, 150, 3);
  EXPECT_LT(e.groups[0].timeUs, e.groups[1].timeUs);
  // The table round-trips with its evidence.
  Expected<LookupTable> reread = readTableJson(writeTableJson(table), "t.json");
  ASSERT_TRUE(reread) << reread.status().toString();
  EXPECT_EQ(reread->entries[0].versusDefault, e.versusDefault);
  EXPECT_EQ(reread->entries[0].groups, e.groups);

  // The log holds the confirmation's runs (the default's with a null configuration); resuming
  // the complete log measures nothing and gives the same table.
  const std::string log = readAll(request.logPath);
  EXPECT_NE(log.find("\"config\":null"), std::string::npos);
  TuningRequest resumed = request;
  resumed.resume = true;
  Expected<TuningResult> again = runTuning(resumed);
  ASSERT_TRUE(again) << again.status().toString();
  for (const TunedWorkload& w : again->workloads)
    EXPECT_EQ(w.replayed, w.result.trials.size() + 4 * static_cast<size_t>(w.confirmation->rounds));
  EXPECT_EQ(writeTableJson(tableFromResult(*again)), writeTableJson(table));
  EXPECT_EQ(readAll(request.logPath), log);
}

// Nothing significantly faster than the default: the entry says so and sets nothing.
TEST(TuningRun, WithoutASignificantWinTheEntryIsTheDefault) {
  const fs::path dir = freshDir("confirmed-default");
  TuningRequest request = channelRequest(dir, 40);
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  const LookupTable table = tableFromResult(*result);
  ASSERT_EQ(table.entries.size(), 1u);
  const TableEntry& e = table.entries[0];
  EXPECT_TRUE(e.isDefault);
  EXPECT_TRUE(e.choices.empty());
  EXPECT_EQ(e.nChannels, 0);
  EXPECT_NEAR(e.timeUs, 40, 1);
  ASSERT_TRUE(e.versusDefault.has_value());
  EXPECT_GT(e.versusDefault->low, 1);  // 8 channels: 50 us against 40
  EXPECT_EQ(e.versusDefault->versus, "nChannels=8 algorithm=ring");
  ASSERT_EQ(e.groups.size(), 2u);
  EXPECT_EQ(e.groups[0].nChannels, 8);
  EXPECT_EQ(e.groups[1].nChannels, 4);
  EXPECT_NE(e.comment.find("nothing measured was significantly faster"), std::string::npos) << e.comment;
  // Without the confirmation the search's best is the entry.
  TuningRequest unconfirmed = channelRequest(freshDir("unconfirmed"), 40);
  unconfirmed.confirm = false;
  Expected<TuningResult> plain = runTuning(unconfirmed);
  ASSERT_TRUE(plain) << plain.status().toString();
  const LookupTable plainTable = tableFromResult(*plain);
  const TableEntry& p = plainTable.entries.at(0);
  EXPECT_FALSE(p.isDefault);
  EXPECT_EQ(p.nChannels, 8);
  EXPECT_FALSE(p.versusDefault.has_value());
}

// A command's NCCL splits large messages into chunks of its own: sizes up to 16 GiB tune (the
// micro-batch bound is the simulator's and libtuccl's), and a space that no configuration fits
// says which constraints emptied it and what was searched.
TEST(TuningRun, ACommandTunesUpTo16GiBAndAnEmptySpaceSaysWhy) {
  const fs::path dir = freshDir("large");
  TuningRequest request = smallRequest(dir);
  request.profiler = ProfilerKind::Command;
  request.topology = "preset:dgx-a100:gpus=4";
  request.sizes = *parseSizeGrid("8G:16G");
  const fs::path script = dir / "bench.sh";
  std::ofstream(script) << "i=0; while [ $i -lt \"$2\" ]; do echo \"  $1 1 float sum -1 1000.0 1.0 1.0 0 1000.0 1.0 "
                           "1.0 0\"; i=$((i+1)); done\n";
  request.commandTemplate = "sh '" + script.string() + "' {bytes} {reps}";
  request.budget = 12;
  request.maxResource = 3;
  request.confirm = false;
  Expected<TuningResult> result = runTuning(request);
  ASSERT_TRUE(result) << result.status().toString();
  ASSERT_EQ(result->workloads.size(), 2u);
  for (const TunedWorkload& w : result->workloads) EXPECT_GT(w.space.validCount(), 0u) << w.bytes;

  TuningRequest empty = smallRequest(freshDir("empty-space"));
  empty.profiler = ProfilerKind::Command;
  empty.topology = "preset:dgx-a100:gpus=4";
  empty.commandTemplate = request.commandTemplate;
  empty.spaceFile = (dir / "space.json").string();
  std::ofstream(empty.spaceFile) << R"({"dimensions": [{"name": "chunkBytes", "values": [67108864]}]})";
  Expected<TuningResult> refused = runTuning(empty);
  ASSERT_FALSE(refused);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("allreduce 64K: no configuration of the search space is valid"), std::string::npos) << message;
  EXPECT_NE(message.find("nccl-simple-chunk: chunkBytes"), std::string::npos) << message;
  EXPECT_NE(message.find("when protocol = Simple"), std::string::npos) << message;
  EXPECT_NE(message.find("(chunkBytes searched here: 67108864)"), std::string::npos) << message;
}

TEST(TuningRun, TunableCollectivesFollowTheProfiler) {
  EXPECT_EQ(tunableCollectives(ProfilerKind::Sim).size(), static_cast<size_t>(kTunerCollectives));
  EXPECT_EQ(tunableCollectives(ProfilerKind::Command).size(), static_cast<size_t>(kTunerCollectives));
  EXPECT_EQ(tunableCollectives(ProfilerKind::Tuccl).size(), static_cast<size_t>(kTunerCollectives));
  TuningRequest request;
  request.sizes = {1024};
  request.sigma = std::numeric_limits<double>::quiet_NaN();
  Status status = checkTuningRequest(request);
  EXPECT_EQ(status.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(status.message().find("--sigma must be a finite number in [0, 1]"), std::string::npos) << status.message();
  request.sigma = 0.05;
  request.collectives = {Collective::AllReduce, Collective::AllToAll};
  request.profiler = ProfilerKind::Command;
  request.commandTemplate = "true";
  status = checkTuningRequest(request);
  EXPECT_NE(status.message().find("'alltoall' cannot be tuned"), std::string::npos) << status.message();
}

TEST(TuningRun, ProfilerNames) {
  EXPECT_EQ(profilerKindName(ProfilerKind::Sim), "sim");
  EXPECT_EQ(parseProfilerKind("command"), ProfilerKind::Command);
  EXPECT_FALSE(parseProfilerKind("gpu"));
}

}  // namespace
}  // namespace tuccl
