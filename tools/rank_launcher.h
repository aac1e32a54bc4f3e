// Starts the ranks of a job as child processes on this machine and supervises them (tuccl-run).
//
// Every child gets TUCCL_RANK, TUCCL_NRANKS, TUCCL_LOCAL_RANK, TUCCL_LOCAL_SIZE, TUCCL_COMM_ID
// and TUCCL_COMM_MAGIC (random per launch unless already set, so a stale rank of another launch on
// the same port is refused by the bootstrap). As soon as one child fails (non-zero exit or a
// signal) the others get SIGTERM, and SIGKILL after the grace period; the launch then ends with
// the failed child's status (128 + signal for a signal, as shells report it). On the timeout all
// children are stopped the same way and the status is 124. SIGINT, SIGTERM and SIGHUP sent to the
// launcher are forwarded to the children. Signals go only to the children's own pids, and only
// while they have not been reaped.
#pragma once

#include <string>
#include <vector>

namespace tuccl::tools {

struct LaunchOptions {
  int ranks = 1;
  double timeoutSeconds = 0;  ///< 0: none
  double graceSeconds = 3;    ///< between SIGTERM and SIGKILL
  std::string commId;         ///< "127.0.0.1:port"
  bool tagOutput = false;     ///< prefix every output line with "[rank] "
  /// > 0: ranks form nodes of this many (rank r on node r / ranksPerNode): each gets TUCCL_HOSTID
  /// of its node and its local rank within it, so libtuccl treats the nodes as hosts (shared
  /// memory inside one, the net plugin between them). 0: one node.
  int ranksPerNode = 0;
  std::vector<std::string> command;
};

inline constexpr int kExitTimedOut = 124;  ///< as timeout(1)
inline constexpr int kExitCannotRun = 127;  ///< a child could not execute the command (as shells)

/// Runs the launch to its end and returns the exit status for the launcher.
int runRanks(const LaunchOptions& options);

}  // namespace tuccl::tools
