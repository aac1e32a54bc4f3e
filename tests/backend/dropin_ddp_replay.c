/* PyTorch DDP's default sequence of NCCL calls, replayed through the drop-in (libtuccl-nccl.so) by
 * one rank: ncclGetVersion; the unique id handed over a store (rank 0 writes it into STORE_DIR,
 * the others wait for it, as torch's TCPStore does); ncclCommInitRankConfig (blocking, or
 * non-blocking polled with ncclCommGetAsyncError); the parameters broadcast from rank 0; STEPS
 * training steps of bucketed gradient AllReduce, pre-divided by the world size then summed and, for
 * every other bucket, averaged with ncclAvg; an int64 AllGather of the tensors' shapes; the
 * asynchronous error polled after every step, as torch's watchdog does; a new_group of the even
 * ranks through ncclCommSplit (the others pass NCCL_SPLIT_NOCOLOR) running an AllReduce; then
 * ncclCommFinalize and ncclCommDestroy of both. Every element is checked on every rank.
 *
 *   dropin_ddp_replay STORE_DIR STEPS blocking|nonblocking
 *
 * Rank and size come from TUCCL_RANK / TUCCL_NRANKS. Exit 0 when every value matched. */
#include <nccl.h>

#include "dropin_store.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                                             \
  do {                                                                                                          \
    ncclResult_t result_ = (call);                                                                              \
    if (result_ != ncclSuccess && result_ != ncclInProgress) {                                                  \
      fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(result_),         \
              ncclGetLastError(NULL));                                                                          \
      exit(2);                                                                                                  \
    }                                                                                                           \
  } while (0)

enum { kBuckets = 3, kParams = 4 };
static const size_t kBucketElems[kBuckets] = {1000, 65536, 3};
static const size_t kParamElems[kParams] = {7, 4096, 1, 100000};

static int failures = 0;

/* Waits (60 s at most) until a non-blocking communicator is ready. */
static void awaitReady(ncclComm_t comm) {
  for (int i = 0; i < 60000; ++i) {
    ncclResult_t state = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      fprintf(stderr, "the communicator failed: %s\n", ncclGetErrorString(state));
      exit(2);
    }
    usleep(1000);
  }
  fprintf(stderr, "the communicator was not ready after 60 s\n");
  exit(2);
}

/* The gradient element i of bucket b at step s on rank r: small integers, exact in float sums. */
static float gradient(int r, int b, int s, size_t i) { return (float)((r * 7 + b * 3 + s + (int)(i % 13)) % 16); }

