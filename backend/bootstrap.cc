// The bootstrap (bootstrap.h): unique ids, the rendezvous of the ranks, and the ring and
// point-to-point exchanges over TCP.
#include "backend/bootstrap.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <system_error>
#include <thread>

#include "backend/bootstrap_wire.h"
#include "support/environment.h"

namespace tuccl::backend {

using transport::Clock;
using transport::Deadline;
using transport::Socket;
using transport::SocketAddress;
using transport::WaitLimits;

namespace {

/// The root's answer may come this much after a rank's own timeout: the root (whose clock
/// started no later, see connect) then names the ranks that never joined.
constexpr double kAnswerGraceSeconds = 0.5;

/// The goodbye of a rank that leaves (leave()): a message header of its own operation, no payload.
constexpr auto kGoodbye = static_cast<wire::Operation>(0x6279);
/// leave() gives each neighbour this long to take the goodbye (its buffer is empty between calls).
constexpr double kGoodbyeSeconds = 1;
/// peerLost() reads this much of what a closed neighbour left unread, looking for its goodbye.
constexpr size_t kPeekBytes = 64 << 10;
/// awaitNotes looks for closed connections this often while it waits.
constexpr auto kNoteSlice = std::chrono::milliseconds(20);
/// A peer whose connection closed may have sent its note just before, on another connection that
/// has not shown it yet: awaitNotes gives up on it only after this.
constexpr auto kClosedGrace = std::chrono::milliseconds(250);

uint64_t fnv1a(std::string_view text, uint64_t hash = 0xcbf29ce484222325ull) {
  for (const char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string environment(const char* name) { return env::text(name).value_or(""); }

uint64_t randomMagic() {
  std::random_device device;
  uint64_t magic = 0;
  while (magic == 0) magic = (static_cast<uint64_t>(device()) << 32) ^ device();
  return magic;
}

/// TUCCL_HOSTID when set; else the host name and, when readable, the boot id: equal for every
/// process of one machine (a container included), different across machines even when they
/// share a host name.
uint64_t computeHostHash() {
  // TUCCL_HOSTID names the host outright: ranks with equal ids form one node (tuccl-run
  // --ranks-per-node gives the ranks of one machine several, to try multi-node plans).
  if (std::optional<std::string> id = env::text("TUCCL_HOSTID")) return fnv1a("id:" + *id);
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string identity = name;
  std::ifstream bootId("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (bootId >> boot) identity += "/" + boot;
  return fnv1a(identity);
}

/// TUCCL_SOCKET_IFNAME's or the option's interface, if one is named.
std::string namedInterface(const BootstrapOptions& options) {
  return options.interfaceName.empty() ? environment("TUCCL_SOCKET_IFNAME") : options.interfaceName;
}

/// The address makeUniqueId's root advertises (port 0): the named interface's, else the first
/// up non-loopback IPv4 interface's, else 127.0.0.1.
Expected<SocketAddress> rootAdvertisedAddress(const BootstrapOptions& options) {
  const std::string name = namedInterface(options);
  if (!name.empty()) return transport::interfaceAddress(name);
  if (std::optional<SocketAddress> found = transport::firstNonLoopbackAddress()) return *found;
  return SocketAddress::loopback(AF_INET, 0);
}

/// The address a rank listens on (port 0): the named interface's, else the one that reaches the root.
Expected<SocketAddress> rankListenAddress(const BootstrapOptions& options, const SocketAddress& root) {
  const std::string name = namedInterface(options);
  if (!name.empty()) return transport::interfaceAddress(name);
  return transport::localAddressToward(root);
}

/// Starts serving one rendezvous on `job`'s listener; SystemError when no thread can be made.
Status startRoot(wire::RootJob job, std::thread* joinable) {
  try {
    std::thread thread(wire::serveRendezvous, std::move(job));
    if (joinable != nullptr)
      *joinable = std::move(thread);
    else
      thread.detach();
  } catch (const std::system_error& error) {
    return makeError(ErrorCode::SystemError, std::string("cannot start the rendezvous root thread: ") + error.what());
  }
  return Status();
}

/// Rank 0's root thread when the id came from TUCCL_COMM_ID: stopped (if still serving) and
/// joined when connect returns.
struct RankZeroRoot {
  std::thread thread;
  std::shared_ptr<transport::AbortSignal> stop = std::make_shared<transport::AbortSignal>();
  bool finished = false;  ///< the rendezvous completed: let the root finish answering
  ~RankZeroRoot() {
    if (!thread.joinable()) return;
    if (!finished) stop->raise();
    thread.join();
  }
};

}  // namespace

// ---- Unique ids ----------------------------------------------------------------------------------

Expected<UniqueIdBytes> uniqueIdFromAddress(const std::string& hostPort) {
  Expected<SocketAddress> root = transport::resolveHostPort(hostPort);
  if (!root) return makeError(ErrorCode::InvalidArgument, "rendezvous address: " + root.status().message());
  wire::DecodedId id;
  id.rootHost = wire::RootHost::RankZero;
  id.root = *root;
  id.magic = fnv1a(environment("TUCCL_COMM_MAGIC"), fnv1a(hostPort + '\0'));
  return wire::encodeUniqueId(id);
}

Expected<UniqueIdBytes> makeUniqueId(const BootstrapOptions& options) {
  const std::string commId = environment("TUCCL_COMM_ID");
  if (!commId.empty()) {
    Expected<UniqueIdBytes> id = uniqueIdFromAddress(commId);
    if (!id) return makeError(ErrorCode::InvalidArgument, "TUCCL_COMM_ID: " + id.status().message());
    return id;
  }
  return makeFreshUniqueId(options);
}

Expected<UniqueIdBytes> makeFreshUniqueId(const BootstrapOptions& options) {
  Expected<SocketAddress> advertised = rootAdvertisedAddress(options);
  if (!advertised) return advertised.status();
  Expected<Socket> listener = transport::listenOn(SocketAddress::wildcard(advertised->family(), 0));
  if (!listener) return listener.status();
  Expected<SocketAddress> bound = listener->localAddress();
  if (!bound) return bound.status();
  wire::DecodedId id;
  id.rootHost = wire::RootHost::IdMaker;
  id.root = *advertised;
  id.root.setPort(bound->port());
  id.magic = randomMagic();
  wire::RootJob job{std::move(listener).value(), id.magic, -1, transport::deadlineAfter(options.timeoutSeconds),
                    options.timeoutSeconds, id.root.toString(), nullptr};
  Status started = startRoot(std::move(job), nullptr);
  if (!started.ok()) return started;
  return wire::encodeUniqueId(id);
}

std::string describeUniqueId(const UniqueIdBytes& bytes) {
  Expected<wire::DecodedId> id = wire::decodeUniqueId(bytes);
  if (!id) return id.status().message();
  char magic[32];
  std::snprintf(magic, sizeof magic, "0x%016llx", static_cast<unsigned long long>(id->magic));
  const char* host = id->rootHost == wire::RootHost::RankZero ? "rank 0" : "the process that made the id";
  return id->root.toString() + " magic " + magic + " (root run by " + host + ")";
}

// ---- Bootstrap -----------------------------------------------------------------------------------

struct Bootstrap::Impl {
  int32_t rank = 0;
  int32_t nRanks = 1;
  uint64_t magic = 0;
  double timeoutSeconds = 0;
  uint64_t hostHash = 0;
  wire::RootHost rootHost = wire::RootHost::IdMaker;
  SocketAddress root;
  std::string rootText;

  std::shared_ptr<transport::AbortSignal> abortSignal;  ///< BootstrapOptions::cancel, or its own
  std::atomic<bool> lost{false};
  std::atomic<bool> nextLeft{false};  ///< the ring successor said goodbye (leave())
  std::atomic<bool> prevLeft{false};  ///< the ring predecessor said goodbye
  std::mutex calls;  ///< one call at a time
  Status failure;    ///< the first failure; later calls return it
  bool left = false;  ///< this rank left (leave())

  Socket listener;
  SocketAddress address;
  std::vector<wire::Peer> peers;
  Socket ringNext;
  Socket ringPrev;
  std::map<std::pair<int32_t, uint32_t>, Socket> outgoing;  ///< (peer, tag) -> our connection to it
  std::map<std::pair<int32_t, uint32_t>, Socket> incoming;  ///< (peer, tag) -> its connection to us
  std::map<uint32_t, std::deque<std::string>> toSelf;       ///< tag -> messages sent to this rank
  std::vector<wire::PendingConnection> pending;
  std::unique_ptr<wire::RefusalLog> refusals;

  int32_t next() const { return (rank + 1) % nRanks; }
  int32_t prev() const { return (rank + nRanks - 1) % nRanks; }
  std::string self() const { return "rank " + std::to_string(rank) + " of " + std::to_string(nRanks); }
  std::string ringNeighbours() const {
    if (next() == prev()) return "rank " + std::to_string(next()) + " (its ring neighbour)";
    return "rank " + std::to_string(prev()) + " (ring predecessor) and rank " + std::to_string(next()) +
           " (ring successor)";
  }
  WaitLimits limits(Deadline deadline) const { return {deadline, abortSignal->fd()}; }
  WaitLimits callLimits() const { return limits(transport::deadlineAfter(timeoutSeconds)); }

  // connect's steps
  Status openListener(const BootstrapOptions& options);
  Expected<std::string> exchangeWithRoot(Deadline deadline);
  Status readTable(const std::string& table);
  Status connectRing(Deadline deadline);

  // calls
  Status begin() const;
  Status fail(const Status& cause, const std::string& what);
  /// The error of `what` that failed with `cause` after waiting up to `seconds`.
  Status describe(const Status& cause, const std::string& what, double seconds) const;
  Status rendezvousError(const Status& cause, const std::string& what, const std::string& timeoutHint = "") const;
  Status acceptUntil(const std::function<bool()>& done, const WaitLimits& limits);
  void identify(wire::PendingConnection pending);
  Status sendMessage(const Socket& socket, wire::Operation operation, uint32_t argument, const std::string& bytes,
                     const WaitLimits& limits);
  Expected<std::string> recvMessage(const Socket& socket, wire::Operation operation, uint32_t argument, int32_t from,
                                    const WaitLimits& limits);
  Status checkHeader(const wire::MessageHeader& header, wire::Operation operation, uint32_t argument,
                     int32_t from) const;
  Expected<std::string> ringStep(wire::Operation operation, const std::string& out, const WaitLimits& limits);
  Status ringAllGather(wire::Operation operation, std::vector<std::string>& blocks);
  Expected<Socket*> outgoingTo(int32_t peer, uint32_t tag, const WaitLimits& limits);
  Status sendTo(int32_t peer, uint32_t tag, const std::string& bytes, double seconds);
  Expected<std::string> recvFrom(int32_t peer, uint32_t tag, double seconds);
  /// A ring message that turned out to be the predecessor's goodbye: it left.
  void noteGoodbye(const wire::MessageHeader& header) {
    if (header.magic == magic && header.operation == kGoodbye) prevLeft.store(true);
  }
};

Bootstrap::Bootstrap() : impl_(std::make_unique<Impl>()) {}
Bootstrap::~Bootstrap() = default;

int32_t Bootstrap::rank() const { return impl_->rank; }
int32_t Bootstrap::nRanks() const { return impl_->nRanks; }
uint64_t Bootstrap::hostHash() const { return impl_->hostHash; }
std::string Bootstrap::address() const { return impl_->address.empty() ? "" : impl_->address.toString(); }
void Bootstrap::abort() { impl_->abortSignal->raise(); }

Expected<std::unique_ptr<Bootstrap>> Bootstrap::connect(const UniqueIdBytes& idBytes, int32_t rank, int32_t nRanks,
                                                        const BootstrapOptions& options) {
  if (nRanks < 1 || rank < 0 || rank >= nRanks)
    return makeError(ErrorCode::InvalidArgument,
                     "bootstrap: rank " + std::to_string(rank) + " of " + std::to_string(nRanks) + " is out of range");
  Expected<wire::DecodedId> id = wire::decodeUniqueId(idBytes);
  if (!id) return makeError(ErrorCode::InvalidArgument, "bootstrap: " + id.status().message());
  std::unique_ptr<Bootstrap> bootstrap(new Bootstrap());
  Impl& impl = *bootstrap->impl_;
  impl.rank = rank;
  impl.nRanks = nRanks;
  impl.magic = id->magic;
  impl.timeoutSeconds = options.timeoutSeconds;
  impl.hostHash = computeHostHash();
  impl.rootHost = id->rootHost;
  impl.root = id->root;
  impl.rootText = id->root.toString();
  impl.abortSignal = options.cancel ? options.cancel : std::make_shared<transport::AbortSignal>();
  if (!impl.abortSignal->valid())
    return makeError(ErrorCode::SystemError, "bootstrap: cannot create an eventfd (out of file descriptors?)");
  if (nRanks == 1) {
    impl.peers.push_back(wire::Peer{impl.hostHash, {}});
    return bootstrap;
  }
  const Deadline deadline = transport::deadlineAfter(options.timeoutSeconds);
  RankZeroRoot root;
  if (id->rootHost == wire::RootHost::RankZero && rank == 0) {
    Expected<Socket> listener = transport::listenOn(SocketAddress::wildcard(id->root.family(), id->root.port()));
    if (!listener)
      return makeError(ErrorCode::SystemError, "bootstrap: rank 0 cannot run the rendezvous root for " + impl.rootText +
                                                   ": " + listener.status().message());
    Status started = startRoot(wire::RootJob{std::move(listener).value(), impl.magic, nRanks, deadline,
                                             options.timeoutSeconds, impl.rootText, root.stop},
                               &root.thread);
    if (!started.ok()) return started;
  }
  Status opened = impl.openListener(options);
  if (!opened.ok()) return opened;
  Expected<std::string> table = impl.exchangeWithRoot(deadline);
  if (!table) return table.status();
  root.finished = true;
  Status known = impl.readTable(*table);
  if (!known.ok()) return known;
  Status ring = impl.connectRing(deadline);
  if (!ring.ok()) return ring;
  return bootstrap;
}

Status Bootstrap::Impl::openListener(const BootstrapOptions& options) {
  Expected<SocketAddress> chosen = rankListenAddress(options, root);
  if (!chosen) return makeError(chosen.status().code(), "bootstrap: " + self() + ": " + chosen.status().message());
  Expected<Socket> opened = transport::listenOn(*chosen);
  if (!opened) return makeError(opened.status().code(), "bootstrap: " + self() + ": " + opened.status().message());
  listener = std::move(opened).value();
  Expected<SocketAddress> bound = listener.localAddress();
  if (!bound) return bound.status();
  address = *bound;
  refusals = std::make_unique<wire::RefusalLog>("rank " + std::to_string(rank) + " at " + address.toString());
  return Status();
}

Status Bootstrap::Impl::rendezvousError(const Status& cause, const std::string& what,
                                        const std::string& timeoutHint) const {
  std::string message = "bootstrap: " + self() + ": " + what;
  if (cause.code() == ErrorCode::Timeout) {
    message += " within " + wire::secondsText(timeoutSeconds) + timeoutHint;
    if (cause.message() != "timed out") message += " (" + cause.message() + ")";
  } else {
    message += ": " + cause.message();
  }
  return makeError(cause.code(), message);
}

Expected<std::string> Bootstrap::Impl::exchangeWithRoot(Deadline deadline) {
  const std::string theRoot = std::string("the rendezvous root (run by ") +
                              (rootHost == wire::RootHost::RankZero ? "rank 0" : "the id's maker") + ") at " + rootText;
  Expected<Socket> socket = transport::connectTo(root, limits(deadline));
  if (!socket) return rendezvousError(socket.status(), "cannot reach " + theRoot);
  const std::string hello = wire::encodeHello(magic, wire::Hello{rank, nRanks, hostHash, address});
  Status sent = transport::sendAll(*socket, hello.data(), hello.size(), limits(deadline));
  if (!sent.ok()) return rendezvousError(sent, "cannot send its hello to " + theRoot);
  const WaitLimits answerLimits = limits(deadline + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(kAnswerGraceSeconds)));
  const std::string noAnswer = "no answer from " + theRoot;
  const std::string notEveryone = ": not every rank joined";
  std::string header(wire::kAnswerHeaderBytes, '\0');
  Status got = transport::recvAll(*socket, header.data(), header.size(), answerLimits);
  if (!got.ok()) return rendezvousError(got, noAnswer, notEveryone);
  wire::Reader in(header);
  const uint64_t answerMagic = in.u64();
  const uint32_t wireCode = in.u32();
  const ErrorCode code = wireCode <= static_cast<uint32_t>(ErrorCode::ResourceExhausted) ? static_cast<ErrorCode>(wireCode)
                                                                                        : ErrorCode::RemoteError;
  const uint64_t length = in.u64();
  if (answerMagic != magic || length > wire::kMaxPayloadBytes)
    return makeError(ErrorCode::RemoteError, "bootstrap: " + self() + ": the rendezvous root at " + rootText +
                                                 " answered with a malformed message");
  std::string payload(length, '\0');
  got = transport::recvAll(*socket, payload.data(), payload.size(), answerLimits);
  if (!got.ok()) return rendezvousError(got, noAnswer, notEveryone);
  if (code != ErrorCode::Ok) return makeError(code, "bootstrap: " + self() + ": " + payload);
  return payload;
}

Status Bootstrap::Impl::readTable(const std::string& table) {
  wire::Reader in(table);
  for (int32_t peer = 0; peer < nRanks; ++peer) {
    wire::Peer entry;
    entry.hostHash = in.u64();
    entry.address = in.address();
    peers.push_back(entry);
  }
  if (!in.ok() || table.size() != static_cast<size_t>(nRanks) * (8 + wire::kAddressBytes))
    return makeError(ErrorCode::RemoteError,
                     "bootstrap: " + self() + ": the rendezvous root at " + rootText + " sent a malformed table");
  return Status();
}

Status Bootstrap::Impl::connectRing(Deadline deadline) {
  const std::string successor = "connecting to its ring successor rank " + std::to_string(next()) + " at " +
                                peers[static_cast<size_t>(next())].address.toString();
  Expected<Socket> socket = transport::connectTo(peers[static_cast<size_t>(next())].address, limits(deadline));
  if (!socket) return fail(socket.status(), successor);
  const std::string preamble = wire::encodePreamble(magic, wire::Preamble{wire::Kind::Ring, rank, 0});
  Status sent = transport::sendAll(*socket, preamble.data(), preamble.size(), limits(deadline));
  if (!sent.ok()) return fail(sent, successor);
  ringNext = std::move(socket).value();
  Status accepted = acceptUntil([this] { return ringPrev.valid(); }, limits(deadline));
  if (!accepted.ok())
    return fail(accepted, "waiting for its ring predecessor rank " + std::to_string(prev()) + " to connect");
  return Status();
}

// ---- Calls ---------------------------------------------------------------------------------------

Status Bootstrap::Impl::begin() const {
  if (abortSignal->raised()) return makeError(ErrorCode::Aborted, "bootstrap: " + self() + ": aborted");
  if (left) return makeError(ErrorCode::Unsupported, "bootstrap: " + self() + ": this rank left the communicator");
  return failure;
}

Status Bootstrap::Impl::describe(const Status& cause, const std::string& what, double seconds) const {
  std::string message = "bootstrap: " + self() + ": " + what;
  if (cause.code() == ErrorCode::Timeout) {
    message += ": nothing within " + wire::secondsText(seconds);
    if (cause.message() != "timed out") message += " (" + cause.message() + ")";
  } else {
    message += ": " + cause.message();
  }
  return makeError(cause.code(), message);
}

Status Bootstrap::Impl::fail(const Status& cause, const std::string& what) {
  Status status = describe(cause, what, timeoutSeconds);
  if (failure.ok()) failure = status;
  return status;
}

Status Bootstrap::Impl::acceptUntil(const std::function<bool()>& done, const WaitLimits& waitLimits) {
  while (!done()) {
    std::vector<pollfd> fds{pollfd{listener.fd(), POLLIN, 0}};
    for (const wire::PendingConnection& connection : pending) fds.push_back(pollfd{connection.socket.fd(), POLLIN, 0});
    Status ready = transport::pollWithLimits(fds, waitLimits);
    if (!ready.ok()) return ready;
    for (size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0) continue;
      const wire::PendingState state = wire::readPending(pending[i], wire::kPreambleBytes, magic, *refusals);
      if (state == wire::PendingState::Incomplete) continue;
      wire::PendingConnection connection = std::move(pending[i]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      if (state == wire::PendingState::Complete) identify(std::move(connection));
    }
    if (fds[0].revents != 0) {
      Status accepted = wire::acceptWaiting(listener, pending);
      if (!accepted.ok()) return accepted;
    }
  }
  return Status();
}

void Bootstrap::Impl::identify(wire::PendingConnection connection) {
  const wire::Preamble preamble = wire::decodePreamble(connection.received);
  const bool fromPeer = preamble.rank >= 0 && preamble.rank < nRanks && preamble.rank != rank;
  if (preamble.kind == wire::Kind::Ring && fromPeer && preamble.rank == prev() && !ringPrev.valid()) {
    ringPrev = std::move(connection.socket);
    return;
  }
  const auto key = std::make_pair(preamble.rank, preamble.tag);
  if (preamble.kind == wire::Kind::PointToPoint && fromPeer && incoming.count(key) == 0) {
    incoming.emplace(key, std::move(connection.socket));
    return;
  }
  refusals->refuse(connection.socket, "unexpected connection (kind " +
                                          std::to_string(static_cast<uint32_t>(preamble.kind)) + " from rank " +
                                          std::to_string(preamble.rank) + ", tag " + std::to_string(preamble.tag) + ")");
}

namespace {

const char* operationName(wire::Operation operation) {
  if (operation == kGoodbye) return "its goodbye";
  switch (operation) {
    case wire::Operation::AllGather: return "allGather";
    case wire::Operation::Broadcast: return "broadcast";
    case wire::Operation::PointToPoint: return "send/recv";
    case wire::Operation::Barrier: return "barrier";
  }
  return "an unknown operation";
}

}  // namespace

Status Bootstrap::Impl::checkHeader(const wire::MessageHeader& header, wire::Operation operation, uint32_t argument,
                                    int32_t from) const {
  const std::string peer = "rank " + std::to_string(from);
  if (header.magic != magic)
    return makeError(ErrorCode::RemoteError, peer + " sent a message with a wrong magic (a corrupt stream)");
  if (header.operation == kGoodbye && operation != kGoodbye)
    return makeError(ErrorCode::RemoteError, peer + " left the communicator (it was destroyed there) while this rank is in " +
                                                 operationName(operation));
  if (header.operation != operation)
    return makeError(ErrorCode::RemoteError, peer + " is in " + operationName(header.operation) + " while this rank is in " +
                                                 operationName(operation) + " (the ranks called different operations)");
  if (header.argument != argument && operation == wire::Operation::Broadcast)
    return makeError(ErrorCode::RemoteError, peer + " broadcasts from root " + std::to_string(header.argument) +
                                                 ", this rank from root " + std::to_string(argument));
  if (header.length > wire::kMaxPayloadBytes)
    return makeError(ErrorCode::RemoteError, peer + " announced a message of " + std::to_string(header.length) +
                                                 " bytes (a corrupt stream)");
  return Status();
}

Status Bootstrap::Impl::sendMessage(const Socket& socket, wire::Operation operation, uint32_t argument,
                                    const std::string& bytes, const WaitLimits& waitLimits) {
  const std::string header = wire::encodeMessageHeader({magic, operation, argument, bytes.size()});
  Status sent = transport::sendAll(socket, header.data(), header.size(), waitLimits);
  if (!sent.ok()) return sent;
  return transport::sendAll(socket, bytes.data(), bytes.size(), waitLimits);
}

Expected<std::string> Bootstrap::Impl::recvMessage(const Socket& socket, wire::Operation operation, uint32_t argument,
                                                   int32_t from, const WaitLimits& waitLimits) {
  std::string header(wire::kMessageHeaderBytes, '\0');
  Status got = transport::recvAll(socket, header.data(), header.size(), waitLimits);
  if (!got.ok()) return got;
  const wire::MessageHeader decoded = wire::decodeMessageHeader(header);
  if (&socket == &ringPrev) noteGoodbye(decoded);
  Status checked = checkHeader(decoded, operation, argument, from);
  if (!checked.ok()) return checked;
  std::string payload(decoded.length, '\0');
  got = transport::recvAll(socket, payload.data(), payload.size(), waitLimits);
  if (!got.ok()) return got;
  return payload;
}

Expected<std::string> Bootstrap::Impl::ringStep(wire::Operation operation, const std::string& out,
                                                const WaitLimits& waitLimits) {
  const std::string headerOut = wire::encodeMessageHeader({magic, operation, 0, out.size()});
  std::string headerIn(wire::kMessageHeaderBytes, '\0');
  Status moved = transport::sendRecvAll(ringNext, headerOut.data(), headerOut.size(), ringPrev, headerIn.data(),
                                        headerIn.size(), waitLimits);
  if (!moved.ok()) return moved;
  const wire::MessageHeader header = wire::decodeMessageHeader(headerIn);
  noteGoodbye(header);
  Status checked = checkHeader(header, operation, 0, prev());
  if (!checked.ok()) return checked;
  std::string in(header.length, '\0');
  moved = transport::sendRecvAll(ringNext, out.data(), out.size(), ringPrev, in.data(), in.size(), waitLimits);
  if (!moved.ok()) return moved;
  return in;
}

// Ring allgather: in step s every rank passes on the block it received in step s-1 (its own in
// step 0), so after nRanks-1 steps every rank holds every block.
Status Bootstrap::Impl::ringAllGather(wire::Operation operation, std::vector<std::string>& blocks) {
  const WaitLimits waitLimits = callLimits();
  for (int32_t step = 0; step + 1 < nRanks; ++step) {
    const auto sendIndex = static_cast<size_t>((rank - step + nRanks) % nRanks);
    const auto recvIndex = static_cast<size_t>((rank - step - 1 + nRanks) % nRanks);
    Expected<std::string> got = ringStep(operation, blocks[sendIndex], waitLimits);
    if (!got) return fail(got.status(), std::string(operationName(operation)) + " with " + ringNeighbours());
    blocks[recvIndex] = std::move(got).value();
  }
  return Status();
}

Expected<std::vector<std::string>> Bootstrap::allGather(const std::string& bytes) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.calls);
  Status usable = impl.begin();
  if (!usable.ok()) return usable;
  std::vector<std::string> blocks(static_cast<size_t>(impl.nRanks));
  blocks[static_cast<size_t>(impl.rank)] = bytes;
  Status gathered = impl.ringAllGather(wire::Operation::AllGather, blocks);
  if (!gathered.ok()) return gathered;
  return blocks;
}

Status Bootstrap::barrier() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.calls);
  Status usable = impl.begin();
  if (!usable.ok()) return usable;
  std::vector<std::string> blocks(static_cast<size_t>(impl.nRanks));
  return impl.ringAllGather(wire::Operation::Barrier, blocks);
}

