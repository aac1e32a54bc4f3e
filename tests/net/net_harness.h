// The net plugin's conformance harness, shared by net_conformance_test (loopback) and
// net_namespace_test (two network namespaces joined by a veth pair): it dlopens
// libnccl-net-tuccl.so and drives one exported version (v8 .. v12) as NCCL's proxy would, with the
// receiver and the sender in two processes it forks. Every scenario runs under a deadline: the
// parent kills its two children when they overrun, and a scenario passes only when both exit 0.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tuccl/nccl_net.h"

namespace tuccl::nettest {

using Clock = std::chrono::steady_clock;

#define CHECK_OR_EXIT(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      std::_Exit(1);                                                  \
    }                                                                 \
  } while (0)

/// One exported version behind a common face (v12 signatures; sizes narrowed for v8).
struct NetApi {
  int version = 0;
  void* table = nullptr;

  template <typename T>
  T& as() const {
    return *static_cast<T*>(table);
  }
  ncclResult_t init() {
    switch (version) {
      case 8: return as<tucclNcclNet_v8_t>().init(nullptr);
      case 9: return as<tucclNcclNet_v9_t>().init(nullptr);
      case 10: return as<tucclNcclNet_v10_t>().init(nullptr, nullptr);
      case 11: return as<tucclNcclNet_v11_t>().init(&ctx, 1, nullptr, nullptr, nullptr);
      default: return as<tucclNcclNet_v12_t>().init(&ctx, 1, nullptr, nullptr, nullptr);
    }
  }
  ncclResult_t devices(int* n) { return as<tucclNcclNet_v12_t>().devices(n); }  // same slot in every version
  ncclResult_t listen(void* handle, void** comm, int dev = 0) {
    if (version >= 11) return as<tucclNcclNet_v12_t>().listen(ctx, dev, handle, comm);
    return as<tucclNcclNet_v10_t>().listen(dev, handle, comm);
  }
  ncclResult_t connect(void* handle, void** comm, int dev = 0) {
    if (version >= 11) return as<tucclNcclNet_v12_t>().connect(ctx, dev, handle, comm, nullptr);
    if (version == 10) return as<tucclNcclNet_v10_t>().connect(dev, nullptr, handle, comm, nullptr);
    return as<tucclNcclNet_v9_t>().connect(dev, handle, comm, nullptr);
  }
  ncclResult_t accept(void* listen, void** comm) { return as<tucclNcclNet_v12_t>().accept(listen, comm, nullptr); }
  ncclResult_t isend(void* comm, void* data, size_t size, int tag, void** request) {
    switch (version) {
      case 8: return as<tucclNcclNet_v8_t>().isend(comm, data, static_cast<int>(size), tag, nullptr, request);
      case 9: return as<tucclNcclNet_v9_t>().isend(comm, data, size, tag, nullptr, request);
      default: return as<tucclNcclNet_v10_t>().isend(comm, data, size, tag, nullptr, nullptr, request);
    }
  }
  ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** request) {
    void* mhandles[8] = {};
    if (version == 8) {
      int narrow[8];
      for (int i = 0; i < n; ++i) narrow[i] = static_cast<int>(sizes[i]);
      return as<tucclNcclNet_v8_t>().irecv(comm, n, data, narrow, tags, mhandles, request);
    }
    if (version == 9) return as<tucclNcclNet_v9_t>().irecv(comm, n, data, sizes, tags, mhandles, request);
    return as<tucclNcclNet_v10_t>().irecv(comm, n, data, sizes, tags, mhandles, nullptr, request);
  }
  // test, closeSend, closeRecv, closeListen sit at the same index in every version.
  ncclResult_t test(void* request, int* done, int* sizes) { return as<tucclNcclNet_v8_t>().test(request, done, sizes); }
  ncclResult_t closeSend(void* comm) { return as<tucclNcclNet_v8_t>().closeSend(comm); }
  ncclResult_t closeRecv(void* comm) { return as<tucclNcclNet_v8_t>().closeRecv(comm); }
  ncclResult_t closeListen(void* comm) { return as<tucclNcclNet_v8_t>().closeListen(comm); }
  void finalize() {
    if (version >= 11) (void)as<tucclNcclNet_v12_t>().finalize(ctx);
  }
  void* ctx = nullptr;
};

