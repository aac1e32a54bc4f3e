// tuccl-tune end to end: the table it writes loads in the plugin's reader and tuccl-table explains
// it; the same seed gives the same table; a killed run resumes to the same table; nothing is
// overwritten silently.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "table/table_io.h"
#include "tests/tools/run_tool.h"

extern char** environ;

namespace {

using tuccl::tooltest::ToolRun;

ToolRun run(const std::string& program, const std::string& arguments) {
  return tuccl::tooltest::runCommand(program + " " + arguments);
}
ToolRun tune(const std::string& arguments) { return run(TUCCL_TUNE, arguments); }
ToolRun table(const std::string& arguments) { return run(TUCCL_TABLE, arguments); }

std::string readAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path freshDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Small and quick: 8 ranks on 2 nodes, 3 sizes, one scheduler, a fixed budget.
const std::string kRun =
    "--topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce,allgather --sizes 64K:256K "
    "--schedulers hpds --budget 3000 --seed 3 -q --candidates-only";

TEST(TucclTune, WritesATableThePluginLoadsAndExplains) {
  const auto dir = freshDir("tuccl_tune_table");
  const std::string json = (dir / "t.json").string();
  ToolRun r = tune(kRun + " -o " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("allreduce"), std::string::npos) << r.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "t.csv"));
  ASSERT_TRUE(std::filesystem::exists(dir / "t.trials.jsonl"));

  tuccl::Expected<tuccl::LoadedTable> loaded = tuccl::loadTableFile(json);
  ASSERT_TRUE(loaded.ok()) << tuccl::formatTableError(loaded.status());
  const tuccl::LookupTable& t = loaded->table;
  ASSERT_GE(t.entries.size(), 2u);  // at least one range per collective
  uint64_t expectedMin = 0;
  for (const tuccl::TableEntry& e : t.entries) {
    if (e.collective != tuccl::Collective::AllReduce) continue;
    EXPECT_EQ(e.minBytes, expectedMin);  // ranges tile [0, inf)
    expectedMin = e.maxBytes == UINT64_MAX ? 0 : e.maxBytes + 1;
    EXPECT_EQ(e.nNodes, 2);
    EXPECT_EQ(e.nRanks, 8);
    ASSERT_EQ(e.choices.size(), 1u);
    EXPECT_TRUE(e.choices[0].protocol.has_value());
    EXPECT_NE(e.comment.find("sketch"), std::string::npos);
    EXPECT_GE(e.nChannels, 1);
    EXPECT_GT(e.chunkSize, 0u);
  }
  EXPECT_EQ(expectedMin, 0u);  // the last range is unbounded
  ASSERT_EQ(t.environment.size(), 1u);

  // Every entry says what TuCCL chose; the metadata lists it per entry.
  nlohmann::json doc = nlohmann::json::parse(readAll(json));
  for (const auto& e : doc["entries"]) EXPECT_NE(e["comment"].get<std::string>().find("sketch"), std::string::npos);
  EXPECT_EQ(doc["metadata"]["tuccl"]["entries"].size(), doc["entries"].size());

  ToolRun valid = table("validate " + json);
  EXPECT_EQ(valid.status, 0) << valid.output;
  ToolRun explained = table("explain " + json + " --coll allreduce --bytes 128K --nodes 2 --ranks 8");
  EXPECT_EQ(explained.status, 0) << explained.output;
  EXPECT_NE(explained.output.find("match: entries["), std::string::npos) << explained.output;
  EXPECT_NE(explained.output.find("chunk size (v6)"), std::string::npos) << explained.output;
  ToolRun csv = table("explain " + (dir / "t.csv").string() + " --coll allgather --bytes 1G --nodes 2 --ranks 8");
  EXPECT_EQ(csv.status, 0) << csv.output;
  EXPECT_NE(csv.output.find("match:"), std::string::npos) << csv.output;
  ToolRun env = table("env " + json + " --nodes 2 --ranks 8");
  EXPECT_NE(env.output.find("NTHREADS="), std::string::npos) << env.output;
}