// Around the ring from the root: each rank receives from its predecessor and passes the bytes on,
// except to the root.
Expected<std::string> Bootstrap::broadcast(const std::string& bytes, int32_t root) {
  Impl& impl = *impl_;
  if (root < 0 || root >= impl.nRanks)
    return makeError(ErrorCode::InvalidArgument, "bootstrap: broadcast root " + std::to_string(root) +
                                                     " is out of range for " + std::to_string(impl.nRanks) + " ranks");
  std::lock_guard lock(impl.calls);
  Status usable = impl.begin();
  if (!usable.ok()) return usable;
  if (impl.rank == root) {
    if (impl.next() == root) return bytes;
    Status sent = impl.sendMessage(impl.ringNext, wire::Operation::Broadcast, static_cast<uint32_t>(root), bytes,
                                   impl.callLimits());
    if (!sent.ok()) return impl.fail(sent, "broadcast to rank " + std::to_string(impl.next()) + " (ring successor)");
    return bytes;
  }
  const WaitLimits waitLimits = impl.callLimits();
  Expected<std::string> value =
      impl.recvMessage(impl.ringPrev, wire::Operation::Broadcast, static_cast<uint32_t>(root), impl.prev(), waitLimits);
  if (!value)
    return impl.fail(value.status(), "broadcast from root " + std::to_string(root) + ", receiving from rank " +
                                         std::to_string(impl.prev()) + " (ring predecessor)");
  if (impl.next() != root) {
    Status sent =
        impl.sendMessage(impl.ringNext, wire::Operation::Broadcast, static_cast<uint32_t>(root), *value, waitLimits);
    if (!sent.ok()) return impl.fail(sent, "broadcast to rank " + std::to_string(impl.next()) + " (ring successor)");
  }
  return value;
}

