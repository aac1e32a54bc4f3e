// The C API in one process: argument checks, ranks as threads (tucclCommInitAll) driven by a
// group or by CPU streams, several communicators and threads at once, abort from another thread.
#include "tuccl/tuccl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("TUCCL_DEVICE", "cpu", 1);
    setenv("TUCCL_TIMEOUT_S", "60", 1);
    setenv("TUCCL_CACHE_DIR", (std::string(TUCCL_BINARY_DIR) + "/tests/tuccl-cache").c_str(), 1);
  }
};

// tests/backend/api_raw_values.c: the API called with enum arguments holding any int.
extern "C" tucclResult_t allReduceWithRawValues(const void* sendbuff, void* recvbuff, size_t count, int datatype,
                                                int op, tucclComm_t comm);
extern "C" const char* errorStringOfRawValue(int result);

std::vector<tucclComm_t> initAll(int n) {
  std::vector<tucclComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(tucclCommInitAll(comms.data(), n, nullptr), tucclSuccess) << tucclGetLastError(nullptr);
  return comms;
}

void destroyAll(std::vector<tucclComm_t>& comms) {
  // Destroy says goodbye to the peers: every rank's destroy runs at once.
  std::vector<std::thread> threads;
  for (tucclComm_t comm : comms) {
    threads.emplace_back([comm] { EXPECT_EQ(tucclCommDestroy(comm), tucclSuccess) << tucclGetLastError(comm); });
  }
  for (auto& t : threads) t.join();
}

TEST_F(Api, ErrorStringsAndVersion) {
  for (int r = -1; r <= tucclNumResults + 5; ++r) EXPECT_NE(errorStringOfRawValue(r), nullptr);
  int version = 0;
  EXPECT_EQ(tucclGetVersion(&version), tucclSuccess);
  EXPECT_EQ(version, TUCCL_VERSION_CODE);
}

// `result` is tucclInvalidArgument and comm's last error contains `words`.
void expectInvalidSaying(tucclComm_t comm, tucclResult_t result, const std::string& words) {
  EXPECT_EQ(result, tucclInvalidArgument);
  EXPECT_NE(std::string(tucclGetLastError(comm)).find(words), std::string::npos) << tucclGetLastError(comm);
}

TEST_F(Api, BadArgumentsAreInvalidArgumentWithAReason) {
  std::vector<tucclComm_t> comms = initAll(2);
  ASSERT_NE(comms[0], nullptr);
  float buffer[8] = {};
  auto expectInvalid = [&](tucclResult_t result, const std::string& words) { expectInvalidSaying(comms[0], result, words); };
  expectInvalid(tucclAllReduce(buffer, buffer, 8, tucclFloat32, tucclSum, nullptr, nullptr), "comm is NULL");
  expectInvalid(tucclAllReduce(nullptr, buffer, 8, tucclFloat32, tucclSum, comms[0], nullptr), "sendbuff is NULL");
  expectInvalid(tucclAllReduce(buffer, nullptr, 8, tucclFloat32, tucclSum, comms[0], nullptr), "recvbuff is NULL");
  expectInvalid(allReduceWithRawValues(buffer, buffer, 8, tucclNumTypes, tucclSum, comms[0]), "datatype");
  expectInvalid(allReduceWithRawValues(buffer, buffer, 8, 42, tucclSum, comms[0]), "datatype");
  expectInvalid(allReduceWithRawValues(buffer, buffer, 8, tucclFloat32, 9, comms[0]), "reduction operation");
  expectInvalid(tucclBroadcast(buffer, buffer, 8, tucclFloat32, 2, comms[0], nullptr), "root 2");
  expectInvalid(tucclReduce(buffer, buffer, 8, tucclFloat32, tucclSum, -1, comms[0], nullptr), "root -1");
  expectInvalid(tucclAllGather(buffer, buffer, SIZE_MAX / 2, tucclFloat32, comms[0], nullptr), "overflows");
  float dummy = 0;
  expectInvalid(tucclAllReduce(buffer, buffer, 8, tucclFloat32, tucclSum, comms[0],
                               reinterpret_cast<tucclStream_t>(&dummy)),
                "stream");
  int count = 0, rank = -1;
  EXPECT_EQ(tucclCommCount(comms[1], &count), tucclSuccess);
  EXPECT_EQ(tucclCommUserRank(comms[1], &rank), tucclSuccess);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(rank, 1);
  tucclResult_t async = tucclInternalError;
  EXPECT_EQ(tucclCommGetAsyncError(comms[0], &async), tucclSuccess);
  EXPECT_EQ(async, tucclSuccess);
  destroyAll(comms);
}

