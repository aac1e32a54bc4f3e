// The agreement rounds of the tuner plugin's runtime phase (rendezvous.h).
#include "adapt/rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace tuccl {
namespace {

constexpr const char* kOutcomeMagic = "tuccl-adapt-outcome 1\n";
constexpr const char* kJoinMagic = "tuccl-adapt-join 1\n";

std::string hex16(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::string encodeOutcome(const RoundOutcome& outcome) {
  std::string bytes = kOutcomeMagic;
  if (!outcome.agreed) return bytes + "abandoned\n";
  bytes += "agreed " + std::to_string(outcome.summaries.size()) + "\n";
  for (const std::string& summary : outcome.summaries) {
    bytes += std::to_string(summary.size()) + "\n";
    bytes += summary;
  }
  return bytes;
}

RoundOutcome decodeOutcome(const std::string& bytes, int32_t nRanks) {
  const std::string magic = kOutcomeMagic;
  const std::string head = "agreed " + std::to_string(nRanks) + "\n";
  if (bytes.compare(0, magic.size(), magic) != 0 || bytes.compare(magic.size(), head.size(), head) != 0) return {};
  RoundOutcome outcome;
  size_t at = magic.size() + head.size();
  for (int32_t r = 0; r < nRanks; ++r) {
    const size_t newline = bytes.find('\n', at);
    if (newline == std::string::npos || newline == at || newline - at > 9) return {};
    size_t length = 0;
    for (size_t i = at; i < newline; ++i) {
      if (bytes[i] < '0' || bytes[i] > '9') return {};
      length = length * 10 + static_cast<size_t>(bytes[i] - '0');
    }
    if (bytes.size() - (newline + 1) < length) return {};
    outcome.summaries.push_back(bytes.substr(newline + 1, length));
    at = newline + 1 + length;
  }
  if (at != bytes.size()) return {};
  outcome.agreed = true;
  return outcome;
}

Rendezvous::Rendezvous(std::unique_ptr<RendezvousStore> store, uint64_t commId, int32_t nRanks,
                       std::chrono::milliseconds timeout)
    : store_(std::move(store)), prefix_("tuccl-adapt-" + hex16(commId)), nRanks_(nRanks), timeout_(timeout) {}

std::string Rendezvous::roundName(const std::string& key, uint64_t round) const {
  return prefix_ + "-" + key + "-r" + std::to_string(round);
}

bool Rendezvous::publish(const std::string& name, const std::string& bytes) {
  // A name that exists already was published by a communicator with the same id (v2..v4 ids,
  // tuner_adapt.h): not ours to remove, and the round's outcome still decides alike for every reader.
  Expected<bool> created = store_->create(name, bytes);
  return created && *created;
}

Expected<std::string> Rendezvous::createOrRead(const std::string& name, const std::string& bytes) {
  Expected<bool> created = store_->create(name, bytes);
  if (!created) return created.status();
  return store_->read(name);
}

Expected<std::string> Rendezvous::awaitOutcome(
    const std::string& outcomeName, const std::function<std::string(int32_t)>& member,
    const std::function<std::string(const std::vector<std::string>&)>& verdict, const std::string& abandoned) {
  std::vector<std::string> values(static_cast<size_t>(nRanks_));
  std::vector<bool> have(static_cast<size_t>(nRanks_), false);
  int32_t missing = nRanks_;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    Expected<std::string> outcome = store_->read(outcomeName);
    if (outcome || outcome.status().code() != ErrorCode::NotFound) return outcome;
    for (int32_t r = 0; r < nRanks_ && missing > 0; ++r) {
      if (have[static_cast<size_t>(r)]) continue;
      Expected<std::string> bytes = store_->read(member(r));
      if (!bytes) continue;
      values[static_cast<size_t>(r)] = std::move(*bytes);
      have[static_cast<size_t>(r)] = true;
      --missing;
    }
    if (missing == 0) return createOrRead(outcomeName, verdict(values));
    if (std::chrono::steady_clock::now() >= deadline) return createOrRead(outcomeName, abandoned);
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

Expected<bool> Rendezvous::join(const std::string& settings) {
  const std::string base = prefix_ + "-join";
  for (int32_t s = 0; s < nRanks_ && slot_ < 0; ++s) {
    Expected<bool> created = store_->create(base + "-slot" + std::to_string(s), settings);
    if (!created) return created.status();
    if (*created) slot_ = s;
  }
  const std::string agreed = std::string(kJoinMagic) + "agreed\n" + settings;
  Expected<std::string> outcome = awaitOutcome(
      base + "-outcome", [&](int32_t s) { return base + "-slot" + std::to_string(s); },
      [&](const std::vector<std::string>& joined) {
        for (const std::string& other : joined) {
          if (other != joined[0]) return std::string(kJoinMagic) + "differ\n";
        }
        return std::string(kJoinMagic) + "agreed\n" + joined[0];
      },
      std::string(kJoinMagic) + "abandoned\n");
  if (!outcome) return outcome.status();
  return *outcome == agreed;
}

Expected<RoundOutcome> Rendezvous::agree(const std::string& key, uint64_t round, int32_t rank,
                                         const std::string& summary) {
  const std::string base = roundName(key, round);
  if (rank >= 0 && rank < nRanks_) {
    const std::string mine = base + "-rank" + std::to_string(rank);
    if (publish(mine, summary)) published_.push_back(mine);
  }
  Expected<std::string> outcome = awaitOutcome(
      base + "-outcome", [&](int32_t r) { return base + "-rank" + std::to_string(r); },
      [](const std::vector<std::string>& summaries) { return encodeOutcome({true, summaries}); },
      encodeOutcome({}));
  if (!outcome) return outcome.status();
  // Once the outcome exists nobody reads the summaries.
  for (const std::string& name : published_) store_->remove(name);
  published_.clear();
  return decodeOutcome(*outcome, nRanks_);
}

void Rendezvous::finish() {
  for (const std::string& name : published_) store_->remove(name);
  published_.clear();
  if (slot_ < 0) return;
  publish(prefix_ + "-done-slot" + std::to_string(slot_), "done\n");
  for (int32_t s = 0; s < nRanks_; ++s) {
    if (!store_->read(prefix_ + "-done-slot" + std::to_string(s))) return;
  }
  // Every rank is done: nobody reads this communicator's names any more.
  store_->removePrefix(prefix_ + "-");
}

}  // namespace tuccl
