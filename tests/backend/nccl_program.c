/* An NCCL program, written against nccl.h alone, passing host buffers and the NULL stream: the
 * test of libtuccl-nccl.so runs it unchanged, once linked to the real libnccl with the drop-in
 * preloaded, once linked to the drop-in. Rank and size come from the launcher's environment, the
 * id from ncclGetUniqueId on every rank (TUCCL_COMM_ID makes them all the same). With
 * NCCL_PROGRAM_FORWARDED set it expects point-to-point and a uint64 AllReduce to succeed (a real
 * NCCL serves them), else to be refused. Prints "OK". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                    \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess) {                                                                           \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                        \
    }                                                                                                  \
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
  if (getenv("NCCL_PROGRAM_FORWARDED") != NULL) {
    /* A real NCCL beside TuCCL: what TuCCL does not serve goes there. */
    CHECK(ncclGroupStart());
    CHECK(ncclSend(send, 1, ncclFloat, (rank + 1) % size, comm, 0));
    CHECK(ncclRecv(recv, 1, ncclFloat, (rank + size - 1) % size, comm, 0));
    CHECK(ncclGroupEnd());
    CHECK(ncclAllReduce(send, recv, 4, ncclUint64, ncclSum, comm, 0));
  } else {
    /* No real NCCL: what TuCCL does not serve is refused with a reason, never a crash. */
    if (ncclSend(send, 1, ncclFloat, (rank + 1) % size, comm, 0) == ncclSuccess) return 8;
    if (strlen(ncclGetLastError(comm)) == 0) return 9;
  }
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  printf("OK\n");
  return 0;
}
