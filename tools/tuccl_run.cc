// tuccl-run: start the ranks of a libtuccl job on this machine (docs/runtime.md, "tuccl-run").
//
//   tuccl-run -n N [--timeout SECONDS] [--port P] [--grace SECONDS] [--tag-output] -- CMD ARGS...
//
// Exit status: the first failed rank's (128 + signal for a signal), 124 on --timeout, 2 for a
// bad command line, 0 when every rank exits 0.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "tools/rank_launcher.h"
#include "transport/socket.h"

namespace {

using namespace tuccl;

/// A port on 127.0.0.1 that was free a moment ago (rank 0's bootstrap root binds it next).
Expected<int> freeLoopbackPort() {
  Expected<transport::Socket> probe = transport::listenOn(transport::SocketAddress::loopback(AF_INET, 0));
  if (!probe) return probe.status();
  Expected<transport::SocketAddress> bound = probe->localAddress();
  if (!bound) return bound.status();
  return static_cast<int>(bound->port());
}

int usageError(const std::string& message) {
  std::fprintf(stderr, "tuccl-run: error: %s\nusage: tuccl-run -n N [options] -- COMMAND [ARGS...] (see --help)\n",
               message.c_str());
  return cli::kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after the first "--" is the command, untouched by option parsing.
  char** split = std::find_if(argv + 1, argv + argc, [](const char* arg) { return std::strcmp(arg, "--") == 0; });
  tools::LaunchOptions options;
  options.command.assign(split == argv + argc ? split : split + 1, argv + argc);

  CLI::App app{"tuccl-run -n N [options] -- COMMAND [ARGS...]\n\nStarts N ranks of COMMAND on this machine with "
               "TUCCL_RANK, TUCCL_NRANKS, TUCCL_LOCAL_RANK, TUCCL_LOCAL_SIZE and TUCCL_COMM_ID set (and TUCCL_HOSTID with "
               "--ranks-per-node), and stops them all "
               "when one fails. Exit status: the failed rank's (128+signal), 124 on --timeout, 2 for bad usage."};
  int port = 0;
  app.add_option("-n,--ranks", options.ranks, "number of ranks to start")->required()->check(CLI::Range(1, 4096));
  app.add_option("--timeout", options.timeoutSeconds, "stop every rank after SECONDS and exit 124 (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--port", port, "rendezvous port on 127.0.0.1 (default: a free one)")->check(CLI::Range(1, 65535));
  app.add_option("--grace", options.graceSeconds, "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--tag-output", options.tagOutput, "prefix every output line with \"[rank] \"");
  app.add_option("--ranks-per-node", options.ranksPerNode,
                 "group the ranks into nodes of N (rank r on node r/N): each rank gets its node's TUCCL_HOSTID and "
                 "its local rank, so libtuccl runs them as separate hosts joined by its net plugin")
      ->check(CLI::Range(1, 4096));
  app.allow_extras();
  if (auto exit = cli::parse(app, static_cast<int>(split - argv), argv)) return *exit;
  if (!app.remaining().empty())
    return usageError("unexpected '" + app.remaining().front() + "' (the command goes after '--')");
  if (options.command.empty()) return usageError("no command to run (the command goes after '--')");
  if (options.ranksPerNode > options.ranks)
    return usageError("--ranks-per-node " + std::to_string(options.ranksPerNode) + " is more than the " +
                      std::to_string(options.ranks) + " ranks");

  if (port == 0) {
    Expected<int> free = freeLoopbackPort();
    if (!free) return cli::reportError("tuccl-run", free.status());
    port = *free;
  }
  options.commId = transport::joinHostPort("127.0.0.1", static_cast<uint16_t>(port));
  return tools::runRanks(options);
}