Expected<Socket*> Bootstrap::Impl::outgoingTo(int32_t peer, uint32_t tag, const WaitLimits& waitLimits) {
  const auto key = std::make_pair(peer, tag);
  auto found = outgoing.find(key);
  if (found != outgoing.end()) return &found->second;
  Expected<Socket> socket = transport::connectTo(peers[static_cast<size_t>(peer)].address, waitLimits);
  if (!socket) return socket.status();
  const std::string preamble = wire::encodePreamble(magic, wire::Preamble{wire::Kind::PointToPoint, rank, tag});
  Status sent = transport::sendAll(*socket, preamble.data(), preamble.size(), waitLimits);
  if (!sent.ok()) return sent;
  return &outgoing.emplace(key, std::move(socket).value()).first->second;
}

namespace {

Status checkPeer(int32_t peer, int32_t nRanks, const char* call) {
  if (peer >= 0 && peer < nRanks) return Status();
  return makeError(ErrorCode::InvalidArgument, std::string("bootstrap: ") + call + ": peer " + std::to_string(peer) +
                                                   " is out of range for " + std::to_string(nRanks) + " ranks");
}

}  // namespace

// One message to `peer` on (peer, tag); a failure names the exchange (the caller decides whether
// it fails the bootstrap). A connection that failed mid-message is dropped: its stream is broken.
Status Bootstrap::Impl::sendTo(int32_t peer, uint32_t tag, const std::string& bytes, double seconds) {
  if (peer == rank) {
    toSelf[tag].push_back(bytes);
    return Status();
  }
  const std::string what = "send to rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  const WaitLimits waitLimits = limits(transport::deadlineAfter(seconds));
  Expected<Socket*> socket = outgoingTo(peer, tag, waitLimits);
  if (!socket) return describe(socket.status(), what, seconds);
  Status sent = sendMessage(**socket, wire::Operation::PointToPoint, tag, bytes, waitLimits);
  if (!sent.ok()) {
    outgoing.erase(std::make_pair(peer, tag));
    return describe(sent, what, seconds);
  }
  return Status();
}

