// The adaptive choice of configuration groups (adaptation.h).
#include "table/adaptation.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "support/text_values.h"

namespace tuccl {
namespace {

struct GroupSummary {
  double meanSeconds;
  uint64_t samples;
};
static_assert(sizeof(GroupSummary) == 16);

const char* nonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

Status badVariable(const char* name, const char* value, const std::string& expected) {
  return makeError(ErrorCode::InvalidArgument, std::string(name) + "=" + value + ": expected " + expected);
}

// A call count of variable `name` in [low, 1048576] into `calls`.
Status readCalls(const char* name, int64_t low, int32_t& calls) {
  const char* value = nonEmptyEnv(name);
  if (value == nullptr) return {};
  const Expected<int64_t> parsed = parseIntegerInRange(value, low, 1 << 20);
  if (!parsed) {
    return badVariable(name, value, "a whole number of calls from " + std::to_string(low) + " to 1048576");
  }
  calls = static_cast<int32_t>(*parsed);
  return {};
}

}  // namespace

Expected<AdaptationSwitches> adaptationSwitchesFromEnvironment() {
  AdaptationSwitches switches;
  if (const char* value = nonEmptyEnv("TUCCL_ADAPT")) {
    const std::string text = toLowerCase(value);
    if (text == "1" || text == "on" || text == "yes") {
      switches.enabled = true;
    } else if (text == "0" || text == "off" || text == "no") {
      switches.enabled = false;
    } else {
      return badVariable("TUCCL_ADAPT", value, "1 or 0");
    }
  }
  if (Status read = readCalls("TUCCL_ADAPT_SYNC", 1, switches.rule.syncEvery); !read) return read;
  if (Status read = readCalls("TUCCL_ADAPT_PROBE", 2, switches.rule.probeEvery); !read) return read;
  if (Status read = readCalls("TUCCL_ADAPT_WARMUP", 0, switches.warmup); !read) return read;
  return switches;
}

int32_t sizeBucket(uint64_t bytes) { return bytes == 0 ? 0 : static_cast<int32_t>(std::bit_width(bytes)) - 1; }

AdaptivePolicy::AdaptivePolicy(int32_t groups, AdaptationOptions options)
    : groups_(std::max(1, groups)), options_(options) {
  options_.samplesPerGroup = std::max(1, options_.samplesPerGroup);
  options_.syncEvery = std::max(1, options_.syncEvery);
  options_.probeEvery = std::max(2, options_.probeEvery);
  options_.window = std::max(1, options_.window);
  agreed_.assign(static_cast<size_t>(groups_), -1.0);
  excluded_.assign(static_cast<size_t>(groups_), false);
  interval_ = static_cast<uint64_t>(options_.syncEvery);
  nextSync_ = interval_;
  recent_.resize(static_cast<size_t>(groups_));
}

int32_t AdaptivePolicy::groupFor(uint64_t k) const {
  const int32_t group = candidateFor(k);
  return excluded_[static_cast<size_t>(group)] ? best_ : group;
}

void AdaptivePolicy::exclude(int32_t group) {
  if (group <= 0 || group >= groups_) return;  // the static choice always runs
  excluded_[static_cast<size_t>(group)] = true;
  agreed_[static_cast<size_t>(group)] = -1;
  if (best_ == group) best_ = 0;
}

int32_t AdaptivePolicy::candidateFor(uint64_t k) const {
  if (groups_ == 1) return 0;
  const uint64_t explore =
      restored_ ? 0 : static_cast<uint64_t>(groups_) * static_cast<uint64_t>(options_.samplesPerGroup);
  if (k < explore) return static_cast<int32_t>(k % static_cast<uint64_t>(groups_));
  const uint64_t since = k - explore;
  const auto every = static_cast<uint64_t>(options_.probeEvery);
  if (since % every != every - 1) return best_;
  // Probes visit the other groups in turn.
  const uint64_t probe = since / every;
  const auto offset = static_cast<int32_t>(1 + probe % static_cast<uint64_t>(groups_ - 1));
  return (best_ + offset) % groups_;
}

void AdaptivePolicy::record(int32_t group, double seconds) {
  if (group < 0 || group >= groups_ || !(seconds >= 0)) return;
  std::lock_guard lock(mutex_);
  std::vector<double>& samples = recent_[static_cast<size_t>(group)];
  samples.push_back(seconds);
  if (samples.size() > static_cast<size_t>(options_.window)) samples.erase(samples.begin());
}

std::string AdaptivePolicy::summary() const {
  std::string bytes(static_cast<size_t>(groups_) * sizeof(GroupSummary), '\0');
  std::lock_guard lock(mutex_);
  for (int32_t g = 0; g < groups_; ++g) {
    const std::vector<double>& samples = recent_[static_cast<size_t>(g)];
    GroupSummary entry{0.0, samples.size()};
    if (!samples.empty()) entry.meanSeconds = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
    std::memcpy(bytes.data() + static_cast<size_t>(g) * sizeof(entry), &entry, sizeof(entry));
  }
  return bytes;
}

Status AdaptivePolicy::agree(const std::vector<std::string>& summaries) {
  const int32_t before = best_;
  Status status = agreeOn(summaries);
  // The next agreement: soon while something changes or is unknown, later and later while not.
  bool settled = status && best_ == before;
  for (int32_t g = 0; g < groups_ && settled; ++g) {
    settled = excluded_[static_cast<size_t>(g)] || agreed_[static_cast<size_t>(g)] >= 0;
  }
  const auto every = static_cast<uint64_t>(options_.syncEvery);
  interval_ = settled ? std::min(interval_ * 2, every * kMaxSyncBackoff) : every;
  nextSync_ += interval_;
  return status;
}

Status AdaptivePolicy::agreeOn(const std::vector<std::string>& summaries) {
  const size_t expected = static_cast<size_t>(groups_) * sizeof(GroupSummary);
  for (size_t r = 0; r < summaries.size(); ++r) {
    if (summaries[r].size() != expected) {
      return makeError(ErrorCode::InvalidArgument, "adaptation: rank " + std::to_string(r) + "'s summary has " +
                                                       std::to_string(summaries[r].size()) + " bytes, not " +
                                                       std::to_string(expected));
    }
  }
  std::vector<double> agreed(static_cast<size_t>(groups_), -1.0);
  for (const std::string& summary : summaries) {
    for (int32_t g = 0; g < groups_; ++g) {
      GroupSummary entry;
      std::memcpy(&entry, summary.data() + static_cast<size_t>(g) * sizeof(entry), sizeof(entry));
      if (entry.samples == 0 || !(entry.meanSeconds >= 0) || excluded_[static_cast<size_t>(g)]) continue;
      agreed[static_cast<size_t>(g)] = std::max(agreed[static_cast<size_t>(g)], entry.meanSeconds);
    }
  }
  agreed_ = agreed;
  // The fastest known group takes over when it beats the current one by the margin (or the
  // current one has no agreed time yet).
  int32_t fastest = -1;
  for (int32_t g = 0; g < groups_; ++g) {
    if (agreed_[static_cast<size_t>(g)] < 0) continue;
    if (fastest < 0 || agreed_[static_cast<size_t>(g)] < agreed_[static_cast<size_t>(fastest)]) fastest = g;
  }
  if (fastest < 0 || fastest == best_) return {};
  const double current = agreed_[static_cast<size_t>(best_)];
  if (current < 0 || agreed_[static_cast<size_t>(fastest)] < current * (1 - options_.switchMargin)) best_ = fastest;
  return {};
}

void AdaptivePolicy::restore(int32_t best, const std::vector<double>& agreedSeconds) {
  if (best < 0 || best >= groups_ || agreedSeconds.size() != static_cast<size_t>(groups_)) return;
  best_ = best;
  agreed_ = agreedSeconds;
  for (double& seconds : agreed_) {
    if (!(seconds >= 0)) seconds = -1;
  }
  restored_ = true;
}

std::optional<double> AdaptivePolicy::agreedSeconds(int32_t group) const {
  if (group < 0 || group >= groups_ || agreed_[static_cast<size_t>(group)] < 0) return std::nullopt;
  return agreed_[static_cast<size_t>(group)];
}

}  // namespace tuccl
