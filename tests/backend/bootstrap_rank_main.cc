// One rank of a multi-process bootstrap test, started by tuccl-run (tests/tools/tuccl_run_cli_test.cc).
//
//   bootstrap_rank_main                       rendezvous at TUCCL_COMM_ID, allGather, broadcast from
//                                             every root, barrier, ring send/recv; checks every byte
//   bootstrap_rank_main --hang R --pid-dir D  rank R writes D/rank<R>.pid, ignores SIGTERM and sleeps
//                                             (so only SIGKILL by pid ends it)
//   bootstrap_rank_main --fail R --code C ... rank R exits with C (after the hanging rank's pid file
//                                             exists, when --pid-dir is given)
//
// Exit status: 0 when every check passed, 1 on a failed check or bootstrap error, 2 on bad usage.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "backend/bootstrap.h"

namespace {

using namespace tuccl;
using namespace tuccl::backend;

struct Arguments {
  int hangRank = -1;
  int failRank = -1;
  int failCode = 1;
  std::string pidDir;
};

bool parseArguments(int argc, char** argv, Arguments& arguments) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--hang") arguments.hangRank = std::atoi(argv[i + 1]);
    else if (flag == "--fail") arguments.failRank = std::atoi(argv[i + 1]);
    else if (flag == "--code") arguments.failCode = std::atoi(argv[i + 1]);
    else if (flag == "--pid-dir") arguments.pidDir = argv[i + 1];
    else return false;
  }
  return argc % 2 == 1;
}

std::string pidFile(const Arguments& arguments, int rank) {
  return arguments.pidDir + "/rank" + std::to_string(rank) + ".pid";
}

[[noreturn]] void hang(const Arguments& arguments, int rank) {
  signal(SIGTERM, SIG_IGN);
  const std::string path = pidFile(arguments, rank);
  {
    std::ofstream out(path + ".tmp");
    out << getpid() << "\n";
  }
  std::filesystem::rename(path + ".tmp", path);
  while (true) pause();
}

[[noreturn]] void failAfterHangingRankStarted(const Arguments& arguments) {
  if (!arguments.pidDir.empty() && arguments.hangRank >= 0) {
    for (int i = 0; i < 1000 && !std::filesystem::exists(pidFile(arguments, arguments.hangRank)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::exit(arguments.failCode);
}

/// Rank `rank`'s bytes for `round`: a pseudo-random string every rank can recompute.
std::string payload(int rank, int round) {
  std::mt19937_64 random(static_cast<uint64_t>(rank) * 7919 + static_cast<uint64_t>(round));
  std::string bytes(1 + random() % 70000, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

int check(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return ok ? 0 : 1;
}

int exercise(Bootstrap& bootstrap) {
  const int rank = bootstrap.rank();
  const int n = bootstrap.nRanks();
  int failures = 0;
  Expected<std::vector<std::string>> gathered = bootstrap.allGather(payload(rank, 0));
  if (!gathered) return check(false, gathered.status().message());
  for (int peer = 0; peer < n; ++peer)
    failures += check((*gathered)[static_cast<size_t>(peer)] == payload(peer, 0), "allGather block " + std::to_string(peer));
  for (int root = 0; root < n; ++root) {
    Expected<std::string> value = bootstrap.broadcast(rank == root ? payload(root, 1) : "", root);
    failures += check(value && *value == payload(root, 1), "broadcast from " + std::to_string(root));
  }
  failures += check(bootstrap.barrier().ok(), "barrier");
  const int next = (rank + 1) % n;
  const int prev = (rank + n - 1) % n;
  // Even ranks send first, odd ranks receive first: no rank waits on a full socket for long.
  Status sent;
  if (rank % 2 == 0) sent = bootstrap.send(next, 9, payload(rank, 2));
  Expected<std::string> received = bootstrap.recv(prev, 9);
  if (rank % 2 != 0) sent = bootstrap.send(next, 9, payload(rank, 2));
  failures += check(sent.ok(), "send: " + sent.message());
  failures += check(received && *received == payload(prev, 2), "recv from " + std::to_string(prev));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments;
  if (!parseArguments(argc, argv, arguments)) {
    std::fprintf(stderr, "usage: bootstrap_rank_main [--hang R --pid-dir D] [--fail R --code C]\n");
    return 2;
  }
  Expected<LaunchEnvironment> launch = readLaunchEnvironment();
  if (!launch) {
    std::fprintf(stderr, "%s\n", launch.status().message().c_str());
    return 1;
  }
  if (launch->rank == arguments.hangRank) hang(arguments, launch->rank);
  if (launch->rank == arguments.failRank) failAfterHangingRankStarted(arguments);
  Expected<UniqueIdBytes> id = uniqueIdFromAddress(launch->commId);
  BootstrapOptions options;
  options.timeoutSeconds = 60;
  Expected<std::unique_ptr<Bootstrap>> bootstrap =
      id ? Bootstrap::connect(*id, launch->rank, launch->nRanks, options) : id.status();
  if (!bootstrap) {
    std::fprintf(stderr, "%s\n", bootstrap.status().message().c_str());
    return 1;
  }
  const int status = exercise(**bootstrap);
  if (status == 0) std::printf("rank %d of %d: ok (from %s)\n", launch->rank, launch->nRanks, launch->source.c_str());
  return status;
}
