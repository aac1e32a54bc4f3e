// The verbs network end to end over Soft-RoCE (the rdma_rxe kernel module): when this process
// is root and `rdma link add tucclrxe0 type rxe netdev lo` (else over a veth pair) succeeds, a
// receiver and a sender process move messages of 0 B .. 64 MiB, 32 in flight, and a grouped
// receive of 4 tagged buffers, over 4 queue pairs per connection; the link is removed after.
// Otherwise the test is skipped with the reason (a container without the module, not root).
// Every wait has a deadline; the parent kills only its own two children.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net/ib_net.h"
#include "tests/tools/run_tool.h"
#include "tuccl/nccl_net.h"

namespace {

using Clock = std::chrono::steady_clock;
using tuccl::tooltest::runCommand;

#define CHECK_OR_EXIT(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      std::_Exit(1);                                                  \
    }                                                                 \
  } while (0)

constexpr const char* kLink = "tucclrxe0";
constexpr double kChildSeconds = 120;

/// A Soft-RoCE link for the test's life.
class RxeLink {
 public:
  RxeLink() {
    if (geteuid() != 0) {
      why_ = "not root: cannot add a Soft-RoCE link";
      return;
    }
    const auto onLoopback = runCommand(std::string("rdma link add ") + kLink + " type rxe netdev lo");
    if (onLoopback.status == 0) {
      cleanup_ = std::string("rdma link delete ") + kLink;
    } else {
      const auto onVeth = runCommand(std::string(
          "ip link add tucclveth0 type veth peer name tucclveth1 && ip addr add 10.254.77.1/30 dev tucclveth0 && "
          "ip link set tucclveth0 up && ip link set tucclveth1 up && rdma link add ") + kLink + " type rxe netdev tucclveth0");
      if (onVeth.status != 0) {
        (void)runCommand("ip link delete tucclveth0");
        why_ = "cannot add a Soft-RoCE link (rdma_rxe not loadable here?): " + onLoopback.output + " / " + onVeth.output;
        return;
      }
      cleanup_ = std::string("rdma link delete ") + kLink + "; ip link delete tucclveth0";
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (runCommand(std::string("rdma link show ") + kLink + "/1").output.find("state ACTIVE") != std::string::npos) {
        up_ = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    why_ = "the Soft-RoCE port did not become active within 10 s";
  }
  ~RxeLink() {
    if (!cleanup_.empty()) (void)runCommand(cleanup_);
  }
  RxeLink(const RxeLink&) = delete;
  RxeLink& operator=(const RxeLink&) = delete;
  bool up() const { return up_; }
  const std::string& why() const { return why_; }

 private:
  bool up_ = false;
  std::string why_;
  std::string cleanup_;
};

bool pastDeadline(Clock::time_point start) { return Clock::now() - start > std::chrono::duration<double>(kChildSeconds); }

uint8_t patternByte(size_t message, size_t i) { return static_cast<uint8_t>((message * 131 + i * 7 + (i >> 12)) & 0xff); }

struct Child {
  const tucclNcclNet_v12_t& net = tuccl::net::ibNetV12();
  void* ctx = nullptr;
  Clock::time_point start = Clock::now();

  void init() {
    CHECK_OR_EXIT(net.init(&ctx, 1, nullptr, nullptr, nullptr) == ncclSuccess, "init: %s",
                  tuccl::net::ibUnavailableReason().c_str());
  }
  void* reg(void* comm, void* data, size_t size) {
    void* mhandle = nullptr;
    CHECK_OR_EXIT(net.regMr(comm, data, size, TUCCL_NCCL_PTR_HOST, &mhandle) == ncclSuccess, "regMr");
    return mhandle;
  }
  /// Tests every request to completion; sizes[i] gets request i's first size.
  void waitAll(std::vector<void*>& requests, std::vector<std::vector<int>>* sizes = nullptr) {
    std::vector<bool> finished(requests.size(), false);
    size_t left = requests.size();
    while (left > 0) {
      CHECK_OR_EXIT(!pastDeadline(start), "requests did not complete");
      for (size_t i = 0; i < requests.size(); ++i) {
        if (finished[i]) continue;
        int done = 0;
        int got[8] = {};
        CHECK_OR_EXIT(net.test(requests[i], &done, got) == ncclSuccess, "test failed");
        if (!done) continue;
        if (sizes != nullptr) (*sizes)[i].assign(got, got + 8);
        finished[i] = true;
        --left;
      }
    }
  }
};

const std::vector<size_t> kSizes = {0, 1, 127, 4096, 65536, 65537, 1 << 20, (3 << 20) + 5, 64 << 20};
constexpr int kInFlight = 32;
constexpr size_t kSmall = 8192;

void runReceiver(int handleOut) {
  Child child;
  child.init();
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  CHECK_OR_EXIT(child.net.listen(child.ctx, 0, handle, &listenComm) == ncclSuccess, "listen");
  CHECK_OR_EXIT(write(handleOut, handle, sizeof handle) == static_cast<ssize_t>(sizeof handle), "pipe");
  void* comm = nullptr;
  while (comm == nullptr) {
    CHECK_OR_EXIT(!pastDeadline(child.start), "accept did not finish");
    CHECK_OR_EXIT(child.net.accept(listenComm, &comm, nullptr) == ncclSuccess, "accept");
  }
  CHECK_OR_EXIT(child.net.closeListen(listenComm) == ncclSuccess, "closeListen");
  std::vector<uint8_t> buffer((64 << 20) + 4096);
  void* mh = child.reg(comm, buffer.data(), buffer.size());
  // 1. Every size, one at a time, into a buffer larger than the message.
  for (size_t m = 0; m < kSizes.size(); ++m) {
    void* data = buffer.data();
    size_t capacity = kSizes[m] + 100;
    int tag = 1;
    void* request = nullptr;
    while (request == nullptr) {
      CHECK_OR_EXIT(!pastDeadline(child.start), "irecv found no free request");
      CHECK_OR_EXIT(child.net.irecv(comm, 1, &data, &capacity, &tag, &mh, nullptr, &request) == ncclSuccess, "irecv");
    }
    std::vector<void*> requests{request};
    std::vector<std::vector<int>> sizes(1);
    child.waitAll(requests, &sizes);
    CHECK_OR_EXIT(sizes[0][0] == static_cast<int>(kSizes[m]), "size %d, expected %zu", sizes[0][0], kSizes[m]);
    for (size_t i = 0; i < kSizes[m]; ++i)
      CHECK_OR_EXIT(buffer[i] == patternByte(m, i), "message %zu byte %zu", m, i);
  }
  // 2. kInFlight receives posted at once.
  std::vector<void*> requests;
  for (int k = 0; k < kInFlight; ++k) {
    void* data = buffer.data() + k * kSmall;
    size_t capacity = kSmall;
    int tag = 1;
    void* request = nullptr;
    CHECK_OR_EXIT(child.net.irecv(comm, 1, &data, &capacity, &tag, &mh, nullptr, &request) == ncclSuccess && request != nullptr,
                  "irecv %d of %d in flight", k, kInFlight);
    requests.push_back(request);
  }
  std::vector<std::vector<int>> sizes(kInFlight);
  child.waitAll(requests, &sizes);
  for (int k = 0; k < kInFlight; ++k) {
    CHECK_OR_EXIT(sizes[k][0] == static_cast<int>(kSmall - k), "in-flight size");
    for (size_t i = 0; i < kSmall - k; ++i) CHECK_OR_EXIT(buffer[k * kSmall + i] == patternByte(100 + k, i), "in-flight data");
  }
  // 3. One grouped receive of 4 tagged buffers.
  void* data[4] = {buffer.data(), buffer.data() + 100000, buffer.data() + 200000, buffer.data() + 300000};
  size_t capacities[4] = {1000, 16, 70000, 300};
  int tags[4] = {10, 11, 12, 13};
  void* mhs[4] = {mh, mh, mh, mh};
  void* grouped = nullptr;
  CHECK_OR_EXIT(child.net.irecv(comm, 4, data, capacities, tags, mhs, nullptr, &grouped) == ncclSuccess && grouped, "grouped irecv");
  std::vector<void*> one{grouped};
  std::vector<std::vector<int>> groupedSizes(1);
  child.waitAll(one, &groupedSizes);
  const int expected[4] = {1000, 0, 70000, 300};
  for (int b = 0; b < 4; ++b) {
    CHECK_OR_EXIT(groupedSizes[0][b] == expected[b], "grouped size %d", b);
    for (int i = 0; i < expected[b]; ++i)
      CHECK_OR_EXIT(static_cast<uint8_t*>(data[b])[i] == patternByte(200 + tags[b], static_cast<size_t>(i)), "grouped data %d", b);
  }
  CHECK_OR_EXIT(child.net.deregMr(comm, mh) == ncclSuccess, "deregMr");
  CHECK_OR_EXIT(child.net.closeRecv(comm) == ncclSuccess, "closeRecv");
  CHECK_OR_EXIT(child.net.finalize(child.ctx) == ncclSuccess, "finalize");
  std::_Exit(0);
}

void fill(uint8_t* data, size_t size, size_t message) {
  for (size_t i = 0; i < size; ++i) data[i] = patternByte(message, i);
}

void* sendOne(Child& child, void* comm, void* data, size_t size, int tag, void* mh) {
  void* request = nullptr;
  while (request == nullptr) {
    CHECK_OR_EXIT(!pastDeadline(child.start), "isend never found its receive");
    CHECK_OR_EXIT(child.net.isend(comm, data, size, tag, mh, nullptr, &request) == ncclSuccess, "isend");
  }
  return request;
}

void runSender(int handleIn) {
  Child child;
  child.init();
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  size_t got = 0;
  while (got < sizeof handle) {
    const ssize_t n = read(handleIn, handle + got, sizeof handle - got);
    CHECK_OR_EXIT(n > 0, "the receiver went away");
    got += static_cast<size_t>(n);
  }
  void* comm = nullptr;
  while (comm == nullptr) {
    CHECK_OR_EXIT(!pastDeadline(child.start), "connect did not finish");
    CHECK_OR_EXIT(child.net.connect(child.ctx, 0, handle, &comm, nullptr) == ncclSuccess, "connect");
  }
  std::vector<uint8_t> buffer((64 << 20) + 4096);
  void* mh = child.reg(comm, buffer.data(), buffer.size());
  for (size_t m = 0; m < kSizes.size(); ++m) {
    fill(buffer.data(), kSizes[m], m);
    std::vector<void*> requests{sendOne(child, comm, buffer.data(), kSizes[m], 1, mh)};
    child.waitAll(requests);
  }
  std::vector<void*> requests;
  for (int k = 0; k < kInFlight; ++k) {
    uint8_t* data = buffer.data() + k * kSmall;
    fill(data, kSmall - k, 100 + k);
    requests.push_back(sendOne(child, comm, data, kSmall - k, 1, mh));
  }
  child.waitAll(requests);
  const int order[4] = {12, 10, 13, 11};
  const size_t sizes[4] = {70000, 1000, 300, 0};
  requests.clear();
  for (int s = 0; s < 4; ++s) {
    uint8_t* data = buffer.data() + s * 100000;
    fill(data, sizes[s], 200 + order[s]);
    requests.push_back(sendOne(child, comm, data, sizes[s], order[s], mh));
  }
  child.waitAll(requests);
  CHECK_OR_EXIT(child.net.deregMr(comm, mh) == ncclSuccess, "deregMr");
  CHECK_OR_EXIT(child.net.closeSend(comm) == ncclSuccess, "closeSend");
  CHECK_OR_EXIT(child.net.finalize(child.ctx) == ncclSuccess, "finalize");
  std::_Exit(0);
}

/// Waits for `pid` until the deadline, then kills it; its exit status (-1: killed or signalled).
int waitChild(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (done < 0) return -1;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      (void)waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(IbRxe, TransfersOverSoftRoce) {
  RxeLink link;
  if (!link.up()) GTEST_SKIP() << link.why();
  setenv("TUCCL_IB_HCA", (std::string("=") + kLink).c_str(), 1);
  setenv("TUCCL_SOCKET_IFNAME", "lo", 1);
  setenv("TUCCL_IB_QPS_PER_CONNECTION", "4", 1);
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  const pid_t receiver = fork();
  ASSERT_GE(receiver, 0);
  if (receiver == 0) {
    close(pipeFds[0]);
    runReceiver(pipeFds[1]);
  }
  const pid_t sender = fork();
  if (sender < 0) kill(receiver, SIGKILL);
  ASSERT_GE(sender, 0);
  if (sender == 0) {
    close(pipeFds[1]);
    runSender(pipeFds[0]);
  }
  close(pipeFds[0]);
  close(pipeFds[1]);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kChildSeconds + 10));
  const int receiverStatus = waitChild(receiver, deadline);
  const int senderStatus = waitChild(sender, deadline);
  EXPECT_EQ(receiverStatus, 0);
  EXPECT_EQ(senderStatus, 0);
  unsetenv("TUCCL_IB_HCA");
  unsetenv("TUCCL_SOCKET_IFNAME");
  unsetenv("TUCCL_IB_QPS_PER_CONNECTION");
}

}  // namespace
