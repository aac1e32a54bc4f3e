// The rendezvous root (bootstrap_wire.h): one rendezvous, then it ends.
#include <algorithm>
#include <optional>

#include "backend/bootstrap_wire.h"

namespace tuccl::backend::wire {
namespace {

using transport::Clock;
using transport::Socket;

/// How long the root spends answering the ranks once the rendezvous is decided; the answers are
/// small, so this is only a bound against a rank that stopped reading.
constexpr double kAnswerSeconds = 2;
/// While ranks are missing the root says who, first after kFirstReportSeconds, then every
/// kReportSeconds, or three times within a shorter timeout (a rank that never comes otherwise
/// costs the whole timeout in silence).
constexpr double kFirstReportSeconds = 10;
constexpr double kReportSeconds = 30;

class RendezvousRoot {
 public:
  explicit RendezvousRoot(RootJob job)
      : job_(std::move(job)), refusals_("the rendezvous root at " + job_.where), nRanks_(job_.nRanks) {
    if (nRanks_ > 0) joined_.resize(static_cast<size_t>(nRanks_));
  }

  void run() {
    nextReport_ = transport::deadlineAfter(std::min(kFirstReportSeconds, job_.timeoutSeconds / 3));
    while (!everyoneJoined()) {
      Status step = serveOnce();
      if (step.code() == ErrorCode::Timeout && Clock::now() < job_.deadline) {
        reportWaiting();
        continue;
      }
      if (!step.ok()) {
        answerEveryone(failureOf(step));
        return;
      }
    }
    answerEveryone(Status());
  }

 private:
  struct Joined {
    Socket socket;
    Peer peer;
  };

  bool everyoneJoined() const {
    return nRanks_ > 0 && std::all_of(joined_.begin(), joined_.end(), [](const auto& j) { return j.has_value(); });
  }

  /// One poll round: accepts newcomers, reads hellos. A non-ok Status ends the rendezvous.
  Status serveOnce() {
    std::vector<pollfd> fds{pollfd{job_.listener.fd(), POLLIN, 0}};
    for (const PendingConnection& pending : pending_) fds.push_back(pollfd{pending.socket.fd(), POLLIN, 0});
    Status ready =
        transport::pollWithLimits(fds, {std::min(job_.deadline, nextReport_), job_.abort ? job_.abort->fd() : -1});
    if (!ready.ok()) return ready;
    for (size_t i = pending_.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0) continue;
      Status admitted = progress(i);
      if (!admitted.ok()) return admitted;
    }
    if (fds[0].revents != 0) return acceptWaiting(job_.listener, pending_);
    return Status();
  }

  /// Reads on pending connection `index`; a complete hello joins its rank.
  Status progress(size_t index) {
    PendingState state = readPending(pending_[index], kHelloBytes, job_.magic, refusals_);
    if (state == PendingState::Incomplete) return Status();
    PendingConnection pending = std::move(pending_[index]);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
    if (state == PendingState::Dropped) return Status();
    std::optional<Hello> hello = decodeHello(pending.received);
    if (!hello) {
      refusals_.refuse(pending.socket, "not a rank's hello");
      return Status();
    }
    return join(*hello, std::move(pending.socket));
  }

  Status join(const Hello& hello, Socket socket) {
    if (nRanks_ < 0 && hello.nRanks > 0) {
      nRanks_ = hello.nRanks;
      firstRank_ = hello.rank;
      joined_.resize(static_cast<size_t>(nRanks_));
    }
    Status problem = checkHello(hello);
    if (!problem.ok()) {
      (void)sendAll(socket, encodeAnswer(job_.magic, problem));
      return problem;
    }
    joined_[static_cast<size_t>(hello.rank)] = Joined{std::move(socket), Peer{hello.hostHash, hello.address}};
    return Status();
  }