// Point-to-point's bad arguments: nothing is enqueued, and the reason names what is wrong.
TEST_F(Api, BadPointToPointArgumentsAreInvalidArgumentWithAReason) {
  std::vector<tucclComm_t> comms = initAll(2);
  ASSERT_NE(comms[0], nullptr);
  float buffer[8] = {};
  auto expectInvalid = [&](tucclResult_t result, const std::string& words) { expectInvalidSaying(comms[0], result, words); };
  expectInvalid(tucclSend(buffer, 8, tucclFloat32, 1, nullptr, nullptr), "comm is NULL");
  expectInvalid(tucclSend(buffer, 8, tucclFloat32, 2, comms[0], nullptr), "peer 2 is outside [0, 2)");
  expectInvalid(tucclRecv(buffer, 8, tucclFloat32, -1, comms[0], nullptr), "peer -1");
  expectInvalid(tucclSend(nullptr, 8, tucclFloat32, 1, comms[0], nullptr), "the buffer is NULL");
  expectInvalid(tucclRecv(buffer, 8, static_cast<tucclDataType_t>(42), 1, comms[0], nullptr), "datatype 42");
  expectInvalid(tucclSend(buffer, SIZE_MAX / 2, tucclFloat32, 1, comms[0], nullptr), "overflows");
  float dummy = 0;
  expectInvalid(tucclSend(buffer, 8, tucclFloat32, 1, comms[0], reinterpret_cast<tucclStream_t>(&dummy)), "stream");
  expectInvalid(tucclSend(buffer, 8, tucclFloat32, 0, comms[0], nullptr), "send(s) to this rank itself but 0");
  expectInvalid(tucclGather(buffer, buffer, 4, tucclFloat32, 3, comms[0], nullptr), "root 3");
  expectInvalid(tucclAllToAllv(buffer, nullptr, nullptr, buffer, nullptr, nullptr, tucclFloat32, comms[0], nullptr),
                "count or displacement array is NULL");
  destroyAll(comms);
}

TEST_F(Api, RanksAsThreadsDrivenByAGroup) {
  const int n = 3;
  std::vector<tucclComm_t> comms = initAll(n);
  const size_t count = 1237;
  std::vector<std::vector<int32_t>> data(n, std::vector<int32_t>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) data[r][i] = static_cast<int32_t>(r * 1000 + i);
  }
  ASSERT_EQ(tucclGroupStart(), tucclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(tucclAllReduce(data[r].data(), data[r].data(), count, tucclInt32, tucclMax, comms[r], nullptr),
              tucclSuccess);
  }
  ASSERT_EQ(tucclGroupEnd(), tucclSuccess) << tucclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[r][i], static_cast<int32_t>((n - 1) * 1000 + i));
  }
  destroyAll(comms);
}

TEST_F(Api, CpuStreamsOrderCallsAndReportCompletion) {
  const int n = 2;
  std::vector<tucclComm_t> comms = initAll(n);
  std::vector<tucclStream_t> streams(n);
  for (auto& s : streams) ASSERT_EQ(tucclStreamCreate(&s), tucclSuccess);
  const size_t count = 4099;
  std::vector<std::vector<float>> send(n, std::vector<float>(count)), gathered(n, std::vector<float>(n * count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>(r + i % 7);
  }
  for (int r = 0; r < n; ++r) {
    // Enqueued and returned at once: the stream runs them, in order.
    ASSERT_EQ(tucclAllReduce(send[r].data(), send[r].data(), count, tucclFloat32, tucclSum, comms[r], streams[r]),
              tucclSuccess);
    ASSERT_EQ(tucclAllGather(send[r].data(), gathered[r].data(), count, tucclFloat32, comms[r], streams[r]),
              tucclSuccess);
  }
  for (int r = 0; r < n; ++r) ASSERT_EQ(tucclStreamSynchronize(streams[r]), tucclSuccess) << tucclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(gathered[r][q * count + i], static_cast<float>(1 + 2 * (i % 7))) << r << " " << q << " " << i;
      }
    }
  }
  for (auto s : streams) EXPECT_EQ(tucclStreamDestroy(s), tucclSuccess);
  destroyAll(comms);
}