Expected<std::string> Bootstrap::Impl::recvFrom(int32_t peer, uint32_t tag, double seconds) {
  if (peer == rank) {
    auto& queue = toSelf[tag];
    if (queue.empty())
      return makeError(ErrorCode::InvalidArgument, "bootstrap: " + self() + ": recv from itself (tag " +
                                                       std::to_string(tag) + ") with no message sent to itself");
    std::string message = std::move(queue.front());
    queue.pop_front();
    return message;
  }
  const std::string what = "recv from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  const auto key = std::make_pair(peer, tag);
  const WaitLimits waitLimits = limits(transport::deadlineAfter(seconds));
  Status connected = acceptUntil([&] { return incoming.count(key) > 0; }, waitLimits);
  if (!connected.ok()) return describe(connected, what, seconds);
  Expected<std::string> message = recvMessage(incoming.at(key), wire::Operation::PointToPoint, tag, peer, waitLimits);
  if (!message) {
    incoming.erase(key);
    return describe(message.status(), what, seconds);
  }
  return message;
}

Status Bootstrap::send(int32_t peer, uint32_t tag, const std::string& bytes) {
  Impl& impl = *impl_;
  Status valid = checkPeer(peer, impl.nRanks, "send");
  if (!valid.ok()) return valid;
  std::lock_guard lock(impl.calls);
  Status usable = impl.begin();
  if (!usable.ok()) return usable;
  Status sent = impl.sendTo(peer, tag, bytes, impl.timeoutSeconds);
  if (!sent.ok() && impl.failure.ok()) impl.failure = sent;
  return sent;
}

