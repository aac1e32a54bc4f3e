#include "tune/trial_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tune/measurement_noise.h"
#include "tune/synthetic_profiler.h"

namespace tuccl {
namespace {

std::string tempPath(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(testing::TempDir()) / name;
  std::filesystem::remove(p);
  return p.string();
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SearchSpace smallSpace() {
  return searchSpaceFromJson(nlohmann::json::parse(R"({"dimensions": [
      {"name": "nChannels", "values": [1, 2, 4, 8]},
      {"name": "nThreads", "values": [128, 256, 384, 512]},
      {"name": "chunkBytes", "values": [16384, 65536, 262144, 1048576]}]})"),
                             defaultSearchSpace({"ring", "hm"}, {"hpds"}));
}

/// One logged MRACO search over a noisy synthetic landscape; the log records the trials.
struct LoggedRun {
  SearchResult result;
  size_t replayed = 0;
};
LoggedRun search(const std::string& logPath, bool resume, uint32_t maxTrials) {
  const SearchSpace space = smallSpace();
  SyntheticProfiler exact([](const SearchSpace& s, const Configuration& c) { return multimodalLandscape(s, c, 3); },
                          0.0, 1);
  NoisyProfiler noisy(exact, 0.05, 11);
  auto log = TrialLog::open(logPath, nlohmann::json{{"seed", 5}}, resume);
  const auto& logged = log->trialsOf("allreduce", 1 << 20);
  ReplayProfiler replay(noisy, logged, [&](const Configuration& c, int64_t r) { noisy.countReplayed(c, r); });
  SearchOptions o;
  o.seed = 5;
  o.budget = 0.2 * static_cast<double>(space.validCount()) * 27;
  o.maxTrials = maxTrials;
  o.onTrial = [&](const Trial& t) {
    if (t.id >= logged.size()) log->append("allreduce", 1 << 20, space, t);
  };
  LoggedRun run;
  run.result = makeMracoSearcher()->search(space, replay, o);
  run.replayed = replay.replayed();
  return run;
}

TEST(TrialLog, AnInterruptedSearchResumesToTheSameResult) {
  const std::string full = tempPath("trial_log_full.jsonl"), cut = tempPath("trial_log_cut.jsonl");
  const LoggedRun whole = search(full, false, 0);
  ASSERT_TRUE(whole.result.best);
  ASSERT_GT(whole.result.trials.size(), 60u);
  // "Interrupted" after 60 trials, then resumed without a limit.
  const LoggedRun first = search(cut, false, 60);
  EXPECT_EQ(first.result.trials.size(), 60u);
  const LoggedRun resumed = search(cut, true, 0);
  EXPECT_EQ(resumed.replayed, 60u);
  ASSERT_TRUE(resumed.result.best);
  EXPECT_EQ(*resumed.result.best, *whole.result.best);
  EXPECT_EQ(resumed.result.trials.size(), whole.result.trials.size());
  for (size_t i = 0; i < whole.result.trials.size(); ++i) {
    EXPECT_EQ(resumed.result.trials[i].config, whole.result.trials[i].config) << i;
    EXPECT_EQ(resumed.result.trials[i].measurement.timeUs, whole.result.trials[i].measurement.timeUs) << i;
  }
  EXPECT_EQ(readAll(cut), readAll(full));  // the log itself is the uninterrupted one
}

TEST(TrialLog, NeverOverwritesAndRefusesAnotherRun) {
  const std::string path = tempPath("trial_log_guard.jsonl");
  search(path, false, 10);
  EXPECT_THROW(TrialLog::open(path, nlohmann::json{{"seed", 5}}, false), std::runtime_error);  // exists
  try {
    TrialLog::open(path, nlohmann::json{{"seed", 6}}, true);
    FAIL() << "a log of another run was resumed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
  auto log = TrialLog::open(path, nlohmann::json{{"seed", 5}}, true);
  EXPECT_EQ(log->loadedTrials(), 10u);
  EXPECT_EQ(log->trialsOf("allreduce", 1 << 20).size(), 10u);
  EXPECT_TRUE(log->trialsOf("allgather", 1 << 20).empty());
}

TEST(TrialLog, DropsATornLastLine) {
  const std::string path = tempPath("trial_log_torn.jsonl");
  search(path, false, 10);
  const std::string text = readAll(path);
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << R"({"kind":"trial","collective":"allreduce","bytes":1048576,"trial":10,"con)";
  }
  auto log = TrialLog::open(path, nlohmann::json{{"seed", 5}}, true);
  EXPECT_EQ(log->loadedTrials(), 10u);
  log.reset();
  EXPECT_EQ(readAll(path), text);  // truncated back to the last whole line
  // A broken line in the middle is an error, not silently skipped.
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::string broken = text;
    broken.insert(broken.find('\n') + 1, "garbage\n");
    out << broken;
  }
  EXPECT_THROW(TrialLog::open(path, nlohmann::json{{"seed", 5}}, true), std::runtime_error);
}

TEST(TrialLog, ReplayDetectsADivergingSearch) {
  const SearchSpace space = smallSpace();
  SyntheticProfiler exact([](const SearchSpace& s, const Configuration& c) { return multimodalLandscape(s, c, 3); },
                          0.0, 1);
  std::mt19937_64 rng(1);
  Trial t;
  t.config = space.sampleValid(rng);
  t.resource = 3;
  t.measurement = exact.profile(space, t.config, 3);
  LoggedTrial logged;
  logged.config = space.configurationToJson(t.config);
  logged.resource = 3;
  logged.measurement = t.measurement;
  ReplayProfiler replay(exact, {logged});
  EXPECT_THROW(replay.profile(space, t.config, 9), std::runtime_error);  // another resource
  EXPECT_EQ(replay.profile(space, t.config, 3).timeUs, t.measurement.timeUs);
  EXPECT_FALSE(replay.replaying());
  Configuration other = space.sampleValid(rng);
  EXPECT_GT(replay.profile(space, other, 3).timeUs, 0);  // past the log: measured
}

TEST(TrialLog, FailedMeasurementsRoundTrip) {
  const SearchSpace space = smallSpace();
  Trial t;
  std::mt19937_64 rng(2);
  t.config = space.sampleValid(rng);
  t.resource = 1;
  t.measurement.ok = false;
  t.measurement.cost = 1;
  t.measurement.error = "command exited with status 1";
  nlohmann::json j = trialToJson(space, t);
  EXPECT_FALSE(j.at("ok").get<bool>());
  EXPECT_FALSE(j.contains("timeUs"));
  EXPECT_EQ(j.at("error"), "command exited with status 1");
}

}  // namespace
}  // namespace tuccl
