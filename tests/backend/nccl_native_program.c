/* An NCCL program, written against nccl.h alone, for what libtuccl-nccl.so serves natively beyond
 * the classic collectives: ncclCommInitRankConfig, point-to-point of every datatype, Gather and
 * Scatter, data movement of datatypes TuCCL does not reduce (their bytes travel), ncclCommSplit
 * (NCCL_SPLIT_NOCOLOR included), ncclCommShrink, ncclCommInitRankScalable, ncclCommFinalize,
 * ncclCommRevoke, registration and windows, ncclGroupSimulateEnd, ncclMemAlloc. The test runs it
 * with no real NCCL to reach (TUCCL_NCCL_LIBRARY naming no file, TUCCL_NCCL_FALLBACK=0), so
 * whatever succeeds here is TuCCL's doing; a forwarded call must be refused, naming the variable.
 *
 * Host buffers hold random bytes (a hash of the run's unique id, the rank, the call and the index,
 * so every rank knows what every other rank sent); every element is checked on every rank.
 * NCCL_PROGRAM_MEMALLOC: "device" expects ncclMemAlloc to give host-visible device memory (the fake
 * CUDA driver), "none" expects ncclSystemError (no driver). Rank and size come from the launcher's
 * environment; argv[1] "memalloc-only" checks ncclMemAlloc and nothing else. Prints "OK". */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                  \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)

#define EXPECT(condition)                                                      \
  do {                                                                         \
    if (!(condition)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition); \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

/* Bytes per element of ncclDataType_t 0 .. 11 (nccl.h). */
static const size_t kElementBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
enum { kTypes = 12 };

static uint64_t runSeed;

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Byte i of what `rank` sends in call `call`. */
static unsigned char byteOf(int call, int rank, size_t i) {
  return (unsigned char)(splitmix64(runSeed ^ ((uint64_t)call << 48) ^ ((uint64_t)rank << 36) ^ i) >> 56);
}

static void fill(unsigned char* buffer, size_t bytes, int call, int rank, size_t offset) {
  for (size_t i = 0; i < bytes; ++i) buffer[i] = byteOf(call, rank, offset + i);
}

/* Whether `bytes` bytes of buffer are what `rank` sent in `call` from byte `offset` on. */
static void expectFrom(const unsigned char* buffer, size_t bytes, int call, int rank, size_t offset,
                       const char* what) {
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[i] != byteOf(call, rank, offset + i)) {
      fprintf(stderr, "%s: byte %zu is %u, expected %u (from rank %d)\n", what, i, buffer[i],
              byteOf(call, rank, offset + i), rank);
      exit(3);
    }
  }
}

static void* allocate(size_t bytes) {
  void* p = malloc(bytes > 0 ? bytes : 1);
  EXPECT(p != NULL);
  return p;
}

/* Point-to-point around the ring, every datatype: odd counts, each from its own random bytes. */
static void sendRecvEveryType(ncclComm_t comm, int rank, int size) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int type = 0; type < kTypes; ++type) {
    const size_t count = 1031 + (size_t)type * 17, bytes = count * kElementBytes[type];
    unsigned char* send = allocate(bytes);
    unsigned char* recv = allocate(bytes);
    fill(send, bytes, 100 + type, rank, 0);
    memset(recv, 0, bytes);
    CHECK(ncclGroupStart());
    CHECK(ncclSend(send, count, (ncclDataType_t)type, next, comm, 0));
    CHECK(ncclRecv(recv, count, (ncclDataType_t)type, prev, comm, 0));
    CHECK(ncclGroupEnd());
    expectFrom(recv, bytes, 100 + type, prev, 0, "ncclSend/ncclRecv");
    free(send);
    free(recv);
  }
}

/* Gather and Scatter to and from the last rank, in fp8 and float64. */
static void gatherScatter(ncclComm_t comm, int rank, int size) {
  const ncclDataType_t types[] = {ncclFloat8e5m2, ncclFloat64};
  const int root = size - 1;
  for (int t = 0; t < 2; ++t) {
    const size_t count = 999, block = count * kElementBytes[types[t]];
    unsigned char* mine = allocate(block);
    unsigned char* all = allocate(block * (size_t)size);
    fill(mine, block, 200 + t, rank, 0);
    memset(all, 0, block * (size_t)size);
    CHECK(ncclGather(mine, all, count, types[t], root, comm, 0));
    if (rank == root) {
      for (int r = 0; r < size; ++r) expectFrom(all + (size_t)r * block, block, 200 + t, r, 0, "ncclGather");
    }
    /* Scatter: the root's buffer holds block r for rank r. */
    if (rank == root) fill(all, block * (size_t)size, 300 + t, root, 0);
    memset(mine, 0, block);
    CHECK(ncclScatter(all, mine, count, types[t], root, comm, 0));
    expectFrom(mine, block, 300 + t, root, (size_t)rank * block, "ncclScatter");
    free(mine);
    free(all);
  }
}