static void expectClose(float got, float want, const char* what, size_t i) {
  if (fabsf(got - want) <= 1e-4f * fmaxf(1.0f, fabsf(want))) return;
  if (failures++ < 5) fprintf(stderr, "%s element %zu: %g, expected %g\n", what, i, got, want);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: dropin_ddp_replay STORE_DIR STEPS blocking|nonblocking\n");
    return 2;
  }
  const int steps = atoi(argv[2]);
  const int blocking = strcmp(argv[3], "nonblocking") != 0;
  const int rank = atoi(getenv("TUCCL_RANK") ? getenv("TUCCL_RANK") : "0");
  const int n = atoi(getenv("TUCCL_NRANKS") ? getenv("TUCCL_NRANKS") : "1");

  int version = 0;
  CHECK(ncclGetVersion(&version));
  if (version < 22800) {
    fprintf(stderr, "ncclGetVersion says %d\n", version);
    return 1;
  }
  ncclUniqueId id;
  shareUniqueId(argv[1], rank, &id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking;
  config.commName = "ddp-default-pg";
  ncclComm_t comm = NULL;
  CHECK(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  if (!blocking) awaitReady(comm);
  int count = 0, me = -1;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  if (count != n || me != rank) {
    fprintf(stderr, "count %d rank %d, expected %d and %d\n", count, me, n, rank);
    return 1;
  }

  /* The parameters broadcast from rank 0, in place. */
  for (int p = 0; p < kParams; ++p) {
    float* param = malloc(kParamElems[p] * sizeof(float));
    for (size_t i = 0; i < kParamElems[p]; ++i) param[i] = rank == 0 ? (float)(p * 1000 + (int)(i % 977)) : -1.0f;
    CHECK(ncclBroadcast(param, param, kParamElems[p], ncclFloat32, 0, comm, NULL));
    for (size_t i = 0; i < kParamElems[p]; ++i) expectClose(param[i], (float)(p * 1000 + (int)(i % 977)), "broadcast", i);
    free(param);
  }

  /* The shapes of every rank's tensors, int64, gathered. */
  int64_t shapes[2] = {rank + 1, 1000 * (rank + 1)};
  int64_t* allShapes = malloc(2 * (size_t)n * sizeof(int64_t));
  CHECK(ncclAllGather(shapes, allShapes, 2, ncclInt64, comm, NULL));
  for (int r = 0; r < n; ++r) {
    if (allShapes[2 * r] != r + 1 || allShapes[2 * r + 1] != 1000 * (r + 1)) {
      fprintf(stderr, "shape of rank %d: %lld %lld\n", r, (long long)allShapes[2 * r], (long long)allShapes[2 * r + 1]);
      ++failures;
    }
  }
  free(allShapes);

  for (int s = 0; s < steps; ++s) {
    for (int b = 0; b < kBuckets; ++b) {
      const size_t elems = kBucketElems[b];
      float* grad = malloc(elems * sizeof(float));
      const int average = (b + s) % 2 == 1;
      /* DDP divides by the world size before a sum; ncclAvg divides after. */
      for (size_t i = 0; i < elems; ++i) grad[i] = average ? gradient(rank, b, s, i) : gradient(rank, b, s, i) / (float)n;
      CHECK(ncclAllReduce(grad, grad, elems, ncclFloat32, average ? ncclAvg : ncclSum, comm, NULL));
      for (size_t i = 0; i < elems; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += gradient(r, b, s, i);
        expectClose(grad[i], sum / (float)n, average ? "avg bucket" : "pre-divided sum bucket", i);
      }
      free(grad);
    }
    ncclResult_t asyncError = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &asyncError));
    if (asyncError != ncclSuccess) {
      fprintf(stderr, "step %d: asynchronous error %s\n", s, ncclGetErrorString(asyncError));
      return 1;
    }
  }

  /* new_group(ranks=[even ranks]): the others take no part. */
  ncclComm_t even = NULL;
  ncclConfig_t childConfig = NCCL_CONFIG_INITIALIZER;
  childConfig.blocking = blocking;
  CHECK(ncclCommSplit(comm, rank % 2 == 0 ? 0 : NCCL_SPLIT_NOCOLOR, rank, &even, &childConfig));
  if (rank % 2 == 0) {
    if (even == NULL) {
      fprintf(stderr, "an even rank got no communicator from ncclCommSplit\n");
      return 1;
    }
    if (!blocking) awaitReady(even);
    const int members = (n + 1) / 2;
    int size = 0, childRank = -1;
    CHECK(ncclCommCount(even, &size));
    CHECK(ncclCommUserRank(even, &childRank));
    if (size != members || childRank != rank / 2) {
      fprintf(stderr, "the even group has %d ranks and this is its %d\n", size, childRank);
      ++failures;
    }
    double value[5] = {rank, rank, rank, rank, rank};
    CHECK(ncclAllReduce(value, value, 5, ncclFloat64, ncclSum, even, NULL));
    const double want = (double)(members - 1) * members; /* 0 + 2 + 4 + ... */
    for (int i = 0; i < 5; ++i) {
      if (value[i] != want) {
        fprintf(stderr, "even group AllReduce: %g, expected %g\n", value[i], want);
        ++failures;
      }
    }
    CHECK(ncclCommFinalize(even));
    if (!blocking) awaitReady(even);
    CHECK(ncclCommDestroy(even));
  } else if (even != NULL) {
    fprintf(stderr, "an odd rank (NCCL_SPLIT_NOCOLOR) got a communicator\n");
    return 1;
  }
  CHECK(ncclCommFinalize(comm));
  if (!blocking) awaitReady(comm);
  CHECK(ncclCommDestroy(comm));
  if (failures > 0) fprintf(stderr, "%d wrong values\n", failures);
  return failures == 0 ? 0 : 1;
}