inline NetApi loadApi(int version) {
  void* library = dlopen(TUCCL_NET_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  CHECK_OR_EXIT(library != nullptr, "%s", dlerror());
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  NetApi api;
  api.version = version;
  api.table = dlsym(library, symbol.c_str());
  CHECK_OR_EXIT(api.table != nullptr, "%s missing", symbol.c_str());
  CHECK_OR_EXIT(api.init() == ncclSuccess, "init failed");
  int n = 0;
  CHECK_OR_EXIT(api.devices(&n) == ncclSuccess && n >= 1, "no devices");
  return api;
}

/// Pipes between the two children: the handle, and one-byte steps.
struct Channel {
  int toSender[2];
  int toReceiver[2];
  void sendTo(int fd, const void* data, size_t bytes) { CHECK_OR_EXIT(write(fd, data, bytes) == (ssize_t)bytes, "pipe"); }
  void recvFrom(int fd, void* data, size_t bytes) {
    size_t got = 0;
    while (got < bytes) {
      const ssize_t n = read(fd, static_cast<char*>(data) + got, bytes - got);
      CHECK_OR_EXIT(n > 0, "the other process went away");
      got += static_cast<size_t>(n);
    }
  }
};

inline constexpr double kDeadlineSeconds = 60;

inline bool pastDeadline(Clock::time_point start) {
  return Clock::now() - start > std::chrono::duration<double>(kDeadlineSeconds);
}

/// Completes every request (retrying test), checking the sizes; exits on an error.
inline void waitAll(NetApi& api, std::vector<void*>& requests, std::vector<std::vector<int>>* sizes = nullptr) {
  const auto start = Clock::now();
  size_t left = requests.size();
  std::vector<bool> finished(requests.size(), false);
  while (left > 0) {
    CHECK_OR_EXIT(!pastDeadline(start), "requests did not complete");
    for (size_t i = 0; i < requests.size(); ++i) {
      if (finished[i]) continue;
      int done = 0;
      int got[8] = {};
      CHECK_OR_EXIT(api.test(requests[i], &done, got) == ncclSuccess, "test failed");
      if (!done) continue;
      finished[i] = true;
      --left;
      if (sizes) (*sizes)[i].assign(got, got + 8);
    }
  }
}

inline void* connectSender(NetApi& api, Channel& channel, int dev = 0) {
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE];
  channel.recvFrom(channel.toSender[0], handle, sizeof handle);
  void* comm = nullptr;
  const auto start = Clock::now();
  while (comm == nullptr) {
    CHECK_OR_EXIT(!pastDeadline(start), "connect never completed");
    CHECK_OR_EXIT(api.connect(handle, &comm, dev) == ncclSuccess, "connect failed");
  }
  return comm;
}

