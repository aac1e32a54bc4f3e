/* An NCCL program, written against nccl.h alone, for what libtuccl-nccl.so serves natively beyond
 * the classic collectives: ncclCommInitRankConfig, point-to-point of every datatype, Gather and
 * Scatter, data movement of fp8, int8 and uint64, reductions of fp8 e4m3, int8 and uint64,
 * PreMulSum operators (host and device scalars) and the reductions using them, ncclCommSplit
 * (NCCL_SPLIT_NOCOLOR included), ncclCommShrink, ncclCommInitRankScalable, ncclCommFinalize,
 * ncclCommRevoke, registration and windows, ncclGroupSimulateEnd, ncclMemAlloc. The test runs it
 * with no real NCCL to reach (TUCCL_NCCL_LIBRARY naming no file, TUCCL_NCCL_FALLBACK=0), so
 * whatever succeeds here is TuCCL's doing. argv[1] "bad-forward" instead expects every reduction
 * and ncclRedOpCreatePreMulSum refused with ncclInvalidArgument naming TUCCL_NCCL_FORWARD and its
 * value (printed as "BADFORWARD: <ncclGetLastError>"), and data movement still served.
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

/* AllGather, Broadcast and AlltoAll of fp8, int8 and uint64, random bytes. */
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

/* A 64-bit random word for element i of what `rank` sends in call `call`. */
static uint64_t wordOf(int call, int rank, size_t i) {
  return splitmix64(runSeed ^ ((uint64_t)call << 48) ^ ((uint64_t)rank << 36) ^ i ^ 0x5a5a5a5a00000000ull);
}

/* fp8 e4m3 (OCP): sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinities, NaN S.1111.111. */
static int e4m3IsNan(unsigned char b) { return (b & 0x7f) == 0x7f; }
static float e4m3Value(unsigned char b) {
  const int exponent = (b >> 3) & 0xf, mantissa = b & 7;
  const float magnitude = exponent == 0 ? (float)mantissa / 8.0f / 64.0f
                                        : (1.0f + (float)mantissa / 8.0f) * (float)(1 << exponent) / 128.0f;
  return (b & 0x80) ? -magnitude : magnitude;
}
/* The e4m3 byte of a value it holds exactly (positive zero for 0). */
static unsigned char e4m3Of(float value) {
  for (int b = 0; b < 256; ++b) {
    if (!e4m3IsNan((unsigned char)b) && e4m3Value((unsigned char)b) == value) return (unsigned char)b;
  }
  fprintf(stderr, "%g has no exact fp8 e4m3 encoding\n", value);
  exit(2);
}

static void expectBytes(const unsigned char* got, const unsigned char* expected, size_t bytes, size_t width,
                        const char* what) {
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != expected[i]) {
      fprintf(stderr, "%s: element %zu differs at its byte %zu: %u, expected %u\n", what, i / width,
              i % width, got[i], expected[i]);
      exit(4);
    }
  }
}

/* fp8 e4m3 AllReduce: a sum of small whole numbers (every partial sum exact, so the result is
 * whatever the order), and a max of random bytes (NaN and negative zero left out). */
