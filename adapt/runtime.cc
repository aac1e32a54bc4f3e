// The runtime phase in a communicator (adaptive_runtime.h).
#include "adapt/runtime.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support/log.h"
#include "support/environment.h"
#include "support/cache_files.h"
#include "support/hash.h"
#include "support/text_values.h"

namespace tuccl {
namespace {

constexpr const char* kLearnedFormat = "tuccl-adaptation";
constexpr int kLearnedVersion = 2;
/// A learned table larger than this is not read (it holds a few numbers per key).
constexpr uintmax_t kMaxLearnedBytes = 16 << 20;

Status badVariable(const char* name, const std::string& value, const std::string& expected) {
  return makeError(ErrorCode::InvalidArgument, std::string(name) + "=" + value + ": expected " + expected);
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
  settings.firstAgreement = switches->firstAgreement;
  if (std::optional<std::string> value = env::text("TUCCL_ADAPT_FILE")) {
    settings.file = std::filesystem::absolute(*value).string();
  } else if (!cacheDir.empty()) {
    settings.file = cacheDir;
    settings.fileFromDefault = true;
  }
  if (std::optional<std::string> value = env::text("TUCCL_TEST_DELAY_GROUP")) {
    const std::string& text = *value;
    const size_t colon = text.find(':');
    const auto group = colon == std::string::npos ? std::nullopt : wholeNumber(text.substr(0, colon), 0, 255);
    const auto micros = colon == std::string::npos ? std::nullopt : wholeNumber(text.substr(colon + 1), 0, 60'000'000);
    if (!group || !micros) return badVariable("TUCCL_TEST_DELAY_GROUP", text, "<group>:<microseconds>");
    settings.delayGroup = static_cast<int32_t>(*group);
    settings.delayMicros = *micros;
  }
  return settings;
}

// The runtime's exchanges, all-gathered by one background thread in the order they were started.
// Each has a ticket; take(ticket) waits for that one's result.
class AdaptiveRuntime::Exchanges {
 public:
  explicit Exchanges(AllGather gather) : gather_(std::move(gather)) {}
  ~Exchanges() { stop(); }

  void stop() {
    std::thread thread;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      thread = std::move(thread_);
    }
    changed_.notify_all();
    if (thread.joinable()) thread.join();
    std::lock_guard lock(mutex_);
    for (auto& [ticket, bytes] : todo_) {
      done_.emplace(ticket, makeError(ErrorCode::Aborted, "TuCCL adapt: the communicator is going away"));
    }
    todo_.clear();
    changed_.notify_all();
  }

  uint64_t start(std::string bytes) {
    std::lock_guard lock(mutex_);
    const uint64_t ticket = ++started_;
    if (stop_) {
      done_.emplace(ticket, makeError(ErrorCode::Aborted, "TuCCL adapt: the communicator is going away"));
      return ticket;
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    todo_.emplace_back(ticket, std::move(bytes));
    changed_.notify_all();
    return ticket;
  }
  Expected<std::vector<std::string>> take(uint64_t ticket) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done_.count(ticket) > 0; });
    Expected<std::vector<std::string>> result = std::move(done_.at(ticket));
    done_.erase(ticket);
    return result;
  }
  void quiesce() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return todo_.empty() && !busy_; });
  }
  double lastSeconds() const {
    std::lock_guard lock(mutex_);
    return lastSeconds_;
  }
  uint64_t started() const {
    std::lock_guard lock(mutex_);
    return started_;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stop_ || !todo_.empty(); });
      if (stop_) return;  // what is left fails in stop()
      auto [ticket, bytes] = std::move(todo_.front());
      todo_.pop_front();
      busy_ = true;
      lock.unlock();
      const auto begin = std::chrono::steady_clock::now();
      Expected<std::vector<std::string>> result = gather_(bytes);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      lock.lock();
      busy_ = false;
      lastSeconds_ = seconds;
      done_.emplace(ticket, std::move(result));
      changed_.notify_all();
    }
  }

  AllGather gather_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<uint64_t, std::string>> todo_;
  std::map<uint64_t, Expected<std::vector<std::string>>> done_;
  uint64_t started_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  double lastSeconds_ = 0;
  std::thread thread_;
};

AdaptiveRuntime::AdaptiveRuntime(AdaptSettings settings, int32_t rank, int32_t nRanks, uint64_t signature,
                                 uint64_t tableHash, AllGather exchange)
    : settings_(std::move(settings)),
      rank_(rank),
      nRanks_(nRanks),
      signature_(signature),
      tableHash_(tableHash),
      gather_(exchange),
      exchanges_(std::make_unique<Exchanges>(std::move(exchange))) {
  if (settings_.fileFromDefault) {
    settings_.file = (std::filesystem::path(settings_.file) /
                      ("adaptation-n" + std::to_string(nRanks_) + "-t" + hex(tableHash_) + ".json"))
                         .string();
  }
}

AdaptiveRuntime::~AdaptiveRuntime() = default;