inline std::pair<void*, void*> acceptReceiver(NetApi& api, Channel& channel, char* handleOut = nullptr, int dev = 0) {
  char handle[TUCCL_NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen = nullptr;
  CHECK_OR_EXIT(api.listen(handle, &listen, dev) == ncclSuccess && listen != nullptr, "listen failed");
  if (handleOut) std::memcpy(handleOut, handle, sizeof handle);
  channel.sendTo(channel.toSender[1], handle, sizeof handle);
  void* comm = nullptr;
  const auto start = Clock::now();
  while (comm == nullptr) {
    CHECK_OR_EXIT(!pastDeadline(start), "accept never completed");
    CHECK_OR_EXIT(api.accept(listen, &comm) == ncclSuccess, "accept failed");
  }
  return {listen, comm};
}

inline unsigned char patternByte(uint64_t seed, size_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ULL ^ (i * 0xBF58476D1CE4E5B9ULL);
  return static_cast<unsigned char>(x >> 56 ^ x >> 13);
}

inline std::vector<unsigned char> pattern(uint64_t seed, size_t size) {
  std::vector<unsigned char> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = patternByte(seed, i);
  return data;
}

using Role = std::function<void(NetApi&, Channel&)>;

/// What a child does first, before it loads the plugin (role 0: the receiver, 1: the sender), e.g.
/// enter a network namespace and name its interface there.
using ChildSetup = std::function<void(int role)>;

/// Forks a receiver and a sender running `receiver` / `sender` against version `version`; passes
/// when both exit 0 before the deadline (the sender killed by SIGKILL when `senderKilled`).
inline void runPair(int version, const Role& receiver, const Role& sender, bool senderKilled = false,
                    const ChildSetup& setup = {}) {
  Channel channel;
  ASSERT_EQ(pipe(channel.toSender), 0);
  ASSERT_EQ(pipe(channel.toReceiver), 0);
  std::fflush(nullptr);
  pid_t pids[2];
  for (int role = 0; role < 2; ++role) {
    pids[role] = fork();
    ASSERT_GE(pids[role], 0);
    if (pids[role] == 0) {
      alarm(static_cast<unsigned>(kDeadlineSeconds * 2));
      if (setup) setup(role);
      NetApi api = loadApi(version);
      (role == 0 ? receiver : sender)(api, channel);
      api.finalize();
      std::_Exit(0);
    }
  }
  for (int fd : {channel.toSender[0], channel.toSender[1], channel.toReceiver[0], channel.toReceiver[1]}) close(fd);
  const auto start = Clock::now();
  int status[2] = {-1, -1};
  int remaining = 2;
  while (remaining > 0) {
    for (int role = 0; role < 2; ++role) {
      if (status[role] != -1) continue;
      int s = 0;
      if (waitpid(pids[role], &s, WNOHANG) == pids[role]) {
        status[role] = s;
        --remaining;
      }
    }
    if (remaining > 0 && pastDeadline(start)) {
      for (int role = 0; role < 2; ++role)
        if (status[role] == -1) kill(pids[role], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 0) << "receiver status " << status[0];
  if (senderKilled)
    EXPECT_TRUE(WIFSIGNALED(status[1]) && WTERMSIG(status[1]) == SIGKILL) << "sender status " << status[1];
  else
    EXPECT_TRUE(WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 0) << "sender status " << status[1];
}

// ---- Scenarios every transport must pass -------------------------------------------------------

// One message of each size, in order, every byte checked (and none written past the message).
inline void sizesInOrder(int version, const std::vector<size_t>& sizes, const ChildSetup& setup = {}) {
  runPair(
      version,
      [&](NetApi& api, Channel& channel) {
        auto [listen, comm] = acceptReceiver(api, channel);
        CHECK_OR_EXIT(api.closeListen(listen) == ncclSuccess, "closeListen");
        for (size_t k = 0; k < sizes.size(); ++k) {
          std::vector<unsigned char> buffer(sizes[k] + 8, 0xEE);
          void* data = buffer.data();
          size_t capacity = buffer.size();
          int tag = 7;
          void* request = nullptr;
          while (request == nullptr) CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &request) == ncclSuccess, "irecv");
          std::vector<void*> requests{request};
          std::vector<std::vector<int>> got(1);
          waitAll(api, requests, &got);
          CHECK_OR_EXIT(static_cast<size_t>(got[0][0]) == sizes[k], "size %d, sent %zu", got[0][0], sizes[k]);
          for (size_t i = 0; i < sizes[k]; ++i) CHECK_OR_EXIT(buffer[i] == patternByte(k, i), "byte %zu of message %zu", i, k);
          CHECK_OR_EXIT(buffer[sizes[k]] == 0xEE, "wrote past the message");
        }
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess, "closeRecv");
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel);
        for (size_t k = 0; k < sizes.size(); ++k) {
          std::vector<unsigned char> data = pattern(k, sizes[k]);
          void* request = nullptr;
          while (request == nullptr) CHECK_OR_EXIT(api.isend(comm, data.data(), sizes[k], 7, &request) == ncclSuccess, "isend");
          std::vector<void*> requests{request};
          waitAll(api, requests);
        }
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      },
      /*senderKilled=*/false, setup);
}

// 32 sends and 32 receives posted before any is tested.
inline void thirtyTwoInFlight(int version, const ChildSetup& setup = {}) {
  constexpr int kCount = 32;
  auto sizeOf = [](int k) { return static_cast<size_t>(1000 + k * 37000); };
  runPair(
      version,
      [&](NetApi& api, Channel& channel) {
        auto [listen, comm] = acceptReceiver(api, channel);
        std::vector<std::vector<unsigned char>> buffers(kCount);
        std::vector<void*> requests(kCount, nullptr);
        for (int k = 0; k < kCount; ++k) {
          buffers[k].assign(sizeOf(k), 0);
          void* data = buffers[k].data();
          size_t capacity = buffers[k].size();
          int tag = 0;
          CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &requests[k]) == ncclSuccess && requests[k],
                        "irecv %d of 32 not accepted", k);
        }
        std::vector<std::vector<int>> got(kCount);
        waitAll(api, requests, &got);
        for (int k = 0; k < kCount; ++k) {
          CHECK_OR_EXIT(static_cast<size_t>(got[k][0]) == sizeOf(k), "size of %d", k);
          CHECK_OR_EXIT(buffers[k] == pattern(100 + k, sizeOf(k)), "content of %d", k);
        }
        CHECK_OR_EXIT(api.closeRecv(comm) == ncclSuccess && api.closeListen(listen) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel);
        std::vector<std::vector<unsigned char>> data(kCount);
        std::vector<void*> requests(kCount, nullptr);
        for (int k = 0; k < kCount; ++k) {
          data[k] = pattern(100 + k, sizeOf(k));
          CHECK_OR_EXIT(api.isend(comm, data[k].data(), data[k].size(), 0, &requests[k]) == ncclSuccess && requests[k],
                        "isend %d of 32 not accepted", k);
        }
        waitAll(api, requests);
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      },
      /*senderKilled=*/false, setup);
}

