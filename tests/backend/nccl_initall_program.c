/* One process, one thread, three ranks (ncclCommInitAll), written against nccl.h alone: a float
 * AllReduce TuCCL serves, issued to the three communicators inside one group, then an fp8 e5m2
 * AllReduce the same way, which the test forwards to a real NCCL (TUCCL_NCCL_FORWARD=float8e5m2).
 * The drop-in keeps the forwarded calls for the group's end and makes the twins there with the
 * real ncclCommInitAll (the test's stand-in records it): the one thread drives every rank, so the
 * ranks could not meet to agree on a twin. Prints "OK". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

enum { kRanks = 3, kCount = 513 };

int main(void) {
  ncclComm_t comms[kRanks];
  CHECK(ncclCommInitAll(comms, kRanks, NULL));
  static float send[kRanks][kCount], recv[kRanks][kCount];
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kCount; ++i) send[r][i] = (float)((r * 7 + i * 13) % 101);
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    CHECK(ncclAllReduce(send[r], recv[r], kCount, ncclFloat, ncclSum, comms[r], 0));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int q = 0; q < kRanks; ++q) expected += send[q][i];
      if (recv[r][i] != expected) return 3;
    }
  }
  CHECK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r)
    CHECK(ncclAllReduce(send[r], recv[r], 8, ncclFloat8e5m2, ncclMax, comms[r], 0));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < kRanks; ++r) CHECK(ncclCommDestroy(comms[r]));
  printf("OK\n");
  return 0;
}
