/* A libtuccl program: every rank contributes its rank number, AllReduce sums them.
 * Build:  cc allreduce.c $(pkg-config --cflags --libs tuccl)   (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig;
 *         or find_package(TuCCL) and link TuCCL::tuccl)
 * Run:    tuccl-run -n 4 -- ./allreduce   (rank, size and rendezvous come from the environment)
 * On a machine without a GPU the CPU device runs it with host buffers and the NULL stream. */
#include <stdio.h>
#include <stdlib.h>
#include <tuccl/tuccl.h>

#define CHECK(call)                                                                         \
  do {                                                                                      \
    tucclResult_t r_ = (call);                                                              \
    if (r_ != tucclSuccess) {                                                               \
      fprintf(stderr, "%s: %s: %s\n", #call, tucclGetErrorString(r_), tucclGetLastError(NULL)); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(void) {
  tucclComm_t comm;
  CHECK(tucclCommInitFromEnv(&comm));
  int rank, size;
  CHECK(tucclCommUserRank(comm, &rank));
  CHECK(tucclCommCount(comm, &size));

  enum { kCount = 1 << 20 };
  float* data = malloc(kCount * sizeof(float));
  for (int i = 0; i < kCount; ++i) data[i] = (float)rank;
  /* In place, on the NULL stream: done when the call returns. */
  CHECK(tucclAllReduce(data, data, kCount, tucclFloat32, tucclSum, comm, NULL));

  const float expected = (float)(size * (size - 1) / 2);
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) wrong += data[i] != expected;
  printf("rank %d of %d: %s (every element %g)\n", rank, size, wrong ? "WRONG" : "ok", expected);
  free(data);
  CHECK(tucclCommDestroy(comm));
  return wrong != 0;
}