namespace {

// One group's agreed time in the learned table: {"us", "lowUs", "highUs", "samples"}.
nlohmann::ordered_json agreedJson(const AgreedTime& a) {
  nlohmann::ordered_json item;
  item["us"] = a.median * 1e6;
  item["lowUs"] = a.lower * 1e6;
  item["highUs"] = a.upper * 1e6;
  item["samples"] = a.samples;
  return item;
}
AgreedTime agreedFromJson(const nlohmann::json& item) {
  AgreedTime a;
  a.median = item.at("us").get<double>() * 1e-6;
  a.lower = item.at("lowUs").get<double>() * 1e-6;
  a.upper = item.at("highUs").get<double>() * 1e-6;
  a.samples = item.at("samples").get<uint64_t>();
  if (!(a.median >= 0)) a = AgreedTime{};
  return a;
}

}  // namespace

Status AdaptiveRuntime::loadLearned() {
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
  Expected<std::vector<std::string>> gathered = gather_(text);
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
        for (const nlohmann::json& group : item.at("groups")) state.agreed.push_back(agreedFromJson(group));
        const auto groups = static_cast<int32_t>(state.agreed.size());
        if (groups < 1 || state.best < 0 || state.best >= groups) continue;
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

namespace {

// The first agreement of a key waits until its calls pay for it: an exchange costs the caller up
// to kExchangeSeconds (4 CPU-device ranks on 2 loaded cores waited 0.1–1.6 ms for their first
// one), and the budget allows `budget` of the key's time. Before anything is agreed a call's time
// is bounded below from its size alone, the same on every rank: kCallFloorSeconds (an empty GPU
// kernel launch back to back takes 4.7 us on an H200, a small CPU-device call 5.5 us) plus its
// bytes at kCallFloorBytesPerSecond (faster than any collective measured: AllReduce moved 151 GB/s
// of algorithm bandwidth on the H200). A key the learned table knows uses its agreed time.
constexpr double kExchangeSeconds = 1e-3;
constexpr double kCallFloorSeconds = 5e-6;
constexpr double kCallFloorBytesPerSecond = 500e9;

uint64_t firstAgreementCall(const AdaptationOptions& rule, double callSeconds) {
  const double calls = std::ceil(kExchangeSeconds / (rule.budget * callSeconds));
  return calls < 1e15 ? static_cast<uint64_t>(calls) : uint64_t{1} << 50;
}

}  // namespace

AdaptiveRuntime::KeyState& AdaptiveRuntime::stateOf(const AdaptKey& key, int32_t groups) {
  KeyState& state = keys_[key];
  if (state.policy && state.policy->groups() == groups) return state;
  state = KeyState{};
  AdaptationOptions rule = settings_.rule;
  const double bytes = std::ldexp(1.0, key.bucket);  // the bucket's smallest size
  double callSeconds = kCallFloorSeconds + bytes / kCallFloorBytesPerSecond;
  auto it = learned_.find(key);
  const bool learned = it != learned_.end() && static_cast<int32_t>(it->second.agreed.size()) == groups;
  if (learned && it->second.agreed[static_cast<size_t>(it->second.best)].median > 0) {
    callSeconds = it->second.agreed[static_cast<size_t>(it->second.best)].median;
  }
  const uint64_t first = settings_.firstAgreement >= 0 ? static_cast<uint64_t>(settings_.firstAgreement)
                                                      : firstAgreementCall(rule, callSeconds);
  rule.firstSync = static_cast<int32_t>(
      std::min<uint64_t>(std::max<uint64_t>(static_cast<uint64_t>(std::max(0, rule.firstSync)), first), uint64_t{1} << 30));
  state.policy = std::make_shared<AdaptivePolicy>(groups, rule);
  state.warmup = static_cast<uint64_t>(std::max(0, settings_.warmup));
  if (it != learned_.end()) {
    if (learned) {
      state.policy->restore(it->second.best, it->second.agreed);
      state.announced = it->second.best;
      state.warmup = 0;
    }
    learned_.erase(it);
  }
  if (state.announced < 0) state.announced = state.policy->best();
  return state;
}

Expected<int32_t> AdaptiveRuntime::choose(const AdaptKey& key, int32_t groups, uint64_t bytes,
                                          std::shared_ptr<AdaptivePolicy>* handle) {
  if (handle != nullptr) handle->reset();
  if (groups < 2) return 0;
  std::unique_lock lock(mutex_);
  KeyState& state = stateOf(key, groups);
  // The key's policy, without a reference count on the common path: the map's node stays, and
  // apply() holds a count while it lets go of the lock.
  AdaptivePolicy* policy = state.policy.get();
  const uint64_t call = state.calls++;          // the key's call number (logs)
  const bool warming = call < state.warmup;     // the static choice, nothing exchanged
  const uint64_t decided = warming ? 0 : call - state.warmup;  // the policy's call number
  // "TuCCL adapt trace: rank=<r> call=<k> coll=<c> bytes=<n> <what>" at TRACE.
  auto trace = [&](const std::string& what) {
    if (logEnabled(LogLevel::Trace)) {
      logLine(LogLevel::Trace, rank_,
              "TuCCL adapt trace: rank=" + std::to_string(rank_) + " call=" + std::to_string(call) +
                  " coll=" + toLowerCase(collectiveName(key.collective)) + " bytes=" + std::to_string(bytes) + " " +
                  what);
    }
  };
  // What call `call` runs: "... runs group=<g>[ (why)]".
  auto traced = [&](int32_t group, const char* why) {
    if (logEnabled(LogLevel::Trace)) trace("runs group=" + std::to_string(group) + why);
    return group;
  };
  if (warming) {
    if (handle != nullptr) *handle = state.policy;  // the static choice's first timings
    return traced(0, " (warming up)");
  }
  // Applies the agreement in flight (waiting for its exchange if it is not done yet).
  auto apply = [&]() -> Status {
    const uint64_t ticket = state.ticket;
    const std::shared_ptr<AdaptivePolicy> held = state.policy;  // `policy` stays valid while unlocked
    lock.unlock();  // the device's completions record timings meanwhile
    const auto waitBegin = std::chrono::steady_clock::now();
    Expected<std::vector<std::string>> summaries = exchanges_->take(ticket);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - waitBegin).count();
    if (logEnabled(LogLevel::Trace)) {
      trace("agreement " + std::to_string(ticket) + " applied, waited " + std::to_string(waited * 1e6) +
            " us, the exchange took " + std::to_string(exchanges_->lastSeconds() * 1e6) + " us");
    }
    lock.lock();
    lastWait_ = waited;
    if (!summaries) return summaries.status();
    if (Status agreed = policy->agree(*summaries, decided); !agreed) return agreed;
    if (state.announced != policy->best()) {
      state.announced = policy->best();
      if (logEnabled(LogLevel::Info)) {
        logLine(LogLevel::Info, rank_,
                "TuCCL adapt: rank=" + std::to_string(rank_) + " call=" + std::to_string(call) +
                    " coll=" + toLowerCase(collectiveName(key.collective)) + " bytes=" + std::to_string(bytes) +
                    " group=" + std::to_string(policy->best()));
      }
    }
    return {};
  };
  if (policy->pending() && decided == state.applyAt) {
    if (Status applied = apply(); !applied) return applied;
  }
  if (policy->exchangeDue(decided)) {
    // What an agreement cost this rank: the exchange, or the wait for it where that was longer.
    state.ticket = exchanges_->start(policy->summary(std::max(exchanges_->lastSeconds(), lastWait_)));
    policy->exchangeStarted();
    const uint64_t lag = policy->exchangeLag();
    state.applyAt = decided + lag;
    if (logEnabled(LogLevel::Trace)) {
      trace("agreement " + std::to_string(state.ticket) + " started, applied " + std::to_string(lag) + " calls later");
    }
    if (lag == 0) {
      if (Status applied = apply(); !applied) return applied;
    }
  }
  const int32_t group = policy->groupFor(decided);
  const bool exploring = group != policy->best();
  if (handle != nullptr && policy->timed(decided, group)) *handle = state.policy;
  return traced(group, exploring ? " (exploring)" : "");
}

