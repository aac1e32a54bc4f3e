// One rank of the tests of how libtuccl makes and ends communicators (tests/backend/
// comm_lifecycle_test.cc starts one or several with the launcher's environment: TUCCL_COMM_ID,
// TUCCL_RANK, TUCCL_NRANKS). Only the C API, like an application. Every AllReduce sums int32 data
// drawn from a seed of (rank, round); each rank recomputes every member's data and checks every
// element.
//
//   comm_lifecycle_rank group-init
//       one process, two ranks: tucclGroupStart; tucclCommInitRankConfig x2 (named
//       "lifecycle-group"); tucclGroupEnd, then an AllReduce of both ranks in one group; the same
//       with non-blocking configs (tucclGroupEnd answers tucclInProgress); each destroyed from this
//       one thread, one after the other (destroy waits for no peer).
//   comm_lifecycle_rank nonblocking
//       a non-blocking init polled with tucclCommGetAsyncError until done, then an AllReduce; a
//       second one used at once (its calls wait for the init).
//   comm_lifecycle_rank abort-init
//       one process: a non-blocking init of rank 0 of 2 whose peer never comes, aborted after
//       300 ms; the abort must return within 10 s (TUCCL_TIMEOUT_S is 60).
//   comm_lifecycle_rank split
//       4 ranks: split by rank % 2 with keys reversed; then with rank 3 NOCOLOR; then a
//       non-blocking split; then a non-blocking one with rank 3 NOCOLOR, which finalizes the
//       parent at once; AllReduce in each child.
//   comm_lifecycle_rank destroy-order
//       3 ranks, communicators A (init), B and C (splits of A); an AllReduce on each; then rank 0
//       destroys A, B, C, rank 1 C, B, A, rank 2 B, A, C, 300 ms apart: each destroy must return
//       within 10 s.
//   comm_lifecycle_rank destroy-order-no-calls
//       the same without the AllReduces (the CUDA device over the fake driver, which runs no
//       kernel NVRTC compiled).
//   comm_lifecycle_rank shrink
//       4 ranks: shrink excluding rank 2 (flag 0; rank 2 takes part and gets NULL), AllReduce in
//       the child; then rank 3 ends without a word and the others shrink it away with flag 1
//       (abort), AllReduce in that child.
//   comm_lifecycle_rank finalize
//       finalize, then a call, a host all-gather and a second finalize are refused with
//       tucclInvalidUsage naming "finalized"; destroy succeeds.
//   comm_lifecycle_rank scalable
//       tucclCommInitRankScalable's argument checks, then an init from two ids and an AllReduce.
// Exit 0 when everything held; each failure is printed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api_check.h"
#include "tuccl/tuccl.h"

