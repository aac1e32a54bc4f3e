// The adaptive choice of configuration groups (adaptation.h).
#include "adapt/policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "support/text_values.h"
#include "support/environment.h"

namespace tuccl {
namespace {

// A rank's summary: a header, then one entry per group.
struct SummaryHeader {
  double exchangeSeconds;  // how long this rank's last exchange took
};
struct GroupSummary {
  double median;     // seconds
  double halfWidth;  // of the median's 95 % interval
  uint64_t samples;
  double first;      // the group's first call here (0: not yet)
};
static_assert(sizeof(SummaryHeader) == 8 && sizeof(GroupSummary) == 32);

/// The ceiling of a call count: the tuner plugin links the C library alone, and std::ceil may
/// call libm.
double ceilOf(double x) {
  if (!(x > -1e18 && x < 1e18)) return x;  // NaN and the huge stay as they are
  const auto t = static_cast<double>(static_cast<int64_t>(x));
  return t < x ? t + 1 : t;
}

Status badVariable(const char* name, const std::string& value, const std::string& expected) {
  return makeError(ErrorCode::InvalidArgument, std::string(name) + "=" + value + ": expected " + expected);
}

// A call count of variable `name` in [low, 1048576] into `calls`.
Status readCalls(const char* name, int64_t low, int32_t& calls) {
  const std::optional<std::string> value = env::text(name);
  if (!value) return {};
  const Expected<int64_t> parsed = parseIntegerInRange(*value, low, 1 << 20);
  if (!parsed) {
    return badVariable(name, *value, "a whole number of calls from " + std::to_string(low) + " to 1048576");
  }
  calls = static_cast<int32_t>(*parsed);
  return {};
}

}  // namespace

Expected<AdaptationSwitches> adaptationSwitchesFromEnvironment() {
  AdaptationSwitches switches;
  if (std::optional<std::string> value = env::text("TUCCL_ADAPT")) {
    const std::string text = toLowerCase(*value);
    if (text == "1" || text == "on" || text == "yes") {
      switches.enabled = true;
    } else if (text == "0" || text == "off" || text == "no") {
      switches.enabled = false;
    } else {
      return badVariable("TUCCL_ADAPT", *value, "1 or 0");
    }
  }
  if (Status read = readCalls("TUCCL_ADAPT_SYNC", 1, switches.rule.syncEvery); !read) return read;
  if (Status read = readCalls("TUCCL_ADAPT_PROBE", 2, switches.rule.probeEvery); !read) return read;
  if (Status read = readCalls("TUCCL_ADAPT_WARMUP", 0, switches.warmup); !read) return read;
  if (Status read = readCalls("TUCCL_ADAPT_FIRST", 0, switches.firstAgreement); !read) return read;
  if (std::optional<std::string> value = env::text("TUCCL_ADAPT_BUDGET")) {
    char* end = nullptr;
    const double percent = std::strtod(value->c_str(), &end);
    if (end == value->c_str() || *end != '\0' || !(percent >= 0.1 && percent <= 50)) {
      return badVariable("TUCCL_ADAPT_BUDGET", *value, "a percentage from 0.1 to 50");
    }
    switches.rule.budget = percent / 100;
  }
  return switches;
}

int32_t sizeBucket(uint64_t bytes) { return bytes == 0 ? 0 : static_cast<int32_t>(std::bit_width(bytes)) - 1; }

AdaptivePolicy::AdaptivePolicy(int32_t groups, AdaptationOptions options)
    : groups_(std::clamp(groups, 1, kMaxPolicyGroups)), options_(options) {
  options_.minSamples = std::max(1, options_.minSamples);
  options_.syncEvery = std::max(1, options_.syncEvery);
  options_.probeEvery = std::max(2, options_.probeEvery);
  options_.window = std::max(options_.minSamples, options_.window);
  if (!(options_.budget > 0)) options_.budget = 0.03;
  agreed_.assign(static_cast<size_t>(groups_), AgreedTime{});
  excluded_.assign(static_cast<size_t>(groups_), false);
  ran_.assign(static_cast<size_t>(groups_), false);
  options_.firstSync = std::max(0, options_.firstSync);
  interval_ = 0;
  nextSync_ = static_cast<uint64_t>(options_.firstSync);  // the first agreement learns the static choice's time
  recent_.resize(static_cast<size_t>(groups_));
  first_.assign(static_cast<size_t>(groups_), 0.0);
  setup_.assign(static_cast<size_t>(groups_), 0.0);
}

bool AdaptivePolicy::measured(int32_t group) const {
  return group >= 0 && group < groups_ && agreed_[static_cast<size_t>(group)].median >= 0 &&
         agreed_[static_cast<size_t>(group)].samples >= static_cast<uint64_t>(options_.minSamples);
}

int32_t AdaptivePolicy::nextProbeGroup() const {
  // Groups still short of minSamples come first, the most promising (lowest agreed median, an
  // unknown one as fast as the best) first; once every group is measured, all in turn.
  const double best = agreed_[static_cast<size_t>(best_)].median;
  int32_t pick = -1;
  double pickTime = 0;
  for (int32_t step = 1; step <= groups_; ++step) {  // the cursor's own group last
    const int32_t g = (probeCursor_ + step) % groups_;
    if (g == best_ || excluded_[static_cast<size_t>(g)] || measured(g)) continue;
    const double t = agreed_[static_cast<size_t>(g)].median >= 0 ? agreed_[static_cast<size_t>(g)].median : best;
    if (pick < 0 || t < pickTime) {
      pick = g;
      pickTime = t;
    }
  }
  if (pick >= 0) return pick;
  for (int32_t step = 1; step <= groups_; ++step) {
    const int32_t g = (probeCursor_ + step) % groups_;
    if (g != best_ && !excluded_[static_cast<size_t>(g)]) return g;
  }
  return -1;
}

uint64_t AdaptivePolicy::probeGap(int32_t group) const {
  const double best = agreed_[static_cast<size_t>(best_)].median;
  const auto least = static_cast<uint64_t>(options_.probeEvery);
  if (!(best > 0)) return least;
  // What one probe of `group` costs beyond a call of the best group, from its agreed median
  // (even of fewer than minSamples timings); a group with no timing yet is costed as twice as
  // slow.
  const double median = agreed_[static_cast<size_t>(group)].median;
  const double extra = median >= 0 ? std::max(0.0, median - best) : best;
  const double calls = ceilOf(extra / (options_.budget * best));
  if (!(calls < 1e12)) return UINT64_MAX / 2;
  return std::max(least, static_cast<uint64_t>(calls));
}

uint64_t AdaptivePolicy::gatedProbeCall() const {
  if (nextProbe_ == UINT64_MAX) return UINT64_MAX;
  const int32_t group = nextProbeGroup();
  if (group < 0) return UINT64_MAX;
  if (ran_[static_cast<size_t>(group)]) return nextProbe_;
  // Its first call builds or loads its plan: not before the key's calls pay for that.
  const AgreedTime& best = agreed_[static_cast<size_t>(best_)];
  if (!(best.median > 0)) return nextProbe_;
  const double affordable = ceilOf(best.first / (options_.budget * best.median));
  if (!(affordable < 1e18)) return UINT64_MAX;
  return std::max(nextProbe_, static_cast<uint64_t>(affordable));
}

int32_t AdaptivePolicy::groupFor(uint64_t k) {
  if (groups_ > 1 && k == nextProbe_) nextProbe_ = gatedProbeCall();
  if (groups_ == 1 || k != nextProbe_) {
    ran_[static_cast<size_t>(best_)] = true;
    return best_;
  }
  const int32_t group = nextProbeGroup();
  if (group < 0) {
    nextProbe_ = UINT64_MAX;
    return best_;
  }
  ran_[static_cast<size_t>(group)] = true;
  ++probes_;
  probeCursor_ = group;
  // The next probe pays for this one.
  const uint64_t gap = probeGap(group);
  nextProbe_ = gap > UINT64_MAX - k ? UINT64_MAX : k + gap;
  return group;
}

void AdaptivePolicy::exclude(int32_t group) {
  if (group <= 0 || group >= groups_) return;  // the static choice always runs
  excluded_[static_cast<size_t>(group)] = true;
  agreed_[static_cast<size_t>(group)] = AgreedTime{};
  if (challenger_ == group) challenger_ = -1;
  if (best_ == group) best_ = 0;
}

uint64_t AdaptivePolicy::exchangeLag() const {
  const auto every = static_cast<uint64_t>(options_.syncEvery);
  const double call = agreed_[static_cast<size_t>(best_)].median;
  if (!(call > 0) && !(exchangeSeconds_ > 0)) return 0;  // nothing agreed yet
  if (!(call > 0) || !(exchangeSeconds_ > 0)) return every;
  const double calls = ceilOf(4 * exchangeSeconds_ / call);
  const double most = static_cast<double>(every * kMaxSyncBackoff);
  return static_cast<uint64_t>(std::clamp(calls, static_cast<double>(every), most));
}

bool AdaptivePolicy::timed(uint64_t k, int32_t group) const {
  if (group != best_ || timesSetup(group)) return true;
  // Before the first agreement the span is the calls up to it; then the agreement interval.
  const uint64_t span = interval_ > 0 ? interval_ : nextSync_;
  const uint64_t stride = std::max<uint64_t>(1, span / static_cast<uint64_t>(options_.window));
  if (stride == 1) return true;
  return k < nextSync_ ? (nextSync_ - 1 - k) % stride == 0 : (k - nextSync_) % stride == 0;
}

void AdaptivePolicy::record(int32_t group, double seconds) {
  if (group < 0 || group >= groups_ || !(seconds >= 0)) return;
  std::lock_guard lock(mutex_);
  if (!seen(group)) {  // the group's first call built or loaded its plan
    seen_.fetch_or(uint64_t{1} << group, std::memory_order_relaxed);
    first_[static_cast<size_t>(group)] = seconds;
    return;
  }
  std::vector<double>& samples = recent_[static_cast<size_t>(group)];
  samples.push_back(seconds);
  if (samples.size() > static_cast<size_t>(options_.window)) samples.erase(samples.begin());
}

void AdaptivePolicy::recordSetup(int32_t group, double seconds) {
  if (group < 0 || group >= groups_ || !(seconds >= 0) || !std::isfinite(seconds)) return;
  std::lock_guard lock(mutex_);
  // Until the group's first timing arrives: the calls after it find the plan cached.
  if (!seen(group)) setup_[static_cast<size_t>(group)] += seconds;
}

std::string AdaptivePolicy::summary(double exchangeSeconds) const {
  std::string bytes(sizeof(SummaryHeader) + static_cast<size_t>(groups_) * sizeof(GroupSummary), '\0');
  const SummaryHeader header{exchangeSeconds >= 0 ? exchangeSeconds : 0};
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::lock_guard lock(mutex_);
  for (int32_t g = 0; g < groups_; ++g) {
    const std::vector<double>& samples = recent_[static_cast<size_t>(g)];
    const auto [median, halfWidth] = medianAndHalfWidth(samples);
    const double first = seen(g) ? first_[static_cast<size_t>(g)] + setup_[static_cast<size_t>(g)] : 0;
    const GroupSummary entry{median, halfWidth, samples.size(), first};
    std::memcpy(bytes.data() + sizeof(SummaryHeader) + static_cast<size_t>(g) * sizeof(entry), &entry, sizeof(entry));
  }
  return bytes;
}

Status AdaptivePolicy::agree(const std::vector<std::string>& summaries, uint64_t k) {
  const int32_t before = best_;
  Status status = agreeOn(summaries);
  pending_ = false;
  // Probes begin once the best group's time is agreed, and restart from here when it changed.
  if (agreed_[static_cast<size_t>(best_)].median > 0 && (nextProbe_ == UINT64_MAX || best_ != before)) {
    const uint64_t gap = static_cast<uint64_t>(options_.probeEvery);
    nextProbe_ = k + gap;
    probeCursor_ = best_;
  }
  // The next agreement: soon while probes bring timings or the choice changes, later and later
  // while not, never more often than the budget pays for, and not before the next probe.
  bool unmeasured = false;
  for (int32_t g = 0; g < groups_; ++g) unmeasured = unmeasured || (!excluded_[static_cast<size_t>(g)] && !measured(g));
  const bool learning = !status || best_ != before || agreed_[static_cast<size_t>(best_)].median < 0 ||
                        challenger_ >= 0 || (unmeasured && probesAtStart_ != probesAgreed_);
  probesAgreed_ = probesAtStart_;
  const auto every = static_cast<uint64_t>(options_.syncEvery);
  interval_ = learning ? every : std::min(std::max(interval_, every) * 2, every * kMaxSyncBackoff);
  const double best = agreed_[static_cast<size_t>(best_)].median;
  if (best > 0 && exchangeSeconds_ > 0) {
    const double paid = ceilOf(exchangeSeconds_ / (options_.budget * best) / static_cast<double>(every));
    if (paid < 1e12) interval_ = std::max(interval_, static_cast<uint64_t>(paid) * every);
  }
  nextSync_ = k + interval_;
  if (!learning) {
    const uint64_t probe = gatedProbeCall();
    if (probe != UINT64_MAX && probe > nextSync_) nextSync_ = k + (probe - k + every - 1) / every * every;
  }
  return status;
}

Status AdaptivePolicy::agreeOn(const std::vector<std::string>& summaries) {
  const size_t expected = sizeof(SummaryHeader) + static_cast<size_t>(groups_) * sizeof(GroupSummary);
  for (size_t r = 0; r < summaries.size(); ++r) {
    if (summaries[r].size() != expected) {
      return makeError(ErrorCode::InvalidArgument, "adaptation: rank " + std::to_string(r) + "'s summary has " +
                                                       std::to_string(summaries[r].size()) + " bytes, not " +
                                                       std::to_string(expected));
    }
  }
  if (summaries.empty()) return {};
  std::vector<AgreedTime> agreed(static_cast<size_t>(groups_));
  std::vector<bool> everyRank(static_cast<size_t>(groups_), true);
  double exchange = 0;
  for (const std::string& summary : summaries) {
    SummaryHeader header;
    std::memcpy(&header, summary.data(), sizeof(header));
    if (header.exchangeSeconds > exchange && std::isfinite(header.exchangeSeconds)) exchange = header.exchangeSeconds;
    for (int32_t g = 0; g < groups_; ++g) {
      GroupSummary entry;
      std::memcpy(&entry, summary.data() + sizeof(SummaryHeader) + static_cast<size_t>(g) * sizeof(entry),
                  sizeof(entry));
      AgreedTime& a = agreed[static_cast<size_t>(g)];
      if (entry.first > a.first && std::isfinite(entry.first)) a.first = entry.first;
      if (entry.samples == 0 || !(entry.median >= 0) || !std::isfinite(entry.median) || !(entry.halfWidth >= 0) ||
          !std::isfinite(entry.halfWidth)) {
        everyRank[static_cast<size_t>(g)] = false;
        continue;
      }
      a.median = std::max(a.median, entry.median);
      a.lower = std::max(a.lower, entry.median - entry.halfWidth);
      a.upper = std::max(a.upper, entry.median + entry.halfWidth);
      a.samples = a.samples == 0 ? entry.samples : std::min(a.samples, entry.samples);
    }
  }
  exchangeSeconds_ = exchange;
  for (int32_t g = 0; g < groups_; ++g) {
    if (excluded_[static_cast<size_t>(g)]) continue;
    AgreedTime& a = agreed[static_cast<size_t>(g)];
    if (!everyRank[static_cast<size_t>(g)]) a.samples = 0;  // a rank has no timing of it yet
    // New timings replace what was agreed (or restored) once they are enough to decide on, or
    // when nothing was known.
    AgreedTime& kept = agreed_[static_cast<size_t>(g)];
    if (a.samples >= static_cast<uint64_t>(options_.minSamples) || kept.median < 0) {
      if (a.median >= 0) kept = AgreedTime{a.median, a.lower, a.upper, a.samples, std::max(kept.first, a.first)};
    }
    kept.first = std::max(kept.first, a.first);
  }
  // A measured group whose interval lies wholly below the best group's, at two agreements in a
  // row (a chance gap at one of many agreements moves nothing), takes over.
  int32_t fastest = -1;
  for (int32_t g = 0; g < groups_ && measured(best_); ++g) {
    if (g == best_ || excluded_[static_cast<size_t>(g)] || !measured(g)) continue;
    if (!(agreed_[static_cast<size_t>(g)].upper < agreed_[static_cast<size_t>(best_)].lower)) continue;
    if (fastest < 0 || agreed_[static_cast<size_t>(g)].median < agreed_[static_cast<size_t>(fastest)].median) fastest = g;
  }
  if (fastest >= 0 && fastest == challenger_) {
    best_ = fastest;
    challenger_ = -1;
  } else {
    challenger_ = fastest;
  }
  return {};
}

void AdaptivePolicy::restore(int32_t best, const std::vector<AgreedTime>& agreed) {
  if (best < 0 || best >= groups_ || agreed.size() != static_cast<size_t>(groups_)) return;
  for (int32_t g = 0; g < groups_; ++g) {
    AgreedTime a = agreed[static_cast<size_t>(g)];
    if (!(a.median >= 0) || !std::isfinite(a.median) || !(a.lower <= a.median) || !(a.upper >= a.median)) a = AgreedTime{};
    if (!(a.first >= 0) || !std::isfinite(a.first)) a.first = 0;
    agreed_[static_cast<size_t>(g)] = a;
    ran_[static_cast<size_t>(g)] = a.median >= 0;  // measured in an earlier run: its plan is cached
  }
  best_ = best;
}

std::optional<AgreedTime> AdaptivePolicy::agreed(int32_t group) const {
  if (group < 0 || group >= groups_ || agreed_[static_cast<size_t>(group)].median < 0) return std::nullopt;
  return agreed_[static_cast<size_t>(group)];
}

std::optional<double> AdaptivePolicy::agreedSeconds(int32_t group) const {
  const std::optional<AgreedTime> a = agreed(group);
  if (!a) return std::nullopt;
  return a->median;
}

}  // namespace tuccl
