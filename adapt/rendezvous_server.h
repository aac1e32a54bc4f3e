// The TCP store of the tuner's runtime phase (TUCCL_ADAPT_RENDEZVOUS=tcp:host:port), served by
// tuccl-adapt-store: names mapped to bytes in this process's memory, a name created once
// (rendezvous_store.h has the wire format). The job starts it before the ranks and ends it after.
//
// In:  the address to listen at. Out: a listening store; one thread per connection; requests of
// all connections applied one at a time (so "create unless it exists" is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/status.h"
#include "transport/socket.h"

namespace tuccl {

class RendezvousServer {
 public:
  /// Listens at host:port (port 0: any free port).
  static Expected<std::unique_ptr<RendezvousServer>> listen(const std::string& host, uint16_t port);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  uint16_t port() const { return port_; }
  /// Serves connections until stop() (from another thread or a signal handler's flag).
  void serve();
  void stop() { stopping_.store(true); }
  /// Names held now (tests: the ranks removed theirs).
  size_t size() const;

 private:
  RendezvousServer(transport::Socket listener, uint16_t port) : listener_(std::move(listener)), port_(port) {}
  void serveConnection(transport::Socket socket);
  /// The reply to one request.
  std::string apply(char op, const std::string& name, const std::string& value);

  transport::Socket listener_;
  uint16_t port_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::map<std::string, std::string> names_;
  std::mutex threadsMutex_;
  std::vector<std::thread> threads_;
};

}  // namespace tuccl
