// The runtime phase in a communicator (adaptive_runtime.h).
#include "backend/adaptive_runtime.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/log.h"
#include "support/cache_files.h"
#include "support/hash.h"
#include "support/text_values.h"

namespace tuccl::backend {
namespace {

constexpr const char* kLearnedFormat = "tuccl-adaptation";
constexpr int kLearnedVersion = 1;
/// A learned table larger than this is not read (it holds a few numbers per key).
constexpr uintmax_t kMaxLearnedBytes = 16 << 20;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

Status badVariable(const char* name, const char* value, const std::string& expected) {
  return makeError(ErrorCode::InvalidArgument,
                   std::string(name) + "=" + value + ": expected " + expected);
}

// A whole number in [low, high] from `text`, or nullopt.
std::optional<long long> wholeNumber(const std::string& text, long long low, long long high) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < low || value > high) return std::nullopt;
  return value;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The names in a sysfs class directory, sorted; empty when it cannot be read.
std::vector<std::string> sysfsNames(const char* directory, bool skipLoopback) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    if (skipLoopback && name == "lo") continue;
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Expected<AdaptSettings> adaptSettingsFromEnvironment(const std::string& cacheDir) {
  AdaptSettings settings;
  Expected<AdaptationSwitches> switches = adaptationSwitchesFromEnvironment();
  if (!switches) return switches.status();
  settings.enabled = switches->enabled;
  settings.rule = switches->rule;
  settings.warmup = switches->warmup;
  if (const char* value = env("TUCCL_ADAPT_FILE")) {
    settings.file = std::filesystem::absolute(value).string();
  } else if (!cacheDir.empty()) {
    settings.file = cacheDir;
    settings.fileFromDefault = true;
  }
  if (const char* value = env("TUCCL_TEST_DELAY_GROUP")) {
    const std::string text = value;
    const size_t colon = text.find(':');
    const auto group = colon == std::string::npos ? std::nullopt : wholeNumber(text.substr(0, colon), 0, 255);
    const auto micros = colon == std::string::npos ? std::nullopt : wholeNumber(text.substr(colon + 1), 0, 60'000'000);
    if (!group || !micros) return badVariable("TUCCL_TEST_DELAY_GROUP", value, "<group>:<microseconds>");
    settings.delayGroup = static_cast<int32_t>(*group);
    settings.delayMicros = *micros;
  }
  return settings;
}

AdaptiveRuntime::AdaptiveRuntime(AdaptSettings settings, int32_t rank, int32_t nRanks, uint64_t signature,
                                 uint64_t tableHash)
    : settings_(std::move(settings)), rank_(rank), nRanks_(nRanks), signature_(signature), tableHash_(tableHash) {
  if (settings_.fileFromDefault) {
    settings_.file = (std::filesystem::path(settings_.file) /
                      ("adaptation-n" + std::to_string(nRanks_) + "-t" + hex(tableHash_) + ".json"))
                         .string();
  }
}

Status AdaptiveRuntime::loadLearned(const AllGather& allGather) {
  std::string text;
  std::string why;  // rank 0: why the file is not used
  if (rank_ == 0 && !settings_.file.empty()) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(settings_.file, error);
    if (!error && size <= kMaxLearnedBytes) {
      std::ifstream in(settings_.file, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      if (in.good() || in.eof()) text = bytes.str();
    } else if (!error) {
      why = "it is larger than " + formatByteSize(kMaxLearnedBytes);
    }
  }
  Expected<std::vector<std::string>> gathered = allGather(text);
  if (!gathered) return gathered.status();
  const std::string& learned = (*gathered)[0];
  if (learned.empty()) {
    if (!why.empty()) warnOnce("adapt-file", "TuCCL adapt: not reading " + settings_.file + ": " + why);
    return {};
  }
  std::map<AdaptKey, Learned> keys;
  try {
    const nlohmann::json doc = nlohmann::json::parse(learned);
    if (doc.value("format", "") != kLearnedFormat || doc.value("version", 0) != kLearnedVersion) {
      why = "not a version " + std::to_string(kLearnedVersion) + " " + kLearnedFormat + " file";
    } else if (doc.value("signature", "") != hex(signature_)) {
      why = "it was learnt under topology signature " + doc.value("signature", std::string("?")) + ", this is " +
            hex(signature_) + ": the learned entries start afresh";
    } else if (doc.value("nRanks", 0) != nRanks_ || doc.value("tableHash", "") != hex(tableHash_)) {
      why = "it was learnt for another rank count or tuning table: the learned entries start afresh";
    } else {
      for (const nlohmann::json& item : doc.at("keys")) {
        const std::optional<Collective> collective = parseCollective(item.at("collective").get<std::string>());
        if (!collective) continue;
        AdaptKey key{*collective, item.at("bucket").get<int32_t>(), item.at("entry").get<int32_t>()};
        Learned state;
        state.best = item.at("best").get<int32_t>();
        for (const nlohmann::json& us : item.at("agreedUs")) state.agreedSeconds.push_back(us.get<double>() * 1e-6);
        state.groups = static_cast<int32_t>(state.agreedSeconds.size());
        if (state.groups < 1 || state.best < 0 || state.best >= state.groups) continue;
        keys[key] = std::move(state);
      }
    }
  } catch (const std::exception& error) {
    why = std::string("it does not parse (") + error.what() + ")";
    keys.clear();
  }
  if (!why.empty()) {
    // Every rank decided the same from the same bytes; rank 0 says it once.
    if (rank_ == 0) warnOnce("adapt-file", "TuCCL adapt: ignoring " + settings_.file + ": " + why);
    return {};
  }
  std::lock_guard lock(mutex_);
  learned_ = std::move(keys);
  if (rank_ == 0 && logEnabled(LogLevel::Info)) {
    logLine(LogLevel::Info, rank_,
            "TuCCL adapt: starting from " + settings_.file + " (" + std::to_string(learned_.size()) + " keys)");
  }
  return {};
}

AdaptiveRuntime::KeyState& AdaptiveRuntime::stateOf(const AdaptKey& key, int32_t groups) {
  KeyState& state = keys_[key];
  if (state.policy && state.policy->groups() == groups) return state;
  state = KeyState{};
  state.policy = std::make_shared<AdaptivePolicy>(groups, settings_.rule);
  state.warmup = static_cast<uint64_t>(std::max(0, settings_.warmup));
  if (auto it = learned_.find(key); it != learned_.end()) {
    if (it->second.groups == groups) {
      state.policy->restore(it->second.best, it->second.agreedSeconds);
      state.announced = it->second.best;
      state.warmup = 0;
    }
    learned_.erase(it);
  }
  if (state.announced < 0) state.announced = state.policy->best();
  return state;
}

Expected<int32_t> AdaptiveRuntime::choose(const AdaptKey& key, int32_t groups, uint64_t bytes,
                                          const AllGather& allGather) {
  if (groups < 2) return 0;
  std::shared_ptr<AdaptivePolicy> policy;
  uint64_t call = 0;     // the key's call number (logs)
  uint64_t decided = 0;  // the policy's call number: calls after the warm-up
  bool warming = false;
  {
    std::lock_guard lock(mutex_);
    KeyState& state = stateOf(key, groups);
    policy = state.policy;
    call = state.calls++;
    warming = call < state.warmup;  // the static choice, nothing exchanged
    decided = warming ? 0 : call - state.warmup;
  }
  // What call `call` runs, at TRACE: "TuCCL adapt trace: ... runs group=<g>[ (why)]".
  auto traced = [&](int32_t group, const char* why) {
    if (logEnabled(LogLevel::Trace)) {
      logLine(LogLevel::Trace, rank_,
              "TuCCL adapt trace: rank=" + std::to_string(rank_) + " call=" + std::to_string(call) +
                  " coll=" + toLowerCase(collectiveName(key.collective)) + " bytes=" + std::to_string(bytes) +
                  " runs group=" + std::to_string(group) + why);
    }
    return group;
  };
  if (warming) return traced(0, " (warming up)");
  if (policy->syncDue(decided)) {
    Expected<std::vector<std::string>> summaries = allGather(policy->summary());
    if (!summaries) return summaries.status();
    if (Status agreed = policy->agree(*summaries); !agreed) return agreed;
    std::lock_guard lock(mutex_);
    KeyState& state = keys_[key];
    if (state.announced != policy->best()) {
      state.announced = policy->best();
      if (logEnabled(LogLevel::Info)) {
        logLine(LogLevel::Info, rank_,
                "TuCCL adapt: rank=" + std::to_string(rank_) + " call=" + std::to_string(call) +
                    " coll=" + toLowerCase(collectiveName(key.collective)) + " bytes=" + std::to_string(bytes) +
                    " group=" + std::to_string(policy->best()));
      }
    }
  }
  const int32_t group = policy->groupFor(decided);
  return traced(group, group == policy->best() ? "" : " (exploring)");
}

void AdaptiveRuntime::record(const AdaptKey& key, int32_t group, double seconds) {
  std::shared_ptr<AdaptivePolicy> policy;
  {
    std::lock_guard lock(mutex_);
    auto it = keys_.find(key);
    if (it == keys_.end() || !it->second.policy) return;
    policy = it->second.policy;
  }
  policy->record(group, seconds);
}

void AdaptiveRuntime::exclude(const AdaptKey& key, int32_t group, const std::string& why) {
  std::shared_ptr<AdaptivePolicy> policy;
  {
    std::lock_guard lock(mutex_);
    auto it = keys_.find(key);
    if (it == keys_.end() || !it->second.policy) return;
    policy = it->second.policy;
  }
  policy->exclude(group);
  warnOnce("adapt-exclude-" + std::to_string(group),
           "TuCCL adapt: rank=" + std::to_string(rank_) + " coll=" + toLowerCase(collectiveName(key.collective)) +
               " bucket=" + std::to_string(key.bucket) + ": configuration group " + std::to_string(group) +
               " is left out: " + why);
}

int64_t AdaptiveRuntime::testDelayMicros(int32_t group) const {
  return settings_.delayGroup >= 0 && group == settings_.delayGroup ? settings_.delayMicros : 0;
}

int32_t AdaptiveRuntime::best(const AdaptKey& key) const {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() || !it->second.policy ? -1 : it->second.policy->best();
}

uint64_t AdaptiveRuntime::calls(const AdaptKey& key) const {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.calls;
}

std::optional<std::string> AdaptiveRuntime::learnedText() const {
  nlohmann::ordered_json doc;
  doc["format"] = kLearnedFormat;
  doc["version"] = kLearnedVersion;
  doc["signature"] = hex(signature_);
  doc["nRanks"] = nRanks_;
  doc["tableHash"] = hex(tableHash_);
  nlohmann::ordered_json keys = nlohmann::ordered_json::array();
  std::lock_guard lock(mutex_);
  auto add = [&](const AdaptKey& key, int32_t best, const std::vector<double>& agreedSeconds) {
    nlohmann::ordered_json item;
    item["collective"] = toLowerCase(collectiveName(key.collective));
    item["bucket"] = key.bucket;
    item["entry"] = key.entry;
    item["best"] = best;
    nlohmann::ordered_json us = nlohmann::ordered_json::array();
    for (double seconds : agreedSeconds) us.push_back(seconds * 1e6);
    item["agreedUs"] = std::move(us);
    keys.push_back(std::move(item));
  };
  for (const auto& [key, state] : keys_) {
    if (!state.policy) continue;
    std::vector<double> agreed;
    bool known = false;
    for (int32_t g = 0; g < state.policy->groups(); ++g) {
      const std::optional<double> seconds = state.policy->agreedSeconds(g);
      agreed.push_back(seconds.value_or(-1));
      known = known || seconds.has_value();
    }
    if (known) add(key, state.policy->best(), agreed);
  }
  for (const auto& [key, state] : learned_) add(key, state.best, state.agreedSeconds);  // not called this run
  if (keys.empty()) return std::nullopt;
  doc["keys"] = std::move(keys);
  return doc.dump(1) + "\n";
}

Status AdaptiveRuntime::persist() {
  if (rank_ != 0 || settings_.file.empty()) return {};
  const std::optional<std::string> text = learnedText();
  if (!text) return {};  // nothing learnt, nothing to keep (no file for every short job)
  const std::filesystem::path path(settings_.file);
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  Status written = writeFileAtomically(path, *text);
  if (!written) warnOnce("adapt-write", "TuCCL adapt: cannot write " + settings_.file + ": " + written.message());
  return written;
}

std::string localTopologyDescription() {
  if (const char* given = env("TUCCL_TOPOLOGY_SIGNATURE")) return std::string("given:") + given;
  std::string text = "net:";
  for (const std::string& name : sysfsNames("/sys/class/net", true)) text += name + ",";
  text += ";ib:";
  for (const std::string& name : sysfsNames("/sys/class/infiniband", false)) text += name + ",";
  return text;
}

uint64_t topologySignatureOf(const std::vector<std::string>& descriptions, int32_t nHosts) {
  uint64_t hash = fnv1a64("ranks=" + std::to_string(descriptions.size()) + ";hosts=" + std::to_string(nHosts));
  for (const std::string& description : descriptions) hash = fnv1a64(description + "\n", hash);
  return hash;
}

}  // namespace tuccl::backend