  Status checkHello(const Hello& hello) const {
    const std::string at = " at the rendezvous " + job_.where;
    if (hello.nRanks != nRanks_) {
      const std::string first = firstRank_ >= 0 ? "rank " + std::to_string(firstRank_) : std::string("the root");
      return makeError(ErrorCode::RemoteError, "the ranks disagree on the number of ranks" + at + ": rank " +
                                                   std::to_string(hello.rank) + " says " + std::to_string(hello.nRanks) +
                                                   ", " + first + " says " + std::to_string(nRanks_));
    }
    if (hello.rank < 0 || hello.rank >= nRanks_)
      return makeError(ErrorCode::RemoteError,
                       "rank " + std::to_string(hello.rank) + " of " + std::to_string(nRanks_) + " is out of range" + at);
    if (joined_[static_cast<size_t>(hello.rank)])
      return makeError(ErrorCode::RemoteError, "rank " + std::to_string(hello.rank) + " joined twice" + at);
    return Status();
  }

  /// "ranks 2, 3" (at most 16 named, then how many more): the ranks that have not joined.
  std::string missingRanks() const {
    std::vector<int32_t> missing;
    for (size_t rank = 0; rank < joined_.size(); ++rank)
      if (!joined_[rank]) missing.push_back(static_cast<int32_t>(rank));
    std::string who;
    for (size_t i = 0; i < missing.size() && i < 16; ++i) who += (i == 0 ? "" : ", ") + std::to_string(missing[i]);
    if (missing.size() > 16) who += " and " + std::to_string(missing.size() - 16) + " more";
    return (missing.size() == 1 ? "rank " : "ranks ") + who;
  }

  /// Says on stderr what the rendezvous still waits for, and when it gives up.
  void reportWaiting() {
    nextReport_ = transport::deadlineAfter(std::min(kReportSeconds, job_.timeoutSeconds / 3));
    const double left = std::chrono::duration<double>(job_.deadline - Clock::now()).count();
    if (nRanks_ < 0) {
      logBootstrap("the rendezvous at " + job_.where + " waits for its first rank (giving up in " +
                   secondsText(left) + ", TUCCL_TIMEOUT_S)");
      return;
    }
    const auto joined = std::count_if(joined_.begin(), joined_.end(), [](const auto& j) { return j.has_value(); });
    logBootstrap("the rendezvous at " + job_.where + " waits for " + missingRanks() + " of " + std::to_string(nRanks_) +
                 " (" + std::to_string(joined) + " joined; giving up in " + secondsText(left) + ", TUCCL_TIMEOUT_S)");
  }

  /// The message the ranks get when the wait ended without everyone.
  Status failureOf(const Status& step) const {
    if (step.code() != ErrorCode::Timeout) return step;
    if (nRanks_ < 0) {
      return makeError(ErrorCode::Timeout, "no rank joined the rendezvous at " + job_.where + " within " +
                                               secondsText(job_.timeoutSeconds));
    }
    return makeError(ErrorCode::Timeout, missingRanks() + " of " + std::to_string(nRanks_) +
                                             " never joined the rendezvous at " + job_.where + " within " +
                                             secondsText(job_.timeoutSeconds));
  }

  /// Sends every joined rank the table (ok) or the failure.
  void answerEveryone(const Status& failure) {
    std::string answer;
    if (failure.ok()) {
      std::vector<Peer> peers;
      for (const auto& joined : joined_) peers.push_back(joined->peer);
      answer = encodeAnswer(job_.magic, peers);
    } else {
      answer = encodeAnswer(job_.magic, failure);
    }
    for (auto& joined : joined_)
      if (joined) (void)sendAll(joined->socket, answer);
  }

  Status sendAll(const Socket& socket, const std::string& bytes) const {
    return transport::sendAll(socket, bytes.data(), bytes.size(), {transport::deadlineAfter(kAnswerSeconds), -1});
  }

  RootJob job_;
  RefusalLog refusals_;
  int32_t nRanks_ = -1;
  int32_t firstRank_ = -1;
  std::vector<PendingConnection> pending_;
  transport::Deadline nextReport_;
  std::vector<std::optional<Joined>> joined_;
};

}  // namespace

void serveRendezvous(RootJob job) { RendezvousRoot(std::move(job)).run(); }

}  // namespace tuccl::backend::wire