static void reduceFp8(ncclComm_t comm, int rank, int size) {
  enum { kCount = 1037 };
  unsigned char send[kCount], recv[kCount], expected[kCount];
  const int most = 16 / size; /* every rank's largest value: sums stay at most 16, all exact */
  for (size_t i = 0; i < kCount; ++i) send[i] = e4m3Of((float)(byteOf(1100, rank, i) % (most + 1)));
  CHECK(ncclAllReduce(send, recv, kCount, ncclFloat8e4m3, ncclSum, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    int sum = 0;
    for (int r = 0; r < size; ++r) sum += byteOf(1100, r, i) % (most + 1);
    expected[i] = e4m3Of((float)sum);
  }
  expectBytes(recv, expected, kCount, 1, "ncclAllReduce fp8 e4m3 sum");

#define FP8_RANDOM(r, i) \
  (e4m3IsNan(byteOf(1101, r, i)) || byteOf(1101, r, i) == 0x80 ? (unsigned char)0 : byteOf(1101, r, i))
  for (size_t i = 0; i < kCount; ++i) send[i] = FP8_RANDOM(rank, i);
  CHECK(ncclAllReduce(send, recv, kCount, ncclFloat8e4m3, ncclMax, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    unsigned char best = FP8_RANDOM(0, i);
    for (int r = 1; r < size; ++r) {
      if (e4m3Value(FP8_RANDOM(r, i)) > e4m3Value(best)) best = FP8_RANDOM(r, i);
    }
    expected[i] = best;
  }
#undef FP8_RANDOM
  expectBytes(recv, expected, kCount, 1, "ncclAllReduce fp8 e4m3 max");
}

/* int8 AllReduce of random bytes: a sum that wraps, and a min that compares them signed. */
static void reduceInt8(ncclComm_t comm, int rank, int size) {
  enum { kCount = 2311 };
  int8_t send[kCount], recv[kCount], expected[kCount];
  for (size_t i = 0; i < kCount; ++i) send[i] = (int8_t)byteOf(1200, rank, i);
  CHECK(ncclAllReduce(send, recv, kCount, ncclInt8, ncclSum, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    unsigned sum = 0;
    for (int r = 0; r < size; ++r) sum += byteOf(1200, r, i);
    expected[i] = (int8_t)(unsigned char)sum;
  }
  expectBytes((unsigned char*)recv, (unsigned char*)expected, kCount, 1, "ncclAllReduce int8 sum");
  CHECK(ncclAllReduce(send, recv, kCount, ncclInt8, ncclMin, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    int8_t least = (int8_t)byteOf(1200, 0, i);
    for (int r = 1; r < size; ++r) {
      if ((int8_t)byteOf(1200, r, i) < least) least = (int8_t)byteOf(1200, r, i);
    }
    expected[i] = least;
  }
  expectBytes((unsigned char*)recv, (unsigned char*)expected, kCount, 1, "ncclAllReduce int8 min");
}

/* uint64 AllReduce of random words: a sum that wraps, and a max. */
static void reduceUint64(ncclComm_t comm, int rank, int size) {
  enum { kCount = 1543 };
  uint64_t* send = allocate(sizeof(uint64_t) * kCount);
  uint64_t* recv = allocate(sizeof(uint64_t) * kCount);
  uint64_t* expected = allocate(sizeof(uint64_t) * kCount);
  for (size_t i = 0; i < kCount; ++i) send[i] = wordOf(1300, rank, i);
  CHECK(ncclAllReduce(send, recv, kCount, ncclUint64, ncclSum, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    expected[i] = 0;
    for (int r = 0; r < size; ++r) expected[i] += wordOf(1300, r, i);
  }
  expectBytes((unsigned char*)recv, (unsigned char*)expected, sizeof(uint64_t) * kCount, 8,
              "ncclAllReduce uint64 sum");
  CHECK(ncclAllReduce(send, recv, kCount, ncclUint64, ncclMax, comm, 0));
  for (size_t i = 0; i < kCount; ++i) {
    expected[i] = 0;
    for (int r = 0; r < size; ++r) {
      if (wordOf(1300, r, i) > expected[i]) expected[i] = wordOf(1300, r, i);
    }
  }
  expectBytes((unsigned char*)recv, (unsigned char*)expected, sizeof(uint64_t) * kCount, 8,
              "ncclAllReduce uint64 max");
  free(send);
  free(recv);
  free(expected);
}

/* PreMulSum: each rank's input times its own scalar, summed. An int32 operator with a host scalar
 * read at creation (random words: products and sums wrap, so exact), used by AllReduce and
 * ReduceScatter; a float operator with a device scalar (host memory on the CPU device) read by every
 * call, changed between two calls (quarters times small whole numbers: exact). Both destroyed; a
 * destroyed operator and one of another datatype are refused by libtuccl. */
static void preMulSum(ncclComm_t comm, int rank, int size) {
  enum { kCount = 1201 };
  int32_t* send = allocate(sizeof(int32_t) * kCount * (size_t)size);
  int32_t* recv = allocate(sizeof(int32_t) * kCount * (size_t)size);
  uint32_t* expected = allocate(sizeof(uint32_t) * kCount * (size_t)size);
#define SCALAR(r) ((int32_t)(uint32_t)wordOf(1400, r, 999999))
#define INPUT(r, i) ((int32_t)(uint32_t)wordOf(1401, r, i))
  int32_t scalar = SCALAR(rank);
  ncclRedOp_t intOp;
  CHECK(ncclRedOpCreatePreMulSum(&intOp, &scalar, ncclInt32, ncclScalarHostImmediate, comm));
  EXPECT((int)intOp >= (int)ncclNumOps);
  scalar = 0; /* read at creation: changing it now changes nothing */
  const size_t total = (size_t)kCount * (size_t)size;
  for (size_t i = 0; i < total; ++i) send[i] = INPUT(rank, i);
  CHECK(ncclAllReduce(send, recv, total, ncclInt32, intOp, comm, 0));
  for (size_t i = 0; i < total; ++i) {
    expected[i] = 0;
    for (int r = 0; r < size; ++r) expected[i] += (uint32_t)SCALAR(r) * (uint32_t)INPUT(r, i);
  }
  expectBytes((unsigned char*)recv, (unsigned char*)expected, sizeof(int32_t) * total, 4,
              "ncclAllReduce with a PreMulSum int32 operator (host scalar)");
  CHECK(ncclReduceScatter(send, recv, kCount, ncclInt32, intOp, comm, 0));
  expectBytes((unsigned char*)recv, (unsigned char*)(expected + (size_t)rank * kCount),
              sizeof(int32_t) * kCount, 4, "ncclReduceScatter with a PreMulSum int32 operator (host scalar)");
#undef SCALAR
#undef INPUT

  float* deviceScalar = allocate(sizeof(float));
  *deviceScalar = 0.25f * (float)(rank + 1);
  ncclRedOp_t floatOp;
  CHECK(ncclRedOpCreatePreMulSum(&floatOp, deviceScalar, ncclFloat32, ncclScalarDevice, comm));
  EXPECT((int)floatOp >= (int)ncclNumOps && floatOp != intOp);
  float* fsend = (float*)send;
  float* frecv = (float*)recv;
  for (size_t i = 0; i < kCount; ++i) fsend[i] = (float)(byteOf(1402, rank, i) % 16);
  for (int round = 0; round < 2; ++round) {
    *deviceScalar = (round == 0 ? 0.25f : 3.0f) * (float)(rank + 1);
    CHECK(ncclAllReduce(fsend, frecv, kCount, ncclFloat32, floatOp, comm, 0));
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0.0f;
      for (int r = 0; r < size; ++r)
        want += (round == 0 ? 0.25f : 3.0f) * (float)(r + 1) * (float)(byteOf(1402, r, i) % 16);
      if (frecv[i] != want) {
        fprintf(stderr,
                "ncclAllReduce with a PreMulSum float operator (device scalar, round %d): element %zu is %g, "
                "expected %g\n",
                round, i, frecv[i], want);
        exit(4);
      }
    }
  }
  /* The operator serves its own datatype only. */
  EXPECT(ncclAllReduce(fsend, frecv, kCount, ncclFloat32, intOp, comm, 0) == ncclInvalidArgument);
  CHECK(ncclRedOpDestroy(intOp, comm));
  CHECK(ncclRedOpDestroy(floatOp, comm));
  EXPECT(ncclAllReduce(send, recv, kCount, ncclInt32, intOp, comm, 0) == ncclInvalidArgument);
  EXPECT(ncclRedOpDestroy(floatOp, comm) == ncclInvalidArgument);
  free(deviceScalar);
  free(send);
  free(recv);
  free(expected);
}

/* Reductions TuCCL serves beyond the first seven datatypes, and PreMulSum, with no real NCCL. */
static void nativeReductions(ncclComm_t comm, int rank, int size) {
  reduceFp8(comm, rank, size);
  reduceInt8(comm, rank, size);
  reduceUint64(comm, rank, size);
  preMulSum(comm, rank, size);
}

/* TUCCL_NCCL_FORWARD holds a name it does not take: what consults it is refused, naming it and its
 * value; data movement, which never forwards, is served. */
static void refusesBadForwardList(ncclComm_t comm, int rank, int size) {
  const char* value = getenv("TUCCL_NCCL_FORWARD");
  EXPECT(value != NULL);
  float buffer[64] = {0};
  EXPECT(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comm, 0) == ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(comm), "TUCCL_NCCL_FORWARD") != NULL);
  EXPECT(strstr(ncclGetLastError(comm), value) != NULL);
  printf("BADFORWARD: %s\n", ncclGetLastError(comm));
  EXPECT(ncclReduce(buffer, buffer, 16, ncclFloat8e4m3, ncclMax, 0, comm, 0) == ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(comm), "TUCCL_NCCL_FORWARD") != NULL);
  ncclRedOp_t op;
  float scalar = 2.0f;
  EXPECT(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm) ==
         ncclInvalidArgument);
  EXPECT(strstr(ncclGetLastError(comm), "TUCCL_NCCL_FORWARD") != NULL);
  const size_t bytes = 1234;
  unsigned char* send = allocate(bytes);
  unsigned char* recv = allocate(bytes * (size_t)size);
  fill(send, bytes, 1500, rank, 0);
  CHECK(ncclAllGather(send, recv, bytes, ncclFloat8e4m3, comm, 0));
  for (int r = 0; r < size; ++r) expectFrom(recv + (size_t)r * bytes, bytes, 1500, r, 0, "ncclAllGather");
  free(send);
  free(recv);
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
  if (argc > 1 && strcmp(argv[1], "bad-forward") == 0) {
    refusesBadForwardList(comm, rank, size);
    CHECK(ncclCommDestroy(comm));
    printf("OK\n");
    return 0;
  }

  sendRecvEveryType(comm, rank, size);
  gatherScatter(comm, rank, size);
  moveUnreducedTypes(comm, rank, size);
  split(comm, rank, size);
  shrink(comm, rank, size);
  nativeReductions(comm, rank, size);
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