/* AllGather, Broadcast and AlltoAll of datatypes TuCCL does not reduce: their bytes travel. */
static void moveUnreducedTypes(ncclComm_t comm, int rank, int size) {
  const ncclDataType_t types[] = {ncclFloat8e4m3, ncclInt8, ncclUint64};
  for (int t = 0; t < 3; ++t) {
    const size_t count = 777, block = count * kElementBytes[types[t]];
    unsigned char* send = allocate(block * (size_t)size);
    unsigned char* recv = allocate(block * (size_t)size);
    fill(send, block, 400 + t, rank, 0);
    CHECK(ncclAllGather(send, recv, count, types[t], comm, 0));
    for (int r = 0; r < size; ++r)
      expectFrom(recv + (size_t)r * block, block, 400 + t, r, 0, "ncclAllGather");

    fill(send, block, 500 + t, rank, 0);
    CHECK(ncclBroadcast(send, recv, count, types[t], 0, comm, 0));
    expectFrom(recv, block, 500 + t, 0, 0, "ncclBroadcast");

    /* AlltoAll: block j of rank i's buffer (bytes j * block on of its stream) goes to rank j. */
    fill(send, block * (size_t)size, 600 + t, rank, 0);
    CHECK(ncclAlltoAll(send, recv, count, types[t], comm, 0));
    for (int r = 0; r < size; ++r) {
      expectFrom(recv + (size_t)r * block, block, 600 + t, r, (size_t)rank * block, "ncclAlltoAll");
    }
    free(send);
    free(recv);
  }
}

/* An int32 sum over the communicator, random small values, every element checked. */
static void allReduceInts(ncclComm_t comm, int call, const int* worldRanks) {
  int count = 0, me = 0;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  enum { kInts = 2049 };
  int32_t* send = allocate(sizeof(int32_t) * kInts);
  int32_t* recv = allocate(sizeof(int32_t) * kInts);
  for (size_t i = 0; i < kInts; ++i) send[i] = byteOf(call, worldRanks[me], i);
  CHECK(ncclAllReduce(send, recv, kInts, ncclInt32, ncclSum, comm, 0));
  for (size_t i = 0; i < kInts; ++i) {
    int32_t expected = 0;
    for (int r = 0; r < count; ++r) expected += byteOf(call, worldRanks[r], i);
    if (recv[i] != expected) {
      fprintf(stderr, "ncclAllReduce (call %d): element %zu is %d, expected %d\n", call, i, recv[i],
              expected);
      exit(4);
    }
  }
  free(send);
  free(recv);
}

/* Split: rank 1 joins nothing; the others form one communicator in reverse order (key). */
static void split(ncclComm_t comm, int rank, int size) {
  ncclComm_t child = NULL;
  const int color = rank == 1 ? NCCL_SPLIT_NOCOLOR : 7;
  CHECK(ncclCommSplit(comm, color, size - rank, &child, NULL));
  if (rank == 1) {
    EXPECT(child == NULL);
    return;
  }
  int worldRanks[64], n = 0;
  for (int r = size - 1; r >= 0; --r) {
    if (r != 1) worldRanks[n++] = r;
  }
  int count = 0, me = -1;
  CHECK(ncclCommCount(child, &count));
  CHECK(ncclCommUserRank(child, &me));
  EXPECT(count == size - 1);
  EXPECT(worldRanks[me] == rank);
  allReduceInts(child, 700, worldRanks);
  /* Point-to-point inside the child, by its own ranks. */
  const size_t bytes = 4099;
  unsigned char* send = allocate(bytes);
  unsigned char* recv = allocate(bytes);
  fill(send, bytes, 701, rank, 0);
  CHECK(ncclGroupStart());
  CHECK(ncclSend(send, bytes, ncclUint8, (me + 1) % count, child, 0));
  CHECK(ncclRecv(recv, bytes, ncclUint8, (me + count - 1) % count, child, 0));
  CHECK(ncclGroupEnd());
  expectFrom(recv, bytes, 701, worldRanks[(me + count - 1) % count], 0, "ncclSend/ncclRecv in the split");
  free(send);
  free(recv);
  CHECK(ncclCommFinalize(child));
  CHECK(ncclCommDestroy(child));
}

/* Shrink: rank 0 is excluded (and still takes part: NCCL_SHRINK_DEFAULT). */
static void shrink(ncclComm_t comm, int rank, int size) {
  ncclComm_t child = NULL;
  int excluded = 0;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "shrunk";
  CHECK(ncclCommShrink(comm, &excluded, 1, &child, &config, NCCL_SHRINK_DEFAULT));
  if (rank == 0) {
    EXPECT(child == NULL);
    return;
  }
  int worldRanks[64];
  for (int r = 1; r < size; ++r) worldRanks[r - 1] = r;
  int me = -1;
  CHECK(ncclCommUserRank(child, &me));
  EXPECT(me == rank - 1);
  allReduceInts(child, 800, worldRanks);
  CHECK(ncclCommDestroy(child));
}