TEST(TucclTune, SameSeedSameTableAndNoSilentOverwrite) {
  const auto dir = freshDir("tuccl_tune_seed");
  ASSERT_EQ(tune(kRun + " -o " + (dir / "a.json").string()).status, 0);
  ASSERT_EQ(tune(kRun + " -o " + (dir / "b.json").string()).status, 0);
  EXPECT_TRUE(readAll(dir / "a.json") == readAll(dir / "b.json"));
  EXPECT_TRUE(readAll(dir / "a.csv") == readAll(dir / "b.csv"));
  EXPECT_TRUE(readAll(dir / "a.trials.jsonl") == readAll(dir / "b.trials.jsonl"));

  const std::string before = readAll(dir / "a.json");
  ToolRun again = tune(kRun + " -o " + (dir / "a.json").string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  // --force replaces the tables but an existing trial log still needs --resume.
  ToolRun forced = tune(kRun + " --force -o " + (dir / "a.json").string());
  EXPECT_NE(forced.status, 0);
  EXPECT_NE(forced.output.find("--resume"), std::string::npos) << forced.output;
  EXPECT_TRUE(readAll(dir / "a.json") == before);
  // A different seed with the old log is another run: refused.
  std::string otherSeed = kRun;
  otherSeed.replace(otherSeed.find("--seed 3"), 8, "--seed 4");
  ToolRun other = tune(otherSeed + " --force --resume -o " + (dir / "a.json").string());
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.output.find("seed"), std::string::npos) << other.output;
}

TEST(TucclTune, AKilledRunResumesToTheSameTable) {
  const auto dir = freshDir("tuccl_tune_resume");
  ASSERT_EQ(tune(kRun + " -o " + (dir / "whole.json").string()).status, 0);
  const std::string log = readAll(dir / "whole.trials.jsonl");
  // The first half of the log, the last line torn, as a killed run leaves it.
  const size_t half = log.find('\n', log.size() / 2);
  ASSERT_NE(half, std::string::npos);
  {
    std::ofstream out(dir / "cut.trials.jsonl", std::ios::binary);
    out << log.substr(0, half + 1) << log.substr(half + 1, 40);
  }
  ToolRun refused = tune(kRun + " -o " + (dir / "cut.json").string());
  EXPECT_NE(refused.status, 0);
  ToolRun resumed = tune(kRun + " --resume -o " + (dir / "cut.json").string());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(readAll(dir / "cut.json") == readAll(dir / "whole.json"));
  EXPECT_TRUE(readAll(dir / "cut.trials.jsonl") == log);
}

