// The ranks of a tuccl-run launch as supervised child processes (rank_launcher.h).
#include "tools/rank_launcher.h"
#include "support/environment.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>

extern char** environ;

namespace tuccl::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

/// The self-pipe: signal handlers write the signal number, the supervisor's poll reads it.
int signalPipe[2] = {-1, -1};

extern "C" void onSignal(int number) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(number);
  (void)!write(signalPipe[1], &byte, 1);
  errno = saved;
}

const char* signalName(int number) {
  switch (number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

void report(const std::string& message) { std::fprintf(stderr, "tuccl-run: %s\n", message.c_str()); }

bool installSignalHandlers() {
  if (pipe2(signalPipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  bool ok = sigaction(SIGCHLD, &action, nullptr) == 0;
  for (const int number : kForwardedSignals) ok = ok && sigaction(number, &action, nullptr) == 0;
  // A closed stdout (tuccl-run ... | head) must not kill the launcher while ranks still run.
  signal(SIGPIPE, SIG_IGN);
  return ok;
}

/// In the child before exec: the dispositions and mask a fresh program expects.
void restoreSignalDefaults() {
  for (const int number : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(number, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string randomMagic() {
  std::random_device device;
  char text[32];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

/// This process's environment with the launch variables of `rank` in place of any inherited ones.
std::vector<std::string> childEnvironment(const LaunchOptions& options, int rank, const std::string& magic) {
  const int perNode = options.ranksPerNode > 0 ? options.ranksPerNode : options.ranks;
  const int node = rank / perNode;
  const int nodeSize = std::min(perNode, options.ranks - node * perNode);
  std::vector<std::string> set = {
      "TUCCL_RANK=" + std::to_string(rank),
      "TUCCL_NRANKS=" + std::to_string(options.ranks),
      "TUCCL_LOCAL_RANK=" + std::to_string(rank % perNode),
      "TUCCL_LOCAL_SIZE=" + std::to_string(nodeSize),
      "TUCCL_COMM_ID=" + options.commId,
      "TUCCL_COMM_MAGIC=" + magic};
  // A host id of this launch's own (its magic), so two launches never share nodes.
  if (options.ranksPerNode > 0) set.push_back("TUCCL_HOSTID=tuccl-run-" + magic + "-node" + std::to_string(node));
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const std::string_view key = text.substr(0, text.find('=') + 1);
    const bool replaced = std::any_of(set.begin(), set.end(), [&](const std::string& ours) {
      return std::string_view(ours).substr(0, ours.find('=') + 1) == key;
    });
    if (!replaced) result.emplace_back(text);
  }
  result.insert(result.end(), set.begin(), set.end());
  return result;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& text : strings) result.push_back(text.data());
  result.push_back(nullptr);
  return result;
}

void writeAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // the reader went away: the ranks' output is dropped, the launch goes on
    text.remove_prefix(static_cast<size_t>(written));
  }
}

std::string describeStatus(int waitStatus) {
  if (WIFSIGNALED(waitStatus))
    return "was killed by signal " + std::to_string(WTERMSIG(waitStatus)) + " (" + strsignal(WTERMSIG(waitStatus)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(waitStatus));
}

/// One of a child's output streams, read through a pipe when output is tagged.
struct OutputStream {
  int fd = -1;      ///< the pipe's read end; -1 once closed (or when not tagging)
  int target = 1;   ///< where the tagged lines go
  std::string partial;
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;  ///< started and not yet reaped: the only state in which it is signalled
  OutputStream out;
  OutputStream err;
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options) : options_(options) {}

  int run() {
    if (!installSignalHandlers()) {
      report(std::string("cannot install signal handlers: ") + std::strerror(errno));
      return 1;
    }
    if (options_.timeoutSeconds > 0)
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(options_.timeoutSeconds));
    if (!spawnAll()) stopAll("could not start every rank");
    while (anyRunning()) waitForEvents();
    drainOutputs();
    if (failure_) return *failure_;
    if (timedOut_) return kExitTimedOut;
    return startFailed_ ? 1 : 0;
  }

 private:
  bool spawnAll() {
    const std::string magic = env::text("TUCCL_COMM_MAGIC").value_or(randomMagic());
    children_.resize(static_cast<size_t>(options_.ranks));
    for (int rank = 0; rank < options_.ranks; ++rank) {
      children_[static_cast<size_t>(rank)].rank = rank;
      if (!spawn(children_[static_cast<size_t>(rank)], magic)) return false;
    }
    return true;
  }

  static bool openPipe(OutputStream& stream, int target, int childEnd[2]) {
    if (pipe2(childEnd, O_CLOEXEC) != 0) return false;
    fcntl(childEnd[0], F_SETFL, fcntl(childEnd[0], F_GETFL) | O_NONBLOCK);
    stream.fd = childEnd[0];
    stream.target = target;
    return true;
  }

  bool spawn(Child& child, const std::string& magic) {
    std::vector<std::string> environment = childEnvironment(options_, child.rank, magic);
    std::vector<std::string> arguments = options_.command;
    std::vector<char*> envp = pointers(environment);
    std::vector<char*> argv = pointers(arguments);
    int outPipe[2] = {-1, -1};
    int errPipe[2] = {-1, -1};
    if (options_.tagOutput && (!openPipe(child.out, 1, outPipe) || !openPipe(child.err, 2, errPipe))) {
      report(std::string("cannot create output pipes: ") + std::strerror(errno));
      startFailed_ = true;
      return false;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      report("cannot start rank " + std::to_string(child.rank) + ": " + std::strerror(errno));
      startFailed_ = true;
      return false;
    }
    if (pid == 0) execChild(argv, envp, outPipe[1], errPipe[1]);
    child.pid = pid;
    child.running = true;
    if (options_.tagOutput) {
      close(outPipe[1]);
      close(errPipe[1]);
    }
    return true;
  }

  [[noreturn]] static void execChild(std::vector<char*>& argv, std::vector<char*>& envp, int out, int err) {
    restoreSignalDefaults();
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    execvpe(argv[0], argv.data(), envp.data());
    const std::string message = std::string("tuccl-run: cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
    writeAll(2, message);
    _exit(kExitCannotRun);
  }

  bool anyRunning() const {
    return std::any_of(children_.begin(), children_.end(), [](const Child& c) { return c.running; });
  }

  /// One poll round over the signal pipe and the output pipes, then whatever it woke up for.
  void waitForEvents() {
    std::vector<pollfd> fds{pollfd{signalPipe[0], POLLIN, 0}};
    for (const Child& child : children_)
      for (const OutputStream* stream : {&child.out, &child.err})
        if (stream->fd >= 0) fds.push_back(pollfd{stream->fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), pollTimeoutMs());
    if (ready < 0 && errno != EINTR) {
      report(std::string("poll: ") + std::strerror(errno));
      stopAll("the launcher cannot wait for its ranks");
    }
    handleSignals();
    reapChildren();
    pumpOutputs(false);
    checkTimers();
  }

  int pollTimeoutMs() const {
    std::optional<Clock::time_point> next = stopping_ ? killAt_ : deadline_;
    if (!next) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
  }

  void handleSignals() {
    unsigned char number = 0;
    while (read(signalPipe[0], &number, 1) == 1) {
      if (number == SIGCHLD) continue;  // reapChildren runs after every wake-up
      report(std::string("forwarding ") + signalName(number) + " to the ranks");
      sendToRunning(number);
    }
  }

  void reapChildren() {
    for (Child& child : children_) {
      if (!child.running) continue;
      int waitStatus = 0;
      if (waitpid(child.pid, &waitStatus, WNOHANG) != child.pid) continue;
      child.running = false;
      onExit(child, waitStatus);
    }
  }

  void onExit(const Child& child, int waitStatus) {
    const int code = WIFSIGNALED(waitStatus) ? 128 + WTERMSIG(waitStatus) : WEXITSTATUS(waitStatus);
    if (code == 0 || stopping_) return;
    failure_ = code;
    report("rank " + std::to_string(child.rank) + " (pid " + std::to_string(child.pid) + ") " +
           describeStatus(waitStatus));
    stopAll("stopping the other ranks");
  }

  void checkTimers() {
    const auto now = Clock::now();
    if (!stopping_ && deadline_ && now >= *deadline_) {
      timedOut_ = true;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", options_.timeoutSeconds);
      stopAll(std::string("timed out after ") + seconds + " s; stopping the ranks");
    }
    if (stopping_ && killAt_ && now >= *killAt_) {
      if (anyRunning()) report("ranks still running after the grace period: sending SIGKILL");
      sendToRunning(SIGKILL);
      killAt_.reset();
    }
  }

  /// SIGTERM to every running rank now, SIGKILL to those left after the grace period.
  void stopAll(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    if (anyRunning()) report(why);
    sendToRunning(SIGTERM);
    killAt_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(std::max(options_.graceSeconds, 0.0)));
  }

  void sendToRunning(int number) {
    for (const Child& child : children_)
      if (child.running) kill(child.pid, number);
  }

  void pumpOutputs(bool final) {
    for (Child& child : children_) {
      readOutput(child.rank, child.out, final);
      readOutput(child.rank, child.err, final);
    }
  }

  /// Reads what the pipe holds and writes its complete lines, tagged; at the end of the stream
  /// (or, when `final`, once nothing more is there) also the unterminated rest.
  void readOutput(int rank, OutputStream& stream, bool final) {
    if (stream.fd < 0) return;
    char buffer[65536];
    bool ended = false;
    while (true) {
      const ssize_t got = read(stream.fd, buffer, sizeof buffer);
      if (got > 0) {
        stream.partial.append(buffer, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      ended = got == 0 || (got < 0 && errno != EAGAIN) || final;
      break;
    }
    emitLines(rank, stream, ended);
    if (ended) {
      close(stream.fd);
      stream.fd = -1;
    }
  }

  static void emitLines(int rank, OutputStream& stream, bool flushRest) {
    const std::string tag = "[" + std::to_string(rank) + "] ";
    std::string text;
    size_t start = 0;
    for (size_t end; (end = stream.partial.find('\n', start)) != std::string::npos; start = end + 1)
      text += tag + stream.partial.substr(start, end - start + 1);
    stream.partial.erase(0, start);
    if (flushRest && !stream.partial.empty()) {
      text += tag + stream.partial + "\n";
      stream.partial.clear();
    }
    writeAll(stream.target, text);
  }

  /// After the last rank ended: what its pipes still hold (a rank's own children may keep a pipe
  /// open; their later output is not waited for).
  void drainOutputs() { pumpOutputs(true); }

  const LaunchOptions& options_;
  std::vector<Child> children_;
  std::optional<Clock::time_point> deadline_;
  std::optional<Clock::time_point> killAt_;
  std::optional<int> failure_;
  bool stopping_ = false;
  bool timedOut_ = false;
  bool startFailed_ = false;
};

}  // namespace

int runRanks(const LaunchOptions& options) { return Supervisor(options).run(); }

}  // namespace tuccl::tools
