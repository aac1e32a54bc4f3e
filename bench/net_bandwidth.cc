// Loopback bandwidth of TuCCL's net plugin (libnccl-net-tuccl.so, dlopened, the v12 table) beside
// a plain single TCP stream and, when installed, iperf3 — side by side in one run.
//
//   bench_net_bandwidth [-b 1M] [-e 64M] [-f 4] [-n 20] [-w 5] [-r 3] [--inflight 4]
//                       [--configs 1x1,2x1,4x1,2x2] [--no-iperf]
//
// Every measurement forks a receiver and a sender over 127.0.0.1. Per size the sender sends -w
// warm-up messages, waits until the receiver has them all, then times -n messages until the
// receiver reports them all received (a byte on a pipe): GB/s = n × size / time (1 GB = 1e9 B).
// -r rounds each measure the TCP stream and then every configuration in turn; a figure is the
// best of its rounds, so load from elsewhere that comes and goes spoils no column alone.
//   tcp      one TCP connection, blocking write()/read() of whole messages, one at a time;
//   TxS      the plugin with T helper threads × S sockets per thread (TUCCL_SOCKET_NTHREADS /
//            TUCCL_NSOCKS_PERTHREAD in the children's environment), --inflight isend/irecv posted
//            at a time, each on its own buffer;
//   iperf3   `iperf3 -s -1` and `iperf3 -c 127.0.0.1 -J -n 1G` (one stream, one figure for every
//            row), when iperf3 is on PATH (Debian: apt-get install iperf3; --no-iperf skips it).
// Figures depend on the machine's cores and load: each side wants a core of its own.
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/text_values.h"
#include "cli/cli.h"
#include "tuccl/nccl_net.h"
#include "support/environment.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChildSeconds = 300;  // a child that runs longer is killed (alarm, and by the parent)

struct Options {
  uint64_t minBytes = 1 << 20;
  uint64_t maxBytes = 64 << 20;
  int64_t factor = 4;
  int64_t iters = 20;
  int64_t warmup = 5;
  int64_t inflight = 4;
  int64_t repeat = 3;
  std::string configs = "1x1,2x1,4x1,2x2";
  bool iperf = true;
};

/// A plugin configuration: helper threads × sockets per thread.
struct SocketConfig {
  int threads = 1;
  int socksPerThread = 1;
  std::string label() const { return std::to_string(threads) + "x" + std::to_string(socksPerThread); }
};

tuccl::Expected<std::vector<SocketConfig>> parseConfigs(const std::string& text) {
  tuccl::Expected<std::vector<std::string>> items = tuccl::splitDistinctList(text);
  if (!items) return items.status();
  std::vector<SocketConfig> configs;
  for (const std::string& item : *items) {
    const size_t x = item.find('x');
    tuccl::Expected<int64_t> threads = x == std::string::npos ? tuccl::Expected<int64_t>(int64_t{0})
                                                              : tuccl::parseIntegerInRange(item.substr(0, x), 1, 16);
    tuccl::Expected<int64_t> socks = x == std::string::npos ? tuccl::Expected<int64_t>(int64_t{0})
                                                            : tuccl::parseIntegerInRange(item.substr(x + 1), 1, 64);
    if (x == std::string::npos || !threads || !socks || *threads * *socks > 64)
      return tuccl::makeError(tuccl::ErrorCode::InvalidArgument,
                              "--configs: '" + item + "' is not THREADSxSOCKETS (1..16 threads, at most 64 sockets)");
    configs.push_back({static_cast<int>(*threads), static_cast<int>(*socks)});
  }
  return configs;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench_net_bandwidth: %s: %s\n", what, std::strerror(errno));
  std::_Exit(1);
}

void writeAll(int fd, const void* data, size_t bytes) {
  const char* from = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, from, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("write");
    from += n;
    bytes -= static_cast<size_t>(n);
  }
}