/* A forwarded call is refused, naming the variable that turned forwarding off. */
static void refusesForwarding(ncclComm_t comm) {
  unsigned char buffer[64] = {0};
  EXPECT(ncclAllReduce(buffer, buffer, 16, ncclFloat8e4m3, ncclSum, comm, 0) == ncclInvalidUsage);
  EXPECT(strstr(ncclGetLastError(comm), "TUCCL_NCCL_FALLBACK") != NULL);
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm) ==
         ncclInvalidUsage);
  EXPECT(strstr(ncclGetLastError(comm), "TUCCL_NCCL_FALLBACK") != NULL);
}

/* Registration and windows are hints: accepted, with a NULL handle. */
static void registers(ncclComm_t comm) {
  char buffer[4096];
  void* handle = (void*)1;
  CHECK(ncclCommRegister(comm, buffer, sizeof buffer, &handle));
  EXPECT(handle == NULL);
  CHECK(ncclCommDeregister(comm, handle));
  ncclWindow_t window = (ncclWindow_t)1;
  CHECK(ncclCommWindowRegister(comm, buffer, sizeof buffer, &window, NCCL_WIN_COLL_SYMMETRIC));
  EXPECT(window == NULL);
  CHECK(ncclCommWindowDeregister(comm, window));
}

/* ncclGroupSimulateEnd ends the group (its calls run) and gives no estimate. */
static void simulates(ncclComm_t comm, int rank, int size) {
  const size_t bytes = 3001;
  unsigned char* send = allocate(bytes);
  unsigned char* recv = allocate(bytes);
  fill(send, bytes, 900, rank, 0);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGroupStart());
  CHECK(ncclSend(send, bytes, ncclUint8, (rank + 1) % size, comm, 0));
  CHECK(ncclRecv(recv, bytes, ncclUint8, (rank + size - 1) % size, comm, 0));
  CHECK(ncclGroupSimulateEnd(&info));
  EXPECT(info.estimatedTime == NCCL_UNDEF_FLOAT);
  expectFrom(recv, bytes, 900, (rank + size - 1) % size, 0,
             "ncclSend/ncclRecv ended by ncclGroupSimulateEnd");
  ncclSimInfo_t unset;
  memset(&unset, 0, sizeof unset);
  EXPECT(ncclGroupSimulateEnd(&unset) == ncclInvalidArgument);
  free(send);
  free(recv);
}

static void memAlloc(void) {
  const char* expect = getenv("NCCL_PROGRAM_MEMALLOC");
  if (expect == NULL) return;
  void* p = NULL;
  const ncclResult_t result = ncclMemAlloc(&p, 1 << 16);
  if (strcmp(expect, "device") == 0) {
    CHECK(result);
    EXPECT(p != NULL);
    memset(p, 0x5a, 1 << 16); /* the fake driver's device memory is host memory */
    CHECK(ncclMemFree(p));
  } else {
    EXPECT(result == ncclSystemError);
    EXPECT(strstr(ncclGetLastError(NULL), "CUDA driver") != NULL);
    printf("MEMALLOC: %s\n", ncclGetLastError(NULL));
  }
  CHECK(ncclMemFree(NULL));
}

/* Revoke stops the communicator's work and keeps the handle for destroy only. */
static void revokes(ncclComm_t comm) {
  int count = 0;
  CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  EXPECT(ncclCommCount(comm, &count) == ncclInvalidUsage);
  EXPECT(strstr(ncclGetLastError(comm), "revoked") != NULL);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess);
  CHECK(ncclCommDestroy(comm));
}

int main(int argc, char** argv) {
  const char* rankText = getenv("TUCCL_RANK");
  const char* sizeText = getenv("TUCCL_NRANKS");
  if (argc > 1 && strcmp(argv[1], "memalloc-only") == 0) {
    memAlloc();
    printf("OK\n");
    return 0;
  }
  if (rankText == NULL || sizeText == NULL) return 2;
  const int rank = atoi(rankText), size = atoi(sizeText);
  EXPECT(size >= 3 && size <= 64);

  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  for (size_t i = 0; i < sizeof id.internal; ++i)
    runSeed = splitmix64(runSeed ^ (unsigned char)id.internal[i]);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "native";
  ncclComm_t comm;
  CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
  int count = 0, me = -1;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  EXPECT(count == size && me == rank);

  sendRecvEveryType(comm, rank, size);
  gatherScatter(comm, rank, size);
  moveUnreducedTypes(comm, rank, size);
  split(comm, rank, size);
  shrink(comm, rank, size);
  refusesForwarding(comm);
  registers(comm);
  simulates(comm, rank, size);
  memAlloc();
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));

  /* Scalable init from one id (every rank passes the same), then revoke. */
  ncclUniqueId ids[1];
  CHECK(ncclGetUniqueId(&ids[0]));
  ncclComm_t scalable;
  CHECK(ncclCommInitRankScalable(&scalable, size, rank, 1, ids, NULL));
  int worldRanks[64];
  for (int r = 0; r < size; ++r) worldRanks[r] = r;
  allReduceInts(scalable, 1000, worldRanks);
  revokes(scalable);
  printf("OK\n");
  return 0;
}
