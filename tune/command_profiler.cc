#include "tune/command_profiler.h"

#include <cstdlib>
#include <ctime>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <optional>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "tune/nccl_tests_output.h"
#include "support/environment.h"

extern char** environ;

namespace tuccl {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The last `n` characters of `text`, on whole lines where possible.
std::string tail(const std::string& text, size_t n = 600) {
  if (text.size() <= n) return text;
  std::string t = text.substr(text.size() - n);
  size_t nl = t.find('\n');
  return "..." + (nl != std::string::npos && nl + 1 < t.size() ? t.substr(nl + 1) : t);
}

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

// ---- Ending a command's process group: on timeout, when it exits, and when we are interrupted ----
//
// Each command runs in its own process group (the shell and whatever it starts: mpirun, its
// ranks, a backgrounded helper), so a terminal's Ctrl-C reaches only this process. While a group
// runs, SIGINT, SIGTERM and SIGHUP end every running group — SIGTERM, then SIGKILL after a grace
// — before this process dies of the signal, so no benchmark is left re-parented to init.

/// How long a group gets between SIGTERM and SIGKILL (mpirun forwards SIGTERM to its ranks).
constexpr int kGraceMilliseconds = 3000;
constexpr int kInterruptSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr size_t kMaxGroups = 64;

std::atomic<pid_t> gGroups[kMaxGroups];  ///< the running groups (their leaders' pids); 0: free slot
std::mutex gHandlersMutex;
int gRunning = 0;  ///< groups registered; the handlers are installed while > 0
struct sigaction gPrevious[std::size(kInterruptSignals)];

void sleepMilliseconds(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, nullptr);
}

/// Whether anything of the group is left (its leader reaped first, when it is ours and done).
bool groupAlive(pid_t group) {
  waitpid(group, nullptr, WNOHANG);
  return kill(-group, 0) == 0 || errno != ESRCH;
}

/// SIGTERM to the group, SIGKILL to what is left after the grace. Async-signal-safe.
void endGroup(pid_t group) {
  if (!groupAlive(group)) return;
  kill(-group, SIGTERM);
  for (int waited = 0; waited < kGraceMilliseconds && groupAlive(group); waited += 10) sleepMilliseconds(10);
  if (groupAlive(group)) kill(-group, SIGKILL);
}

/// The handler of kInterruptSignals while groups run: end them, then die of the signal as we would
/// have without the handler.
void endGroupsAndRedeliver(int signal) {
  for (std::atomic<pid_t>& slot : gGroups) {
    const pid_t group = slot.load();
    if (group > 0) kill(-group, SIGTERM);
  }
  for (std::atomic<pid_t>& slot : gGroups) {
    const pid_t group = slot.exchange(0);
    if (group > 0) endGroup(group);
  }
  for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
    if (kInterruptSignals[i] == signal) sigaction(signal, &gPrevious[i], nullptr);
  }
  raise(signal);
}

/// Blocks the interrupt signals for the time between spawning a group and registering it.
class InterruptsBlocked {
 public:
  InterruptsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int signal : kInterruptSignals) sigaddset(&set, signal);
    pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  ~InterruptsBlocked() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  InterruptsBlocked(const InterruptsBlocked&) = delete;
  InterruptsBlocked& operator=(const InterruptsBlocked&) = delete;
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t previous_;
};

/// A running group, registered for the handler; ending it (endGroup) when it goes out of scope.
class RunningGroup {
 public:
  explicit RunningGroup(pid_t group) : group_(group) {
    {
      std::lock_guard<std::mutex> lock(gHandlersMutex);
      if (gRunning++ == 0) {
        for (size_t i = 0; i < std::size(kInterruptSignals); ++i) {
          sigaction(kInterruptSignals[i], nullptr, &gPrevious[i]);
          if (gPrevious[i].sa_handler == SIG_IGN) continue;  // e.g. SIGHUP under nohup: stays ignored
          struct sigaction action {};
          action.sa_handler = endGroupsAndRedeliver;
          sigemptyset(&action.sa_mask);
          for (int signal : kInterruptSignals) sigaddset(&action.sa_mask, signal);
          sigaction(kInterruptSignals[i], &action, nullptr);
        }
      }
    }
    for (std::atomic<pid_t>& slot : gGroups) {
      pid_t free = 0;
      if (slot.compare_exchange_strong(free, group)) break;
    }
  }
  ~RunningGroup() {
    endGroup(group_);
    for (std::atomic<pid_t>& slot : gGroups) {
      pid_t mine = group_;
      if (slot.compare_exchange_strong(mine, 0)) break;
    }
    std::lock_guard<std::mutex> lock(gHandlersMutex);
    if (--gRunning == 0) {
      for (size_t i = 0; i < std::size(kInterruptSignals); ++i) sigaction(kInterruptSignals[i], &gPrevious[i], nullptr);
    }
  }
  RunningGroup(const RunningGroup&) = delete;
  RunningGroup& operator=(const RunningGroup&) = delete;

