// tuccl-adapt-store: the TCP store where the tuner plugin instances of an NCCL job agree on their
// runtime-phase choices (TUCCL_ADAPT_RENDEZVOUS=tcp:<host>:<port>, docs/tuning-table.md). The job
// starts it before the ranks and ends it (SIGTERM or SIGINT) after them; it keeps everything in
// memory, so nothing outlives it.
//
//   tuccl-adapt-store [--host ADDRESS] [--port PORT] [--port-file FILE]
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "adapt/rendezvous_server.h"
#include "cli/cli.h"

namespace {

tuccl::RendezvousServer* serving = nullptr;

extern "C" void stopServing(int /*signal*/) {
  if (serving != nullptr) serving->stop();  // an atomic store: safe in a signal handler
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-adapt-store: the rendezvous of the tuner plugin's runtime phase (tcp:HOST:PORT)"};
  app.set_version_flag("--version", "tuccl-adapt-store 0.1.0");
  std::string host = "0.0.0.0";
  uint16_t port = 0;
  std::string portFile;
  app.add_option("--host", host, "the address to listen at")->capture_default_str();
  app.add_option("--port", port, "the port to listen at (0: any free port, printed)")->capture_default_str();
  app.add_option("--port-file", portFile, "also write the port to this file (written once listening)");
  if (std::optional<int> exit = tuccl::cli::parse(app, argc, argv)) return *exit;

  tuccl::Expected<std::unique_ptr<tuccl::RendezvousServer>> server = tuccl::RendezvousServer::listen(host, port);
  if (!server) {
    std::cerr << "tuccl-adapt-store: " << server.status().message() << "\n";
    return tuccl::cli::kExitError;
  }
  serving = server->get();
  std::signal(SIGTERM, stopServing);
  std::signal(SIGINT, stopServing);
  if (!portFile.empty()) {
    const std::string temporary = portFile + ".tmp";
    std::ofstream(temporary) << (*server)->port() << "\n";
    std::rename(temporary.c_str(), portFile.c_str());
  }
  std::cout << "tuccl-adapt-store: listening on " << host << ":" << (*server)->port() << std::endl;
  (*server)->serve();
  std::cout << "tuccl-adapt-store: stopped (" << (*server)->size() << " names left)" << std::endl;
  serving = nullptr;
  return 0;
}