Expected<std::string> Bootstrap::recv(int32_t peer, uint32_t tag) {
  Impl& impl = *impl_;
  Status valid = checkPeer(peer, impl.nRanks, "recv");
  if (!valid.ok()) return valid;
  std::lock_guard lock(impl.calls);
  Status usable = impl.begin();
  if (!usable.ok()) return usable;
  Expected<std::string> message = impl.recvFrom(peer, tag, impl.timeoutSeconds);
  // Receiving from itself with nothing sent is the caller's mistake: the bootstrap stays usable.
  if (!message && peer != impl.rank && impl.failure.ok()) impl.failure = message.status();
  return message;
}

Status Bootstrap::sendWithin(int32_t peer, uint32_t tag, const std::string& bytes, double seconds) {
  Impl& impl = *impl_;
  Status valid = checkPeer(peer, impl.nRanks, "send");
  if (!valid.ok()) return valid;
  std::lock_guard lock(impl.calls);
  if (impl.abortSignal->raised()) return makeError(ErrorCode::Aborted, "bootstrap: " + impl.self() + ": aborted");
  return impl.sendTo(peer, tag, bytes, seconds);
}

Expected<std::string> Bootstrap::recvWithin(int32_t peer, uint32_t tag, double seconds) {
  Impl& impl = *impl_;
  Status valid = checkPeer(peer, impl.nRanks, "recv");
  if (!valid.ok()) return valid;
  std::lock_guard lock(impl.calls);
  if (impl.abortSignal->raised()) return makeError(ErrorCode::Aborted, "bootstrap: " + impl.self() + ": aborted");
  return impl.recvFrom(peer, tag, seconds);
}