TEST(TucclTune, ReportsBadArguments) {
  const auto dir = freshDir("tuccl_tune_bad");
  ToolRun r = tune("--topo preset:resccl-a100:nodes=2 --collectives alltoall -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("alltoall"), std::string::npos) << r.output;
  r = tune("--topo preset:resccl-a100:nodes=2 --sizes 1G:1K -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("MIN:MAX"), std::string::npos) << r.output;
  r = tune("--topo preset:nope -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  r = tune("--sizes 1K:1Q -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'1Q' is not a byte size"), std::string::npos) << r.output;
  r = tune("--collectives allreduce,allscatter -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown collective 'allscatter'"), std::string::npos) << r.output;
  r = tune("--topo preset:resccl-a100:nodes=2,gpus=4,oversub=abc -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("oversub=abc is not a number"), std::string::npos) << r.output;
  // This machine's ranks are for the libtuccl profiler without a topology; the confirmation needs
  // at least two rounds.
  r = tune("--profiler tuccl --topo preset:dgx-a100:gpus=4 --ranks 4 -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--ranks is for --profiler tuccl without --topo"), std::string::npos) << r.output;
  r = tune("--ranks 4 -o " + (dir / "x.json").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--ranks is for --profiler tuccl"), std::string::npos) << r.output;
  for (const char* rounds : {"1:4", "6:3", "a:b", "6:1001"}) {
    r = tune(std::string("--profiler tuccl --confirm-rounds ") + rounds + " -o " + (dir / "x.json").string());
    EXPECT_EQ(r.status, 2) << rounds;
    EXPECT_NE(r.output.find("--confirm-rounds: expected MIN:MAX with 2 <= MIN <= MAX <= 1000"), std::string::npos)
        << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x.json"));
}

TEST(TucclTune, MakesTheOutputFolder) {
  const auto dir = freshDir("tuccl_tune_folder") / "new" / "folder";
  ToolRun r = tune("--topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce --sizes 64K:64K --schedulers hpds "
                   "--budget 1000 --seed 3 -q -o " +
                   (dir / "table.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "table.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "table.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "table.trials.jsonl"));
  // A relative path whose folders are all new.
  r = run("cd " + dir.string() + " && " + TUCCL_TUNE,
          "--topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce --sizes 64K:64K --schedulers hpds "
          "--budget 1000 --seed 3 -q -o rel/deeper/table.json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "rel" / "deeper" / "table.json"));
}

TEST(TucclTune, ChecksEveryArgumentAndOutputBeforeAnyWork) {
  const auto dir = freshDir("tuccl_tune_checked_first");
  const std::string base = "--topo preset:resccl-a100:nodes=2,gpus=4 --sizes 64K:64K --schedulers hpds --seed 3 -q ";
  const std::string out = " -o " + (dir / "t.json").string();
  std::ofstream(dir / "plain_file") << "x";
  struct Case {
    std::string arguments;
    std::string message;
  };
  const Case cases[] = {
      {"--budget=-5", "--budget must be a finite number >= 0"},
      {"--budget nan", "--budget must be a finite number >= 0"},
      {"--sigma=-1", "--sigma must be a finite number in [0, 1]"},
      {"--sigma nan", "got nan"},
      {"--budget-fraction 0", "--budget-fraction must be a finite number in (0, 1]"},
      {"--timeout 0", "--timeout must be a finite number in (0, 604800]"},
      {"--max-resource 0", "--max-resource must be a finite number in [1, 1e+06]"},
      {"--collectives allreduce,allreduce", "names allreduce twice"},
      {"--csv " + (dir / "plain_file" / "t.csv").string(), "is not a directory"},
      {"--log " + (dir / "t.json").string(), "name the same file"},
      {"--force --csv " + dir.string(), "it is a directory"},
  };
  for (const Case& c : cases) {
    const bool collectives = c.arguments.find("--collectives") != std::string::npos;
    ToolRun r = tune(base + (collectives ? "" : "--collectives allreduce ") + c.arguments + out);
    EXPECT_EQ(r.status, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.arguments << "\n" << r.output;
    EXPECT_EQ(r.output.find("1797693"), std::string::npos) << r.output;
    // Nothing written: no trial log to demand --resume, no table, no folder.
    EXPECT_FALSE(std::filesystem::exists(dir / "t.trials.jsonl")) << c.arguments;
    EXPECT_FALSE(std::filesystem::exists(dir / "t.json")) << c.arguments;
  }
  // The corrected run needs no --resume.
  ToolRun fixed = tune(base + "--collectives allreduce --budget 500" + out);
  EXPECT_EQ(fixed.status, 0) << fixed.output;
}

TEST(TucclTune, TheCommandProfilerNeedsTheTopology) {
  const auto dir = freshDir("tuccl_tune_command_topo");
  ToolRun r = tune("--profiler command --command 'true' --sizes 1K:1K -o " + (dir / "t.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--profiler command needs --topo"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(TucclTune, TheSimulatorAndTheCommandTuneBroadcast) {
  const auto dir = freshDir("tuccl_tune_broadcast");
  // The simulator's broadcast candidates come from the generators and the synthesiser.
  ToolRun r = tune("--topo preset:resccl-a100:nodes=1,gpus=2 --collectives broadcast --sizes 1K:1M -o " +
                   (dir / "sim.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  tuccl::Expected<tuccl::LoadedTable> simTable = tuccl::loadTableFile((dir / "sim.json").string());
  ASSERT_TRUE(simTable.ok()) << tuccl::formatTableError(simTable.status());
  ASSERT_FALSE(simTable->table.entries.empty());
  for (const tuccl::TableEntry& entry : simTable->table.entries)
    EXPECT_EQ(entry.collective, tuccl::Collective::Broadcast);
  // A stand-in for broadcast_perf printing one nccl-tests row whose time follows the channels.
  const std::string command =
      "'echo \"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
      "  busbw #wrong\"; echo \"{bytes} 256 float none 0 $((10 + {nChannels})).5 0.1 0.1 0 11.0 0.1 0.1 0\"'";
  r = tune("--topo preset:resccl-a100:nodes=1,gpus=2 --profiler command --collectives broadcast,reduce "
           "--sizes 1K:1K --budget 200 -q --command " + command + " -o " + (dir / "t.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  tuccl::Expected<tuccl::LoadedTable> loaded = tuccl::loadTableFile((dir / "t.json").string());
  ASSERT_TRUE(loaded.ok()) << tuccl::formatTableError(loaded.status());
  ASSERT_EQ(loaded->table.entries.size(), 2u);
  EXPECT_EQ(loaded->table.entries[0].collective, tuccl::Collective::Broadcast);
  EXPECT_EQ(loaded->table.entries[1].collective, tuccl::Collective::Reduce);
  EXPECT_EQ(loaded->table.entries[0].nChannels, 1);  // the fastest in the stand-in
}

TEST(TucclTune, WarnsWhenNcclDoesNotRunTheProgramTheTableWasTunedOn) {
  const auto dir = freshDir("tuccl_tune_hm_warning");
  const std::string json = (dir / "t.json").string();
  // HM wins on two nodes; NCCL has no HM.
  ToolRun r = tune("--topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce --algorithms hm --sizes 64K:64K "
                   "--schedulers hpds --budget 500 --seed 3 -q --candidates-only -o " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: 1 of 1 table entries were won by TuCCL programs NCCL does not run"),
            std::string::npos) << r.output;
  ToolRun valid = table("validate " + json);
  EXPECT_EQ(valid.status, 0) << valid.output;
  EXPECT_NE(valid.output.find("warning: 1 of 1 entries were tuned on TuCCL programs"), std::string::npos)
      << valid.output;
  ToolRun explained = table("explain " + json + " --coll allreduce --bytes 64K --nodes 2 --ranks 8");
  EXPECT_EQ(explained.status, 0) << explained.output;
  EXPECT_NE(explained.output.find("warning: tuned on hm_allreduce"), std::string::npos) << explained.output;

  // The rank-order ring is NCCL's RING: no warning.
  r = tune("--topo preset:resccl-a100:nodes=2,gpus=4 --collectives allreduce --algorithms ring --sizes 64K:64K "
           "--schedulers hpds --budget 500 --seed 3 -q -o " + (dir / "ring.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("warning:"), std::string::npos) << r.output;
  valid = table("validate " + (dir / "ring.json").string());
  EXPECT_EQ(valid.output.find("warning:"), std::string::npos) << valid.output;
}

/// Whether process `pid` has ended (gone, or a zombie waiting for init to reap it).
bool processEnded(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || (close + 2 < text.size() && text[close + 2] == 'Z');
}

TEST(TucclTune, AnInterruptEndsTheBenchmarkAndEverythingItStarted) {
  for (int signal : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(signal));
    const auto dir = freshDir("tuccl_tune_interrupt_" + std::to_string(signal));
    const std::string pidFile = (dir / "grandchild.pid").string();
    // The benchmark starts a grandchild that ignores SIGTERM (only SIGKILL ends it) and waits.
    const std::string command = "(trap '' TERM; exec sleep 120) & echo $! > " + pidFile + "; wait";
    std::vector<std::string> args = {TUCCL_TUNE, "--topo", "preset:resccl-a100:nodes=1,gpus=2", "--profiler", "command",
                                     "--collectives", "allreduce", "--sizes", "1K:1K", "--timeout", "100", "-q",
                                     "--command", command, "-o", (dir / "t.json").string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string outFile = (dir / "out.txt").string();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;  // as from a terminal, whatever this test inherited
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, s);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t tune = -1;
    ASSERT_EQ(posix_spawn(&tune, TUCCL_TUNE, &actions, &attr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);

    pid_t grandchild = 0;
    for (int i = 0; i < 2000 && grandchild <= 0; ++i) {  // at most 20 s
      std::ifstream in(pidFile);
      if (!(in >> grandchild)) grandchild = 0;
      if (grandchild <= 0) usleep(10000);
    }
    ASSERT_GT(grandchild, 0) << "the benchmark never started: " << readAll(outFile);
    ASSERT_EQ(kill(tune, signal), 0);
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 1500 && done == 0; ++i) {  // at most 15 s (the grace is 3 s)
      done = waitpid(tune, &status, WNOHANG);
      if (done == 0) usleep(10000);
    }
    if (done == 0) {
      kill(tune, SIGKILL);
      waitpid(tune, &status, 0);
      ADD_FAILURE() << "tuccl-tune did not end on the signal";
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << readAll(outFile);
    bool ended = false;
    for (int i = 0; i < 500 && !ended; ++i) {  // at most 5 s
      ended = processEnded(grandchild);
      if (!ended) usleep(10000);
    }
    EXPECT_TRUE(ended) << "the benchmark's grandchild " << grandchild << " outlived tuccl-tune";
    if (!ended) kill(grandchild, SIGKILL);  // ours: started by the command above
  }
}

// --algorithms DIR: every .resccl and .xml (MSCCL) program of the directory joins the candidates
// of its collective; the others are skipped, misfits are named.
TEST(TucclTune, ADirectoryOfProgramsAddsRescclAndXmlCandidates) {
  const auto dir = freshDir("tuccl_tune_program_dir");
  const std::filesystem::path programs = dir / "programs";
  std::filesystem::create_directories(programs);
  const std::string source(TUCCL_SOURCE_DIR);
  std::filesystem::copy_file(source + "/tests/data/msccl/ring_allreduce_1ch.xml", programs / "ring_1ch.xml");
  std::filesystem::copy_file(source + "/tests/data/msccl/allgather_inplace.xml", programs / "gather.xml");
  std::filesystem::copy_file(source + "/tests/data/msccl/ring_allreduce_2.xml", programs / "two_gpus.xml");
  std::filesystem::copy_file(source + "/examples/algorithms/ring_allreduce.resccl", programs / "my_ring.resccl");
  const std::string json = (dir / "t.json").string();
  ToolRun r = tune("--topo preset:dgx-a100:nodes=1,gpus=4 --collectives allreduce --sizes 64M:64M --schedulers hpds "
                   "--budget 2000 --seed 3 --algorithms " + programs.string() + " -o " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t line = r.output.find("allreduce candidates");
  ASSERT_NE(line, std::string::npos) << r.output;
  const std::string candidates = r.output.substr(line, r.output.find('\n', line) - line);
  EXPECT_NE(candidates.find("my_ring.resccl"), std::string::npos) << candidates;
  EXPECT_NE(candidates.find("ring_1ch.xml"), std::string::npos) << candidates;
  EXPECT_NE(candidates.find("ring ["), std::string::npos) << candidates;  // the built-ins stay
  EXPECT_EQ(candidates.find("gather.xml"), std::string::npos) << candidates;  // another collective
  EXPECT_EQ(candidates.find("two_gpus.xml"), std::string::npos) << candidates;
  EXPECT_NE(r.output.find("two_gpus.xml is left out: it is for 2 GPUs, the topology has 4"), std::string::npos)
      << r.output;
  tuccl::Expected<tuccl::LoadedTable> loaded = tuccl::loadTableFile(json);
  ASSERT_TRUE(loaded.ok()) << tuccl::formatTableError(loaded.status());

  ToolRun command = tune("--topo preset:dgx-a100:nodes=1,gpus=4 --profiler command --command true --collectives "
                         "allreduce --sizes 64K:64K --algorithms " + programs.string() + " -o " +
                         (dir / "c.json").string());
  EXPECT_EQ(command.status, 2) << command.output;
  EXPECT_NE(command.output.find("--profiler sim only"), std::string::npos) << command.output;
}


TEST(TucclTune, NodesComposesTheTopologyAndSpeedUpsAreOverTheNcclModel) {
  const auto dir = freshDir("tuccl_tune_nodes");
  const std::string quick =
      " --collectives allreduce --sizes 64K:128K --schedulers hpds --budget 1000 --seed 3 -q --candidates-only";
  ToolRun viaOption = tune("--topo preset:resccl-a100:gpus=4 --nodes 2" + quick + " -o " + (dir / "a.json").string());
  ToolRun viaSpec = tune("--topo preset:resccl-a100:nodes=2,gpus=4" + quick + " -o " + (dir / "b.json").string());
  ASSERT_EQ(viaOption.status, 0) << viaOption.output;
  ASSERT_EQ(viaSpec.status, 0) << viaSpec.output;
  EXPECT_NE(viaOption.output.find("8 ranks on 2 nodes"), std::string::npos) << viaOption.output;
  EXPECT_EQ(readAll(dir / "a.csv").substr(readAll(dir / "a.csv").find('\n')),
            readAll(dir / "b.csv").substr(readAll(dir / "b.csv").find('\n')));
  // Every row says what NCCL would do and the speed-up over it: time(us) and nccl(us) give xNCCL.
  EXPECT_NE(viaOption.output.find("xNCCL"), std::string::npos) << viaOption.output;
  std::istringstream lines(viaOption.output);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("  allreduce", 0) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> f;
    for (std::string w; words >> w;) f.push_back(w);
    // The simulator's times are noiseless: no interval, no confirmation against a default.
    ASSERT_EQ(f.size(), 17u) << line;
    EXPECT_EQ(f[10], "-") << line;
    EXPECT_EQ(f[13], "-") << line;
    const double time = std::stod(f[9]), nccl = std::stod(f[14]);
    EXPECT_NEAR(std::stod(f[16]), nccl / time, 0.01 + 0.01 * nccl / time) << line;
    EXPECT_NE(f[15].find("/"), std::string::npos) << line;  // "TREE/LL128/4ch"
    ++rows;
  }
  EXPECT_GE(rows, 1) << viaOption.output;
  ToolRun conflict = tune("--topo preset:resccl-a100:nodes=2 --nodes 3" + quick + " -o " + (dir / "c.json").string());
  EXPECT_EQ(conflict.status, 2) << conflict.output;
  EXPECT_NE(conflict.output.find("disagree"), std::string::npos) << conflict.output;
}

// tuccl-table explain shows what an entry rests on: its time and interval, its comparison with
// the defaults, and its groups fastest first; a default entry says it decides nothing.
TEST(TucclTable, ExplainShowsTheEvidence) {
  const auto dir = freshDir("tuccl_table_evidence");
  const std::string json = (dir / "t.json").string();
  std::ofstream(json) << R"({"version": 1, "entries": [
    {"collective": "allreduce", "maxBytes": 65535, "nNodes": 1, "nRanks": 4, "timeUs": 40, "lowUs": 38.5,
     "highUs": 41, "samples": 6, "default": true,
     "versusDefault": {"ratio": 1.1, "low": 1.02, "high": 1.2, "pairs": 6, "won": 0, "versus": "chunkBytes=8192 algorithm=direct"},
     "groups": [{"tucclAlgorithm": "direct", "chunkSize": 8192, "timeUs": 44, "lowUs": 43, "highUs": 45, "samples": 6}]},
    {"collective": "allreduce", "minBytes": 65536, "nNodes": 1, "nRanks": 4, "tucclAlgorithm": "ring",
     "chunkSize": 32768, "timeUs": 80, "lowUs": 78, "highUs": 82, "samples": 6,
     "versusDefault": {"ratio": 0.8, "low": 0.75, "high": 0.86, "pairs": 6, "won": 6},
     "groups": [{"timeUs": 100, "lowUs": 97, "highUs": 103, "samples": 6}]}]})";
  ToolRun small = table("explain " + json + " --coll allreduce --bytes 4K --nodes 1 --ranks 4");
  ASSERT_EQ(small.status, 0) << small.output;
  EXPECT_NE(small.output.find("nothing: the defaults (tuning found nothing significantly faster)"), std::string::npos)
      << small.output;
  EXPECT_NE(small.output.find("the defaults (a default entry): 40.0 us [38.5, 41.0] (6 samples)"), std::string::npos)
      << small.output;
  EXPECT_NE(small.output.find("the best rival, chunkBytes=8192 algorithm=direct, against the defaults: 1.100 [1.020, "
                              "1.200] over 6 interleaved pairs, 0 won (significantly slower)"),
            std::string::npos)
      << small.output;
  EXPECT_NE(small.output.find("group 1: chunk 8192 B, libtuccl direct: 44.0 us [43.0, 45.0] (6 samples)"),
            std::string::npos)
      << small.output;
  ToolRun large = table("explain " + json + " --coll allreduce --bytes 1M --nodes 1 --ranks 4");
  ASSERT_EQ(large.status, 0) << large.output;
  EXPECT_NE(large.output.find("libtuccl algorithm: ring"), std::string::npos) << large.output;
  EXPECT_NE(large.output.find("against the defaults: time ratio 0.800 [0.750, 0.860] over 6 interleaved pairs, 6 won "
                              "(significantly faster)"),
            std::string::npos)
      << large.output;
  EXPECT_NE(large.output.find("group 1: the defaults (nothing set): 100.0 us [97.0, 103.0]"), std::string::npos)
      << large.output;
}

}  // namespace
