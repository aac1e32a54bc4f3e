// The TCP store of the tuner's runtime phase (TUCCL_ADAPT_RENDEZVOUS=tcp:host:port), served by
// tuccl-adapt-store: names mapped to bytes in this process's memory, a name created once
// (rendezvous_store.h has the wire format). The job starts it before the ranks and ends it after,
// or lets it end by itself (a rank count, an idle time).
//
// In:  the address to listen at (loopback unless told otherwise), the job's secret, when to stop.
// Out: a listening store admitting only connections whose hello carries the secret (compared in
//      constant time); one thread per connection; requests of all admitted connections applied one
//      at a time (so "create unless it exists" is atomic). A connection that is no client of ours
//      is closed within the hello time and reported at most once per peer host.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "support/status.h"
#include "transport/socket.h"

namespace tuccl {

struct RendezvousServerOptions {
  std::string host = "127.0.0.1";  ///< the address to listen at: this host only unless widened
  uint16_t port = 0;               ///< 0: any free port
  std::string secret;              ///< what every hello must carry (1 .. kStoreMaxSecret bytes)
  int64_t ranks = 0;               ///< > 0: stop once this many connections said hello and all closed
  double idleSeconds = 0;          ///< > 0: stop after this long with no admitted connection open
  double helloSeconds = 10;        ///< the longest a new connection may take to say hello
  /// Where refusals are told, one call at a time and a line per peer host at most (64 hosts);
  /// none: they are only counted.
  std::function<void(const std::string&)> report;
};

/// Why serve() returned.
enum class ServeEnd { Stopped, RanksDone, Idle };

class RendezvousServer {
 public:
  /// Listens at options.host:options.port; InvalidArgument without a secret.
  static Expected<std::unique_ptr<RendezvousServer>> listen(RendezvousServerOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  uint16_t port() const { return port_; }
  /// Serves connections until stop() (another thread, or a signal handler: async-signal-safe),
  /// or until the options' rank count or idle time says the job is over.
  ServeEnd serve();
  void stop();
  /// Names held now (tests: the ranks removed theirs).
  size_t size() const;
  /// Connections closed for want of a valid hello so far.
  uint64_t refused() const { return refused_.load(); }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  RendezvousServer(transport::Socket listener, uint16_t port, RendezvousServerOptions options);
  void start(transport::Socket socket);
  /// Joins the workers whose connections ended.
  void reapWorkers();
  std::optional<ServeEnd> jobOver();
  void serveConnection(transport::Socket socket);
  /// Reads the hello within the hello time; false (the connection refused) unless it holds the secret.
  bool admit(const transport::Socket& socket);
  void refuse(const transport::Socket& socket, const std::string& reason);
  void closed();
  /// The reply to one request.
  std::string apply(char op, const std::string& name, const std::string& value);

  transport::Socket listener_;
  uint16_t port_;
  RendezvousServerOptions options_;
  std::atomic<bool> stopping_{false};
  transport::AbortSignal abort_;  ///< raised by stop(): waits for a hello or a request end at once
  mutable std::mutex mutex_;
  std::map<std::string, std::string> names_;
  std::list<Worker> workers_;  ///< serve()'s and the destructor's alone
  std::atomic<int> waitingHellos_{0};
  std::atomic<uint64_t> refused_{0};
  std::mutex jobMutex_;  ///< guards the four below
  int64_t admitted_ = 0;
  int64_t open_ = 0;
  transport::Deadline idleSince_;
  std::set<std::string> reportedHosts_;
};

/// A new random secret: 32 bytes of getrandom(2), as 64 hexadecimal digits.
Expected<std::string> makeRendezvousSecret();
/// Writes `secret` and a newline to `file`, which must not exist, created with mode 0600.
Status writeRendezvousSecret(const std::string& file, const std::string& secret);

}  // namespace tuccl
