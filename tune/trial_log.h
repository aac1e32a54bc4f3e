// The trial log of a tuning run (issue 8 item 5): one JSON line per profiling call, so that an
// interrupted run resumes where it stopped instead of profiling again.
//
// In:  the log path, a header describing the run (everything that determines the trial sequence:
//      topology, collectives, sizes, space, method, seed, budget, profiler), and every trial.
// Out: per workload (collective, size) the logged trials in order; a ReplayProfiler that answers
//      a search's first calls from them and passes the rest to the real profiler.
//
// Format:
//   {"kind":"header","format":"tuccl-trial-log","version":1,"run":{...}}
//   {"kind":"trial","collective":"allreduce","bytes":1048576,"trial":0,"config":{...},
//    "resource":3,"ok":true,"timeUs":812.4,"samplesUs":[...],"busBwGBps":...,"cost":3,"bracket":3,
//    "rung":0}
// A failed measurement has "ok":false and "error" instead of the numbers. A measurement of the
// system's default (the confirmation runs, profileDefault) has "config":null. The median's
// interval and the spread are recomputed from samplesUs. Doubles are written in
// shortest round-trip form, so a replayed search sees bit-identical values and — searches being
// deterministic given their seed — asks for exactly the logged sequence; a difference is an error.
// A torn last line (the run was killed mid-write) is dropped and the file truncated before it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tune/searcher.h"

namespace tuccl {

struct LoggedTrial {
  uint32_t trial = 0;
  nlohmann::json config;  ///< SearchSpace::configurationToJson
  int64_t resource = 0;
  Measurement measurement;
};

class TrialLog {
 public:
  /// Opens `path` for a run described by `header`. An existing log is resumed only when `resume`
  /// is set and its header equals `header` (std::runtime_error otherwise, naming the first key
  /// that differs); a missing one is created. Never truncates a log except a torn last line.
  static std::unique_ptr<TrialLog> open(const std::string& path, const nlohmann::json& header, bool resume);
  ~TrialLog();
  TrialLog(const TrialLog&) = delete;
  TrialLog& operator=(const TrialLog&) = delete;

  /// The logged trials of one workload, in trial order (empty when none).
  const std::vector<LoggedTrial>& trialsOf(const std::string& collective, int64_t bytes) const;
  /// Number of trials read from an existing log.
  size_t loadedTrials() const { return loaded_; }
  /// Appends one trial and flushes.
  void append(const std::string& collective, int64_t bytes, const SearchSpace& space, const Trial& trial);
  const std::string& path() const { return path_; }

 private:
  TrialLog() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  std::map<std::pair<std::string, int64_t>, std::vector<LoggedTrial>> trials_;
  size_t loaded_ = 0;
};

/// A trial as one JSON object (the log line without "kind", "collective" and "bytes").
nlohmann::json trialToJson(const SearchSpace& space, const Trial& trial);

/// Answers the first calls of a search from logged trials (checking that the search asks for the
/// logged configuration and resource), then profiles with `inner`. `onReplayed` is told of every
/// replayed call (NoisyProfiler::countReplayed keeps the noise sequence of an uninterrupted run).
class ReplayProfiler : public Profiler {
 public:
  ReplayProfiler(Profiler& inner, std::vector<LoggedTrial> logged,
                 std::function<void(const Configuration&, int64_t)> onReplayed = {});
  std::string_view name() const override { return inner_.name(); }
  /// Throws std::runtime_error when the search diverges from the log (a different seed, space or
  /// program version wrote it).
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override;
  bool hasDefault() const override { return inner_.hasDefault(); }
  Measurement profileDefault(int64_t resource) override;
  size_t replayed() const { return next_; }
  bool replaying() const { return next_ < logged_.size(); }

 private:
  Profiler& inner_;
  std::vector<LoggedTrial> logged_;
  std::function<void(const Configuration&, int64_t)> onReplayed_;
  size_t next_ = 0;
};

}  // namespace tuccl