void AdaptiveRuntime::quiesce() { exchanges_->quiesce(); }

void AdaptiveRuntime::shutdown() { exchanges_->stop(); }

uint64_t AdaptiveRuntime::exchangesStarted() const { return exchanges_->started(); }

std::shared_ptr<AdaptivePolicy> AdaptiveRuntime::policyOf(const AdaptKey& key) const {
  std::lock_guard lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : it->second.policy;
}

void AdaptiveRuntime::record(const AdaptKey& key, int32_t group, double seconds) {
  if (std::shared_ptr<AdaptivePolicy> policy = policyOf(key)) policy->record(group, seconds);
}

void AdaptiveRuntime::exclude(const AdaptKey& key, int32_t group, const std::string& why) {
  std::shared_ptr<AdaptivePolicy> policy = policyOf(key);
  if (!policy) return;
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
  auto add = [&](const AdaptKey& key, int32_t best, const std::vector<AgreedTime>& agreed) {
    nlohmann::ordered_json item;
    item["collective"] = toLowerCase(collectiveName(key.collective));
    item["bucket"] = key.bucket;
    item["entry"] = key.entry;
    item["best"] = best;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const AgreedTime& a : agreed) groups.push_back(agreedJson(a));
    item["groups"] = std::move(groups);
    keys.push_back(std::move(item));
  };
  for (const auto& [key, state] : keys_) {
    if (!state.policy) continue;
    std::vector<AgreedTime> agreed;
    bool known = false;
    for (int32_t g = 0; g < state.policy->groups(); ++g) {
      const std::optional<AgreedTime> a = state.policy->agreed(g);
      agreed.push_back(a.value_or(AgreedTime{}));
      known = known || a.has_value();
    }
    if (known) add(key, state.policy->best(), agreed);
  }
  for (const auto& [key, state] : learned_) add(key, state.best, state.agreed);  // not called this run
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
  if (std::optional<std::string> given = env::text("TUCCL_TOPOLOGY_SIGNATURE")) return "given:" + *given;
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

}  // namespace tuccl
