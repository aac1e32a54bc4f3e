/* An NCCL program, written against nccl.h alone, passing host buffers and the NULL stream: the
 * test of libtuccl-nccl.so runs it unchanged, once linked to the real libnccl with the drop-in
 * preloaded, once linked to the drop-in. Rank and size come from the launcher's environment, the
 * id from ncclGetUniqueId on every rank (TUCCL_COMM_ID makes them all the same). It makes only calls
 * TuCCL serves, unless NCCL_PROGRAM_FORWARD says: "yes" makes the calls the test forwards to a real
 * NCCL with TUCCL_NCCL_FORWARD=float8e4m3,premulsum (an fp8 AllReduce inside a group, a PreMulSum
 * operator and an AllReduce with it) and expects them to succeed; "refused" makes them and expects
 * ncclInvalidUsage, printing each reason as "REFUSED: <ncclGetLastError>". Prints "OK". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

int main(void) {
  const char* rankText = getenv("TUCCL_RANK");
  const char* sizeText = getenv("TUCCL_NRANKS");
  if (rankText == NULL || sizeText == NULL) return 2;
  const int rank = atoi(rankText), size = atoi(sizeText);
  enum { kCount = 1000 };
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, size, id, rank));
  int count = 0, me = -1, version = 0;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  CHECK(ncclGetVersion(&version));
  if (count != size || me != rank || version <= 0) return 3;

  float* send = malloc(sizeof(float) * kCount * size);
  float* recv = malloc(sizeof(float) * kCount * size);
  for (int i = 0; i < kCount; ++i) send[i] = (float)(rank + 1) * (float)(i % 5);
  CHECK(ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, 0));
  for (int i = 0; i < kCount; ++i) {
    if (recv[i] != (float)(size * (size + 1) / 2) * (float)(i % 5)) return 4;
  }
  CHECK(ncclAllGather(send, recv, kCount, ncclFloat, comm, 0));
  for (int q = 0; q < size; ++q) {
    for (int i = 0; i < kCount; ++i) {
      if (recv[q * kCount + i] != (float)(q + 1) * (float)(i % 5)) return 5;
    }
  }
  memcpy(recv, send, sizeof(float) * kCount);
  CHECK(ncclBcast(recv, kCount, ncclFloat, size - 1, comm, 0));
  for (int i = 0; i < kCount; ++i) {
    if (recv[i] != (float)size * (float)(i % 5)) return 6;
  }
  CHECK(ncclGroupStart());
  CHECK(ncclReduce(send, rank == 0 ? recv : NULL, kCount, ncclFloat, ncclMax, 0, comm, 0));
  CHECK(ncclGroupEnd());
  if (rank == 0) {
    for (int i = 0; i < kCount; ++i) {
      if (recv[i] != (float)size * (float)(i % 5)) return 7;
    }
  }
  /* Point-to-point around the ring. */
  CHECK(ncclGroupStart());
  CHECK(ncclSend(send, kCount, ncclFloat, (rank + 1) % size, comm, 0));
  CHECK(ncclRecv(recv, kCount, ncclFloat, (rank + size - 1) % size, comm, 0));
  CHECK(ncclGroupEnd());
  for (int i = 0; i < kCount; ++i) {
    if (recv[i] != (float)((rank + size - 1) % size + 1) * (float)(i % 5)) return 8;
  }
  const char* forward = getenv("NCCL_PROGRAM_FORWARD");
  if (forward != NULL && strcmp(forward, "yes") == 0) {
    /* Served by TuCCL, or by a real NCCL beside it (with the twin) where TUCCL_NCCL_FORWARD says. */
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(send, recv, 4, ncclFloat8e4m3, ncclSum, comm, 0));
    CHECK(ncclGroupEnd());
    ncclRedOp_t premul;
    float scalar = 0.5f;
    CHECK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
    CHECK(ncclAllReduce(send, recv, 5, ncclFloat, premul, comm, 0));
    CHECK(ncclRedOpDestroy(premul, comm));
  } else if (forward != NULL && strcmp(forward, "refused") == 0) {
    /* Forwarded (TUCCL_NCCL_FORWARD) with no real NCCL to reach: refused with a reason, never a
     * crash. */
    if (ncclAllReduce(send, recv, 4, ncclFloat8e4m3, ncclSum, comm, 0) != ncclInvalidUsage) return 9;
    printf("REFUSED: %s\n", ncclGetLastError(comm));
    ncclRedOp_t premul;
    float scalar = 0.5f;
    if (ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm) !=
        ncclInvalidUsage) {
      return 10;
    }
    printf("REFUSED: %s\n", ncclGetLastError(comm));
  }
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  printf("OK\n");
  return 0;
}