void readAll(int fd, void* data, size_t bytes) {
  char* to = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, to, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("read");
    if (n == 0) {
      std::fprintf(stderr, "bench_net_bandwidth: the other side went away\n");
      std::_Exit(1);
    }
    to += n;
    bytes -= static_cast<size_t>(n);
  }
}

/// The pipes between the two children: the receiver's address or handle to the sender, and the
/// receiver's "all received" bytes.
struct Pipes {
  int toSender[2] = {-1, -1};
  int toReceiver[2] = {-1, -1};  // unused by the roles; kept symmetrical for closing
  int done[2] = {-1, -1};
};

/// The receiver has every message of a phase.
void signalDone(const Pipes& pipes) { writeAll(pipes.done[1], "d", 1); }
void awaitDone(const Pipes& pipes) {
  char byte;
  readAll(pipes.done[0], &byte, 1);
}

using Role = std::function<void(const Pipes&)>;
/// The sender's role: fills one duration (seconds) per size.
using SenderRole = std::function<void(const Pipes&, std::vector<double>&)>;

/// Forks `receiver` and `sender`; the sender's durations, or nothing when either child failed
/// or overran (then it is killed).
std::optional<std::vector<double>> runPair(const Role& receiver, const SenderRole& sender, size_t nSizes) {
  Pipes pipes;
  int result[2];
  if (::pipe(pipes.toSender) != 0 || ::pipe(pipes.done) != 0 || ::pipe(result) != 0) die("pipe");
  std::fflush(nullptr);
  pid_t pids[2];
  for (int role = 0; role < 2; ++role) {
    pids[role] = ::fork();
    if (pids[role] < 0) die("fork");
    if (pids[role] == 0) {
      ::alarm(kChildSeconds);
      ::close(result[0]);
      if (role == 0) {
        receiver(pipes);
      } else {
        std::vector<double> seconds;
        sender(pipes, seconds);
        writeAll(result[1], seconds.data(), seconds.size() * sizeof(double));
      }
      std::_Exit(0);
    }
  }
  for (int fd : {pipes.toSender[0], pipes.toSender[1], pipes.done[0], pipes.done[1], result[1]}) ::close(fd);
  std::vector<double> seconds(nSizes);
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(kChildSeconds + 5);
  char* to = reinterpret_cast<char*>(seconds.data());
  while (got < nSizes * sizeof(double) && Clock::now() < deadline) {
    pollfd fd{result[0], POLLIN, 0};
    if (::poll(&fd, 1, 1000) <= 0) continue;
    const ssize_t n = ::read(result[0], to + got, nSizes * sizeof(double) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(result[0]);
  bool ok = got == nSizes * sizeof(double);
  for (pid_t pid : pids) {
    int status = 0;
    pid_t waited = 0;
    while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (waited == 0) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
    }
    ok = ok && waited == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) return std::nullopt;
  return seconds;
}

/// A buffer of `bytes`, every page touched (no page faults in the timed loop).
std::vector<char> touchedBuffer(size_t bytes) { return std::vector<char>(bytes, 'x'); }

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// ---- A plain TCP stream --------------------------------------------------------------------------

std::optional<std::vector<double>> measureTcp(const std::vector<uint64_t>& sizes, const Options& options) {
  const size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());
  const int count = static_cast<int>(options.warmup + options.iters);
  return runPair(
      [&](const Pipes& pipes) {
        const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener, 1) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
          die("listen");
        writeAll(pipes.toSender[1], &address, sizeof address);
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) die("accept");
        std::vector<char> buffer = touchedBuffer(maxBytes);
        for (uint64_t size : sizes) {
          for (int k = 0; k < count; ++k) {
            readAll(fd, buffer.data(), size);
            if (k + 1 == options.warmup || k + 1 == count) signalDone(pipes);
          }
        }
        ::close(fd);
        ::close(listener);
      },
      [&](const Pipes& pipes, std::vector<double>& seconds) {
        sockaddr_in address{};
        readAll(pipes.toSender[0], &address, sizeof address);
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) die("connect");
        std::vector<char> buffer = touchedBuffer(maxBytes);
        for (uint64_t size : sizes) {
          for (int k = 0; k < options.warmup; ++k) writeAll(fd, buffer.data(), size);
          if (options.warmup > 0) awaitDone(pipes);
          const auto start = Clock::now();
          for (int k = 0; k < options.iters; ++k) writeAll(fd, buffer.data(), size);
          awaitDone(pipes);
          seconds.push_back(secondsSince(start));
        }
        ::close(fd);
      },
      sizes.size());
}