namespace {

int failures = 0;


#define EXPECT(condition, ...)                                      \
  do {                                                              \
    if (!(condition)) {                                             \
      std::fprintf(stderr, "%s:%d: failed: %s: ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                   \
      ++failures;                                                   \
    }                                                               \
  } while (0)

constexpr size_t kCount = 10007;
constexpr double kPollSeconds = 60;

int envInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    std::fprintf(stderr, "%s is not set\n", name);
    std::exit(2);
  }
  return std::atoi(value);
}

/// The data of `rank` in `round`: random int32 in [-1000, 1000] from a seed of both.
std::vector<int32_t> dataOf(int rank, int round) {
  std::mt19937 random(static_cast<uint32_t>(rank * 7919 + round * 104729 + 17));
  std::uniform_int_distribution<int32_t> pick(-1000, 1000);
  std::vector<int32_t> data(kCount);
  for (int32_t& value : data) value = pick(random);
  return data;
}

/// Checks `got` against the sum of the data of `members` (ranks of the data, not of the communicator).
void checkSum(const std::vector<int32_t>& got, const std::vector<int>& members, int round, const std::string& what) {
  std::vector<int64_t> sum(kCount, 0);
  for (int member : members) {
    const std::vector<int32_t> data = dataOf(member, round);
    for (size_t i = 0; i < kCount; ++i) sum[i] += data[i];
  }
  for (size_t i = 0; i < kCount; ++i) {
    if (got[i] != sum[i]) {
      std::fprintf(stderr, "%s: element %zu is %d, expected %lld\n", what.c_str(), i, got[i],
                   static_cast<long long>(sum[i]));
      ++failures;
      return;
    }
  }
  std::printf("%s: %zu elements right\n", what.c_str(), kCount);
}

/// An AllReduce on `comm` of `dataRank`'s data of `round`, checked against `members`' sum.
void allReduceChecked(tucclComm_t comm, int dataRank, const std::vector<int>& members, int round,
                      const std::string& what) {
  std::vector<int32_t> data = dataOf(dataRank, round);
  CHECK_OK(tucclAllReduce(data.data(), data.data(), kCount, tucclInt32, tucclSum, comm, nullptr));
  checkSum(data, members, round, what);
}

/// Polls until the communicator is made; fails the rank if that takes more than kPollSeconds.
tucclResult_t pollMade(tucclComm_t comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kPollSeconds);
  tucclResult_t state = tucclInProgress;
  while (std::chrono::steady_clock::now() < deadline) {
    CHECK_OK(tucclCommGetAsyncError(comm, &state));
    if (state != tucclInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state;
}

double secondsSince(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

tucclUniqueId freshId() {
  tucclUniqueId id;
  CHECK_OK(tucclGetUniqueId(&id));
  return id;
}

// ---- Modes ----------------------------------------------------------------------------------------

void groupInit() {
  unsetenv("TUCCL_COMM_ID");  // two ranks of this process: fresh ids
  for (int blocking : {1, 0}) {
    const tucclUniqueId id = freshId();
    tucclConfig_t config = TUCCL_CONFIG_INITIALIZER;
    config.blocking = blocking;
    config.commName = blocking ? "lifecycle-group" : "lifecycle-group-nb";
    tucclComm_t comms[2] = {nullptr, nullptr};
    CHECK_OK(tucclGroupStart());
    for (int r = 0; r < 2; ++r) CHECK_OK(tucclCommInitRankConfig(&comms[r], 2, id, r, &config));
    EXPECT(comms[0] == nullptr && comms[1] == nullptr, "the handles exist before the group's end");
    const tucclResult_t ended = tucclGroupEnd();
    EXPECT(ended == (blocking ? tucclSuccess : tucclInProgress), "tucclGroupEnd answered %s: %s",
           tucclGetErrorString(ended), tucclGetLastError(nullptr));
    if (comms[0] == nullptr || comms[1] == nullptr) {
      std::fprintf(stderr, "no handles after the group\n");
      std::exit(1);
    }
    if (!blocking) {
      for (tucclComm_t comm : comms) EXPECT(pollMade(comm) == tucclSuccess, "a non-blocking init failed: %s", tucclGetLastError(nullptr));
    }
    std::vector<std::vector<int32_t>> data{dataOf(0, blocking), dataOf(1, blocking)};
    CHECK_OK(tucclGroupStart());
    for (int r = 0; r < 2; ++r) {
      CHECK_OK(tucclAllReduce(data[r].data(), data[r].data(), kCount, tucclInt32, tucclSum, comms[r], nullptr));
    }
    CHECK_OK(tucclGroupEnd());
    for (int r = 0; r < 2; ++r) checkSum(data[r], {0, 1}, blocking, "group AllReduce rank " + std::to_string(r));
    for (tucclComm_t comm : comms) {
      const auto begin = std::chrono::steady_clock::now();
      CHECK_OK(tucclCommDestroy(comm));
      EXPECT(secondsSince(begin) < 10, "a destroy took %.1f s", secondsSince(begin));
    }
  }
}

void nonBlocking(int rank, int nranks) {
  tucclUniqueId id = freshId();  // TUCCL_COMM_ID: the launch's address, the same on every rank
  tucclConfig_t config = TUCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "lifecycle-nb";
  tucclComm_t polled = nullptr;
  const tucclResult_t started = tucclCommInitRankConfig(&polled, nranks, id, rank, &config);
  EXPECT(started == tucclInProgress, "a non-blocking init answered %s", tucclGetErrorString(started));
  EXPECT(polled != nullptr, "no handle from a non-blocking init");
  EXPECT(pollMade(polled) == tucclSuccess, "the init failed: %s", tucclGetLastError(nullptr));
  std::vector<int> everyone;
  for (int r = 0; r < nranks; ++r) everyone.push_back(r);
  allReduceChecked(polled, rank, everyone, 1, "AllReduce after polling");
  CHECK_OK(tucclCommDestroy(polled));

  // Used at once: the calls wait for the init.
  tucclComm_t used = nullptr;
  EXPECT(tucclCommInitRankConfig(&used, nranks, id, rank, &config) == tucclInProgress, "not in progress");
  int count = 0;
  CHECK_OK(tucclCommCount(used, &count));
  EXPECT(count == nranks, "count %d", count);
  allReduceChecked(used, rank, everyone, 2, "AllReduce without polling");
  tucclResult_t state = tucclInternalError;
  CHECK_OK(tucclCommGetAsyncError(used, &state));
  EXPECT(state == tucclSuccess, "async error %s", tucclGetErrorString(state));
  CHECK_OK(tucclCommDestroy(used));
}

void abortInit() {
  unsetenv("TUCCL_COMM_ID");
  const tucclUniqueId id = freshId();
  tucclConfig_t config = TUCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  tucclComm_t comm = nullptr;
  EXPECT(tucclCommInitRankConfig(&comm, 2, id, 0, &config) == tucclInProgress, "not in progress");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tucclResult_t state = tucclInternalError;
  CHECK_OK(tucclCommGetAsyncError(comm, &state));
  EXPECT(state == tucclInProgress, "an init whose peer never came is %s", tucclGetErrorString(state));
  const auto begin = std::chrono::steady_clock::now();
  CHECK_OK(tucclCommAbort(comm));
  EXPECT(secondsSince(begin) < 10, "aborting an init in progress took %.1f s", secondsSince(begin));
  std::printf("aborted an init in progress in %.3f s\n", secondsSince(begin));
}

void split(int rank, int nranks) {
  tucclComm_t parent = nullptr;
  CHECK_OK(tucclCommInitRank(&parent, nranks, freshId(), rank));

  // Colour rank % 2, keys reversed: within a colour the higher parent rank comes first.
  tucclConfig_t named = TUCCL_CONFIG_INITIALIZER;
  named.commName = "lifecycle-split";
  tucclComm_t child = nullptr;
  CHECK_OK(tucclCommSplit(parent, rank % 2, nranks - rank, &child, &named));
  std::vector<int> members;
  for (int r = nranks - 1; r >= 0; --r) {
    if (r % 2 == rank % 2) members.push_back(r);
  }
  int childRank = -1, childCount = 0;
  CHECK_OK(tucclCommUserRank(child, &childRank));
  CHECK_OK(tucclCommCount(child, &childCount));
  const int expectedRank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  EXPECT(childRank == expectedRank && childCount == static_cast<int>(members.size()),
         "rank %d of %d in the child, expected %d of %zu", childRank, childCount, expectedRank, members.size());
  allReduceChecked(child, rank, members, 1, "AllReduce in the child of colour " + std::to_string(rank % 2));
  CHECK_OK(tucclCommDestroy(child));

  // The last rank joins none; the others keep their order.
  tucclComm_t some = nullptr;
  const bool out = rank == nranks - 1;
  CHECK_OK(tucclCommSplit(parent, out ? TUCCL_SPLIT_NOCOLOR : 7, 0, &some, nullptr));
  if (out) {
    EXPECT(some == nullptr, "a NOCOLOR rank got a communicator");
  } else {
    std::vector<int> kept;
    for (int r = 0; r + 1 < nranks; ++r) kept.push_back(r);
    CHECK_OK(tucclCommUserRank(some, &childRank));
    EXPECT(childRank == rank, "rank %d in the child, expected %d", childRank, rank);
    allReduceChecked(some, rank, kept, 2, "AllReduce without the NOCOLOR rank");
    CHECK_OK(tucclCommDestroy(some));
  }

  // Non-blocking: the split's exchange and the child's init run in the background.
  tucclConfig_t background = TUCCL_CONFIG_INITIALIZER;
  background.blocking = 0;
  tucclComm_t later = nullptr;
  const tucclResult_t started = tucclCommSplit(parent, rank % 2, rank, &later, &background);
  EXPECT(started == tucclInProgress, "a non-blocking split answered %s", tucclGetErrorString(started));
  EXPECT(pollMade(later) == tucclSuccess, "the non-blocking split failed: %s", tucclGetLastError(nullptr));
  std::vector<int> byRank;
  for (int r = 0; r < nranks; ++r) {
    if (r % 2 == rank % 2) byRank.push_back(r);
  }
  allReduceChecked(later, rank, byRank, 3, "AllReduce in a non-blocking split's child");
  CHECK_OK(tucclCommDestroy(later));

  // Non-blocking with a NOCOLOR rank (PyTorch's new_group): it has no handle to poll and goes on
  // at once to finalize the parent, which waits for its part of the exchange.
  tucclComm_t without = nullptr;
  const tucclResult_t splitting = tucclCommSplit(parent, out ? TUCCL_SPLIT_NOCOLOR : 3, rank, &without, &background);
  if (out) {
    EXPECT(splitting == tucclSuccess && without == nullptr, "a non-blocking NOCOLOR split answered %s",
           tucclGetErrorString(splitting));
  } else {
    EXPECT(splitting == tucclInProgress, "a non-blocking split answered %s", tucclGetErrorString(splitting));
    EXPECT(pollMade(without) == tucclSuccess, "the non-blocking split failed: %s", tucclGetLastError(nullptr));
    std::vector<int> kept;
    for (int r = 0; r + 1 < nranks; ++r) kept.push_back(r);
    allReduceChecked(without, rank, kept, 4, "AllReduce in a non-blocking split without the NOCOLOR rank");
    CHECK_OK(tucclCommDestroy(without));
  }

  EXPECT(tucclCommSplit(parent, -2, 0, &some, nullptr) == tucclInvalidArgument, "colour -2 accepted");
  CHECK_OK(tucclCommFinalize(parent));
  tucclResult_t state = tucclInternalError;
  CHECK_OK(tucclCommGetAsyncError(parent, &state));
  EXPECT(state == tucclSuccess, "the parent's async error after finalize is %s", tucclGetErrorString(state));
  CHECK_OK(tucclCommDestroy(parent));
}

void destroyOrder(int rank, int nranks, bool calls) {
  tucclComm_t comms[3] = {nullptr, nullptr, nullptr};
  tucclConfig_t config = TUCCL_CONFIG_INITIALIZER;
  config.commName = "lifecycle-A";
  CHECK_OK(tucclCommInitRankConfig(&comms[0], nranks, freshId(), rank, &config));
  config.commName = "lifecycle-B";
  CHECK_OK(tucclCommSplit(comms[0], 0, rank, &comms[1], &config));
  config.commName = "lifecycle-C";
  CHECK_OK(tucclCommSplit(comms[0], 0, rank, &comms[2], &config));
  std::vector<int> everyone;
  for (int r = 0; r < nranks; ++r) everyone.push_back(r);
  for (int c = 0; c < 3 && calls; ++c) {
    allReduceChecked(comms[c], rank, everyone, c, "AllReduce on communicator " + std::string(1, "ABC"[c]));
  }
  static const char* kOrders[] = {"ABC", "CBA", "BAC"};
  const std::string order = kOrders[rank % 3];
  for (char name : order) {
    const auto begin = std::chrono::steady_clock::now();
    CHECK_OK(tucclCommDestroy(comms[name - 'A']));
    const double took = secondsSince(begin);
    std::printf("destroyed %c in %.3f s\n", name, took);
    std::fflush(stdout);
    EXPECT(took < 10, "destroying %c took %.1f s (TUCCL_TIMEOUT_S is 60): it waited for a peer", name, took);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

void shrink(int rank, int nranks) {
  tucclComm_t parent = nullptr;
  CHECK_OK(tucclCommInitRank(&parent, nranks, freshId(), rank));
  // Flag 0: rank 2 takes part and gets NULL.
  int excluded[1] = {2};
  tucclComm_t child = nullptr;
  CHECK_OK(tucclCommShrink(parent, excluded, 1, &child, nullptr, 0));
  std::vector<int> kept;
  for (int r = 0; r < nranks; ++r) {
    if (r != 2) kept.push_back(r);
  }
  if (rank == 2) {
    EXPECT(child == nullptr, "an excluded rank got a communicator");
  } else {
    int childRank = -1;
    CHECK_OK(tucclCommUserRank(child, &childRank));
    const int expected = static_cast<int>(std::find(kept.begin(), kept.end(), rank) - kept.begin());
    EXPECT(childRank == expected, "rank %d in the shrunk communicator, expected %d", childRank, expected);
    allReduceChecked(child, rank, kept, 1, "AllReduce after shrinking rank 2 away");
    CHECK_OK(tucclCommDestroy(child));
  }
  int bad[2] = {1, 1};
  EXPECT(tucclCommShrink(parent, bad, 2, &child, nullptr, 0) == tucclInvalidArgument, "a rank excluded twice accepted");
  EXPECT(tucclCommShrink(parent, excluded, 1, &child, nullptr, 5) == tucclInvalidArgument, "flags 5 accepted");

  // Flag 1: the last rank ends without a word; the others go on without it.
  const int gone = nranks - 1;
  if (rank == gone) {
    std::printf("rank %d ends without destroying its communicator\n", rank);
    std::fflush(stdout);
    _exit(failures == 0 ? 0 : 1);
  }
  std::vector<int> rest;
  for (int r = 0; r < gone; ++r) rest.push_back(r);
  int excludedGone[1] = {gone};
  tucclComm_t survivors = nullptr;
  CHECK_OK(tucclCommShrink(parent, excludedGone, 1, &survivors, nullptr, 1));
  int count = 0;
  CHECK_OK(tucclCommCount(survivors, &count));
  EXPECT(count == gone, "%d ranks after the abort shrink, expected %d", count, gone);
  allReduceChecked(survivors, rank, rest, 2, "AllReduce after shrinking a gone rank away");
  CHECK_OK(tucclCommDestroy(survivors));
  CHECK_OK(tucclCommAbort(parent));
}

void finalize(int rank, int nranks) {
  tucclComm_t comm = nullptr;
  CHECK_OK(tucclCommInitRank(&comm, nranks, freshId(), rank));
  std::vector<int> everyone;
  for (int r = 0; r < nranks; ++r) everyone.push_back(r);
  allReduceChecked(comm, rank, everyone, 1, "AllReduce before finalize");
  CHECK_OK(tucclCommFinalize(comm));
  auto refused = [&](tucclResult_t result, const char* what) {
    EXPECT(result == tucclInvalidUsage, "%s after finalize answered %s", what, tucclGetErrorString(result));
    EXPECT(std::string(tucclGetLastError(comm)).find("finalized") != std::string::npos, "%s: the reason is '%s'", what,
           tucclGetLastError(comm));
  };
  std::vector<int32_t> data = dataOf(rank, 2);
  refused(tucclAllReduce(data.data(), data.data(), kCount, tucclInt32, tucclSum, comm, nullptr), "AllReduce");
  int mine = rank, all[64] = {};
  refused(tucclCommHostAllGather(comm, &mine, all, sizeof mine), "HostAllGather");
  refused(tucclCommFinalize(comm), "a second finalize");
  tucclComm_t child = nullptr;
  refused(tucclCommSplit(comm, 0, 0, &child, nullptr), "a split");
  tucclResult_t state = tucclInternalError;
  CHECK_OK(tucclCommGetAsyncError(comm, &state));
  EXPECT(state == tucclSuccess, "the async error after finalize is %s", tucclGetErrorString(state));
  CHECK_OK(tucclCommDestroy(comm));
  std::printf("finalize refused the calls after it\n");
}

void scalable(int rank, int nranks) {
  tucclUniqueId ids[2] = {freshId(), freshId()};
  tucclComm_t comm = nullptr;
  EXPECT(tucclCommInitRankScalable(&comm, nranks, rank, 0, ids, nullptr) == tucclInvalidArgument, "nId 0 accepted");
  EXPECT(tucclCommInitRankScalable(&comm, nranks, rank, 2, nullptr, nullptr) == tucclInvalidArgument,
         "NULL ids accepted");
  CHECK_OK(tucclCommInitRankScalable(&comm, nranks, rank, 2, ids, nullptr));
  std::vector<int> everyone;
  for (int r = 0; r < nranks; ++r) everyone.push_back(r);
  allReduceChecked(comm, rank, everyone, 1, "AllReduce of a scalable init");
  CHECK_OK(tucclCommDestroy(comm));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: comm_lifecycle_rank MODE\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int rank = envInt("TUCCL_RANK");
  const int nranks = envInt("TUCCL_NRANKS");
  if (mode == "group-init") {
    groupInit();
  } else if (mode == "nonblocking") {
    nonBlocking(rank, nranks);
  } else if (mode == "abort-init") {
    abortInit();
  } else if (mode == "split") {
    split(rank, nranks);
  } else if (mode == "destroy-order") {
    destroyOrder(rank, nranks, true);
  } else if (mode == "destroy-order-no-calls") {
    destroyOrder(rank, nranks, false);
  } else if (mode == "shrink") {
    shrink(rank, nranks);
  } else if (mode == "finalize") {
    finalize(rank, nranks);
  } else if (mode == "scalable") {
    scalable(rank, nranks);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  std::printf("%s: %s\n", mode.c_str(), failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
