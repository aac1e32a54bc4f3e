// Where the tuner plugin instances of one communicator agree (TuCCL §III-A's runtime phase inside
// NCCL): a store every rank can reach (TUCCL_ADAPT_RENDEZVOUS=dir:/path or tcp:host:port,
// rendezvous_store.h), whose names are created once.
//
// In:  per agreement round (a communicator, a key, a round number), this rank's summary.
// Out: the round's outcome — every rank's summary, or "abandoned" — identical for every rank that
//      reads it; or an error when this rank can neither read nor create the outcome.
//
// Protocol, per round: each rank publishes its summary under its own name (the store makes it
// appear complete or not at all), then waits. The first rank that sees all nRanks summaries
// creates the *outcome* name — "agreed" and the summaries in rank order. Creating a name fails
// when it exists, so exactly one outcome is ever created, complete when visible. A rank that finds
// no outcome and not all summaries by the timeout creates the outcome "abandoned" the same way.
// Every rank applies whatever the outcome holds, never what it saw itself: a rank that timed out
// while another completed the round applies "agreed", and one that completed the round after
// another's timeout applies "abandoned". The single residual case is a rank that can neither
// create nor read the outcome (the directory gone or unwritable mid-job, the store's process or
// connection lost, an I/O error): agree() returns an error; the caller keeps its last agreed
// state and says so (WARN), and only then may its choice differ from ranks that read an "agreed"
// outcome. (The TCP store answers from one process's memory, so there the residual case is the
// store dying between two ranks' reads of the same outcome.)
//
// Joining: before any round, at init, each rank's tuner takes a join slot (the first of
// ...-join-slot0 .. slot<nRanks-1> it can create) holding its settings (table hash, rule, rank
// count), and the join outcome is decided like a round's: "agreed" when nRanks slots exist and
// hold the same settings, else "differ", or "abandoned" by the timeout. Only a rank that reads
// "agreed" with its own settings adapts; so a rank without a rendezvous (or with other settings)
// keeps every rank on the static choice, exploration included.
//
// Waits are bounded: agree() returns by the timeout plus the time of a few store operations (each
// TCP request waits at most the timeout). Names: tuccl-adapt-<comm>-<key>-r<round>-rank<r> (a
// summary; its rank removes it once the outcome is read), ...-r<round>-outcome, and
// tuccl-adapt-<comm>-join-slot<s>, ...-join-outcome, and tuccl-adapt-<comm>-done-slot<s> (finish()).
// The last rank to finish removes every name of the communicator. A rank that crashes leaves its names (and keeps the others from removing theirs):
// give each job its own directory and remove it after the job (a TCP store ends with its job).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapt/rendezvous_store.h"
#include "support/status.h"

namespace tuccl {

/// A round's outcome: every rank's summary (rank order) when agreed; nothing when abandoned.
struct RoundOutcome {
  bool agreed = false;
  std::vector<std::string> summaries;
};

class Rendezvous {
 public:
  Rendezvous(std::unique_ptr<RendezvousStore> store, uint64_t commId, int32_t nRanks,
             std::chrono::milliseconds timeout);

  /// At init: takes a join slot with `settings` and waits (bounded) for the join outcome. True
  /// when every rank joined with the same settings (then rounds may follow); an error when this
  /// rank can neither create nor read the outcome.
  Expected<bool> join(const std::string& settings);

  /// Publishes `summary` as `rank`'s for round `round` of `key` (a file-name-safe word; `rank` -1:
  /// this rank has nothing to publish) and waits, bounded, for the round's outcome.
  Expected<RoundOutcome> agree(const std::string& key, uint64_t round, int32_t rank, const std::string& summary);

  /// Finalize: removes this rank's summaries and marks its join slot done (no slot: nothing to
  /// mark); the rank that finds every slot done removes all of the communicator's names.
  void finish();

 private:
  std::string roundName(const std::string& key, uint64_t round) const;
  /// Whether this call created `name` with `bytes`.
  bool publish(const std::string& name, const std::string& bytes);
  /// Creates `name` with `bytes` unless it exists; either way returns what `name` holds.
  Expected<std::string> createOrRead(const std::string& name, const std::string& bytes);
  /// Waits (bounded) for the outcome `outcomeName` and returns its bytes: when the nRanks names
  /// member(0 .. nRanks-1) all exist first, it creates verdict(their bytes); when the timeout
  /// passes first, it creates `abandoned`.
  Expected<std::string> awaitOutcome(const std::string& outcomeName, const std::function<std::string(int32_t)>& member,
                                     const std::function<std::string(const std::vector<std::string>&)>& verdict,
                                     const std::string& abandoned);

  std::unique_ptr<RendezvousStore> store_;
  std::string prefix_;  ///< tuccl-adapt-<comm hex>
  int32_t nRanks_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> published_;  ///< this rank's summaries not yet removed
  int32_t slot_ = -1;                   ///< join slot; -1: none
};

/// The bytes of an outcome file, and back (a malformed file reads as abandoned, the same for
/// every reader).
std::string encodeOutcome(const RoundOutcome& outcome);
RoundOutcome decodeOutcome(const std::string& bytes, int32_t nRanks);

}  // namespace tuccl