// ---- The plugin ----------------------------------------------------------------------------------

/// The plugin's v12 table, loaded and initialised in this (child) process.
struct Plugin {
  const tucclNcclNet_v12_t* net = nullptr;
  void* ctx = nullptr;
};

Plugin loadPlugin(const SocketConfig& config) {
  ::setenv("TUCCL_SOCKET_IFNAME", "=lo", 1);
  ::setenv("TUCCL_SOCKET_NTHREADS", std::to_string(config.threads).c_str(), 1);
  ::setenv("TUCCL_NSOCKS_PERTHREAD", std::to_string(config.socksPerThread).c_str(), 1);
  ::unsetenv("NCCL_SOCKET_FAMILY");
  void* library = ::dlopen(TUCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "bench_net_bandwidth: %s\n", ::dlerror());
    std::_Exit(1);
  }
  Plugin plugin;
  plugin.net = static_cast<const tucclNcclNet_v12_t*>(::dlsym(library, "ncclNetPlugin_v12"));
  int devices = 0;
  if (plugin.net == nullptr || plugin.net->init(&plugin.ctx, 1, nullptr, nullptr, nullptr) != ncclSuccess ||
      plugin.net->devices(&devices) != ncclSuccess || devices < 1) {
    std::fprintf(stderr, "bench_net_bandwidth: the plugin has no v12 table or no loopback device\n");
    std::_Exit(1);
  }
  return plugin;
}

void check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  std::fprintf(stderr, "bench_net_bandwidth: %s failed (%d)\n", what, static_cast<int>(result));
  std::_Exit(1);
}

/// Keeps up to `window` requests in flight until `count` messages of `size` bytes have completed,
/// message k on buffer k % window. `post` posts one (nullptr: the pool is full, try again).
void pump(const Plugin& plugin, std::vector<std::vector<char>>& buffers, int count, uint64_t size,
          const std::function<void*(char*, uint64_t)>& post) {
  const size_t window = buffers.size();
  std::vector<void*> requests(window, nullptr);
  int posted = 0;
  int completed = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(kChildSeconds);
  while (completed < count) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "bench_net_bandwidth: requests did not complete\n");
      std::_Exit(1);
    }
    for (size_t slot = 0; slot < window; ++slot) {
      if (requests[slot] == nullptr && posted < count && static_cast<size_t>(posted) % window == slot) {
        requests[slot] = post(buffers[slot].data(), size);
        if (requests[slot] != nullptr) ++posted;
      }
      if (requests[slot] == nullptr) continue;
      int done = 0;
      int sizes[8] = {};  // maxRecvs
      check(plugin.net->test(requests[slot], &done, sizes), "test");
      if (done) {
        requests[slot] = nullptr;
        ++completed;
      }
    }
  }
}

