// Where the tuner plugin instances of one communicator agree (TuCCL §III-A's runtime phase inside
// NCCL): a directory every rank can reach (TUCCL_ADAPT_RENDEZVOUS=dir:/path).
//
// In:  per agreement round (a communicator, a key, a round number), this rank's summary.
// Out: the round's outcome — every rank's summary, or "abandoned" — identical for every rank that
//      reads it; or an error when this rank can neither read nor create the outcome.
//
// Protocol, per round: each rank publishes its summary as a file (written under a temporary name,
// then linked to its final name, so a reader never sees half of it), then waits. The first rank
// that sees all nRanks summaries writes the *outcome* — "agreed" and the summaries in rank order —
// to a temporary file and links it to the round's outcome name; link() fails when that name
// exists, so exactly one outcome is ever created and it is complete when visible. A rank that
// finds no outcome and not all summaries by the timeout creates the outcome "abandoned" the same
// way. Every rank applies whatever the outcome file holds, never what it saw itself: a rank that
// timed out while another completed the round applies "agreed", and one that completed the round
// after another's timeout applies "abandoned". The single residual case is a rank that can
// neither create nor read the outcome (the directory gone or unwritable mid-job, an I/O error):
// agree() returns an error; the caller keeps its last agreed state and says so (WARN), and only
// then may its choice differ from ranks that read an "agreed" outcome.
//
// Waits are bounded: agree() returns by the timeout plus the time of a few file operations.
// Files: <dir>/tuccl-adapt-<comm>-<key>-r<round>-rank<r> (a summary; its rank removes it once the
// outcome is read), ...-r<round>-outcome, and tuccl-adapt-<comm>-done-rank<r> (finish()). The last
// rank to finish removes every file of the communicator. A rank that crashes leaves its files
// (and keeps the others from removing theirs): give each job its own directory and remove it after
// the job.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace tuccl {

/// A round's outcome: every rank's summary (rank order) when agreed; nothing when abandoned.
struct RoundOutcome {
  bool agreed = false;
  std::vector<std::string> summaries;
};

/// Whether `directory` can hold a rendezvous: an existing directory this process can write.
Status checkRendezvousDirectory(const std::string& directory);

class DirectoryRendezvous {
 public:
  DirectoryRendezvous(std::string directory, uint64_t commId, int32_t nRanks, std::chrono::milliseconds timeout);

  /// Publishes `summary` as `rank`'s for round `round` of `key` (a file-name-safe word; `rank` -1:
  /// this rank has nothing to publish) and waits, bounded, for the round's outcome.
  Expected<RoundOutcome> agree(const std::string& key, uint64_t round, int32_t rank, const std::string& summary);

  /// Finalize: marks `rank` (-1: unknown, nothing to mark) done and removes its own summaries;
  /// the rank that finds every rank done removes all of the communicator's files.
  void finish(int32_t rank);

 private:
  std::string path(const std::string& name) const;
  std::string roundName(const std::string& key, uint64_t round) const;
  /// Whether this call created `name` with `bytes`.
  bool publish(const std::string& name, const std::string& bytes) const;
  /// Creates `name` with `bytes` unless it exists; either way returns what `name` holds.
  Expected<std::string> createOrRead(const std::string& name, const std::string& bytes) const;

  std::string directory_;
  std::string prefix_;  ///< tuccl-adapt-<comm hex>
  int32_t nRanks_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> published_;  ///< this rank's summaries not yet removed
};

/// The bytes of an outcome file, and back (a malformed file reads as abandoned, the same for
/// every reader).
std::string encodeOutcome(const RoundOutcome& outcome);
RoundOutcome decodeOutcome(const std::string& bytes, int32_t nRanks);

}  // namespace tuccl
