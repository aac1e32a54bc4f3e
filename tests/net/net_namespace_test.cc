// The net plugin between two network namespaces: the test creates tuccl-a-<pid> and tuccl-b-<pid>,
// joined by a veth pair (tuccla<pid> in a, tucclb<pid> in b) with private addresses that exist
// only inside them (10.213.0.1/30 and 10.213.0.2/30); the receiver runs in b, the sender in a
// (each child enters its namespace with setns before it loads the plugin, and names its veth in
// TUCCL_SOCKET_IFNAME). It needs root and a working `ip netns`; otherwise every test is skipped
// with the reason. The namespaces and the veth pair are removed after every test (TearDown, and
// the destructor of the object that made them should the test end another way), and leftovers of
// this pid or of test processes that no longer run are removed before.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/net/net_harness.h"

namespace {

using namespace tuccl::nettest;

/// The `ip` program, or "" when there is none.
std::string ipProgram() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(path, X_OK) == 0) return path;
  return "";
}

struct CommandResult {
  int status = -1;  ///< the exit status; -1 when it did not run or overran
  std::string output;
};

/// Runs `ip args...` with stdout and stderr captured, killed after 10 s.
CommandResult runIp(const std::vector<std::string>& args) {
  CommandResult result;
  const std::string program = ipProgram();
  int out[2];
  if (program.empty() || pipe2(out, O_CLOEXEC) != 0) return result;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::_Exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    return result;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  char chunk[1024];
  for (;;) {
    pollfd fd{out[0], POLLIN, 0};
    if (Clock::now() > deadline) break;
    if (poll(&fd, 1, 100) <= 0) continue;
    const ssize_t n = read(out[0], chunk, sizeof chunk);
    if (n <= 0) break;
    result.output.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  pid_t waited = 0;
  while ((waited = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (waited == 0) {
    kill(pid, SIGKILL);  // our own child
    waitpid(pid, &status, 0);
    return result;
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// Whether `pid` names no running process.
bool processGone(long pid) { return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

/// Names in `listing` made by this test for a process that is this one or gone: namespaces
/// ("tuccl-a-123 (id: 0)") or veth links ("7: tuccla123@tucclb123: <...").
std::vector<std::string> leftovers(const std::string& listing, const std::regex& name) {
  std::vector<std::string> found;
  for (std::sregex_iterator it(listing.begin(), listing.end(), name), end; it != end; ++it) {
    const long pid = std::stol((*it)[2].str());
    if (pid == getpid() || processGone(pid)) found.push_back((*it)[1].str());
  }
  return found;
}

/// Removes the namespaces and veth links of this pid and of test processes that are gone.
void removeLeftovers() {
  for (const std::string& name : leftovers(runIp({"netns", "list"}).output, std::regex(R"((tuccl-[ab]-(\d+)))")))
    runIp({"netns", "del", name});
  for (const std::string& name :
       leftovers(runIp({"-o", "link", "show", "type", "veth"}).output, std::regex(R"(\d+: (tuccl[ab](\d+))[@:])")))
    runIp({"link", "del", name});
}

/// Two namespaces joined by a veth pair; removed (every step tried) by remove() or the destructor.
class VethNamespaces {
 public:
  VethNamespaces() {
    const std::string pid = std::to_string(getpid());
    nsA_ = "tuccl-a-" + pid;
    nsB_ = "tuccl-b-" + pid;
    vethA_ = "tuccla" + pid;
    vethB_ = "tucclb" + pid;
  }
  ~VethNamespaces() { remove(); }
  VethNamespaces(const VethNamespaces&) = delete;
  VethNamespaces& operator=(const VethNamespaces&) = delete;

  /// Builds the pair; "" on success, else the command that failed and what it said.
  std::string create() {
    created_ = true;
    const std::vector<std::vector<std::string>> steps = {
        {"netns", "add", nsA_},
        {"netns", "add", nsB_},
        {"link", "add", vethA_, "type", "veth", "peer", "name", vethB_},
        {"link", "set", vethA_, "netns", nsA_},
        {"link", "set", vethB_, "netns", nsB_},
        {"-n", nsA_, "addr", "add", std::string(kAddressA) + "/30", "dev", vethA_},
        {"-n", nsB_, "addr", "add", std::string(kAddressB) + "/30", "dev", vethB_},
        {"-n", nsA_, "link", "set", vethA_, "up"},
        {"-n", nsB_, "link", "set", vethB_, "up"},
        {"-n", nsA_, "link", "set", "lo", "up"},
        {"-n", nsB_, "link", "set", "lo", "up"},
    };
    for (const std::vector<std::string>& step : steps) {
      const CommandResult result = runIp(step);
      if (result.status != 0) {
        std::string command = "ip";
        for (const std::string& arg : step) command += " " + arg;
        return command + ": " + (result.output.empty() ? "did not finish" : result.output);
      }
    }
    return "";
  }

  /// Deleting a namespace deletes the veth end inside it and with it the peer; the link is
  /// deleted by name too, for when it never left the initial namespace.
  void remove() {
    if (!created_) return;
    created_ = false;
    runIp({"netns", "del", nsA_});
    runIp({"netns", "del", nsB_});
    runIp({"link", "del", vethA_});
  }

  /// Enters a namespace in a child: the receiver (role 0) b, the sender (role 1) a.
  ChildSetup enter() const {
    const std::string nsA = nsA_, nsB = nsB_, vethA = vethA_, vethB = vethB_;
    return [nsA, nsB, vethA, vethB](int role) {
      const std::string path = "/var/run/netns/" + (role == 0 ? nsB : nsA);
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      CHECK_OR_EXIT(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "cannot enter %s: %s", path.c_str(), std::strerror(errno));
      close(fd);
      setenv("TUCCL_SOCKET_IFNAME", ("=" + (role == 0 ? vethB : vethA)).c_str(), 1);
    };
  }

  const std::string& vethA() const { return vethA_; }
  const std::string& vethB() const { return vethB_; }
  static constexpr const char* kAddressA = "10.213.0.1";
  static constexpr const char* kAddressB = "10.213.0.2";

 private:
  std::string nsA_, nsB_, vethA_, vethB_;
  bool created_ = false;
};

/// This process's names in `ip netns list`.
std::vector<std::string> ownNamespaces() {
  std::vector<std::string> own;
  const std::string suffix = "-" + std::to_string(getpid());
  std::istringstream lines(runIp({"netns", "list"}).output);
  for (std::string name; lines >> name;)
    if (name.starts_with("tuccl-") && name.ends_with(suffix)) own.push_back(name);
  return own;
}

class NetNamespaces : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    if (ipProgram().empty()) GTEST_SKIP() << "no `ip` program (Debian: iproute2)";
    if (access(TUCCL_NET_PLUGIN_PATH, R_OK) != 0) GTEST_SKIP() << "the plugin is not built";
    removeLeftovers();
    pair_.emplace();
    const std::string failure = pair_->create();
    if (!failure.empty()) {
      pair_.reset();
      GTEST_SKIP() << "`ip netns` does not work here: " << failure;
    }
    unsetenv("NCCL_SOCKET_FAMILY");
  }

  void TearDown() override {
    if (!pair_) return;
    pair_.reset();
    EXPECT_TRUE(ownNamespaces().empty()) << "namespaces left behind";
  }

  std::optional<VethNamespaces> pair_;
};

// The receiver listens on its veth's address, the sender (which sees only its own veth) connects
// through the pair, and one message crosses.
TEST_P(NetNamespaces, HandshakeAcrossTheVeth) {
  const std::string vethA = pair_->vethA(), vethB = pair_->vethB();
  runPair(
      GetParam(),
      [&](NetApi& api, Channel& channel) {
        char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE];
        auto [listen, comm] = acceptReceiver(api, channel, handle);
        sockaddr_in address{};
        std::memcpy(&address, handle + 20, sizeof address);  // the handle's sockaddr (handshake.h)
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
        CHECK_OR_EXIT(std::strcmp(text, VethNamespaces::kAddressB) == 0, "listening on %s", text);
        CHECK_OR_EXIT(if_nametoindex(vethB.c_str()) != 0 && if_nametoindex(vethA.c_str()) == 0, "not in namespace b");
        std::vector<unsigned char> buffer(1 << 20);
        void* data = buffer.data();
        size_t capacity = buffer.size();
        int tag = 5;
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[0]) == ncclSuccess && requests[0], "irecv");
        waitAll(api, requests);
        CHECK_OR_EXIT(buffer == pattern(5, buffer.size()), "content");
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess && api.closeListen(listen) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        CHECK_OR_EXIT(if_nametoindex(vethA.c_str()) != 0 && if_nametoindex(vethB.c_str()) == 0, "not in namespace a");
        void* comm = connectSender(api, channel);
        std::vector<unsigned char> data = pattern(5, 1 << 20);
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.isend(comm, data.data(), data.size(), 5, &requests[0]) == ncclSuccess && requests[0], "isend");
        waitAll(api, requests);
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      },
      /*senderKilled=*/false, pair_->enter());
}

TEST_P(NetNamespaces, SizesUpTo64MiB) {
  sizesInOrder(GetParam(), {0, 1, 127, 16384, 16385, 65536, 1 << 20, (5 << 20) + 3, 64 << 20}, pair_->enter());
}

TEST_P(NetNamespaces, ThirtyTwoRequestsInFlight) { thirtyTwoInFlight(GetParam(), pair_->enter()); }

TEST_P(NetNamespaces, GroupedReceiveMatchesTags) { groupedReceiveMatchesTags(GetParam(), pair_->enter()); }

TEST_P(NetNamespaces, PeerKilledMidTransferFailsTest) { peerKilledMidTransfer(GetParam(), pair_->enter()); }

INSTANTIATE_TEST_SUITE_P(Versions, NetNamespaces, ::testing::Values(8, 12),
                         [](const ::testing::TestParamInfo<int>& param) { return "v" + std::to_string(param.param); });

}  // namespace
