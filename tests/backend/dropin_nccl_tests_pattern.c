/* nccl-tests' way of driving NCCL, through the drop-in (libtuccl-nccl.so): one process holds G
 * ranks (nccl-tests -g G) of one communicator of nProcs * G ranks, initialised from one thread in
 * a group (ncclGroupStart; ncclCommInitRankConfig per rank; ncclGroupEnd); then, each from one
 * thread in a group over the G communicators: sendrecv_perf's ring (ncclSend to the next rank,
 * ncclRecv from the previous) in float and int8, an all-to-all-v of sends and receives whose sizes
 * differ per pair, and an AllReduce; then every communicator destroyed one after the other from
 * that thread (as nccl-tests does), which must not wait for ranks not yet destroyed. Every element
 * is checked.
 *
 *   dropin_nccl_tests_pattern STORE_DIR G
 *
 * The process's index and count come from TUCCL_RANK / TUCCL_NRANKS; rank g of process p is
 * p * G + g. Exit 0 when everything matched. */
#include <nccl.h>

#include "dropin_store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    ncclResult_t result_ = (call);                                                                      \
    if (result_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(result_), \
              ncclGetLastError(NULL));                                                                  \
      exit(2);                                                                                          \
    }                                                                                                   \
  } while (0)

enum { kMaxG = 4 };

static int failures = 0;

static uint8_t byteOf(int from, int to, int round, size_t i) {
  uint64_t h = (uint64_t)(from + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(to + 3) << 24) ^ ((uint64_t)round << 44) ^
               (i * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 31;
  return (uint8_t)(h * 0x94D049BB133111EBull >> 56);
}

static void fill(uint8_t* data, size_t bytes, int from, int to, int round) {
  for (size_t i = 0; i < bytes; ++i) data[i] = byteOf(from, to, round, i);
}

static void expect(const uint8_t* data, size_t bytes, int from, int to, int round, const char* what) {
  for (size_t i = 0; i < bytes; ++i) {
    if (data[i] != byteOf(from, to, round, i)) {
      if (failures++ < 5) fprintf(stderr, "%s: rank %d byte %zu from rank %d is wrong\n", what, to, i, from);
      return;
    }
  }
}

/* Elements rank `from` sends rank `to` in the all-to-all-v: 0 for some pairs, up to ~70000. */
static size_t pairCount(int from, int to) { return (size_t)((from * 7919 + to * 104729) % 5) * 17497u; }

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: dropin_nccl_tests_pattern STORE_DIR G\n");
    return 2;
  }
  const int g = atoi(argv[2]);
  const int process = atoi(getenv("TUCCL_RANK") ? getenv("TUCCL_RANK") : "0");
  const int processes = atoi(getenv("TUCCL_NRANKS") ? getenv("TUCCL_NRANKS") : "1");
  if (g < 1 || g > kMaxG) return 2;
  const int n = processes * g;
  ncclUniqueId id;
  shareUniqueId(argv[1], process, &id);

  ncclComm_t comms[kMaxG];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  CHECK(ncclGroupStart());
  for (int i = 0; i < g; ++i) CHECK(ncclCommInitRankConfig(&comms[i], n, id, process * g + i, &config));
  CHECK(ncclGroupEnd());

  /* sendrecv_perf's ring, float then int8, twice each. */
  const size_t ringCounts[2] = {262147, 1000003};
  const ncclDataType_t ringTypes[2] = {ncclFloat32, ncclInt8};
  const size_t ringSizes[2] = {4, 1};
  for (int round = 0; round < 4; ++round) {
    const int t = round % 2;
    const size_t bytes = ringCounts[t] * ringSizes[t];
    uint8_t* send[kMaxG];
    uint8_t* recv[kMaxG];
    for (int i = 0; i < g; ++i) {
      const int r = process * g + i;
      send[i] = malloc(bytes);
      recv[i] = calloc(bytes, 1);
      fill(send[i], bytes, r, (r + 1) % n, round);
    }
    CHECK(ncclGroupStart());
    for (int i = 0; i < g; ++i) {
      const int r = process * g + i;
      CHECK(ncclSend(send[i], ringCounts[t], ringTypes[t], (r + 1) % n, comms[i], NULL));
      CHECK(ncclRecv(recv[i], ringCounts[t], ringTypes[t], (r + n - 1) % n, comms[i], NULL));
    }
    CHECK(ncclGroupEnd());
    for (int i = 0; i < g; ++i) {
      const int r = process * g + i;
      expect(recv[i], bytes, (r + n - 1) % n, r, round, "sendrecv");
      free(send[i]);
      free(recv[i]);
    }
  }

  /* An all-to-all-v of int32 as nccl-tests' alltoall does it: a send and a receive per peer. */
  uint8_t** sends = calloc((size_t)(g * n), sizeof(uint8_t*));
  uint8_t** recvs = calloc((size_t)(g * n), sizeof(uint8_t*));
  CHECK(ncclGroupStart());
  for (int i = 0; i < g; ++i) {
    const int r = process * g + i;
    for (int peer = 0; peer < n; ++peer) {
      sends[i * n + peer] = malloc(pairCount(r, peer) * 4 + 1);
      recvs[i * n + peer] = calloc(pairCount(peer, r) * 4 + 1, 1);
      fill(sends[i * n + peer], pairCount(r, peer) * 4, r, peer, 9);
      CHECK(ncclSend(sends[i * n + peer], pairCount(r, peer), ncclInt32, peer, comms[i], NULL));
      CHECK(ncclRecv(recvs[i * n + peer], pairCount(peer, r), ncclInt32, peer, comms[i], NULL));
    }
  }
  CHECK(ncclGroupEnd());
  for (int i = 0; i < g; ++i) {
    const int r = process * g + i;
    for (int peer = 0; peer < n; ++peer) {
      expect(recvs[i * n + peer], pairCount(peer, r) * 4, peer, r, 9, "alltoallv");
      free(sends[i * n + peer]);
      free(recvs[i * n + peer]);
    }
  }
  free(sends);
  free(recvs);

  /* all_reduce_perf's call, the G ranks of this process in one group. */
  float* values[kMaxG];
  CHECK(ncclGroupStart());
  for (int i = 0; i < g; ++i) {
    values[i] = malloc(40000 * sizeof(float));
    for (int k = 0; k < 40000; ++k) values[i][k] = (float)(process * g + i + k % 5);
    CHECK(ncclAllReduce(values[i], values[i], 40000, ncclFloat32, ncclSum, comms[i], NULL));
  }
  CHECK(ncclGroupEnd());
  for (int i = 0; i < g; ++i) {
    for (int k = 0; k < 40000; ++k) {
      const float want = (float)(n * (n - 1) / 2 + n * (k % 5));
      if (values[i][k] != want) {
        if (failures++ < 5) fprintf(stderr, "allreduce element %d: %g, expected %g\n", k, values[i][k], want);
        break;
      }
    }
    free(values[i]);
  }

  /* nccl-tests destroys its communicators one after the other from this thread. */
  for (int i = 0; i < g; ++i) CHECK(ncclCommDestroy(comms[i]));
  if (failures > 0) fprintf(stderr, "%d mismatches\n", failures);
  return failures == 0 ? 0 : 1;
}
