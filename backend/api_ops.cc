// libtuccl's C API: PreMulSum reduction operators (include/tuccl/tuccl.h, "Reduction operators").
// The operators live in their communicator (Communicator::createPreMulSum); a call with one is a
// Sum whose kernel scales the rank's input first (backend/call_buffers.h).
#include <string>

#include "backend/api_internal.h"
#include "backend/communicator.h"
#include "tuccl/tuccl.h"

using tuccl::api::finish;
using tuccl::api::guarded;
using tuccl::api::invalid;
using tuccl::api::rawValue;
using tuccl::api::Use;

extern "C" {

tucclResult_t tucclRedOpCreatePreMulSum(tucclRedOp_t* op, void* scalar, tucclDataType_t datatype,
                                        tucclScalarResidence_t residence, tucclComm_t comm) {
  static constexpr const char* kFunction = "tucclRedOpCreatePreMulSum";
  return guarded(kFunction, [&] {
    if (comm == nullptr) return invalid(kFunction, "comm is NULL");
    if (op == nullptr) return invalid(kFunction, "op is NULL");
    if (scalar == nullptr) return invalid(kFunction, "scalar is NULL");
    const int where = rawValue(residence);
    if (where != tucclScalarDevice && where != tucclScalarHostImmediate) {
      return invalid(kFunction, "residence " + std::to_string(where) +
                                    " is not tucclScalarDevice (0) or tucclScalarHostImmediate (1)");
    }
    Use use(comm);
    tuccl::Expected<int> made =
        comm->impl->createPreMulSum(scalar, rawValue(datatype), where == tucclScalarHostImmediate);
    if (!made) return finish(kFunction, made.status(), comm->impl->rank());
    *op = static_cast<tucclRedOp_t>(*made);
    return tucclSuccess;
  });
}

tucclResult_t tucclRedOpDestroy(tucclRedOp_t op, tucclComm_t comm) {
  static constexpr const char* kFunction = "tucclRedOpDestroy";
  return guarded(kFunction, [&] {
    if (comm == nullptr) return invalid(kFunction, "comm is NULL");
    Use use(comm);
    return finish(kFunction, comm->impl->destroyOp(rawValue(op)), comm->impl->rank());
  });
}

}  // extern "C"
