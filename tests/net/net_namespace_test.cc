// The net plugin between two network namespaces: the test creates tuccl-a-<pid> and tuccl-b-<pid>,
// joined by a veth pair (tuccla<pid> in a, tucclb<pid> in b) with private addresses that exist
// only inside them (10.213.0.1/30 and 10.213.0.2/30), and for NIC fusion a second pair
// (tucclc<pid> in a, tuccld<pid> in b; 10.213.0.5/30 and 10.213.0.6/30); the receiver runs in b, the sender in a
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
       leftovers(runIp({"-o", "link", "show", "type", "veth"}).output, std::regex(R"(\d+: (tuccl[a-d](\d+))[@:])")))
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
    vethC_ = "tucclc" + pid;
    vethD_ = "tuccld" + pid;
  }
  ~VethNamespaces() { remove(); }
  VethNamespaces(const VethNamespaces&) = delete;
  VethNamespaces& operator=(const VethNamespaces&) = delete;

  /// Builds the pair (and the second pair when `twoPairs`); "" on success, else the command that
  /// failed and what it said.
  std::string create(bool twoPairs = false) {
    created_ = true;
    twoPairs_ = twoPairs;
    std::vector<std::vector<std::string>> steps = {
        {"netns", "add", nsA_},
        {"netns", "add", nsB_},
        {"-n", nsA_, "link", "set", "lo", "up"},
        {"-n", nsB_, "link", "set", "lo", "up"},
    };
    // One veth pair: end `a` in namespace A with `addressA`, end `b` in B with `addressB`, both up.
    auto addPair = [&](const std::string& a, const std::string& b, const char* addressA, const char* addressB) {
      steps.insert(steps.end(), {
                                    {"link", "add", a, "type", "veth", "peer", "name", b},
                                    {"link", "set", a, "netns", nsA_},
                                    {"link", "set", b, "netns", nsB_},
                                    {"-n", nsA_, "addr", "add", std::string(addressA) + "/30", "dev", a},
                                    {"-n", nsB_, "addr", "add", std::string(addressB) + "/30", "dev", b},
                                    {"-n", nsA_, "link", "set", a, "up"},
                                    {"-n", nsB_, "link", "set", b, "up"},
                                });
    };
    addPair(vethA_, vethB_, kAddressA, kAddressB);
    if (twoPairs) addPair(vethC_, vethD_, kAddressC, kAddressD);
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
    if (twoPairs_) runIp({"link", "del", vethC_});
  }

  /// Enters a namespace in a child: the receiver (role 0) b, the sender (role 1) a.
  /// With two pairs, the child names both of its veths (the sockets network's devices 0 and 1)
  /// and forces the socket network (which fuses devices).
  ChildSetup enter() const {
    const std::string nsA = nsA_, nsB = nsB_;
    const std::string ifnamesA = "=" + vethA_ + (twoPairs_ ? "," + vethC_ : "");
    const std::string ifnamesB = "=" + vethB_ + (twoPairs_ ? "," + vethD_ : "");
    const bool forceSockets = twoPairs_;
    return [nsA, nsB, ifnamesA, ifnamesB, forceSockets](int role) {
      const std::string path = "/var/run/netns/" + (role == 0 ? nsB : nsA);
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      CHECK_OR_EXIT(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "cannot enter %s: %s", path.c_str(), std::strerror(errno));
      close(fd);
      setenv("TUCCL_SOCKET_IFNAME", (role == 0 ? ifnamesB : ifnamesA).c_str(), 1);
      if (forceSockets) setenv("TUCCL_NET", "Socket", 1);
    };
  }

  const std::string& vethA() const { return vethA_; }
  const std::string& vethB() const { return vethB_; }
  const std::string& vethC() const { return vethC_; }
  const std::string& vethD() const { return vethD_; }
  static constexpr const char* kAddressA = "10.213.0.1";
  static constexpr const char* kAddressB = "10.213.0.2";
  static constexpr const char* kAddressC = "10.213.0.5";
  static constexpr const char* kAddressD = "10.213.0.6";

 private:
  std::string nsA_, nsB_, vethA_, vethB_, vethC_, vethD_;
  bool created_ = false;
  bool twoPairs_ = false;
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
  /// Whether the namespaces are joined by two veth pairs (NIC fusion) rather than one.
  virtual bool twoPairs() const { return false; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    if (ipProgram().empty()) GTEST_SKIP() << "no `ip` program (Debian: iproute2)";
    if (access(TUCCL_NET_PLUGIN_PATH, R_OK) != 0) GTEST_SKIP() << "the plugin is not built";
    removeLeftovers();
    pair_.emplace();
    const std::string failure = pair_->create(twoPairs());
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

// ---- NIC fusion ----------------------------------------------------------------------------------

class NetFusion : public NetNamespaces {
 protected:
  bool twoPairs() const override { return true; }
};

/// Bytes received on `interface` so far, from this process's network namespace (/proc/net/dev;
/// /sys/class/net would show the namespace sysfs was mounted in).
uint64_t receivedBytes(const std::string& interface) {
  FILE* file = std::fopen("/proc/net/dev", "r");
  CHECK_OR_EXIT(file != nullptr, "cannot read /proc/net/dev");
  char line[512];
  uint64_t bytes = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, file) != nullptr) {
    std::string text(line);
    const size_t colon = text.find(':');
    if (colon == std::string::npos) continue;
    std::string name = text.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != interface) continue;
    bytes = std::stoull(text.substr(colon + 1));
    found = true;
  }
  std::fclose(file);
  CHECK_OR_EXIT(found, "%s is not in /proc/net/dev", interface.c_str());
  return bytes;
}