// ---- Leaving ---------------------------------------------------------------------------------------
//
// A rank that leaves a communicator in order (tucclCommDestroy) does not wait for its peers: it
// says goodbye on both ring connections (leave()) and closes them. A neighbour's watchdog
// (peerLost) sees the connection close; it reads, without consuming, what the leaver left unread
// and finds the goodbye after any message a ring call of its own will still read: an orderly leave.
// A connection that closed with no goodbye in it is a lost peer. The communicator's reaper
// (communicator.cc) also exchanges notes with sendWithin / awaitNotes: "this rank's calls are
// done", so that what a peer may still touch stays until it no longer does.

std::vector<std::pair<int32_t, std::string>> Bootstrap::awaitNotes(const std::vector<int32_t>& peers, uint32_t tag,
                                                                   double seconds) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.calls);
  const Deadline deadline = transport::deadlineAfter(seconds);
  std::vector<std::pair<int32_t, std::string>> notes;
  std::set<int32_t> waiting;
  for (int32_t peer : peers) {
    if (peer >= 0 && peer < impl.nRanks && peer != impl.rank) waiting.insert(peer);
  }
  std::map<int32_t, transport::Clock::time_point> closedSince;
  while (!waiting.empty() && !impl.abortSignal->raised() && Clock::now() < deadline) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto key = std::make_pair(*it, tag);
      auto in = impl.incoming.find(key);
      if (in != impl.incoming.end()) {
        pollfd entry{in->second.fd(), POLLIN, 0};
        if (::poll(&entry, 1, 0) > 0 && entry.revents != 0) {
          // Readable: the note (a few bytes, whole or nearly), or the peer's end.
          Expected<std::string> note =
              impl.recvMessage(in->second, wire::Operation::PointToPoint, tag, *it, impl.limits(deadline));
          if (note) {
            notes.emplace_back(*it, std::move(*note));
          } else {
            impl.incoming.erase(in);
          }
          it = waiting.erase(it);
          continue;
        }
      }
      auto out = impl.outgoing.find(key);
      if (out != impl.outgoing.end() && transport::connectionClosed(out->second)) {
        // Its process ended, or it let go of the communicator: its note, if it sent one, is
        // already on its way.
        const auto since = closedSince.emplace(*it, Clock::now()).first->second;
        if (Clock::now() - since >= kClosedGrace) {
          it = waiting.erase(it);
          continue;
        }
      }
      ++it;
    }
    if (waiting.empty()) break;
    // New connections are taken in the meantime; data and closings are looked at every slice.
    int rounds = 0;
    (void)impl.acceptUntil([&] { return rounds++ > 0; }, impl.limits(std::min(deadline, Clock::now() + kNoteSlice)));
  }
  return notes;
}

