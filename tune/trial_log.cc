#include "tune/trial_log.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tuccl {
namespace {

constexpr const char* kLogFormat = "tuccl-trial-log";
constexpr int kLogVersion = 2;  // 2: repetitions, samplesUs, default runs

nlohmann::json headerLine(const nlohmann::json& run) {
  return nlohmann::json{{"kind", "header"}, {"format", kLogFormat}, {"version", kLogVersion}, {"run", run}};
}

/// The first key (dotted path) where two run descriptions differ, for the error message.
std::string firstDifference(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (!b.contains(it.key())) return key;
      if (std::string d = firstDifference(it.value(), b.at(it.key()), key); !d.empty()) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) return prefix.empty() ? it.key() : prefix + "." + it.key();
    return "";
  }
  return a == b ? "" : (prefix.empty() ? "(the whole header)" : prefix);
}

LoggedTrial trialFromJson(const nlohmann::json& j) {
  LoggedTrial t;
  t.trial = j.at("trial").get<uint32_t>();
  t.config = j.at("config");
  t.resource = j.at("resource").get<int64_t>();
  t.measurement.ok = j.at("ok").get<bool>();
  t.measurement.cost = j.value("cost", static_cast<double>(t.resource));
  if (t.measurement.ok) {
    std::vector<double> samples = j.at("samplesUs").get<std::vector<double>>();
    const double cost = t.measurement.cost;
    t.measurement = measurementOfSamples(std::move(samples), cost);
    t.measurement.busBwGBps = j.value("busBwGBps", 0.0);
    if (t.measurement.timeUs != j.at("timeUs").get<double>())
      throw std::runtime_error("timeUs is not the median of samplesUs");
  } else {
    t.measurement.timeUs = std::numeric_limits<double>::infinity();
    t.measurement.error = j.value("error", std::string("failed"));
  }
  return t;
}

}  // namespace

nlohmann::json trialToJson(const SearchSpace& space, const Trial& trial) {
  nlohmann::json j;
  j["trial"] = trial.id;
  j["config"] = trial.isDefault ? nlohmann::json(nullptr) : space.configurationToJson(trial.config);
  j["resource"] = trial.resource;
  j["ok"] = trial.measurement.ok;
  if (trial.measurement.ok) {
    j["timeUs"] = trial.measurement.timeUs;
    // A measurement made without samples (a searcher's own bookkeeping) logs its time as one.
    j["samplesUs"] = trial.measurement.samplesUs.empty() ? std::vector<double>{trial.measurement.timeUs}
                                                         : trial.measurement.samplesUs;
    j["busBwGBps"] = trial.measurement.busBwGBps;
  } else {
    j["error"] = trial.measurement.error;
  }
  j["cost"] = trial.measurement.cost;
  if (trial.bracket >= 0) j["bracket"] = trial.bracket;
  if (trial.rung >= 0) j["rung"] = trial.rung;
  return j;
}

