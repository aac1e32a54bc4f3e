// CHECK_OK for the rank programs of libtuccl's multi-process tests (peer_rank_main.cc,
// comm_lifecycle_rank_main.cc): a call that does not return tucclSuccess ends the rank with exit
// status 2, printing where, the call, its result and tucclGetLastError's reason.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "tuccl/tuccl.h"

#define CHECK_OK(call)                                                                                         \
  do {                                                                                                         \
    const tucclResult_t result_ = (call);                                                                      \
    if (result_ != tucclSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, tucclGetErrorString(result_), \
                   tucclGetLastError(nullptr));                                                                \
      std::exit(2);                                                                                            \
    }                                                                                                          \
  } while (0)