void Bootstrap::leave() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.calls);
  if (impl.left) return;
  impl.left = true;
  if (impl.nRanks == 1 || impl.abortSignal->raised()) return;
  const std::string goodbye =
      wire::encodeMessageHeader({impl.magic, kGoodbye, static_cast<uint32_t>(impl.rank), 0});
  const WaitLimits waitLimits = impl.limits(transport::deadlineAfter(std::min(impl.timeoutSeconds, kGoodbyeSeconds)));
  for (const Socket* socket : {&impl.ringNext, &impl.ringPrev}) {
    if (socket->valid() && !transport::connectionClosed(*socket)) {
      (void)transport::sendAll(*socket, goodbye.data(), goodbye.size(), waitLimits);
    }
  }
}

namespace {

enum class Closing { Open, Left, Lost };

// A ring connection: open, closed by a neighbour that said goodbye, or closed without one. What
// the neighbour left unread is read without consuming it: messages a ring call of this rank will
// still take, then the goodbye.
Closing closingOf(const Socket& socket, uint64_t magic) {
  if (!transport::connectionClosed(socket)) return Closing::Open;
  std::string unread(kPeekBytes, '\0');
  const ssize_t got = ::recv(socket.fd(), unread.data(), unread.size(), MSG_PEEK | MSG_DONTWAIT);
  if (got <= 0) return Closing::Lost;
  size_t at = 0;
  while (at + wire::kMessageHeaderBytes <= static_cast<size_t>(got)) {
    const wire::MessageHeader header =
        wire::decodeMessageHeader(std::string_view(unread.data() + at, wire::kMessageHeaderBytes));
    if (header.magic != magic) return Closing::Lost;
    if (header.operation == kGoodbye) return Closing::Left;
    if (header.length > wire::kMaxPayloadBytes) return Closing::Lost;
    at += wire::kMessageHeaderBytes + static_cast<size_t>(header.length);
  }
  // More unread than was looked at: undecided until this rank's own ring call reads it.
  return static_cast<size_t>(got) == unread.size() ? Closing::Open : Closing::Lost;
}

}  // namespace

bool Bootstrap::peerLost() {
  Impl& impl = *impl_;
  if (impl.nRanks == 1) return false;
  if (impl.lost.load()) return true;
  auto watch = [&](const Socket& socket, std::atomic<bool>& left) {
    if (left.load()) return;
    const Closing closing = closingOf(socket, impl.magic);
    if (closing == Closing::Left) left.store(true);
    if (closing == Closing::Lost) impl.lost.store(true);
  };
  watch(impl.ringNext, impl.nextLeft);
  watch(impl.ringPrev, impl.prevLeft);
  return impl.lost.load();
}

}  // namespace tuccl::backend