std::optional<std::vector<double>> measurePlugin(const std::vector<uint64_t>& sizes, const Options& options,
                                                 const SocketConfig& config) {
  const size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());
  const size_t window = static_cast<size_t>(options.inflight);
  const int warmup = static_cast<int>(options.warmup);
  const int iters = static_cast<int>(options.iters);
  return runPair(
      [&](const Pipes& pipes) {
        Plugin plugin = loadPlugin(config);
        char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
        void* listenComm = nullptr;
        check(plugin.net->listen(plugin.ctx, 0, handle, &listenComm), "listen");
        writeAll(pipes.toSender[1], handle, sizeof handle);
        void* comm = nullptr;
        while (comm == nullptr) check(plugin.net->accept(listenComm, &comm, nullptr), "accept");
        std::vector<std::vector<char>> buffers(window);
        for (std::vector<char>& buffer : buffers) buffer = touchedBuffer(maxBytes);
        auto post = [&](char* data, uint64_t size) -> void* {
          void* request = nullptr;
          void* pointers[1] = {data};
          size_t capacities[1] = {size};
          int tags[1] = {0};
          void* mhandles[1] = {nullptr};
          check(plugin.net->irecv(comm, 1, pointers, capacities, tags, mhandles, nullptr, &request), "irecv");
          return request;
        };
        for (uint64_t size : sizes) {
          if (warmup > 0) {
            pump(plugin, buffers, warmup, size, post);
            signalDone(pipes);
          }
          pump(plugin, buffers, iters, size, post);
          signalDone(pipes);
        }
        check(plugin.net->closeRecv(comm), "closeRecv");
        check(plugin.net->closeListen(listenComm), "closeListen");
        (void)plugin.net->finalize(plugin.ctx);
      },
      [&](const Pipes& pipes, std::vector<double>& seconds) {
        Plugin plugin = loadPlugin(config);
        char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE];
        readAll(pipes.toSender[0], handle, sizeof handle);
        void* comm = nullptr;
        while (comm == nullptr) check(plugin.net->connect(plugin.ctx, 0, handle, &comm, nullptr), "connect");
        std::vector<std::vector<char>> buffers(window);
        for (std::vector<char>& buffer : buffers) buffer = touchedBuffer(maxBytes);
        auto post = [&](char* data, uint64_t size) -> void* {
          void* request = nullptr;
          check(plugin.net->isend(comm, data, size, 0, nullptr, nullptr, &request), "isend");
          return request;
        };
        for (uint64_t size : sizes) {
          if (warmup > 0) {
            pump(plugin, buffers, warmup, size, post);
            awaitDone(pipes);
          }
          const auto start = Clock::now();
          pump(plugin, buffers, iters, size, post);
          awaitDone(pipes);
          seconds.push_back(secondsSince(start));
        }
        check(plugin.net->closeSend(comm), "closeSend");
        (void)plugin.net->finalize(plugin.ctx);
      },
      sizes.size());
}

// ---- iperf3 --------------------------------------------------------------------------------------

