// One collective call as TuCCL runs and checks it: the collective, its ranks and root, datatype,
// reduction, NCCL's count, whether it is in place, and (for a call a program made) the user's
// buffers. libtuccl's C API converts its arguments into this type once (backend/api.cc); the plan
// cache decides on it, the devices launch it, and the reference result (kernelgen/
// collective_reference.h) is computed from it.
#pragma once

#include <cstdint>

#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

struct CollectiveCall {
  Collective collective = Collective::AllReduce;
  int32_t nRanks = 0;
  int32_t root = -1;  ///< Broadcast and Reduce: the root rank; ignored by the others
  DataType dataType = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int64_t count = 0;  ///< NCCL's count (elements)
  bool inPlace = true;  ///< NCCL's in-place condition held for the calling rank
  const void* sendbuff = nullptr;  ///< a program's call: its buffers as passed (null in references)
  void* recvbuff = nullptr;
  /// PreMulSum (libtuccl's tucclRedOpCreatePreMulSum; op is Sum): every rank's input is multiplied
  /// by a scalar of the call's datatype before the sum. The scalar is preMulScalar's element when
  /// that is set (device memory, read when the call runs), else the low bytes of preMulBits (read
  /// when the operator was made). The reference (collective_reference.h) ignores it.
  bool preMul = false;
  uint64_t preMulBits = 0;
  const void* preMulScalar = nullptr;
};

/// Elements of a rank's input (sendbuff) and output (recvbuff) under NCCL's conventions:
/// AllReduce, Broadcast, Reduce c and c; AllGather c and n·c; ReduceScatter n·c and c; AllToAll
/// n·c and n·c.
int64_t inputElements(const CollectiveCall& call);
int64_t outputElements(const CollectiveCall& call);

/// Whether the call is well-formed: at least one rank, a count >= 0 whose buffers fit in memory
/// sizes, and a root in [0, nRanks) for Broadcast and Reduce.
Status checkCall(const CollectiveCall& call);

}  // namespace tuccl