 private:
  pid_t group_;
};

Measurement failure(std::string message, int64_t resource) {
  Measurement m;
  m.ok = false;
  m.cost = static_cast<double>(resource);
  m.error = std::move(message);
  return m;
}

}  // namespace

namespace {
constexpr uint64_t kNcclSteps = 8;  // NCCL_STEPS (nccl-net-abi.md)
// NCCL's default buffers (nccl-tuner-abi.md): Simple 4 MiB; LL 512 KiB; LL128 120 elements × 640
// threads × NCCL_STEPS × 8 bytes = 4,915,200 B.
constexpr uint64_t kDefaultBufferBytes[kProtocols] = {512u << 10, 4915200, 4u << 20};
}  // namespace

uint64_t ncclBufferForChunk(Protocol protocol, bool ring, uint64_t chunkBytes) {
  const uint64_t chunkSteps = protocol == Protocol::Simple && ring ? kNcclSteps / 2 : 1;
  uint64_t stepData = (chunkBytes + chunkSteps - 1) / chunkSteps;
  if (protocol == Protocol::LL) stepData *= 2;                         // 8 data bytes per 16-byte line
  if (protocol == Protocol::LL128) stepData = (stepData * 128 + 119) / 120;  // 120 data bytes per 128
  return stepData * kNcclSteps;
}