std::unique_ptr<TrialLog> TrialLog::open(const std::string& path, const nlohmann::json& header, bool resume) {
  std::unique_ptr<TrialLog> log(new TrialLog());
  log->path_ = path;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (exists) {
    if (!resume)
      throw std::runtime_error("trial log " + path + " exists; pass --resume to continue that run, or remove it");
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    size_t offset = 0, lineNo = 0, keep = 0;
    bool sawHeader = false;
    while (offset < text.size()) {
      const size_t end = text.find('\n', offset);
      const bool torn = end == std::string::npos;  // no newline: the write was cut short
      const std::string line = text.substr(offset, torn ? std::string::npos : end - offset);
      ++lineNo;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        const bool last = torn || end + 1 >= text.size();
        if (last && sawHeader) break;  // a torn last line: dropped below
        throw std::runtime_error(path + ":" + std::to_string(lineNo) + ": not a trial-log line (invalid JSON)");
      }
      if (!sawHeader) {
        if (j.value("kind", "") != "header" || j.value("format", "") != kLogFormat)
          throw std::runtime_error(path + ":1: not a tuccl-tune trial log");
        if (j.value("version", 0) != kLogVersion)
          throw std::runtime_error(path + ":1: trial log version " + std::to_string(j.value("version", 0)) +
                                   " (this tuccl-tune writes " + std::to_string(kLogVersion) + ")");
        if (j.at("run") != header)
          throw std::runtime_error("trial log " + path + " was written by a different run (" +
                                   firstDifference(j.at("run"), header, "") +
                                   " differs); resume it with the same arguments or remove it");
        sawHeader = true;
      } else if (j.value("kind", "") == "trial") {
        try {
          auto& list = log->trials_[{j.at("collective").get<std::string>(), j.at("bytes").get<int64_t>()}];
          LoggedTrial t = trialFromJson(j);
          if (t.trial != list.size())
            throw std::runtime_error("trial " + std::to_string(t.trial) + " follows trial " +
                                     std::to_string(static_cast<int64_t>(list.size()) - 1));
          list.push_back(std::move(t));
          ++log->loaded_;
        } catch (const std::exception& e) {
          throw std::runtime_error(path + ":" + std::to_string(lineNo) + ": bad trial line: " + e.what());
        }
      }
      if (torn) break;
      offset = end + 1;
      keep = offset;
    }
    if (!sawHeader) throw std::runtime_error(path + ": empty trial log (remove it to start afresh)");
    if (keep < text.size()) std::filesystem::resize_file(path, keep);  // drop the torn line
    log->file_ = std::fopen(path.c_str(), "ab");
  } else {
    log->file_ = std::fopen(path.c_str(), "wb");
    if (log->file_ != nullptr) {
      const std::string line = headerLine(header).dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), log->file_);
      std::fflush(log->file_);
    }
  }
  if (log->file_ == nullptr) throw std::runtime_error("cannot write the trial log " + path);
  return log;
}

TrialLog::~TrialLog() {
  if (file_ != nullptr) std::fclose(file_);
}

const std::vector<LoggedTrial>& TrialLog::trialsOf(const std::string& collective, int64_t bytes) const {
  static const std::vector<LoggedTrial> kNone;
  auto it = trials_.find({collective, bytes});
  return it == trials_.end() ? kNone : it->second;
}

void TrialLog::append(const std::string& collective, int64_t bytes, const SearchSpace& space, const Trial& trial) {
  nlohmann::json j = {{"kind", "trial"}, {"collective", collective}, {"bytes", bytes}};
  j.update(trialToJson(space, trial));
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw std::runtime_error("cannot append to the trial log " + path_);
}

ReplayProfiler::ReplayProfiler(Profiler& inner, std::vector<LoggedTrial> logged,
                               std::function<void(const Configuration&, int64_t)> onReplayed)
    : inner_(inner), logged_(std::move(logged)), onReplayed_(std::move(onReplayed)) {}

Measurement ReplayProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  if (next_ >= logged_.size()) return inner_.profile(space, config, resource);
  const LoggedTrial& t = logged_[next_];
  const nlohmann::json asked = space.configurationToJson(config);
  if (asked != t.config || resource != t.resource)
    throw std::runtime_error("the search diverges from the trial log at trial " + std::to_string(t.trial) +
                             ": logged " + t.config.dump() + " r=" + std::to_string(t.resource) + ", asked " +
                             asked.dump() + " r=" + std::to_string(resource));
  ++next_;
  if (onReplayed_) onReplayed_(config, resource);
  return t.measurement;
}

Measurement ReplayProfiler::profileDefault(int64_t resource) {
  if (next_ >= logged_.size()) return inner_.profileDefault(resource);
  const LoggedTrial& t = logged_[next_];
  if (!t.config.is_null() || resource != t.resource)
    throw std::runtime_error("the run diverges from the trial log at trial " + std::to_string(t.trial) + ": logged " +
                             t.config.dump() + " r=" + std::to_string(t.resource) + ", asked the default r=" +
                             std::to_string(resource));
  ++next_;
  return t.measurement;
}

}  // namespace tuccl