TEST_F(Api, SeveralCommunicatorsAndThreadsAtOnce) {
  const int n = 3;
  std::vector<tucclComm_t> a = initAll(n), b = initAll(n);
  std::vector<std::thread> threads;
  std::vector<int> wrong(2 * n, 0);
  for (int set = 0; set < 2; ++set) {
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, set, r] {
        tucclComm_t comm = set == 0 ? a[r] : b[r];
        for (int iteration = 0; iteration < 10; ++iteration) {
          const size_t count = 100 + 37 * static_cast<size_t>(iteration) + 500 * static_cast<size_t>(set);
          std::vector<double> data(count, r + 1.0 + iteration);
          if (tucclAllReduce(data.data(), data.data(), count, tucclFloat64, tucclSum, comm, nullptr) != tucclSuccess) {
            ++wrong[set * n + r];
            continue;
          }
          const double expected = n * (n + 1) / 2.0 + n * iteration;
          for (double v : data) wrong[set * n + r] += v != expected;
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
  destroyAll(a);
  destroyAll(b);
}

TEST_F(Api, AbortFromAnotherThreadUnblocksAStuckCall) {
  std::vector<tucclComm_t> comms = initAll(2);
  std::vector<float> data(1000, 1);
  tucclResult_t result = tucclSuccess;
  std::thread stuck([&] {  // rank 1 never joins: this call waits
    result = tucclAllReduce(data.data(), data.data(), data.size(), tucclFloat32, tucclSum, comms[0], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(tucclCommAbort(comms[0]), tucclSuccess);
  stuck.join();
  EXPECT_NE(result, tucclSuccess);
  EXPECT_EQ(tucclCommAbort(comms[1]), tucclSuccess);
}

// A call that fails on a stream leaves the communicator's asynchronous error, and
// tucclGetLastError then says why on the thread that asked.
TEST_F(Api, AFailedStreamCallIsTheAsyncErrorWithItsReason) {
  std::vector<tucclComm_t> comms = initAll(2);
  tucclStream_t stream = nullptr;
  ASSERT_EQ(tucclStreamCreate(&stream), tucclSuccess);
  std::vector<float> data(1000, 1);
  // Rank 1 never joins; aborting it stops rank 0's TBs, which wait for it.
  ASSERT_EQ(tucclAllReduce(data.data(), data.data(), data.size(), tucclFloat32, tucclSum, comms[0], stream),
            tucclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(tucclCommAbort(comms[1]), tucclSuccess);
  EXPECT_NE(tucclStreamSynchronize(stream), tucclSuccess);
  tucclResult_t async = tucclSuccess;
  EXPECT_EQ(tucclCommGetAsyncError(comms[0], &async), tucclSuccess);
  EXPECT_NE(async, tucclSuccess);
  const std::string reason = tucclGetLastError(comms[0]);
  EXPECT_NE(reason.find("asynchronous error"), std::string::npos) << reason;
  EXPECT_GT(reason.size(), std::string("asynchronous error: ").size() + 10) << reason;  // and why
  EXPECT_EQ(tucclStreamDestroy(stream), tucclSuccess);
  EXPECT_EQ(tucclCommAbort(comms[0]), tucclSuccess);
}

// A bad value of one of libtuccl's variables fails init with InvalidArgument naming it.
TEST_F(Api, BadEnvironmentValuesAreRefusedNamingTheVariable) {
  const std::pair<const char*, const char*> bad[] = {{"TUCCL_TIMEOUT_S", "soon"},   {"TUCCL_TIMEOUT_S", "-1"},
                                                     {"TUCCL_DEVICE", "gpu"},       {"TUCCL_STAGING_BYTES", "12Q"},
                                                     {"TUCCL_STAGING_SLOTS", "0"},  {"TUCCL_CHUNK_SIZE", "8"},
                                                     {"TUCCL_NCHANNELS", "65"},     {"TUCCL_PROTO", "LL64"},
                                                     {"TUCCL_ADAPT_WARMUP", "-1"},  {"TUCCL_FUSE", "yes"}};
  for (const auto& [name, value] : bad) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    const char* before = std::getenv(name);
    const std::string saved = before != nullptr ? before : "";
    setenv(name, value, 1);
    std::vector<tucclComm_t> comms(2, nullptr);
    EXPECT_EQ(tucclCommInitAll(comms.data(), 2, nullptr), tucclInvalidArgument);
    EXPECT_NE(std::string(tucclGetLastError(nullptr)).find(name), std::string::npos) << tucclGetLastError(nullptr);
    if (before != nullptr) {
      setenv(name, saved.c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
}

// TUCCL_ALGO naming an algorithm the collective has no built-in of fails the call, naming it.
TEST_F(Api, AForcedAlgorithmTheCollectiveLacksIsAnError) {
  setenv("TUCCL_ALGO", "binomial", 1);
  std::vector<tucclComm_t> comms = initAll(2);
  unsetenv("TUCCL_ALGO");
  std::vector<float> data(64, 1);
  ASSERT_EQ(tucclGroupStart(), tucclSuccess);
  for (tucclComm_t comm : comms) {
    EXPECT_EQ(tucclAllReduce(data.data(), data.data(), data.size(), tucclFloat32, tucclSum, comm, nullptr),
              tucclSuccess);
  }
  EXPECT_EQ(tucclGroupEnd(), tucclInvalidArgument);
  EXPECT_NE(std::string(tucclGetLastError(nullptr)).find("TUCCL_ALGO=binomial"), std::string::npos)
      << tucclGetLastError(nullptr);
  for (tucclComm_t comm : comms) EXPECT_EQ(tucclCommAbort(comm), tucclSuccess);
}

// A PreMulSum operator on ranks as threads: a uint64 AllReduce whose scalar wraps the products,
// and a one-rank communicator, whose call is the scaling alone.
TEST_F(Api, PreMulSumOnRanksAsThreadsAndOnOneRank) {
  const int n = 2;
  std::vector<tucclComm_t> comms = initAll(n);
  const size_t count = 1001;
  uint64_t scalar = 0x9E3779B97F4A7C15ull;
  std::vector<tucclRedOp_t> ops(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(tucclRedOpCreatePreMulSum(&ops[r], &scalar, tucclUint64, tucclScalarDevice, comms[r]), tucclSuccess)
        << tucclGetLastError(comms[r]);
    EXPECT_EQ(ops[r], tucclNumOps);
  }
  std::vector<std::vector<uint64_t>> data(n, std::vector<uint64_t>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) data[r][i] = (static_cast<uint64_t>(r) << 60) + i * 0x12345679ull;
  }
  std::vector<uint64_t> expected(count, 0);
  for (size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) expected[i] += data[r][i] * scalar;
  }
  ASSERT_EQ(tucclGroupStart(), tucclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(tucclAllReduce(data[r].data(), data[r].data(), count, tucclUint64, ops[r], comms[r], nullptr),
              tucclSuccess);
  }
  ASSERT_EQ(tucclGroupEnd(), tucclSuccess) << tucclGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(data[r], expected) << "rank " << r;
  for (int r = 0; r < n; ++r) EXPECT_EQ(tucclRedOpDestroy(ops[r], comms[r]), tucclSuccess);
  EXPECT_EQ(tucclRedOpDestroy(ops[0], comms[0]), tucclInvalidArgument);
  destroyAll(comms);

  std::vector<tucclComm_t> one = initAll(1);
  double half = 0.5;
  tucclRedOp_t op = tucclSum;
  ASSERT_EQ(tucclRedOpCreatePreMulSum(&op, &half, tucclFloat64, tucclScalarHostImmediate, one[0]), tucclSuccess);
  std::vector<double> send(100), recv(100, 0);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<double>(i) * 3;
  ASSERT_EQ(tucclReduceScatter(send.data(), recv.data(), send.size(), tucclFloat64, op, one[0], nullptr), tucclSuccess)
      << tucclGetLastError(one[0]);
  for (size_t i = 0; i < send.size(); ++i) EXPECT_EQ(recv[i], send[i] * 0.5);
  EXPECT_EQ(tucclAllReduce(send.data(), recv.data(), send.size(), tucclFloat32, op, one[0], nullptr),
            tucclInvalidArgument);
  EXPECT_EQ(tucclCommDestroy(one[0]), tucclSuccess);
}

TEST_F(Api, OneRankCommunicatorCopies) {
  std::vector<tucclComm_t> comms = initAll(1);
  std::vector<int64_t> send(100), recv(100, 0);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int64_t>(i) * 3;
  ASSERT_EQ(tucclAllReduce(send.data(), recv.data(), send.size(), tucclInt64, tucclSum, comms[0], nullptr),
            tucclSuccess);
  EXPECT_EQ(recv, send);
  EXPECT_EQ(tucclCommDestroy(comms[0]), tucclSuccess);
}

}  // namespace