std::vector<Constraint> ncclChunkConstraints(bool ring) {
  std::vector<Constraint> out;
  for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    const uint64_t buffer = kDefaultBufferBytes[static_cast<int>(protocol)];
    // The chunk of a buffer: the inverse of ncclBufferForChunk, rounded down.
    auto chunkOf = [&](uint64_t bytes) {
      uint64_t step = bytes / kNcclSteps;
      if (protocol == Protocol::LL) step /= 2;
      if (protocol == Protocol::LL128) step = step * 120 / 128;
      return step * (protocol == Protocol::Simple && ring ? kNcclSteps / 2 : 1);
    };
    Constraint c;
    c.name = "nccl-" + lower(protocolName(protocol)) + "-chunk";
    c.kind = Constraint::Kind::Range;
    c.whenDimension = std::string(kDimProtocol);
    c.whenValue = std::string(protocolName(protocol));
    c.dimension = std::string(kDimChunkBytes);
    c.min = static_cast<int64_t>(chunkOf(buffer / 64));
    c.max = static_cast<int64_t>(chunkOf(buffer));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ncclEnvironmentFor(const SearchSpace& space,
                                                                   const Configuration& config) {
  std::vector<std::pair<std::string, std::string>> env;
  const std::string protocol = space.valueOf(config, kDimProtocol);
  if (!protocol.empty()) env.emplace_back("NCCL_PROTO", protocol);
  const std::string algorithm = space.valueOf(config, kDimAlgorithm);
  static const std::set<std::string> kNcclAlgorithmSettings = {"ring", "tree", "collnet_direct", "collnet_chain",
                                                        "nvls", "nvls_tree", "pat", "collnet"};
  if (kNcclAlgorithmSettings.count(lower(algorithm))) env.emplace_back("NCCL_ALGO", algorithm);
  if (space.dimensionIndex(kDimChannels) != SearchSpace::npos) {
    const std::string c = space.valueOf(config, kDimChannels);
    env.emplace_back("NCCL_MIN_NCHANNELS", c);
    env.emplace_back("NCCL_MAX_NCHANNELS", c);
  }
  // NCCL's per-protocol variables (nccl-tuner-abi.md): LL128 threads and LL / LL128 buffers apart.
  const std::optional<Protocol> proto = protocolOf(space, config);
  if (space.dimensionIndex(kDimThreads) != SearchSpace::npos)
    env.emplace_back(proto == Protocol::LL128 ? "NCCL_LL128_NTHREADS" : "NCCL_NTHREADS",
                     space.valueOf(config, kDimThreads));
  if (space.dimensionIndex(kDimChunkBytes) != SearchSpace::npos) {
    const Protocol p = proto.value_or(Protocol::Simple);
    const bool ring = algorithm.empty() || lower(algorithm) == "ring";
    const auto chunk = static_cast<uint64_t>(space.levelOf(config, kDimChunkBytes, 0));
    env.emplace_back(p == Protocol::LL      ? "NCCL_LL_BUFFSIZE"
                     : p == Protocol::LL128 ? "NCCL_LL128_BUFFSIZE"
                                            : "NCCL_BUFFSIZE",
                     std::to_string(ncclBufferForChunk(p, ring, chunk)));
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> tucclDefaultEnvironment() {
  std::vector<std::pair<std::string, std::string>> env = {
      {"TUCCL_ALGO", ""},         {"TUCCL_PROTO", ""},  {"TUCCL_NCHANNELS", ""}, {"TUCCL_CHUNK_SIZE", ""},
      {"TUCCL_TUNER_TABLE", ""}, {"TUCCL_ADAPT", "0"}};
  if (!env::isSet("TUCCL_DEVICE")) env.emplace_back("TUCCL_DEVICE", "cpu");
  return env;
}

std::vector<std::pair<std::string, std::string>> tucclEnvironmentFor(const SearchSpace& space,
                                                                    const Configuration& config) {
  std::vector<std::pair<std::string, std::string>> env = tucclDefaultEnvironment();
  auto set = [&](const char* name, std::string value) {
    for (auto& [key, old] : env)
      if (key == name) old = std::move(value);
  };
  const std::string algorithm = space.valueOf(config, kDimAlgorithm);
  if (!algorithm.empty()) set("TUCCL_ALGO", algorithm);
  if (const std::optional<Protocol> proto = protocolOf(space, config)) set("TUCCL_PROTO", std::string(protocolName(*proto)));
  if (space.dimensionIndex(kDimChannels) != SearchSpace::npos) set("TUCCL_NCHANNELS", space.valueOf(config, kDimChannels));
  if (space.dimensionIndex(kDimChunkBytes) != SearchSpace::npos)
    set("TUCCL_CHUNK_SIZE", space.valueOf(config, kDimChunkBytes));
  return env;
}

std::string expandCommandTemplate(std::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '{') {
      out += text[i++];
      continue;
    }
    size_t close = text.find('}', i);
    if (close == std::string_view::npos)
      throw std::invalid_argument("command template: unterminated placeholder at column " + std::to_string(i + 1));
    std::string name(text.substr(i + 1, close - i - 1));
    auto it = values.find(name);
    if (it == values.end()) {
      std::string known;
      for (const auto& [k, v] : values) known += (known.empty() ? "" : ", ") + k;
      throw std::invalid_argument("command template: unknown placeholder {" + name + "} (known: " + known + ")");
    }
    out += it->second;
    i = close + 1;
  }
  return out;
}

CommandRun runShellCommand(const std::string& shell, const std::string& command,
                           const std::vector<std::pair<std::string, std::string>>& environment,
                           double timeoutSeconds, size_t maxOutputBytes) {
  CommandRun run;
  // The child's environment: ours, with `environment` replacing or adding variables.
  std::vector<std::string> envStrings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = std::any_of(environment.begin(), environment.end(), [&](const auto& kv) { return kv.first == key; });
    if (!replaced) envStrings.emplace_back(entry);
  }
  for (const auto& [name, value] : environment) {
    const std::string prefix = name + "=";  // a named copy: Clang 14 cannot capture a structured binding
    std::erase_if(envStrings, [&](const std::string& s) { return s.compare(0, prefix.size(), prefix) == 0; });
    envStrings.push_back(prefix + value);
  }
  std::vector<char*> envp;
  for (std::string& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    run.error = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The child starts in its own process group, with our signal mask and default dispositions;
  // the interrupt signals wait until the group is registered for the handler.
  std::optional<InterruptsBlocked> blocked(std::in_place);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &blocked->previous());
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal : kInterruptSignals) {
    struct sigaction current {};
    sigaction(signal, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaddset(&defaults, signal);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::string arg0 = shell, arg1 = "-c", arg2 = command;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, shell.c_str(), &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    run.error = "cannot start " + shell + ": " + std::strerror(rc);
    return run;
  }
  run.started = true;
  std::optional<RunningGroup> group(std::in_place, pid);  // ends the group whenever we leave
  blocked.reset();
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  auto drain = [&] {
    char buffer[65536];
    while (true) {
      ssize_t n = read(fds[0], buffer, sizeof buffer);
      if (n <= 0) return n == 0;  // true at end of file
      run.output.append(buffer, static_cast<size_t>(n));
      if (run.output.size() > maxOutputBytes) run.output.erase(0, run.output.size() - maxOutputBytes);
    }
  };
  bool eof = false;
  int status = 0;
  while (true) {
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      poll(&p, 1, 20);
      eof = drain();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      if (!eof) drain();
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      run.timedOut = true;
      endGroup(pid);
      waitpid(pid, &status, 0);
      drain();
      break;
    }
  }
  group.reset();  // whatever the command left running in its group
  close(fds[0]);
  if (!run.timedOut) {
    if (WIFEXITED(status)) run.exitStatus = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  }
  return run;
}