// One grouped receive of 4 buffers with tags 30, 10, 40, 20; the sends come as 10, 20, 30, 40
// with different sizes, each must land in the buffer its tag names.
inline void groupedReceiveMatchesTags(int version, const ChildSetup& setup = {}) {
  const int tags[4] = {30, 10, 40, 20};
  auto sizeOfTag = [](int tag) { return static_cast<size_t>(tag) * 3001; };  // 30 KB .. 120 KB
  runPair(
      version,
      [&](NetApi& api, Channel& channel) {
        auto [listen, comm] = acceptReceiver(api, channel);
        std::vector<std::vector<unsigned char>> buffers(4, std::vector<unsigned char>(200000, 0));
        void* data[4];
        size_t capacity[4];
        int posted[4];
        for (int i = 0; i < 4; ++i) {
          data[i] = buffers[i].data();
          capacity[i] = buffers[i].size();
          posted[i] = tags[i];
        }
        std::vector<void*> requests(1, nullptr);
        CHECK_OR_EXIT(api.irecv(comm, 4, data, capacity, posted, &requests[0]) == ncclSuccess && requests[0], "irecv");
        std::vector<std::vector<int>> got(1);
        waitAll(api, requests, &got);
        for (int i = 0; i < 4; ++i) {
          CHECK_OR_EXIT(static_cast<size_t>(got[0][i]) == sizeOfTag(tags[i]), "size of buffer %d", i);
          std::vector<unsigned char> expected = pattern(static_cast<uint64_t>(tags[i]), sizeOfTag(tags[i]));
          CHECK_OR_EXIT(std::equal(expected.begin(), expected.end(), buffers[i].begin()), "content of buffer %d", i);
        }
        CHECK_OR_EXIT(api.closeListen(listen) == ncclSuccess && api.closeRecv(comm) == ncclSuccess, "close");
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel);
        std::vector<std::vector<unsigned char>> data;
        std::vector<void*> requests(4, nullptr);
        for (int k = 0; k < 4; ++k) {
          const int tag = 10 * (k + 1);
          data.push_back(pattern(static_cast<uint64_t>(tag), sizeOfTag(tag)));
          CHECK_OR_EXIT(api.isend(comm, data.back().data(), data.back().size(), tag, &requests[k]) == ncclSuccess && requests[k], "isend");
        }
        waitAll(api, requests);
        CHECK_OR_EXIT(api.closeSend(comm) == ncclSuccess, "closeSend");
      },
      /*senderKilled=*/false, setup);
}

// The sender dies (SIGKILL) with most of a 64 MiB message unsent: the receiver's test returns an
// error within the deadline and never reports the message done.
inline void peerKilledMidTransfer(int version, const ChildSetup& setup = {}) {
  runPair(
      version,
      [&](NetApi& api, Channel& channel) {
        auto [listen, comm] = acceptReceiver(api, channel);
        pid_t sender = 0;
        channel.recvFrom(channel.toReceiver[0], &sender, sizeof sender);
        CHECK_OR_EXIT(kill(sender, SIGKILL) == 0, "kill");  // the sibling this test forked
        std::vector<unsigned char> buffer(64 << 20);
        void* data = buffer.data();
        size_t capacity = buffer.size();
        int tag = 0;
        void* request = nullptr;
        CHECK_OR_EXIT(api.irecv(comm, 1, &data, &capacity, &tag, &request) == ncclSuccess && request, "irecv");
        const auto start = Clock::now();
        for (;;) {
          CHECK_OR_EXIT(!pastDeadline(start), "test never reported the dead peer");
          int done = 0;
          if (api.test(request, &done, nullptr) != ncclSuccess) break;
          CHECK_OR_EXIT(!done, "a message from a killed sender completed");
        }
        (void)api.closeRecv(comm);
        (void)api.closeListen(listen);
      },
      [&](NetApi& api, Channel& channel) {
        void* comm = connectSender(api, channel);
        std::vector<unsigned char> data(64 << 20, 0x5A);
        void* request = nullptr;
        CHECK_OR_EXIT(api.isend(comm, data.data(), data.size(), 0, &request) == ncclSuccess && request, "isend");
        const pid_t self = getpid();
        channel.sendTo(channel.toReceiver[1], &self, sizeof self);
        for (;;) pause();  // killed by the receiver
      },
      /*senderKilled=*/true, setup);
}

}  // namespace tuccl::nettest
