// tuccl-adapt-store: the TCP store where the tuner plugin instances of an NCCL job agree on their
// runtime-phase choices (TUCCL_ADAPT_RENDEZVOUS=tcp:<host>:<port>, docs/tuning-table.md). The job
// starts it before the ranks; it ends on SIGTERM or SIGINT, or by itself once its ranks are done
// (--ranks) or nobody used it for a while (--idle-timeout). It keeps everything in memory, so
// nothing outlives it.
//
//   tuccl-adapt-store (--secret-file FILE | --write-secret FILE) [--host ADDRESS] [--port PORT]
//                     [--port-file FILE] [--ranks N] [--idle-timeout SECONDS]
//
// Safe by default: it listens on loopback unless --host widens it, and admits only connections
// whose hello carries the job's secret (the ranks read the same file, TUCCL_ADAPT_SECRET_FILE).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "adapt/rendezvous_server.h"
#include "adapt/rendezvous_store.h"
#include "cli/cli.h"

namespace {

tuccl::RendezvousServer* serving = nullptr;

extern "C" void stopServing(int /*signal*/) {
  if (serving != nullptr) serving->stop();  // an atomic store and an eventfd write: signal-safe
}

struct StoreCommand {
  tuccl::RendezvousServerOptions server;
  std::string portFile;
  std::string secretFile;   ///< --secret-file: read
  std::string writeSecret;  ///< --write-secret: created
};

void addOptions(CLI::App& app, StoreCommand& command) {
  app.add_option("--host", command.server.host,
                 "the address to listen at: 127.0.0.1 (this host only; the default), or 0.0.0.0 (every "
                 "interface) or one interface's address for ranks on other hosts")
      ->type_name("ADDRESS")
      ->capture_default_str();
  app.add_option("--port", command.server.port, "the port to listen at (0: any free port, printed)")
      ->type_name("PORT")
      ->capture_default_str();
  app.add_option("--port-file", command.portFile, "also write the port to this file (written once listening)")
      ->type_name("FILE");
  CLI::Option* read = app.add_option("--secret-file", command.secretFile,
                                     "admit only ranks holding the secret in this existing file (its bytes "
                                     "without trailing whitespace; only its owner may read it, e.g. mode 0600)");
  CLI::Option* write = app.add_option("--write-secret", command.writeSecret,
                                      "make a random secret and write it to this new file, mode 0600 (never "
                                      "over an existing file)");
  read->type_name("FILE")->excludes(write);
  write->type_name("FILE");
  app.add_option("--ranks", command.server.ranks,
                 "stop once N connections said hello and all of them closed (one per rank and "
                 "communicator: a job with one communicator gives its rank count)")
      ->type_name("N")
      ->transform(tuccl::cli::integerIn(1, 1 << 24));
  app.add_option("--idle-timeout", command.server.idleSeconds,
                 "stop after SECONDS with no rank connected (from the start, and whenever the last "
                 "connection closes)")
      ->type_name("SECONDS")
      ->transform(tuccl::cli::numberIn(0.001, 1e9));
  app.footer(
      "The ranks set TUCCL_ADAPT_RENDEZVOUS=tcp:HOST:PORT and TUCCL_ADAPT_SECRET_FILE to the secret file. "
      "Without --ranks or --idle-timeout the store runs until SIGTERM or SIGINT.");
}

/// The secret the command names: read from --secret-file, or made and written to --write-secret.
tuccl::Expected<std::string> secretOf(const StoreCommand& command) {
  if (!command.secretFile.empty()) return tuccl::readRendezvousSecret(command.secretFile);
  if (command.writeSecret.empty()) {
    return tuccl::makeError(tuccl::ErrorCode::InvalidArgument,
                            "a secret is needed: --secret-file FILE (an existing file only you can read) or "
                            "--write-secret FILE (a new one); the ranks read the same file "
                            "(TUCCL_ADAPT_SECRET_FILE)");
  }
  tuccl::Expected<std::string> secret = tuccl::makeRendezvousSecret();
  if (!secret) return secret;
  if (tuccl::Status written = tuccl::writeRendezvousSecret(command.writeSecret, *secret); !written) {
    const bool exists = written.code() == tuccl::ErrorCode::InvalidArgument;
    return exists ? tuccl::makeError(written.code(), written.message() + " (remove it, or pass it with --secret-file)")
                  : written;
  }
  return secret;
}

void writePortFile(const std::string& portFile, uint16_t port) {
  if (portFile.empty()) return;
  const std::string temporary = portFile + ".tmp";
  std::ofstream(temporary) << port << "\n";
  std::rename(temporary.c_str(), portFile.c_str());
}

std::string endText(tuccl::ServeEnd end, const StoreCommand& command) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", command.server.idleSeconds);
  switch (end) {
    case tuccl::ServeEnd::RanksDone:
      return "the " + std::to_string(command.server.ranks) +
             (command.server.ranks == 1 ? " connection" : " connections") + " of --ranks said hello and closed";
    case tuccl::ServeEnd::Idle:
      return "no rank was connected for " + std::string(seconds) + " s (--idle-timeout)";
    case tuccl::ServeEnd::Stopped:
      break;
  }
  return "SIGTERM or SIGINT";
}

/// Serves until the job is over; what it printed on stdout is the listening and the stopped line,
/// and a line per refused peer host at most.
int serveStore(StoreCommand& command, const std::string& secretSource) {
  command.server.report = [](const std::string& line) { std::cout << "tuccl-adapt-store: " << line << std::endl; };
  tuccl::Expected<std::unique_ptr<tuccl::RendezvousServer>> server = tuccl::RendezvousServer::listen(command.server);
  if (!server) {
    std::cerr << "tuccl-adapt-store: " << server.status().message() << "\n";
    if (!command.writeSecret.empty()) std::remove(command.writeSecret.c_str());  // ours, and of no use now
    return tuccl::cli::kExitError;
  }
  serving = server->get();
  std::signal(SIGTERM, stopServing);
  std::signal(SIGINT, stopServing);
  writePortFile(command.portFile, (*server)->port());
  std::cout << "tuccl-adapt-store: listening on " << command.server.host << ":" << (*server)->port()
            << ", admitting the ranks that hold the secret in " << secretSource << std::endl;
  const tuccl::ServeEnd end = (*server)->serve();
  std::cout << "tuccl-adapt-store: stopped (" << (*server)->size() << " names left): " << endText(end, command);
  if (const uint64_t refused = (*server)->refused(); refused > 0) {
    std::cout << "; refused " << refused << (refused == 1 ? " connection" : " connections");
  }
  std::cout << std::endl;
  serving = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tuccl-adapt-store: the rendezvous of the tuner plugin's runtime phase (tcp:HOST:PORT)"};
  app.set_version_flag("--version", "tuccl-adapt-store 0.2.0");
  StoreCommand command;
  addOptions(app, command);
  if (std::optional<int> exit = tuccl::cli::parse(app, argc, argv)) return *exit;
  tuccl::Expected<std::string> secret = secretOf(command);
  if (!secret) {
    std::cerr << "tuccl-adapt-store: " << secret.status().message() << "\n";
    return tuccl::cli::kExitError;
  }
  command.server.secret = std::move(*secret);
  return serveStore(command, command.secretFile.empty() ? command.writeSecret : command.secretFile);
}