CommandProfiler::CommandProfiler(CommandProfilerOptions options) : options_(std::move(options)) {
  if (options_.commandTemplate.empty()) throw std::invalid_argument("command profiler: empty command template");
  if (!(options_.timeoutSeconds > 0)) throw std::invalid_argument("command profiler: timeout must be > 0");
  if (options_.iterations < 1) throw std::invalid_argument("command profiler: iterations must be >= 1");
  repetitions_ = options_.commandTemplate.find("{reps}") != std::string::npos;
}

Measurement CommandProfiler::profile(const SearchSpace& space, const Configuration& config, int64_t resource) {
  if (resource < 1) throw std::invalid_argument("profile: resource must be >= 1");
  std::map<std::string, std::string> values;
  for (size_t d = 0; d < space.dimensionCount(); ++d)
    values[space.dimension(d).name] = space.dimension(d).label(config.index.at(d));
  std::vector<std::pair<std::string, std::string>> env = options_.environment;
  for (auto& kv : options_.environmentFor ? options_.environmentFor(space, config) : ncclEnvironmentFor(space, config))
    env.push_back(std::move(kv));
  return measure(values, env, resource);
}

Measurement CommandProfiler::profileDefault(int64_t resource) {
  if (resource < 1) throw std::invalid_argument("profileDefault: resource must be >= 1");
  std::vector<std::pair<std::string, std::string>> env = options_.environment;
  if (options_.defaultEnvironment)
    for (auto& kv : options_.defaultEnvironment()) env.push_back(std::move(kv));
  // No configuration values: a template naming one cannot run the default.
  return measure({}, env, resource);
}

Measurement CommandProfiler::measure(const std::map<std::string, std::string>& configValues,
                                     const std::vector<std::pair<std::string, std::string>>& env, int64_t resource) {
  std::map<std::string, std::string> values = configValues;
  values["bytes"] = values["size"] = std::to_string(options_.bytes);
  values["iters"] = std::to_string(repetitions_ ? options_.iterations : resource);
  if (repetitions_) values["reps"] = std::to_string(resource);
  std::string command;
  try {
    command = expandCommandTemplate(options_.commandTemplate, values);
  } catch (const std::invalid_argument& e) {
    return failure(configValues.empty() ? std::string("the default configuration cannot be measured: ") + e.what() +
                                              " (the template names a configuration value)"
                                        : std::string(e.what()),
                   resource);
  }

  const CommandRun run = runShellCommand(options_.shell, command, env, options_.timeoutSeconds, options_.maxOutputBytes);
  const std::string where = "`" + command + "`";
  if (!run.started) return failure(where + ": " + run.error, resource);
  if (run.timedOut)
    return failure(where + " timed out after " + formatSeconds(options_.timeoutSeconds) +
                       " s and was killed; output so far:\n" + tail(run.output),
                   resource);
  if (run.signal != 0)
    return failure(where + " was killed by signal " + std::to_string(run.signal) + " (" + strsignal(run.signal) +
                       "); output:\n" + tail(run.output),
                   resource);
  if (run.exitStatus != 0)
    return failure(where + " exited with status " + std::to_string(run.exitStatus) + "; output:\n" + tail(run.output),
                   resource);

  const NcclTestsOutput parsed = parseNcclTestsOutput(run.output);
  if (!parsed.ok()) return failure(where + ": " + parsed.error, resource);
  const std::vector<const NcclTestsRow*> rows = findNcclTestsRows(parsed, options_.bytes);
  if (rows.empty())
    return failure(where + ": no nccl-tests result row for " + std::to_string(options_.bytes) + " bytes in its output (" +
                       std::to_string(parsed.rows.size()) + " rows); output:\n" + tail(run.output),
                   resource);
  if (repetitions_ && rows.size() != static_cast<size_t>(resource))
    return failure(where + ": " + std::to_string(rows.size()) + " result rows for " + std::to_string(rows.front()->bytes) +
                       " bytes where {reps} asked for " + std::to_string(resource) + "; output:\n" + tail(run.output),
                   resource);
  std::vector<double> samples;
  double busBwTimesUs = 0;
  for (const NcclTestsRow* row : rows) {
    const NcclTestsHalf& half = options_.inPlace ? row->inPlace : row->outOfPlace;
    if (half.wrong && *half.wrong > 0)
      return failure(where + ": nccl-tests reports " + std::to_string(*half.wrong) + " wrong elements at " +
                         std::to_string(row->bytes) + " bytes (output line " + std::to_string(row->line) + ")",
                     resource);
    if (!(half.timeUs > 0) || !std::isfinite(half.timeUs))
      return failure(where + ": output line " + std::to_string(row->line) + " has no positive time", resource);
    samples.push_back(half.timeUs);
    busBwTimesUs += half.busBwGBps * half.timeUs / static_cast<double>(rows.size());  // bytes moved, per row alike
  }
  return measurementOfSamples(std::move(samples), static_cast<double>(resource), busBwTimesUs);
}

}  // namespace tuccl
