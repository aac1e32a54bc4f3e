/* The store of the drop-in's test programs (dropin_ddp_replay.c, dropin_nccl_tests_pattern.c): a
 * directory every process sees, where process 0 puts the unique id and the others wait for it
 * (60 s at most), as torch's TCPStore or nccl-tests' MPI broadcast hand it round. */
#ifndef TUCCL_TESTS_DROPIN_STORE_H_
#define TUCCL_TESTS_DROPIN_STORE_H_

#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void shareUniqueId(const char* store, int process, ncclUniqueId* id) {
  char path[4096], partial[4200];
  snprintf(path, sizeof path, "%s/unique-id", store);
  if (process == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) {
      fprintf(stderr, "ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
      exit(2);
    }
    snprintf(partial, sizeof partial, "%s.partial", path);
    FILE* out = fopen(partial, "wb");
    if (out == NULL || fwrite(id, sizeof *id, 1, out) != 1 || fclose(out) != 0 || rename(partial, path) != 0) {
      fprintf(stderr, "cannot write %s\n", path);
      exit(2);
    }
    return;
  }
  for (int i = 0; i < 60000; ++i) {
    FILE* in = fopen(path, "rb");
    if (in != NULL) {
      const size_t read = fread(id, sizeof *id, 1, in);
      fclose(in);
      if (read == 1) return;
    }
    usleep(1000);
  }
  fprintf(stderr, "no unique id in %s after 60 s\n", path);
  exit(2);
}

#endif /* TUCCL_TESTS_DROPIN_STORE_H_ */