/// makeVDevice through the version's table: the new device's index.
int fuse(NetApi& api, std::initializer_list<int> members) {
  int d = -1;
  ncclResult_t result = ncclInternalError;
  if (api.version >= 12) {
    tucclNcclNetVDeviceProps_v12_t props{};
    for (int member : members) props.devs[props.ndevs++] = member;
    CHECK_OR_EXIT(api.as<tucclNcclNet_v12_t>().makeVDevice != nullptr, "v12 has no makeVDevice");
    result = api.as<tucclNcclNet_v12_t>().makeVDevice(&d, &props);
  } else {
    tucclNcclNetVDeviceProps_v9_t props{};
    for (int member : members) props.devs[props.ndevs++] = member;
    CHECK_OR_EXIT(api.as<tucclNcclNet_v9_t>().makeVDevice != nullptr, "v9 has no makeVDevice");
    result = api.as<tucclNcclNet_v9_t>().makeVDevice(&d, &props);
  }
  CHECK_OR_EXIT(result == ncclSuccess, "makeVDevice failed: %d", static_cast<int>(result));
  return d;
}

// Two veths on each side fused into one virtual device (index 2, after the two physical ones):
// NCCL sees three devices, the virtual one with both as members and their summed speed; a
// connection on it listens on both members, its data sockets cross both veths, and 64 MiB in
// 8 MiB messages arrive whole, each veth carrying at least a quarter of them (counted after the
// handshake, whose bytes are few). Fusing a device
// twice, a device that does not exist or too many devices is refused.
TEST_P(NetFusion, AVirtualDeviceSpreadsItsMessagesOverEveryMember) {
  const std::string vethB = pair_->vethB(), vethD = pair_->vethD();
  constexpr size_t kMessage = 8 << 20;
  constexpr int kMessages = 8;
  const int version = GetParam();
  runPair(
      version,
      [&](NetApi& api, Channel& channel) {
        const int d = fuse(api, {0, 1});
        CHECK_OR_EXIT(d == 2, "the virtual device is %d, not 2", d);
        CHECK_OR_EXIT(fuse(api, {0, 1}) == 2, "the same members gave another device");
        int n = 0;
        CHECK_OR_EXIT(api.devices(&n) == ncclSuccess && n == 3, "%d devices after the fusion", n);
        if (version >= 12) {
          tucclNcclNetProperties_v12_t props{};
          CHECK_OR_EXIT(api.as<tucclNcclNet_v12_t>().getProperties(d, &props) == ncclSuccess, "getProperties");
          CHECK_OR_EXIT(props.vProps.ndevs == 2 && props.vProps.devs[0] == 0 && props.vProps.devs[1] == 1,
                        "vProps %d", props.vProps.ndevs);
          tucclNcclNetProperties_v12_t member{};
          CHECK_OR_EXIT(api.as<tucclNcclNet_v12_t>().getProperties(0, &member) == ncclSuccess, "getProperties(0)");
          CHECK_OR_EXIT(props.speed == 2 * member.speed, "speed %d, a member's %d", props.speed, member.speed);
          CHECK_OR_EXIT(std::string(props.name).find('+') != std::string::npos, "name %s", props.name);
          tucclNcclNetVDeviceProps_v12_t twice{2, {0, 0}};
          tucclNcclNetVDeviceProps_v12_t missing{2, {0, 7}};
          tucclNcclNetVDeviceProps_v12_t tooMany{5, {0, 1, 0, 1, 0}};
          int unused = -1;
          for (tucclNcclNetVDeviceProps_v12_t* bad : {&twice, &missing, &tooMany})
            CHECK_OR_EXIT(api.as<tucclNcclNet_v12_t>().makeVDevice(&unused, bad) != ncclSuccess, "a bad fusion passed");
        }
        auto [listen, comm] = acceptReceiver(api, channel, nullptr, d);
        const uint64_t beforeB = receivedBytes(vethB), beforeD = receivedBytes(vethD);
        std::vector<unsigned char> buffer(kMessage);
        for (int m = 0; m < kMessages; ++m) {
          void* data = buffer.data();
          size_t capacity = buffer.size();
          int tag = m;
          std::vector<void*> requests(1, nullptr);
          CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[0]) == ncclSuccess && requests[0], "irecv");
          waitAll(api, requests);
          CHECK_OR_EXIT(buffer == pattern(static_cast<uint64_t>(m), kMessage), "message %d differs", m);
        }
        const uint64_t overB = receivedBytes(vethB) - beforeB, overD = receivedBytes(vethD) - beforeD;
        const uint64_t quarter = kMessage * kMessages / 4;
        CHECK_OR_EXIT(overB >= quarter && overD >= quarter, "received %llu bytes on %s and %llu on %s",
                      static_cast<unsigned long long>(overB), vethB.c_str(), static_cast<unsigned long long>(overD),
                      vethD.c_str());
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess && api.closeListen(listen) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel, fuse(api, {0, 1}));
        for (int m = 0; m < kMessages; ++m) {
          std::vector<unsigned char> data = pattern(static_cast<uint64_t>(m), kMessage);
          std::vector<void*> requests(1, nullptr);
          CHECK_OR_EXIT(api.isend(comm, data.data(), data.size(), m, &requests[0]) == ncclSuccess && requests[0], "isend");
          waitAll(api, requests);
        }
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      },
      /*senderKilled=*/false, pair_->enter());
}

INSTANTIATE_TEST_SUITE_P(Versions, NetFusion, ::testing::Values(9, 12),
                         [](const ::testing::TestParamInfo<int>& param) { return "v" + std::to_string(param.param); });

}  // namespace