std::optional<std::string> findOnPath(const std::string& program) {
  for (const std::string& dir : tuccl::splitList(tuccl::env::text("PATH").value_or(""), ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) ::close(fd);
  return ok ? ntohs(address.sin_port) : -1;
}

/// Starts `argv` with stdout into a pipe (or /dev/null); the pid and the pipe's read end.
pid_t spawn(const std::vector<std::string>& argv, int* output) {
  int out[2] = {-1, -1};
  if (output != nullptr && ::pipe(out) != 0) return -1;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(output != nullptr ? out[1] : null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::dup2(null, STDIN_FILENO);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  if (output != nullptr) {
    ::close(out[1]);
    if (pid < 0) ::close(out[0]);
    *output = pid < 0 ? -1 : out[0];
  }
  return pid;
}

/// Waits for `pid` until `deadline`, then kills it; its exit status (-1 when killed).
int reap(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  pid_t waited = 0;
  while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (waited == 0) {
    ::kill(pid, SIGKILL);
    (void)::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs `argv` to completion (killed after `seconds`); its stdout and exit status.
std::pair<std::string, int> capture(const std::vector<std::string>& argv, int seconds) {
  int output = -1;
  const pid_t pid = spawn(argv, &output);
  if (pid < 0) return {{}, -1};
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  std::string text;
  char chunk[4096];
  while (Clock::now() < deadline) {
    pollfd fd{output, POLLIN, 0};
    if (::poll(&fd, 1, 200) <= 0) continue;
    const ssize_t n = ::read(output, chunk, sizeof chunk);
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(output);
  return {text, reap(pid, deadline)};
}

/// iperf3's single-stream loopback figure (GB/s), or why there is none.
tuccl::Expected<double> measureIperf3(const std::string& iperf3) {
  const int port = freePort();
  if (port < 0) return tuccl::makeError(tuccl::ErrorCode::SystemError, "no free port");
  const std::string portText = std::to_string(port);
  const pid_t server = spawn({iperf3, "-s", "-1", "-p", portText}, nullptr);
  if (server < 0) return tuccl::makeError(tuccl::ErrorCode::SystemError, "cannot start the iperf3 server");
  // The one-shot server ends after its test; it is reaped (or killed, after 5 s) however this
  // function is left, an exception included.
  struct Reaper {
    pid_t pid;
    ~Reaper() { (void)reap(pid, Clock::now() + std::chrono::seconds(5)); }
  } reaper{server};
  std::string failure = "iperf3 did not run";
  std::optional<double> gbps;
  // The server needs a moment to listen; a client that finds no listener fails at once and
  // leaves the one-shot server untouched, so it is simply tried again.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!gbps && Clock::now() < deadline) {
    auto [text, status] = capture({iperf3, "-c", "127.0.0.1", "-p", portText, "-J", "-n", "1G"}, 60);
    const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
    const nlohmann::json::json_pointer received("/end/sum_received/bits_per_second");
    if (status == 0 && report.is_object() && report.contains(received) && report.at(received).is_number() &&
        report.at(received).get<double>() > 0) {
      gbps = report.at(received).get<double>() / 8e9;
      break;
    }
    if (report.is_object() && report.contains("error") && report["error"].is_string())
      failure = report["error"].get<std::string>();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!gbps) return tuccl::makeError(tuccl::ErrorCode::SystemError, failure);
  return *gbps;
}

// ---- The table -----------------------------------------------------------------------------------

double gbps(uint64_t size, int64_t iters, double seconds) {
  return seconds > 0 ? static_cast<double>(size) * static_cast<double>(iters) / seconds / 1e9 : 0;
}

int run(int argc, char** argv) {
  Options options;
  CLI::App app{"Loopback bandwidth of TuCCL's net plugin beside a single TCP stream and iperf3"};
  app.add_option("-b,--minbytes", options.minBytes, "smallest message size")
      ->transform(tuccl::cli::byteSizeIn(1, uint64_t{1} << 30));
  app.add_option("-e,--maxbytes", options.maxBytes, "largest message size")
      ->transform(tuccl::cli::byteSizeIn(1, uint64_t{1} << 30));
  app.add_option("-f,--stepfactor", options.factor, "size multiplication factor")
      ->transform(tuccl::cli::integerIn(2, 1024));
  app.add_option("-n,--iters", options.iters, "timed messages per size")->transform(tuccl::cli::integerIn(1, 100000));
  app.add_option("-w,--warmup_iters", options.warmup, "warm-up messages per size")
      ->transform(tuccl::cli::integerIn(0, 100000));
  app.add_option("--inflight", options.inflight, "plugin requests in flight (each on its own buffer)")
      ->transform(tuccl::cli::integerIn(1, 32));
  app.add_option("-r,--repeat", options.repeat, "rounds; each figure is the best round")
      ->transform(tuccl::cli::integerIn(1, 100));
  app.add_option("--configs", options.configs, "plugin socket configurations THREADSxSOCKETS_PER_THREAD");
  app.add_flag("!--no-iperf", options.iperf, "skip iperf3 even when it is on PATH");
  app.footer("iperf3 is an extra column when it is on PATH (Debian: apt-get install iperf3).");
  if (std::optional<int> exit = tuccl::cli::parse(app, argc, argv)) return *exit;
  if (options.minBytes > options.maxBytes) {
    std::fprintf(stderr, "bench_net_bandwidth: error: -b (%s) is larger than -e (%s)\n",
                 tuccl::formatByteSize(options.minBytes).c_str(), tuccl::formatByteSize(options.maxBytes).c_str());
    return tuccl::cli::kExitError;
  }
  tuccl::Expected<std::vector<SocketConfig>> configs = parseConfigs(options.configs);
  if (!configs) return tuccl::cli::reportError("bench_net_bandwidth", configs.status());

  std::vector<uint64_t> sizes;
  for (uint64_t size = options.minBytes; size <= options.maxBytes; size *= static_cast<uint64_t>(options.factor))
    sizes.push_back(size);

  std::optional<double> iperf;
  std::string iperfNote = "not run (--no-iperf)";
  if (options.iperf) {
    if (std::optional<std::string> program = findOnPath("iperf3")) {
      tuccl::Expected<double> measured = measureIperf3(*program);
      if (measured) iperf = *measured;
      iperfNote = measured ? "one stream, 1 GiB, its own write size" : "failed: " + measured.status().message();
    } else {
      iperfNote = "not on PATH (Debian: apt-get install iperf3)";
    }
  }
  // Round r measures the TCP stream and then every configuration; each keeps its shortest time
  // per size over the rounds, so a moment of load from elsewhere spoils none of them alone.
  std::vector<double> tcp(sizes.size(), std::numeric_limits<double>::infinity());
  std::vector<std::vector<double>> plugin(configs->size(), tcp);
  auto keepBest = [](std::vector<double>& best, const std::vector<double>& seconds) {
    for (size_t s = 0; s < best.size(); ++s) best[s] = std::min(best[s], seconds[s]);
  };
  for (int64_t round = 0; round < options.repeat; ++round) {
    std::optional<std::vector<double>> stream = measureTcp(sizes, options);
    if (!stream) {
      std::fprintf(stderr, "bench_net_bandwidth: error: the TCP stream failed\n");
      return 1;
    }
    keepBest(tcp, *stream);
    for (size_t c = 0; c < configs->size(); ++c) {
      std::optional<std::vector<double>> seconds = measurePlugin(sizes, options, (*configs)[c]);
      if (!seconds) {
        std::fprintf(stderr, "bench_net_bandwidth: error: the plugin failed with %s\n", (*configs)[c].label().c_str());
        return 1;
      }
      keepBest(plugin[c], *seconds);
    }
  }

  std::printf("# TuCCL net plugin (%s) over 127.0.0.1 beside a single TCP stream\n", TUCCL_NET_PLUGIN_PATH);
  std::printf("# %lld timed messages per size after %lld warm-up, best of %lld rounds; plugin: %lld in flight, TxS = "
              "threads x sockets per thread\n",
              static_cast<long long>(options.iters), static_cast<long long>(options.warmup),
              static_cast<long long>(options.repeat), static_cast<long long>(options.inflight));
  std::printf("# iperf3: %s\n", iperfNote.c_str());
  std::printf("# %10s %10s", "size", "tcp GB/s");
  if (iperf) std::printf(" %11s", "iperf3 GB/s");
  for (const SocketConfig& config : *configs) std::printf(" %9s %6s", (config.label() + " GB/s").c_str(), "%tcp");
  std::printf("\n");
  for (size_t s = 0; s < sizes.size(); ++s) {
    const double reference = gbps(sizes[s], options.iters, tcp[s]);
    std::printf("  %10s %10.2f", tuccl::formatByteSize(sizes[s]).c_str(), reference);
    if (iperf) std::printf(" %11.2f", *iperf);
    for (const std::vector<double>& seconds : plugin) {
      const double figure = gbps(sizes[s], options.iters, seconds[s]);
      std::printf(" %9.2f %5.0f%%", figure, reference > 0 ? 100.0 * figure / reference : 0.0);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  return tuccl::cli::runGuarded("bench_net_bandwidth", [&] { return run(argc, argv); });
}
